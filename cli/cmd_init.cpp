// `lockstep init`: write a starting lockstep.yaml in the current directory (or -o), from nothing or
// from what the project has: a requirements file, a pyproject.toml, an environment.yml, or an
// installed venv or conda environment (read as `lockstep doctor` reads it).
#include "cli/cli.hpp"
#include "envspec/load/conda_env_file.hpp"
#include "envspec/load/init_spec.hpp"
#include "envspec/load/python_inputs.hpp"
#include "envspec/stack/recipes.hpp"
#include "runner/audit/doctor.hpp"
#include "support/base/log.hpp"
#include "support/python/pep440.hpp"
#include "support/python/pep508.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* k_examples = R"(Examples:
  lockstep init                                   a commented template in ./lockstep.yaml
  lockstep init --from requirements.in            {requirements: requirements.in}, stack when torch is there
  lockstep init --from pyproject.toml             {pyproject: pyproject.toml}; Python from requires-python
  lockstep init --from environment.yml            its channels and conda packages, as conda would install them
  lockstep init --from environment.yml --translate   {conda-env: environment.yml}: PyPI and Debian instead
  lockstep init --from env                        the active venv, or the conda environment's exact builds
  lockstep init --from /opt/conda/envs/train      that environment's packages
  lockstep init && lockstep check && lockstep lock

The base is the Debian suite whose python3 is the project's Python (bookworm for 3.11, trixie for
3.13), else the official python:X.Y image. A `stack:` with the framework is added when torch,
tensorflow or jax is among the requirements. init never overwrites a file.)";

struct InitArgs {
  std::string from;
  std::string name;
  std::string output = "lockstep.yaml";
  bool translate = false; // --translate: an environment.yml's conda packages mapped to PyPI and Debian
};

// An image name from a directory name: lowercase letters, digits, '.', '_', '-'.
std::string name_from(const fs::path& dir) {
  std::string out;
  for (char c : dir.filename().string()) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isalnum(u) != 0 ? static_cast<char>(std::tolower(u)) : (c == '.' || c == '_' ? c : '-');
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.front()))) {
    out.erase(out.begin());
  }
  return out.empty() ? "image" : out;
}

// "3.11" of "3.11.2".
std::string minor_of(const std::string& version) {
  const auto first = version.find('.');
  const auto second = first == std::string::npos ? std::string::npos : version.find('.', first + 1);
  return version.substr(0, second);
}

// The Python for a requires-python range: the default suite's if it fits, else the newest recipe
// version with a Debian suite that fits, else the newest that fits at all.
std::string python_for(const std::string& requires_python, const envspec::RecipeSet& recipes) {
  auto spec = SpecifierSet::parse(requires_python);
  if (!spec) {
    return {};
  }
  const auto fits = [&spec](const std::string& v) {
    auto version = PyVersion::parse(v);
    return version && spec->contains(*version, Prereleases::allow);
  };
  if (fits("3.11")) {
    return "3.11";
  }
  std::string any;
  for (const envspec::PythonVersion& v : recipes.python.versions) {
    if (fits(v.version)) {
      if (!v.debian.empty()) {
        return v.version;
      }
      if (any.empty()) {
        any = v.version;
      }
    }
  }
  return any;
}

// The project file, as the spec (in `spec_dir`) names it: relative, and inside the spec's directory.
Result<std::string> file_in_spec_dir(const fs::path& file, const fs::path& spec_dir) {
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(fs::absolute(file), ec);
  const fs::path dir = fs::weakly_canonical(spec_dir, ec);
  const fs::path rel = abs.lexically_relative(dir);
  if (rel.empty() || *rel.begin() == "..") {
    return invalid_input("init: {} is outside {}, the spec's directory; lockstep reads project files only "
                         "under it: write the spec beside the file (-o {}/lockstep.yaml)",
                         file.string(), dir.string(), abs.parent_path().string());
  }
  return rel.generic_string();
}

// pip's own tools, which an environment has but a spec doesn't ask for.
bool installer_tool(const std::string& project) {
  static const std::set<std::string> tools = {"pip", "setuptools", "wheel", "distribute"};
  return tools.count(normalize_project_name(project)) != 0;
}

