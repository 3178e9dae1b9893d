#pragma once
// The stack recipes (recipes/**/*.yaml) as typed data: which versions of CUDA, cuDNN, NCCL, Open
// MPI, MPICH, UCX, PMIx, Python, PyTorch, TensorFlow and JAX exist, what each needs of the others,
// and which real packages deliver them (NVIDIA's CUDA apt repository names, PyPI wheels, Debian
// packages). The `stack:` solver (envspec/stack/stack.hpp) works from this data alone, so `lockstep
// check` can run it offline. docs/recipes.md describes every file.
//
// Every row carries its provenance: the `source:` keys of its file's `sources:` map and a
// `confidence:` (primary / secondary / observed / unverified). Rows marked unverified are loaded
// (and shown by `lockstep check --explain`) but never used as hard rules: the solver neither picks
// nor refuses anything because of them.
//
// Where the recipes come from (one entry point, RecipeSet::load):
//  - built in: every recipes/**/*.yaml is embedded in the binary at build time;
//  - LOCKSTEP_RECIPES_DIR=DIR: DIR/<path> instead of the embedded file (for recipe authors);
//  - a team's recipes repository: `stack.recipes: {git: URL, rev: REV}` in the spec, fetched by
//    `lockstep lock` (the lock records the commit), read from the store by later commands.
#include "envspec/lock/image_facts.hpp"
#include "envspec/yaml/diagnostics.hpp"
#include "support/base/result.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// How a recipe row is known (compat-facts.md, "confidence").
enum class Confidence {
  primary,    ///< the vendor's own document or repository
  secondary,  ///< a third party quoting the vendor
  observed,   ///< seen in real install logs, lockfiles or image manifests
  unverified, ///< not confirmed: kept for information, never used as a rule
};

/// "primary", "secondary", "observed", "unverified".
std::string_view to_string(Confidence c);

/// Where a recipe row comes from.
struct Provenance {
  std::vector<std::string> sources;            ///< keys of the file's `sources:` map (at least one)
  Confidence confidence = Confidence::primary; ///< `confidence:` (default primary)
  std::string where;                           ///< "recipes/pytorch/pytorch.yaml:42", for messages
  /// False for unverified rows: the solver must not pick or refuse anything because of them.
  [[nodiscard]] bool usable() const { return confidence != Confidence::unverified; }
};

/// One entry of a recipe file's `sources:` map.
struct RecipeSourceRef {
  std::string id;   ///< the key
  std::string text; ///< what it is and where (URL, repository path, ...)
};

/// A free-text fact with its provenance (rules, notes shown in explanations).
struct RecipeFact {
  std::string text;
  Provenance why;
};

/// A version constraint as recipes and `stack:` write it. Clauses separated by ',' must all hold;
/// each is `OP VERSION` with OP one of >=, <=, >, <, ==, !=, or a bare VERSION, which matches that
/// version and every version it is a prefix of at a dot ("12.1" matches 12.1, 12.1.0 and 12.1.105
/// but not 12.10). Versions are dotted numbers ("12.1", "8.9.2.26", "2.18.3"); a trailing
/// pre-release such as "rc1" or "a1" on the last part is allowed and sorts before the release.
struct VersionConstraint {
  std::string text; ///< as written, for messages
  struct Clause {
    std::string op; ///< ">=", "<=", ">", "<", "==", "!=" or "" (prefix match)
    std::string version;
  };
  std::vector<Clause> clauses;

  /// Parses `text`; an empty text, an unknown operator or a malformed version is invalid_input.
  static Result<VersionConstraint> parse(std::string_view text);
  /// True when `version` satisfies every clause.
  [[nodiscard]] bool matches(std::string_view version) const;
  /// True when the constraint is one bare version (a prefix match, "12.1").
  [[nodiscard]] bool is_prefix() const { return clauses.size() == 1 && clauses[0].op.empty(); }
};

/// Compares dotted versions numerically part by part; a missing part is 0 ("12.1" == "12.1.0"); a
/// pre-release suffix sorts before the same release (a < b < rc). <0, 0 or >0. A malformed version
/// sorts after every well-formed one (two malformed ones by their text).
int compare_dotted(std::string_view a, std::string_view b);

