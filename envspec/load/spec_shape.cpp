// The shape of lockstep.yaml, written once (envspec/load/spec_shape.hpp), and the JSON Schema made from it.
#include "envspec/load/spec_shape.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace lockstep::envspec::shape {

namespace {

// A version constraint (envspec/stack/recipes.hpp VersionConstraint): clauses separated by ',', each OP
// VERSION or a bare VERSION; the same pattern as recipes/schema/common.schema.json's `constraint`.
#define LS_VERSION R"([0-9]+(\.[0-9]+)*([a-z]+[0-9]*)?)"
#define LS_CLAUSE R"( *(>=|<=|==|!=|>|<)? *)" LS_VERSION " *"
#define LS_CONSTRAINT LS_CLAUSE "(," LS_CLAUSE ")*"

// The shapes, the named ones (Shapes) and the ones only their keys use.
struct AllShapes : Shapes {
  Shape schema_version, image_name, extends, extends_list, platform, platform_list, host_path, image_path;
  Shape base_scratch, base_oci, base_image, base_debian, oci_path, image_ref, tag, debian_suite,
      debian_variant;
  Shape snapshot_stamp;
  Shape repos, repo, repo_apt_dists, repo_apt_suites, apt_suites, repo_apt_flat, repo_url, apt_suite,
      apt_priority, apt_components, apt_component, flat_false, flat_true;
  Shape apt_list, apt_package, pip_list, pip_item, pip_requirement;
  Shape conda_channel, conda_subdir, conda_subdirs, conda_list, conda_spec, conda_priority, conda_virtual;
  Shape constraint, mpi, framework, cuda_flavor, git_url, rev;
  Shape copy, copy_host, copy_git, mode, owner;
  Shape run, run_item, command, network;
  Shape env, labels, scalar_value, argv, user;
  Shape compression, sif_compression, sbom_path, sbom_list, sbom, mirror, mirrors;