// An installed environment's packages as pins (conda's own through the conda names table).
Result<void> from_environment(const runner::PythonEnv& env, envspec::InitRequest& r) {
  r.from = envspec::InitRequest::From::environment;
  r.environment = fmt::format("{} {}", env.kind, env.prefix);
  if (!env.version.empty()) {
    r.python = minor_of(env.version);
    r.python_source = fmt::format("the environment's Python {}", env.version);
  }
  std::set<std::string> pinned;
  for (const runner::PythonPackage& p : env.packages) {
    const std::string project = normalize_project_name(p.name);
    if (p.from == "conda") {
      if (p.name == "python") {
        continue;
      }
      LS_TRY_ASSIGN(envspec::CondaMapping m, envspec::map_conda_package(p.name));
      using Kind = envspec::CondaMapping::Kind;
      if (m.kind == Kind::pypi && !installer_tool(m.name) &&
          pinned.insert(normalize_project_name(m.name)).second) {
        r.pip.push_back(fmt::format("{}=={}", m.name, p.version));
      } else if (m.kind == Kind::apt) {
        r.apt.push_back(m.name);
      } else if (m.kind == Kind::stack) {
        r.notes.push_back(
            fmt::format("conda's {} {} is stack.{}: set it under stack:", p.name, p.version, m.name));
      } else if (m.kind == Kind::unknown) {
        r.notes.push_back(fmt::format(
            "not carried over: conda package {} {} (no known PyPI or Debian equivalent)", p.name, p.version));
      }
      continue;
    }
    if (installer_tool(project) || !pinned.insert(project).second) {
      continue;
    }
    r.pip.push_back(fmt::format("{}=={}", p.name, p.version));
    if (p.version.find('+') != std::string::npos) {
      r.notes.push_back(fmt::format("{} {} is a local build (+label): add the index it came from to repos",
                                    p.name, p.version));
    }
  }
  std::sort(r.apt.begin(), r.apt.end());
  r.apt.erase(std::unique(r.apt.begin(), r.apt.end()), r.apt.end());
  return {};
}

// An installed conda environment as the exact builds its conda-meta records, each from its channel;
// what pip installed there as pins over its python.
Result<void> from_conda_prefix(const runner::PythonEnv& env, envspec::InitRequest& r) {
  LS_TRY_ASSIGN(const envspec::CondaPrefix prefix, envspec::read_conda_prefix(env.prefix));
  r.from = envspec::InitRequest::From::conda;
  r.file = "the conda environment " + env.prefix;
  r.conda_exact = true;
  std::map<std::string, std::size_t> per_channel;
  for (const envspec::CondaPrefixPackage& p : prefix.packages) {
    r.conda.push_back(envspec::exact_match_spec(p));
    per_channel[p.channel] += 1;
    if (p.name == "cuda-version" || (p.name == "pytorch-cuda" && r.conda_cuda.empty())) {
      r.conda_cuda = minor_of(p.version);
    }
  }
  // The channel most packages came from first.
  std::vector<std::pair<std::string, std::size_t>> channels(per_channel.begin(), per_channel.end());
  std::stable_sort(channels.begin(), channels.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [channel, count] : channels) {
    r.conda_channels.push_back(channel);
  }
  for (const std::string& u : prefix.unpinnable) {
    r.notes.push_back("not carried over: " + u);
  }
  for (const runner::PythonPackage& p : env.packages) {
    if (p.from != "conda" && !installer_tool(p.name)) {
      r.pip.push_back(fmt::format("{}=={}", p.name, p.version));
    }
  }
  return {};
}