/// True when `prefix` equals `version` or is a prefix of it at a dot ("12.1" of "12.1.105").
bool dotted_prefix(std::string_view prefix, std::string_view version);

/// A Debian package a component maps to. `name` and `version` may hold placeholders the solver fills
/// in: {version} (the chosen version or series, e.g. "2.18"), {major} {minor} (of that version),
/// {cuda} (the chosen CUDA X.Y), {cuda_major}, {cuda_minor}. A `version` containing `*` is a glob
/// the apt resolver matches against the repository (the highest match wins), e.g. libnccl2 with
/// version "{version}.*-*+cuda{cuda}". An empty version takes the repository's newest.
struct AptPattern {
  std::string name;
  std::string version;
};

/// A pinned wheel (`name==version`), as a framework's Requires-Dist pins it.
struct WheelPin {
  std::string name; ///< as PyPI spells it ("nvidia-nccl-cu12", "cuda-toolkit[cublas,cudart]")
  std::string version;
};

// ---------------------------------------------------------------------------------------------
// recipes/cuda/cuda.yaml (+ recipes/cuda/drivers.yaml: CudaDriverTable, image_facts.hpp)

/// Minor-version compatibility of one CUDA major: any X.Y of it runs on drivers >= linux_min.
struct CudaMvcRule {
  std::string major;       ///< "12"
  std::string linux_min;   ///< "525"
  std::string linux_below; ///< "580": MVC is only promised below it ("" = no upper bound)
  Provenance why;
};

/// What a CUDA release supports in GPU compute capability (the row applies from `cuda` until the
/// next row).
struct CudaComputeRow {
  std::string cuda;               ///< "12.0"
  std::string min_cc;             ///< the lowest compute capability it builds for ("5.0"); "" = unchanged
  std::vector<std::string> added; ///< capabilities it added ("10.0", "12.0")
  Provenance why;
};

/// One CUDA minor line lockstep can pin.
struct CudaLine {
  std::string version; ///< "12.1"
  /// The driver branch for releases after NVIDIA stopped bundling drivers ("R615"); "" otherwise.
  std::string driver_branch;
  Provenance why;
};

struct CudaRecipe {
  CudaDriverTable drivers;             ///< recipes/cuda/drivers.yaml
  std::vector<CudaLine> lines;         ///< every known X.Y, newest first
  std::vector<CudaMvcRule> mvc;        ///< newest major first
  std::vector<CudaComputeRow> compute; ///< oldest first
  /// Packages per flavor: "base" (the runtime library: cuda-cudart-{cuda_major}-{cuda_minor}),
  /// "runtime" (cuda-libraries-...), "devel" (cuda-toolkit-...).
  std::map<std::string, std::vector<AptPattern>> apt;
  std::string apt_repo; ///< NVIDIA's repository URL pattern, for messages ("{distro}/{arch}")
  std::vector<RecipeSourceRef> sources;

  /// The lowest compute capability CUDA `version` (X.Y) builds for, from the usable compute rows;
  /// "" when unknown.
  [[nodiscard]] std::string min_cc_for(std::string_view version) const;
  /// The lowest Linux driver for CUDA `version` (X.Y): the GA row of the driver table, else the
  /// major's MVC minimum; "" when unknown.
  [[nodiscard]] std::string driver_floor_for(std::string_view version) const;
};

// ---------------------------------------------------------------------------------------------
// recipes/cudnn/cudnn.yaml

/// One cuDNN series and the CUDA toolkits its builds support, per CUDA major.
struct CudnnSeries {
  std::string series;                      ///< "8.9" or "9.10.2" (a prefix of the versions it covers)
  std::map<std::string, std::string> cuda; ///< CUDA major -> supported X.Y range "12.0-12.2"
  std::string min_cc;                      ///< "5.0"
  Provenance why;
};

struct CudnnRecipe {
  std::vector<CudnnSeries> series;                    ///< newest first
  std::map<std::string, std::vector<AptPattern>> apt; ///< cuDNN major ("8", "9") -> packages
  std::string pip;                                    ///< "nvidia-cudnn-cu{cuda_major}"
  std::vector<RecipeFact> rules;
  std::vector<RecipeSourceRef> sources;
};