  AllShapes();
};

AllShapes::AllShapes() {
  // ---- scalars shared by several keys ----------------------------------------------------------
  host_path = {.name = "hostPath",
               .doc = "A path on the host, relative to the directory of the file that names it.",
               .non_empty = true};
  image_path = {.name = "imagePath",
                .doc = "An absolute path in the image, without '..' components.",
                .pattern = R"(^/(?!(.*/)?\.\.(/|$)).*$)"};
  scalar_value = {
      .name = "scalar",
      .doc = "A YAML scalar, kept as written (1 is the string \"1\"); write \"\" for an empty string.",
      .types = k_any};
  constraint = {.name = "versionConstraint",
                .doc = "A version constraint: \"12.1\" (12.1 and 12.1.x) or clauses such as \">=12.1,<13\".",
                .types = k_version,
                .pattern = "^" LS_CONSTRAINT "$"};
  git_url = {.name = "gitRepository",
             .doc = "A git repository: an https, http, git or file URL, or a local path.",
             .pattern = R"(^((https?|git|file)://.*|(?![A-Za-z][A-Za-z0-9+.-]*://).+)$)"};
  rev = {.name = "gitRev",
         .doc = "A full commit id, a tag or a branch; the lock pins it to a commit.",
         .types = k_word,
         .pattern = R"(^(?!.*\.\.)[A-Za-z0-9._/+-]+$)"};

  // ---- top-level scalars -------------------------------------------------------------------------
  schema_version = {.types = k_integer, .values = {"1"}};
  image_name = {.pattern = R"(^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$)",
                .max_length = 255};
  extends_list = {.kind = Kind::list, .items = &host_path};
  extends = {.kind = Kind::one_of, .forms = {&host_path, &extends_list}};
  platform = {.pattern = R"(^[a-z0-9]+/[a-z0-9]+(/[^/]{1,8})?$)"};
  platform_list = {.kind = Kind::list, .non_empty = true, .items = &platform};
  user = {.types = k_word, .pattern = R"(^[^:\s]+(:[^:\s]+)?$)"};
  argv = {.kind = Kind::list, .items = &scalar_value};

  // ---- base --------------------------------------------------------------------------------------
  base_scratch = {.doc = "An empty image.", .values = {"scratch"}};
  oci_path = {.pattern = R"(^((?!.*@[^@]*:[^@]*$).+|.+@(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}))$)"};
  tag = {.pattern =
             R"(^[A-Za-z0-9]+(([-._:@+]|--)[A-Za-z0-9]+)*(/[A-Za-z0-9]+(([-._:@+]|--)[A-Za-z0-9]+)*)*$)"};
  const Key base_python_key{.name = "python",
                            .shape = &image_path,
                            .doc = "The base's Python interpreter when it is not a Debian package (e.g. "
                                   "/usr/local/bin/python3.11): wheels go into its site-packages."};
  base_oci = {
      .kind = Kind::map,
      .name = "baseOci",
      .doc = "An OCI image layout directory or OCI archive.",
      .keys = {
          {.name = "oci",
           .shape = &oci_path,
           .doc = "The OCI layout directory or archive, optionally pinned: PATH@sha256:HEX.",
           .presence = Presence::required},
          {.name = "tag", .shape = &tag, .doc = "Picks the manifest whose ref.name annotation is TAG."},
          base_python_key,
      }};
  image_ref = {.pattern = R"(^(docker://|oci:|oci-archive:).+$)"};
  base_image = {.kind = Kind::map,
                .name = "baseImage",
                .doc = "An image named by reference: in a registry, an OCI layout or an OCI archive.",
                .keys = {
                    {.name = "image",
                     .shape = &image_ref,
                     .doc = "docker://[HOST[:PORT]/]REPO[:TAG][@sha256:HEX], oci:DIR[:TAG] or "
                            "oci-archive:FILE[:TAG].",
                     .presence = Presence::required},
                    base_python_key,
                }};
  debian_suite = {.pattern = R"(^[a-z0-9][a-z0-9.+-]*$)"};
  debian_variant = {.values = {"essential", "apt", "required"}};
  base_debian = {.kind = Kind::map,
                 .name = "baseDebian",
                 .doc = "A Debian root bootstrapped from the apt repositories in `repos`.",
                 .keys = {
                     {.name = "debian",
                      .shape = &debian_suite,
                      .doc = "The suite or codename, e.g. bookworm.",
                      .presence = Presence::required},
                     {.name = "variant",
                      .shape = &debian_variant,
                      .doc = "The starting set: essential, apt (the default) or required."},
                 }};
  base = {.kind = Kind::one_of,
          .name = "base",
          .doc = "The image the layers go on: scratch, {oci: PATH}, {image: REF} or {debian: SUITE}.",
          .forms = {&base_scratch, &base_oci, &base_image, &base_debian}};

  // ---- repos ---------------------------------------------------------------------------------------
  repo_url = {.name = "repositoryUrl",
              .doc = "An http, https or file URL, or a local directory.",
              .pattern = R"(^((https?|file)://.*|(?![A-Za-z][A-Za-z0-9+.-]*://).+)$)"};
  apt_suite = {.pattern = R"(^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._+/-]*$)"};
  snapshot_stamp = {.name = "snapshotTimestamp",
                    .doc = "A snapshot timestamp, YYYYMMDDTHHMMSSZ (UTC).",
                    .pattern = R"(^[0-9]{8}T[0-9]{6}Z$)"};
  apt_component = {.pattern = R"(^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._+/-]*$)"};
  apt_components = {.kind = Kind::list, .non_empty = true, .items = &apt_component};
  flat_false = {.types = k_boolean, .values = {"false"}};
  apt_priority = {.name = "aptPriority", .types = k_integer};
  flat_true = {.types = k_boolean, .values = {"true"}};
  const Key apt_url{
      .name = "apt", .shape = &repo_url, .doc = "The repository's URL.", .presence = Presence::required};
  const Key snapshot{.name = "snapshot",
                     .shape = &snapshot_stamp,
                     .doc = "Read the repository as a snapshot service served it then: YYYYMMDDTHHMMSSZ."};
  const Key snapshot_url{
      .name = "snapshot_url",
      .shape = &repo_url,
      .doc = "The archive in a snapshot service laid out URL/<timestamp>/ (known for Debian's "
             "and Ubuntu's): pinned by snapshot, and where a build finds pool files gone "
             "upstream.",
      .in_digest = false};
  const Key priority{.name = "priority",
                     .shape = &apt_priority,
                     .doc = "apt's pin priority of the entry (1-9999, default 500): names come from the "
                            "entries of the highest priority that have them, the highest version among "
                            "equals; 1001 makes an overlay win whatever the versions."};
  const Key keyring{.name = "keyring",
                    .shape = &host_path,
                    .doc = "The OpenPGP keyring the repository's Release file must be signed with.",
                    .presence = Presence::required,
                    .in_digest = false};
  repo_apt_dists = {.kind = Kind::map,
                    .name = "repoAptDists",
                    .doc = "An apt repository with dists/SUITE.",
                    .keys = {
                        apt_url,
                        {.name = "suite",
                         .shape = &apt_suite,
                         .doc = "The suite or codename, e.g. bookworm.",
                         .presence = Presence::required},
                        {.name = "components",
                         .shape = &apt_components,
                         .doc = "The components, e.g. [main].",
                         .presence = Presence::required},
                        keyring,
                        snapshot,
                        snapshot_url,
                        priority,
                        {.name = "flat", .shape = &flat_false, .doc = "false: the repository has dists/."},
                    }};
  apt_suites = {.kind = Kind::list, .non_empty = true, .items = &apt_suite};
  repo_apt_suites = {.kind = Kind::map,
                     .name = "repoAptSuites",
                     .doc = "An apt repository with several suites of equal priority (the highest version "
                            "wins), e.g. Ubuntu's jammy, jammy-updates and jammy-security.",
                     .keys = {
                         apt_url,
                         {.name = "suites",
                          .shape = &apt_suites,
                          .doc = "The suites, e.g. [jammy, jammy-updates, jammy-security].",
                          .presence = Presence::required},
                         {.name = "components",
                          .shape = &apt_components,
                          .doc = "The components of every suite, e.g. [main, universe].",
                          .presence = Presence::required},
                         keyring,
                         snapshot,
                         snapshot_url,
                         priority,
                         {.name = "flat", .shape = &flat_false, .doc = "false: the repository has dists/."},
                     }};
  repo_apt_flat = {.kind = Kind::map,
                   .name = "repoAptFlat",
                   .doc = "A flat apt repository: Packages and Release at its URL.",
                   .keys = {
                       apt_url,
                       {.name = "flat",
                        .shape = &flat_true,
                        .doc = "true: a flat repository (no suite, no components).",
                        .presence = Presence::required},
                       keyring,
                       snapshot,
                       snapshot_url,
                       priority,
                   }};
  repo_apt = {.kind = Kind::one_of, .forms = {&repo_apt_dists, &repo_apt_suites, &repo_apt_flat}};
  repo_pypi = {.kind = Kind::map,
               .name = "repoPypi",
               .doc = "A PEP 503/691 Python package index.",
               .keys = {{.name = "pypi",
                         .shape = &repo_url,
                         .doc = "The index URL, e.g. https://pypi.org/simple.",
                         .presence = Presence::required}}};
  repo_wheels = {
      .kind = Kind::map,
      .name = "repoWheels",
      .doc = "A local directory of .whl files.",
      .keys = {
          {.name = "wheels", .shape = &host_path, .doc = "The directory.", .presence = Presence::required}}};
  conda_channel = {.name = "condaChannel",
                   .doc = "A channel: a URL (https://conda.anaconda.org/conda-forge, a label "
                          ".../label/NAME, file://DIR) or a name on anaconda.org (conda-forge, nvidia).",
                   .pattern =
                       R"(^((https?|file)://.*|[A-Za-z0-9][A-Za-z0-9._-]*(/label/[A-Za-z0-9._-]+)?)$)"};
  conda_subdir = {.pattern = R"(^(noarch|[a-z0-9]+-[a-z0-9]+)$)", .max_length = 32};
  conda_subdirs = {.kind = Kind::list, .non_empty = true, .items = &conda_subdir};
  repo_conda = {
      .kind = Kind::map,
      .name = "repoConda",
      .doc = "A conda channel; noarch is always read.",
      .keys = {
          {.name = "conda", .shape = &conda_channel, .doc = "The channel.", .presence = Presence::required},
          {.name = "subdirs",
           .shape = &conda_subdirs,
           .doc = "The subdirs to read, e.g. [linux-64, noarch]; default: the platform's and noarch."}}};
  repo = {
      .kind = Kind::one_of,
      .name = "repository",
      .doc = "An apt repository, a Python package index, a wheelhouse or a conda channel.",
      .forms = {&repo_apt_dists, &repo_apt_suites, &repo_apt_flat, &repo_pypi, &repo_wheels, &repo_conda}};
  repos = {.kind = Kind::list, .items = &repo};

  // ---- packages -----------------------------------------------------------------------------------
  apt_package = {.doc = "NAME, NAME=VERSION, NAME=VERSION-GLOB (with '*') or NAME:ARCH.",
                 .pattern = R"(^[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?(=[0-9A-Za-z.+~:*-]+)?$)"};
  apt_list = {.kind = Kind::list, .items = &apt_package};
  pip_requirement = {.doc = "A PEP 508 requirement: a range (numpy>=1.26), a pin (==) or just a name.",
                     .non_empty = true};
  requirements = {.kind = Kind::map,
                  .name = "requirementsFile",
                  .doc =
                      "A pip requirements file (.txt or unpinned .in) whose requirements (and --hash values) "
                      "become requests.",
                  .keys = {{.name = "requirements",
                            .shape = &host_path,
                            .doc = "The requirements file.",
                            .presence = Presence::required}}};
  extras_list = {.kind = Kind::list, .items = &extra_name};
  extra_name = {.doc = "An optional-dependencies name of the project.", .non_empty = true};
  pyproject = {.kind = Kind::map,
               .name = "pyprojectFile",
               .doc = "A pyproject.toml whose [project].dependencies (and the optional dependencies of "
                      "`extras`) become requests.",
               .keys = {{.name = "pyproject",
                         .shape = &host_path,
                         .doc = "The pyproject.toml.",
                         .presence = Presence::required},
                        {.name = "extras",
                         .shape = &extras_list,
                         .doc = "Names in [project.optional-dependencies] to add."}}};
  conda_env = {.kind = Kind::map,
               .name = "condaEnvFile",
               .doc = "A conda environment.yml: its pip: section and the conda packages with a known PyPI or "
                      "Debian equivalent become requests, its python pin stack.python.",
               .keys = {{.name = "conda-env",
                         .shape = &host_path,
                         .doc = "The environment.yml.",
                         .presence = Presence::required}}};
  pip_item = {.kind = Kind::one_of, .forms = {&pip_requirement, &requirements, &pyproject, &conda_env}};
  pip_list = {.kind = Kind::list, .items = &pip_item};
  conda_spec = {
      .doc = "A conda MatchSpec: python=3.11, numpy>=1.26, conda-forge::pytorch=2.3.1, blas=*=openblas, "
             "pkg[version='>=1,<2',build=*cuda*].",
      .non_empty = true};
  conda_list = {.kind = Kind::list, .items = &conda_spec};
  packages = {
      .kind = Kind::map,
      .name = "packages",
      .keys = {
          {.name = "apt", .shape = &apt_list, .doc = "Debian packages, resolved into the lock."},
          {.name = "conda",
           .shape = &conda_list,
           .doc = "conda packages (MatchSpecs), solved from the conda channels in `repos` into the lock."},
          {.name = "pip",
           .shape = &pip_list,
           .doc = "Python requirements (PEP 508), {requirements: FILE}, {pyproject: FILE, extras: [...]} "
                  "or {conda-env: FILE}; resolved with their dependencies into the lock."},
      }};

  // ---- conda ----------------------------------------------------------------------------------------
  conda_priority = {.values = {"strict", "flexible"}};
  conda_virtual = {
      .kind = Kind::dict, .key_pattern = "^(glibc|linux|archspec|cuda)$", .value = &scalar_value};
  conda = {
      .kind = Kind::map,
      .name = "conda",
      .doc = "How the conda environment is solved and where it goes.",
      .keys = {
          {.name = "prefix",
           .shape = &image_path,
           .doc = "The environment's path in the image; default /opt/conda."},
          {.name = "channel_priority",
           .shape = &conda_priority,
           .doc = "strict (default): a package comes from the first channel that has it; flexible: "
                  "from any channel, the channel order first."},
          {.name = "virtual_packages",
           .shape = &conda_virtual,
           .doc = "What the image offers the solve instead of what lockstep reads from it: glibc, linux, "
                  "archspec, cuda to a version, or \"\" to leave one out."},
      }};

  // ---- stack ----------------------------------------------------------------------------------------
  mpi = {.pattern = "^(openmpi|mpich)(@" LS_CONSTRAINT ")?$"};
  framework = {.pattern = "^(pytorch|tensorflow|jax)(@" LS_CONSTRAINT ")?$"};
  cuda_flavor = {.values = {"base", "runtime", "devel"}};
  stack_recipes = {
      .kind = Kind::map,
      .name = "stackRecipes",
      .doc = "A team's recipes repository instead of the built-in recipes.",
      .keys = {
          {.name = "git",
           .shape = &git_url,
           .doc = "The recipes repository.",
           .presence = Presence::required},
          {.name = "rev", .shape = &rev, .doc = "The commit to use.", .presence = Presence::required},
      }};
  stack = {
      .kind = Kind::map,
      .name = "stack",
      .doc = "The GPU and MPI stack as version constraints, solved from the recipes.",
      .keys = {
          {.name = "cuda", .shape = &constraint, .doc = "CUDA X or X.Y."},
          {.name = "cudnn", .shape = &constraint, .doc = "cuDNN (needs cuda or a framework)."},
          {.name = "nccl", .shape = &constraint, .doc = "NCCL (needs cuda or a framework)."},
          {.name = "mpi", .shape = &mpi, .doc = "openmpi or mpich, with an optional @VERSION."},
          {.name = "python", .shape = &constraint, .doc = "Python X.Y; else the Debian base's python3."},
          {.name = "framework",
           .shape = &framework,
           .doc = "pytorch, tensorflow or jax, with an optional @VERSION."},
          {.name = "cuda_flavor",
           .shape = &cuda_flavor,
           .doc = "System CUDA packages: base (cudart, the default), runtime (all libraries) or devel."},
          {.name = "recipes", .shape = &stack_recipes, .doc = "{git: URL, rev: REV}: the team's recipes."},
      }};

  // ---- copy -----------------------------------------------------------------------------------------
  mode = {.doc = "0NNN (octal, at most 07777) or preserve; default: normalize.",
          .types = k_word,
          .pattern = R"(^(preserve|0?[0-7]{1,4})$)"};
  owner = {.doc = "UID, UID:GID (numbers) or preserve; default 0:0.",
           .types = k_word,
           .pattern = R"(^(preserve|[0-9]+(:[0-9]+)?)$)"};
  const Key to{.name = "to",
               .shape = &image_path,
               .doc = "The absolute path in the image; a trailing / makes it a directory.",
               .presence = Presence::required};
  const Key mode_key{.name = "mode", .shape = &mode, .doc = "Permission bits: 0NNN or preserve."};
  const Key owner_key{.name = "owner", .shape = &owner, .doc = "Ownership: UID[:GID] or preserve."};
  copy_host = {.kind = Kind::map,
               .name = "copyHost",
               .doc = "Files from the host.",
               .keys = {
                   {.name = "from",
                    .shape = &host_path,
                    .doc = "The file or directory on the host.",
                    .presence = Presence::required},
                   to,
                   mode_key,
                   owner_key,
               }};
  copy_git = {
      .kind = Kind::map,
      .name = "copyGit",
      .doc = "A git source, pinned in the lock to a commit.",
      .keys = {
          {.name = "git", .shape = &git_url, .doc = "The repository.", .presence = Presence::required},
          {.name = "rev",
           .shape = &rev,
           .doc = "A commit id, a tag or a branch.",
           .presence = Presence::required},
          to,
          mode_key,
          owner_key,
          {.name = "keep_git", .presence = Presence::later},
      }};
  copy_item = {.kind = Kind::one_of, .name = "copyItem", .forms = {&copy_host, &copy_git}};
  copy = {.kind = Kind::list, .items = &copy_item};

  // ---- run ----------------------------------------------------------------------------------------
  command = {
      .name = "command", .doc = "A shell command, run with /bin/sh -c.", .types = k_any, .non_empty = true};
  network = {.types = k_boolean};
  run_step = {
      .kind = Kind::map,
      .name = "runStep",
      .doc = "A build step with options.",
      .keys = {
          {.name = "sh", .shape = &command, .doc = "The shell command.", .presence = Presence::required},
          {.name = "network",
           .shape = &network,
           .doc = "true: the step has the host network (the build is impure)."},
      }};
  run_item = {.kind = Kind::one_of, .forms = {&command, &run_step}};
  run = {.kind = Kind::list, .items = &run_item};

  // ---- env, labels, outputs -------------------------------------------------------------------------
  env = {.kind = Kind::dict, .key_pattern = R"(^[A-Za-z_][A-Za-z0-9_]*$)", .value = &scalar_value};
  labels = {.kind = Kind::dict, .value = &scalar_value};
  compression = {.values = {"gzip", "zstd"}};
  sif_compression = {.values = {"gzip", "zstd", "xz", "lz4"}};
  sbom_path = {.name = "sbomPath",
               .doc = "An SBOM file: NAME.spdx.json (SPDX 2.3) or NAME.cdx.json (CycloneDX 1.6).",
               .pattern = R"(\.(spdx|cdx)\.json$)",
               .non_empty = true};
  sbom_list = {.kind = Kind::list, .items = &sbom_path};
  mirror = {.name = "mirror",
            .doc = "A vendor directory (DIR, relative to this file) or docker://REGISTRY/REPO.",
            .non_empty = true};
  mirrors = {.kind = Kind::list, .items = &mirror};
  sbom = {.kind = Kind::one_of, .forms = {&sbom_path, &sbom_list}};
  outputs = {
      .kind = Kind::map,
      .name = "outputs",
      .doc = "What lockstep build writes; the paths are not part of the digest.",
      .keys = {
          {.name = "oci", .shape = &host_path, .doc = "An OCI image layout directory.", .in_digest = false},
          {.name = "oci_archive",
           .shape = &host_path,
           .doc = "An OCI archive (a tar of an OCI layout).",
           .in_digest = false},
          {.name = "docker_archive",
           .shape = &host_path,
           .doc = "A docker load archive.",
           .in_digest = false},
          {.name = "sif",
           .shape = &host_path,
           .doc = "A SIF file for Apptainer/Singularity.",
           .in_digest = false},
          {.name = "sbom",
           .shape = &sbom,
           .doc = "SBOM files of the image, by name: *.spdx.json (SPDX 2.3), *.cdx.json (CycloneDX 1.6).",
           .in_digest = false},
          {.name = "compression", .shape = &compression, .doc = "Layer compression: gzip (default) or zstd."},
          {.name = "sif_compression",
           .shape = &sif_compression,
           .doc = "The SIF's squashfs compression: gzip (default), zstd, xz or lz4."},
      }};

  // ---- the top level, in the order the schema has always listed its keys -------------------------
  spec = {
      .kind = Kind::map,
      .doc = "A lockstep spec: one image, pinned to the byte (docs/spec.md).",
      .keys = {
          {.name = "lockstep",
           .shape = &schema_version,
           .doc = "The schema version: 1.",
           .presence = Presence::required},
          {.name = "name",
           .shape = &image_name,
           .doc = "The image name: lowercase letters and digits separated by . _ __ or -, with / between "
                  "components.",
           .presence = Presence::required},
          {.name = "extends",
           .shape = &extends,
           .doc = "Files merged under this one (a path or a list of paths).",
           .in_digest = false},
          {.name = "platform", .shape = &platform, .doc = "OS/ARCH[/VARIANT]; default linux/amd64."},
          {.name = "platforms",
           .shape = &platform_list,
           .doc = "Several platforms, one image each under one image index (instead of 'platform'), "
                  "e.g. [linux/amd64, linux/arm64].",
           .merge = Merge::replace},
          {.name = "base", .shape = &base, .doc = "The image the layers go on; default scratch."},
          {.name = "repos",
           .shape = &repos,
           .doc = "apt repositories, Python indexes, wheelhouses and conda channels, in priority order."},
          {.name = "packages", .shape = &packages, .doc = "apt, pip and conda packages to install."},
          {.name = "conda", .shape = &conda, .doc = "The conda environment's prefix and solve."},
          {.name = "copy", .shape = &copy, .doc = "Files from the host, or git sources, copied in order."},
          {.name = "run", .shape = &run, .doc = "Build steps run in the sandbox; each gives a layer."},
          {.name = "env", .shape = &env, .doc = "Environment variables of the image."},
          {.name = "labels", .shape = &labels, .doc = "Image labels."},
          {.name = "entrypoint",
           .shape = &argv,
           .doc = "The entrypoint, a list of strings (exec form).",
           .merge = Merge::replace},
          {.name = "cmd",
           .shape = &argv,
           .doc = "The command, a list of strings (exec form).",
           .merge = Merge::replace},
          {.name = "workdir",
           .shape = &image_path,
           .doc = "The working directory, an absolute path in the image."},
          {.name = "user", .shape = &user, .doc = "NAME or UID, optionally :GROUP or :GID."},
          {.name = "outputs", .shape = &outputs, .doc = "What lockstep build writes."},
          {.name = "mirrors",
           .shape = &mirrors,
           .doc = "Where builds fetch the lock's files first (lockstep vendor); not part of the digest.",
           .in_digest = false},
          {.name = "stack",
           .shape = &stack,
           .doc = "CUDA, cuDNN, NCCL, MPI, Python and a framework, solved."},
          {.name = "launch", .presence = Presence::later},
      }};
}

#undef LS_CONSTRAINT
#undef LS_CLAUSE
#undef LS_VERSION

// ---- the JSON Schema ----------------------------------------------------------------------------------

using ojson = nlohmann::ordered_json;

// A value written in the spec (`values`) as the JSON an editor reads it as.
ojson typed_value(std::string_view text, const Types& types) {
  if (!types.string && types.boolean) {
    return text == "true";
  }
  if (!types.string && types.integer) {
    return std::stoll(std::string(text));
  }
  return std::string(text);
}

ojson type_names(const Types& types) {
  ojson names = ojson::array();
  if (types.string) {
    names.push_back("string");
  }
  if (types.number) {
    names.push_back("number");
  } else if (types.integer) {
    names.push_back("integer");
  }
  if (types.boolean) {
    names.push_back("boolean");
  }
  return names.size() == 1 ? names[0] : names;
}

class SchemaWriter {
public:
  // The schema of `s`: a $ref to its $defs entry when it is named, else written in place.
  ojson ref(const Shape& s) {
    if (s.name.empty()) {
      return inline_schema(s);
    }
    const std::string name(s.name);
    if (!m_defs.contains(name)) {
      m_defs[name] = ojson(); // placeholder: a shape may (in principle) reach itself
      m_defs[name] = inline_schema(s);
    }
    return ojson{{"$ref", "#/$defs/" + name}};
  }

