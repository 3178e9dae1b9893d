// The starting lockstep.yaml of `lockstep init`: see init_spec.hpp.
#include "envspec/load/init_spec.hpp"

#include "support/python/pep508.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace lockstep::envspec {

namespace {

// A YAML double-quoted scalar (JSON's escaping is valid YAML).
std::string quote(const std::string& s) {
  return nlohmann::json(s).dump();
}

std::vector<std::string> quoted_all(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const std::string& i : items) {
    out.push_back(quote(i));
  }
  return out;
}

// The Debian suite whose python3 is `python` ("3.11" -> "bookworm"), else "".
std::string suite_for(const RecipeSet& recipes, const std::string& python) {
  for (const PythonVersion& v : recipes.python.versions) {
    if (v.version == python && !v.debian.empty()) {
      return v.debian.front();
    }
  }
  return {};
}

// "pytorch@2.4.1" / "tensorflow" / "" from the requirements: the first framework among them, with
// its version when pinned exactly.
std::string framework_of(const std::vector<std::string>& requirements) {
  static const std::vector<std::pair<std::string, std::string>> frameworks = {
      {"torch", "pytorch"}, {"tensorflow", "tensorflow"}, {"tensorflow-cpu", "tensorflow"}, {"jax", "jax"}};
  for (const std::string& text : requirements) {
    auto req = Requirement::parse(text);
    if (!req) {
      continue;
    }
    for (const auto& [project, framework] : frameworks) {
      if (req->project != project) {
        continue;
      }
      for (const VersionSpecifier& c : req->specifier.clauses()) {
        if (c.op == VersionSpecifier::Op::equal && !c.wildcard && req->specifier.clauses().size() == 1) {
          return framework + "@" + c.text.substr(0, c.text.find('+')); // "2.4.1+cu121": the release
        }
      }
      return framework;
    }
  }
  return {};
}

// `base: {debian: SUITE}` and `repos:` with Debian's standard sources for it, as apt has them: the
// release and its -updates from the main archive, -security from the security archive (a release
// that has them: not sid).
std::string debian_base_text(std::string_view suite) {
  if (suite == "sid" || suite == "unstable") {
    return fmt::format("base: {{debian: {}}}\n\n"
                       "repos:\n"
                       "  - apt: http://deb.debian.org/debian\n"
                       "    suite: {}\n"
                       "    components: [main]\n"
                       "    keyring: /usr/share/keyrings/debian-archive-keyring.gpg\n",
                       suite, suite);
  }
  return fmt::format("base: {{debian: {}}}\n\n"
                     "repos:\n"
                     "  # Debian's standard sources, as apt has them: at equal priority the newest build of\n"
                     "  # each package wins, the security archive's fixes included.\n"
                     "  - apt: http://deb.debian.org/debian\n"
                     "    suites: [{}, {}-updates]\n"
                     "    components: [main]\n"
                     "    keyring: /usr/share/keyrings/debian-archive-keyring.gpg\n"
                     "  - apt: http://deb.debian.org/debian-security\n"
                     "    suite: {}-security\n"
                     "    components: [main]\n"
                     "    keyring: /usr/share/keyrings/debian-archive-keyring.gpg\n",
                     suite, suite, suite, suite);
}

// The rest of a spec that keeps an environment.yml's conda packages: a Debian base (its libc is the
// image's __glibc; a shell for run steps), the file's channels, its MatchSpecs as written.
std::string conda_spec_body(const InitRequest& r, std::string_view suite) {
  std::string out = "# The conda packages go into /opt/conda (conda.prefix) over a Debian root, whose libc\n"
                    "# is the environment's __glibc.\n";
  out += debian_base_text(suite);
  out += fmt::format("  # {}'s channels, in its order (strict channel priority, as pixi)\n", r.file);
  for (const std::string& c : r.conda_channels) {
    out += fmt::format("  - conda: {}\n", quote(c));
  }
  if (!r.pip.empty()) {
    out += "  - pypi: https://pypi.org/simple\n";
  }
  out += "\npackages:\n  apt: [ca-certificates]\n";
  out += fmt::format("  conda: [{}]\n", fmt::join(quoted_all(r.conda), ", "));
  if (!r.pip.empty()) {
    out += "  # Its pip: section: wheels for the conda python, into its site-packages; its conda Python\n"
           "  # packages count as installed.\n";
    out += fmt::format("  pip: [{}]\n", fmt::join(quoted_all(r.pip), ", "));
  }
  std::vector<std::string> settings;
  if (r.conda_exact) {
    out += "\n# Each package is the installed build, from the channel it came from (flexible priority).";
    settings.emplace_back("channel_priority: flexible");
  }
  if (!r.conda_cuda.empty()) {
    out += fmt::format(
        "\n# The environment is for CUDA {}: the GPU builds are chosen even where the lock is made\n"
        "# without a GPU (conda's __cuda virtual package).",
        r.conda_cuda);
    settings.push_back(fmt::format("virtual_packages: {{cuda: {}}}", quote(r.conda_cuda)));
  }
  if (!settings.empty()) {
    out += fmt::format("\nconda: {{{}}}\n", fmt::join(settings, ", "));
  }
  out += "\noutputs:\n  oci: build/image\n";
  return out;
}

} // namespace