Result<ExitCode> run_init(const InitArgs& args) {
  const fs::path output = fs::absolute(args.output);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(output, ec))) {
    return invalid_input("init: {} exists; lockstep init never overwrites a file: remove it, or write "
                         "another with -o FILE",
                         args.output);
  }
  const fs::path spec_dir = output.parent_path();
  envspec::InitRequest r;
  r.name = args.name.empty() ? name_from(spec_dir) : args.name;
  LS_TRY_ASSIGN(const envspec::RecipeSet* recipes, envspec::builtin_recipes());
  if (!args.from.empty()) {
    const fs::path from(args.from);
    if (args.from == "env" || fs::is_directory(from, ec)) {
      runner::DoctorOptions options = runner::doctor_options_from_env();
      if (args.from != "env") {
        options.python_prefix = fs::absolute(from).string();
      }
      std::vector<std::string> warnings;
      LS_TRY_ASSIGN(std::optional<runner::PythonEnv> env, runner::capture_python(options, warnings));
      for (const std::string& w : warnings) {
        log::warn("init: {}", w);
      }
      if (!env) {
        return invalid_input("init: no active Python environment ($VIRTUAL_ENV and $CONDA_PREFIX are unset); "
                             "activate one, or give its prefix: --from /path/to/env");
      }
      if (env->kind == "conda" && !args.translate) {
        LS_TRY(from_conda_prefix(*env, r));
      } else {
        LS_TRY(from_environment(*env, r));
      }
    } else {
      LS_TRY_ASSIGN(std::string text, read_file(from, 4 << 20));
      LS_TRY_ASSIGN(r.file, file_in_spec_dir(from, spec_dir));
      const std::string ext = from.extension().string();
      if (ext == ".toml") {
        r.from = envspec::InitRequest::From::pyproject;
        LS_TRY_ASSIGN(auto reqs, envspec::read_pyproject(text, r.file, {}));
        for (const auto& q : reqs) {
          r.pip.push_back(q.text);
        }
        LS_TRY_ASSIGN(envspec::PyProjectInfo info, envspec::read_pyproject_info(text, r.file));
        r.extras = info.extras;
        if (!info.requires_python.empty()) {
          r.python = python_for(info.requires_python, *recipes);
          r.python_source = fmt::format("{} requires-python {}", r.file, info.requires_python);
        }
      } else if ((ext == ".yml" || ext == ".yaml") && !args.translate) {
        r.from = envspec::InitRequest::From::conda;
        LS_TRY_ASSIGN(envspec::CondaEnvFile env, envspec::read_conda_env_file(text, r.file));
        r.conda_channels = env.channels;
        r.conda = env.specs;
        r.conda_cuda = env.cuda;
        if (args.name.empty() && !env.name.empty()) {
          r.name = name_from(env.name);
        }
        r.pip = env.pip;
        r.notes = env.notes;
        if (!env.nodefaults) {
          r.notes.push_back(
              fmt::format("{} does not list nodefaults: conda would add its default channels after "
                          "these; lockstep reads only the channels named",
                          r.file));
        }
      } else if (ext == ".yml" || ext == ".yaml") {
        r.from = envspec::InitRequest::From::conda_env;
        LS_TRY_ASSIGN(envspec::CondaEnv env, envspec::read_conda_env(text, r.file));
        for (const auto& q : env.pip) {
          r.pip.push_back(q.text);
        }
        if (env.python) {
          r.python = env.python->text;
          r.python_source = env.python->where;
        }
      } else {
        r.from = envspec::InitRequest::From::requirements;
        LS_TRY_ASSIGN(RequirementsFile reqs, parse_requirements_txt(text, r.file));
        for (const PinnedRequirement& q : reqs.requirements) {
          r.pip.push_back(q.requirement.str());
        }
      }
    }
  }
  LS_TRY_ASSIGN(std::string text, envspec::init_spec_text(r, *recipes));
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(output, 0644));
  LS_TRY(out.write(text));
  LS_TRY(out.commit());
  log::info("wrote {}; next: lockstep check, then lockstep lock", args.output);
  return ExitCode::ok;
}

} // namespace

void register_init(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<InitArgs>();
  auto* cmd =
      app.add_subcommand("init", "Write a starting lockstep.yaml, from nothing or from a project's files");
  cmd->add_option("--from", args->from,
                  "requirements.txt/.in, pyproject.toml, environment.yml, 'env' (the active venv or conda "
                  "environment) or an environment's prefix")
      ->type_name("SOURCE");
  cmd->add_flag("--translate", args->translate,
                "environment.yml: map its conda packages to PyPI projects, Debian packages and stack: "
                "(the default keeps them as conda packages)");
  cmd->add_option("--name", args->name, "The image name (default: the directory's name)");
  cmd->add_option("-o,--output", args->output, "The spec to write (never overwritten)")
      ->type_name("FILE")
      ->capture_default_str();
  add_common_flags(*cmd, ctx, false);
  cmd->footer(command_footer(k_examples, {ExitCode::ok, ExitCode::invalid_input, ExitCode::io}));
  cmd->callback([args, &ctx] { ctx.action = [args] { return run_init(*args); }; });
}

} // namespace lockstep::cli