// ---------------------------------------------------------------------------------------------
// recipes/nccl/nccl.yaml

/// One NCCL release and the CUDA builds it is published for.
struct NcclRelease {
  std::string version; ///< "2.18.1"
  std::vector<std::string>
      cuda_builds; ///< CUDA X.Y of apt/tarball builds ("12.1"), or a major ("12") for wheels
  Provenance why;
};

struct NcclRecipe {
  std::vector<NcclRelease> releases; ///< newest first
  std::vector<AptPattern> apt;       ///< libnccl2 / libnccl-dev with "{version}*-*+cuda{cuda}"-style globs
  std::string pip;                   ///< "nvidia-nccl-cu{cuda_major}"
  std::vector<RecipeFact> rules;
  std::vector<RecipeSourceRef> sources;
};

// ---------------------------------------------------------------------------------------------
// recipes/openmpi/openmpi.yaml, recipes/mpich/mpich.yaml

/// One MPI release series.
struct MpiSeries {
  std::string series; ///< "4.1", "5.0", "4.0"
  std::string pmix;   ///< the PMIx it bundles / needs ("3.2", ">=4.2.0"); "" unknown
  std::string soname; ///< "libmpi.so.40"
  std::vector<RecipeFact> notes;
  Provenance why;
};

struct MpiRecipe {
  std::string impl;              ///< "openmpi" or "mpich"
  std::vector<MpiSeries> series; ///< newest first
  std::vector<AptPattern> apt;   ///< Debian packages (openmpi-bin={version}*, libopenmpi-dev)
  std::vector<RecipeFact> rules; ///< ABI and launcher rules
  std::vector<RecipeSourceRef> sources;
};

// ---------------------------------------------------------------------------------------------
// recipes/ucx/ucx.yaml, recipes/pmix/pmix.yaml

/// A support library of the MPI stack: its Debian packages and facts.
struct LibraryRecipe {
  std::string name;            ///< "ucx", "pmix"
  std::vector<AptPattern> apt; ///< libucx0 / libpmix2 ...
  std::vector<RecipeFact> facts;
  std::vector<RecipeSourceRef> sources;
};

// ---------------------------------------------------------------------------------------------
// recipes/python/python.yaml

/// One Python minor and the Debian suites that ship it as their python3.
struct PythonVersion {
  std::string version;             ///< "3.11"
  std::vector<std::string> debian; ///< suites/codenames whose python3 is this version ("bookworm")
  Provenance why;
};

struct PythonRecipe {
  std::vector<PythonVersion> versions; ///< newest first
  std::vector<AptPattern> apt;         ///< "python{version}" ...
  std::vector<RecipeSourceRef> sources;
};

// ---------------------------------------------------------------------------------------------
// recipes/pytorch/pytorch.yaml, recipes/tensorflow/tensorflow.yaml, recipes/jax/jax.yaml

/// One build variant of a framework release (PyTorch cu121, JAX cuda12, TensorFlow's tested
/// configuration).
struct FrameworkVariant {
  std::string tag; ///< "cu121", "cuda12", "tested"
  /// What it needs of each component, as VersionConstraint text: an exact version the wheels carry
  /// ("12.1", "8.9.2.26", "2.18.1") or a range the system must meet (">=9.8,<10"). "" = no need.
  std::string cuda;
  std::string cudnn;
  std::string nccl;
  std::string driver_min;         ///< an explicit driver floor ("525"); "" = from the CUDA version
  std::string min_cc;             ///< lowest compute capability ("7.5"); "" = from CUDA
  std::vector<std::string> archs; ///< compute capabilities the binaries carry ("5.0", "8.6", "9.0")
  /// The platforms it has wheels for (`platforms:`, default linux/amd64); linux/arm64 is Grace's
  /// (sbsa) build, `manylinux_*_aarch64`.
  std::vector<std::string> platforms = {"linux/amd64"};
  std::vector<std::string> arm64_archs; ///< the aarch64 wheels' compute capabilities, when known
  bool pypi_default = false;            ///< the variant PyPI's plain wheel is
  std::string status;                   ///< "stable" or "experimental"
  std::string index;                    ///< the wheel index it comes from (download.pytorch.org/whl/cu121)
  /// The wheels to request, `{version}` = the framework version ("torch=={version}").
  std::vector<std::string> wheels;
  std::vector<WheelPin> pins; ///< Requires-Dist pins of those wheels (nvidia-*-cu12, triton)
  /// Components that come from the system (apt) rather than wheels: any of cuda, cudnn, nccl.
  std::vector<std::string> system;
  Provenance why;
};