Result<std::string> init_spec_text(const InitRequest& r, const RecipeSet& recipes) {
  constexpr const char* k_default_suite = "bookworm";
  std::string python = r.python;
  std::string suite = python.empty() ? k_default_suite : suite_for(recipes, python);
  std::string out = "# lockstep.yaml, written by `lockstep init`";
  switch (r.from) {
  case InitRequest::From::none:
    out += ": a starting point to edit.\n";
    break;
  case InitRequest::From::requirements:
  case InitRequest::From::pyproject:
  case InitRequest::From::conda_env:
  case InitRequest::From::conda:
    out += fmt::format(" from {}.\n", r.file);
    break;
  case InitRequest::From::environment:
    out += fmt::format(" from the {} environment.\n", r.environment);
    break;
  }
  out += "#   lockstep lock               pin every package (Debian and Python) into lockstep.lock\n"
         "#   lockstep build --locked     build the image; docs/spec.md describes every key\n";
  for (const std::string& note : r.notes) {
    out += "# " + note + "\n";
  }
  out += "lockstep: 1\n";
  out += fmt::format("name: {}\n", quote(r.name));
  out += "platform: linux/amd64\n";
  if (r.from == InitRequest::From::conda) {
    return out + conda_spec_body(r, k_default_suite);
  }
  const bool debian = !suite.empty();
  if (debian) {
    if (python.empty()) {
      for (const PythonVersion& v : recipes.python.versions) {
        if (std::find(v.debian.begin(), v.debian.end(), suite) != v.debian.end()) {
          python = v.version;
        }
      }
    }
    out += fmt::format("# Debian {}'s python3 is {}{}: the Python the wheels are chosen for.\n", suite,
                       python, r.python_source.empty() ? "" : fmt::format(", as {} asks", r.python_source));
    out += debian_base_text(suite);
  } else {
    out += fmt::format(
        "# No Debian suite ships Python {} as python3 (recipes/python/python.yaml): the official\n"
        "# python image's CPython, installed in /usr/local.\n",
        python);
    out += fmt::format(
        "base: {{image: \"docker://python:{}-slim-bookworm\", python: /usr/local/bin/python3}}\n\n", python);
    out += "repos:\n";
  }
  out += "  - pypi: https://pypi.org/simple\n\n";
  const std::string framework = framework_of(r.pip);
  if (!framework.empty()) {
    out +=
        "# The framework's CUDA, cuDNN and NCCL come with its wheels; `lockstep lock` records the choice.\n";
    out += fmt::format("stack:\n  framework: {}\n\n", framework);
  }
  out += "packages:\n";
  std::vector<std::string> apt;
  if (debian) {
    apt.emplace_back("python3");
  }
  apt.insert(apt.end(), r.apt.begin(), r.apt.end());
  if (!apt.empty()) {
    out += fmt::format("  apt: [{}]\n", fmt::join(apt, ", "));
  }
  switch (r.from) {
  case InitRequest::From::none:
    out += "  # Python requirements, resolved with their dependencies: ranges, pins, or files.\n"
           "  pip: []\n"
           "  # pip: [\"numpy>=1.26\", {requirements: requirements.in}, {pyproject: pyproject.toml, extras: "
           "[gpu]}]\n";
    break;
  case InitRequest::From::requirements:
    out += fmt::format("  pip: [{{requirements: {}}}]\n", quote(r.file));
    break;
  case InitRequest::From::pyproject:
    if (!r.extras.empty()) {
      out += fmt::format("  # its optional dependencies: {}; add them with extras: [...]\n",
                         fmt::join(r.extras, ", "));
    }
    out += fmt::format("  pip: [{{pyproject: {}}}]\n", quote(r.file));
    break;
  case InitRequest::From::conda_env:
    out += fmt::format("  pip: [{{conda-env: {}}}]\n", quote(r.file));
    break;
  case InitRequest::From::conda: // conda_spec_body wrote it
    break;
  case InitRequest::From::environment:
    if (r.pip.empty()) {
      out += "  pip: []\n";
    } else {
      out += "  pip:\n";
      for (const std::string& p : r.pip) {
        out += fmt::format("    - {}\n", quote(p));
      }
    }
    break;
  }
  out += "\noutputs:\n  oci: build/image\n";
  return out;
}

} // namespace lockstep::envspec