  ojson inline_schema(const Shape& s) {
    ojson j = ojson::object();
    if (!s.doc.empty()) {
      j["description"] = s.doc;
    }
    switch (s.kind) {
    case Kind::scalar:
      scalar(s, j);
      break;
    case Kind::list:
      j["type"] = "array";
      j["items"] = ref(*s.items);
      if (s.non_empty) {
        j["minItems"] = 1;
      }
      break;
    case Kind::map:
      map(s, j);
      break;
    case Kind::dict:
      j["type"] = "object";
      j["propertyNames"] =
          s.key_pattern.empty() ? ojson{{"minLength", 1}} : ojson{{"pattern", std::string(s.key_pattern)}};
      j["additionalProperties"] = ref(*s.value);
      break;
    case Kind::one_of: {
      ojson forms = ojson::array();
      for (const Shape* f : s.forms) {
        forms.push_back(ref(*f));
      }
      j["oneOf"] = std::move(forms);
      break;
    }
    }
    return j;
  }

  // The named shapes, sorted by name.
  [[nodiscard]] ojson defs() const {
    ojson out = ojson::object();
    for (const auto& [name, schema] : m_defs) {
      out[name] = schema;
    }
    return out;
  }

private:
  static void scalar(const Shape& s, ojson& j) {
    j["type"] = type_names(s.types);
    if (s.values.size() == 1) {
      j["const"] = typed_value(s.values[0], s.types);
    } else if (!s.values.empty()) {
      ojson values = ojson::array();
      for (std::string_view v : s.values) {
        values.push_back(typed_value(v, s.types));
      }
      j["enum"] = std::move(values);
    }
    if (s.non_empty) {
      j["minLength"] = 1;
    }
    if (s.max_length > 0) {
      j["maxLength"] = s.max_length;
    }
    if (!s.pattern.empty()) {
      j["pattern"] = s.pattern;
    }
  }