/// One framework release series.
struct FrameworkRelease {
  std::string series;                ///< "2.1"; "*" = any version the spec pins exactly (JAX)
  std::vector<std::string> versions; ///< exact releases of the series, newest first ("2.1.2", "2.1.0")
  std::string python;                ///< supported Python range as a constraint (">=3.8,<=3.11")
  std::vector<FrameworkVariant> variants;
  Provenance why;
};

struct FrameworkRecipe {
  std::string name;                       ///< "pytorch", "tensorflow", "jax" (the `stack.framework` name)
  std::string package;                    ///< "torch", "tensorflow", "jax"
  std::vector<FrameworkRelease> releases; ///< newest first
  std::vector<RecipeFact> rules;
  std::vector<RecipeSourceRef> sources;
};

// ---------------------------------------------------------------------------------------------

/// Where a RecipeSet was read from, as the lock records it.
struct RecipeOrigin {
  std::string kind;   ///< "builtin", "dir" (LOCKSTEP_RECIPES_DIR) or "git"
  std::string url;    ///< git: the repository URL as the spec writes it; dir: the directory
  std::string commit; ///< git: the 40-hex commit
  /// sha256 over, for each file of recipe_files() in order, "PATH\0SIZE\0BYTES" (PATH relative to
  /// recipes/, SIZE in decimal).
  Digest digest;
};

/// Every stack recipe, loaded and validated together.
struct RecipeSet {
  RecipeOrigin origin;
  CudaRecipe cuda;
  CudnnRecipe cudnn;
  NcclRecipe nccl;
  MpiRecipe openmpi;
  MpiRecipe mpich;
  LibraryRecipe ucx;
  LibraryRecipe pmix;
  PythonRecipe python;
  std::vector<FrameworkRecipe> frameworks; ///< pytorch, tensorflow, jax

  /// The framework recipe named `name` ("pytorch"), or nullptr.
  [[nodiscard]] const FrameworkRecipe* framework(std::string_view name) const;
  /// The MPI recipe for `impl` ("openmpi", "mpich"), or nullptr.
  [[nodiscard]] const MpiRecipe* mpi(std::string_view impl) const;
};

/// Reads one recipe file's text by its path under recipes/ ("cuda/drivers.yaml"): from
/// LOCKSTEP_RECIPES_DIR when set, else the copy embedded in the binary. `origin` is set to the file
/// name to use in messages. The one place recipe files are opened (runner/runtime/gpu.cpp and
/// builder/image/image_facts.cpp read theirs through it).
Result<std::string> read_builtin_recipe(std::string_view relative_path, std::filesystem::path& origin);

/// The built-in recipes (or LOCKSTEP_RECIPES_DIR's, read at the first call). Parsed once per process
/// and cached (thread-safe). Every problem in every file (unknown key, missing source, malformed
/// version or constraint, a `source:` naming no `sources:` key) is reported together, located, as
/// invalid_input.
Result<const RecipeSet*> builtin_recipes();

/// Loads recipes from a directory laid out like recipes/ (a team's recipes repository checkout).
/// Files it lacks are taken from the built-in set.
Result<RecipeSet> load_recipes_dir(const std::filesystem::path& dir, RecipeOrigin origin);

/// Parses a whole set from texts keyed by relative path ("cuda/cuda.yaml" -> text); missing files
/// are errors. `origin_prefix` is prepended to paths in messages. For tests and the loaders above.
Result<RecipeSet> parse_recipes(const std::map<std::string, std::string>& files,
                                const std::filesystem::path& origin_prefix, RecipeOrigin origin);

/// The relative paths of every file a RecipeSet is made of, in load order.
const std::vector<std::string>& recipe_files();

} // namespace lockstep::envspec