  void map(const Shape& s, ojson& j) {
    j["type"] = "object";
    ojson properties = ojson::object();
    ojson required = ojson::array();
    for (const Key& k : s.keys) {
      if (k.presence == Presence::later) {
        continue; // rejected, like every key not listed
      }
      // The key's own line of documentation first, then the schema of its value.
      ojson p = ojson::object();
      if (!k.doc.empty()) {
        p["description"] = k.doc;
      }
      const ojson value = ref(*k.shape);
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!p.contains(it.key())) {
          p[it.key()] = *it;
        }
      }
      properties[std::string(k.name)] = std::move(p);
      if (k.presence == Presence::required) {
        required.push_back(k.name);
      }
    }
    j["properties"] = std::move(properties);
    if (!required.empty()) {
      j["required"] = std::move(required);
    }
    j["additionalProperties"] = false;
  }

  std::map<std::string, ojson> m_defs;
};

void collect_keys(const Shape& s, bool later, std::vector<std::string_view>& out) {
  if (s.kind == Kind::one_of) {
    for (const Shape* f : s.forms) {
      collect_keys(*f, later, out);
    }
    return;
  }
  for (const Key& k : s.keys) {
    if ((k.presence == Presence::later) == later && std::find(out.begin(), out.end(), k.name) == out.end()) {
      out.push_back(k.name);
    }
  }
}

} // namespace

const Shapes& shapes() {
  static const AllShapes all;
  return all;
}

const Key* find_key(const Shape& shape, std::string_view name) {
  if (shape.kind == Kind::one_of) {
    for (const Shape* f : shape.forms) {
      if (const Key* k = find_key(*f, name)) {
        return k;
      }
    }
    return nullptr;
  }
  auto it =
      std::find_if(shape.keys.begin(), shape.keys.end(), [name](const Key& k) { return k.name == name; });
  return it == shape.keys.end() ? nullptr : &*it;
}

std::vector<std::string_view> key_names(const Shape& shape) {
  std::vector<std::string_view> out;
  collect_keys(shape, false, out);
  return out;
}

std::vector<std::string_view> later_key_names(const Shape& shape) {
  std::vector<std::string_view> out;
  collect_keys(shape, true, out);
  return out;
}

ojson json_schema() {
  SchemaWriter writer;
  ojson top = ojson::object();
  top["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  top["title"] = "lockstep.yaml (lockstep spec, schema version 1)";
  ojson body = writer.inline_schema(spec());
  for (auto& [key, value] : body.items()) {
    top[key] = value;
  }
  top["$defs"] = writer.defs();
  return top;
}

} // namespace lockstep::envspec::shape
