// pyproject.toml and environment.yml as requirements: see python_inputs.hpp.
#include "envspec/load/python_inputs.hpp"

#include "envspec/load/conda_env_file.hpp"
#include "envspec/stack/recipes.hpp"
#include "envspec/yaml/diagnostics.hpp"
#include "envspec/yaml/node.hpp"
#include "support/base/text.hpp"
#include "support/base/toml.hpp"
#include "support/python/pep508.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace lockstep::envspec {

namespace {

std::string at(const std::string& what, const toml::node& n) {
  return fmt::format("{}:{}", what, n.source().begin.line);
}

// The requirement strings of a TOML array (problems reported).
void requirement_list(const toml::node& node, const std::string& what, const std::string& key,
                      std::vector<ImportedRequirement>& out, std::vector<std::string>& problems) {
  const toml::array* list = node.as_array();
  if (list == nullptr) {
    problems.push_back(fmt::format("{}: {} must be a list of requirement strings", at(what, node), key));
    return;
  }
  for (const toml::node& item : *list) {
    const auto* s = item.as_string();
    if (s == nullptr) {
      problems.push_back(fmt::format("{}: {} must hold requirement strings", at(what, item), key));
      continue;
    }
    Result<Requirement> req = Requirement::parse(s->get());
    if (!req) {
      problems.push_back(fmt::format("{}: {}", at(what, item), req.error().message));
      continue;
    }
    out.push_back(ImportedRequirement{s->get(), at(what, item)});
  }
}

} // namespace

Result<std::vector<ImportedRequirement>> read_pyproject(std::string_view text, const std::string& what,
                                                        const std::vector<std::string>& extras) {
  toml::parse_result parsed = toml::parse(text, what);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return invalid_input("{}:{}:{}: not valid TOML: {}", what, e.source().begin.line, e.source().begin.column,
                         e.description());
  }
  const toml::table& root = parsed.table();
  const toml::table* project = root["project"].as_table();
  if (project == nullptr) {
    return invalid_input("{}: no [project] table (PEP 621); lockstep reads [project].dependencies and "
                         "[project.optional-dependencies]",
                         what);
  }
  std::vector<std::string> problems;
  std::string self;
  if (const auto* name = (*project)["name"].as_string()) {
    self = normalize_project_name(name->get());
  }
  if (const toml::array* dynamic = (*project)["dynamic"].as_array()) {
    for (const toml::node& d : *dynamic) {
      if (d.value<std::string>() == "dependencies" || d.value<std::string>() == "optional-dependencies") {
        problems.push_back(
            fmt::format("{}: [project] declares {} dynamic: only the build backend knows them, "
                        "and lockstep does not run it; list them in [project] or use a "
                        "requirements file",
                        at(what, d), *d.value<std::string>()));
      }
    }
  }
  std::vector<ImportedRequirement> out;
  if (const toml::node* deps = project->get("dependencies")) {
    requirement_list(*deps, what, "[project].dependencies", out, problems);
  }
  const toml::table* optional = (*project)["optional-dependencies"].as_table();
  std::set<std::string> expanded;
  std::vector<std::string> todo(extras.begin(), extras.end());
  while (!todo.empty()) {
    const std::string extra = normalize_project_name(todo.front());
    todo.erase(todo.begin());
    if (!expanded.insert(extra).second) {
      continue;
    }
    const toml::node* list = nullptr;
    if (optional != nullptr) {
      for (const auto& [key, value] : *optional) {
        if (normalize_project_name(key.str()) == extra) {
          list = &value;
        }
      }
    }
    if (list == nullptr) {
      std::vector<std::string> known;
      if (optional != nullptr) {
        for (const auto& [key, value] : *optional) {
          known.emplace_back(key.str());
        }
      }
      problems.push_back(
          fmt::format("{}: no optional dependencies '{}' in [project.optional-dependencies]{}", what, extra,
                      known.empty() ? "" : fmt::format(" (it has {})", fmt::join(known, ", "))));
      continue;
    }
    std::vector<ImportedRequirement> reqs;
    requirement_list(*list, what, fmt::format("[project.optional-dependencies].{}", extra), reqs, problems);
    for (ImportedRequirement& r : reqs) {
      auto req = Requirement::parse(r.text);
      if (req && !self.empty() && req->project == self) {
        todo.insert(todo.end(), req->extras.begin(), req->extras.end()); // "mypkg[gpu]": another extra
        continue;
      }
      out.push_back(std::move(r));
    }
  }
  if (!problems.empty()) {
    return invalid_input("{}", fmt::join(problems, "\n"));
  }
  return out;
}

Result<PyProjectInfo> read_pyproject_info(std::string_view text, const std::string& what) {
  toml::parse_result parsed = toml::parse(text, what);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return invalid_input("{}:{}:{}: not valid TOML: {}", what, e.source().begin.line, e.source().begin.column,
                         e.description());
  }
  PyProjectInfo out;
  const toml::table& root = parsed.table();
  out.name = root["project"]["name"].value_or(std::string());
  out.requires_python = root["project"]["requires-python"].value_or(std::string());
  if (const toml::table* optional = root["project"]["optional-dependencies"].as_table()) {
    for (const auto& [key, value] : *optional) {
      out.extras.emplace_back(key.str());
    }
  }
  std::sort(out.extras.begin(), out.extras.end());
  return out;
}

std::string conda_version_to_pep440(std::string_view conda) {
  std::string v(trim_chars(conda, " \t"));
  if (v.empty()) {
    return v;
  }
  const bool exact = v.starts_with("==");
  const bool fuzzy = !exact && v.front() == '=';
  if (exact || fuzzy) {
    v = v.substr(exact ? 2 : 1);
    if (auto build = v.find('='); build != std::string::npos) {
      v = v.substr(0, build); // "1.26.4=py311h64a7726_0": the build string
    }
    if (fuzzy && !v.ends_with("*")) {
      v += ".*"; // conda's "=1.26" is "1.26*"
    }
    return "==" + v;
  }
  if (std::isdigit(static_cast<unsigned char>(v.front())) != 0) {
    // "1.26.*" or "1.26" (a space between name and version): a prefix match
    if (auto build = v.find(' '); build != std::string::npos) {
      v = v.substr(0, build);
    }
    return v.ends_with("*") ? "==" + v : "==" + v + ".*";
  }
  return v; // ">=1.2,<2", "!=1.3"
}

namespace {

// One row of recipes/conda/conda-names.yaml.
struct CondaName {
  std::string pypi;
  std::string apt;
  std::string stack;
  bool system = false;
};

Result<std::map<std::string, CondaName>> read_conda_names() {
  std::filesystem::path origin;
  LS_TRY_ASSIGN(std::string text, read_builtin_recipe("conda/conda-names.yaml", origin));
  Diagnostics diags;
  std::optional<Node> root = parse_yaml(text, origin, diags);
  if (!root || !diags.empty()) {
    return diags.empty() ? invalid_input("{}: not a YAML map", origin.string()) : diags.to_error();
  }
  std::map<std::string, CondaName> out;
  const MapEntry* packages = root->find("packages");
  if (packages == nullptr || !packages->value.is_sequence()) {
    return invalid_input("{}: no 'packages:' list", origin.string());
  }
  for (const Node& row : packages->value.items) {
    const MapEntry* conda = row.find("conda");
    if (conda == nullptr) {
      return invalid_input("{}:{}: a row without 'conda:'", origin.string(), row.location.line);
    }
    CondaName n;
    if (const MapEntry* e = row.find("pypi")) {
      n.pypi = e->value.scalar;
    }
    if (const MapEntry* e = row.find("apt")) {
      n.apt = e->value.scalar;
    }
    if (const MapEntry* e = row.find("stack")) {
      n.stack = e->value.scalar;
    }
    n.system = row.find("system") != nullptr;
    out.emplace(conda->value.scalar, std::move(n));
  }
  return out;
}

// The table, read once.
Result<const std::map<std::string, CondaName>*> conda_names() {
  static const Result<std::map<std::string, CondaName>> table = read_conda_names();
  if (!table) {
    return table.error();
  }
  return &*table;
}

// Splits a conda match spec "conda-forge::numpy=1.26" into name and version part.
std::pair<std::string, std::string> split_match_spec(std::string_view spec) {
  std::string s(trim_chars(spec, " \t"));
  if (auto channel = s.find("::"); channel != std::string::npos) {
    s = s.substr(channel + 2);
  }
  std::size_t i = 0;
  while (i < s.size() &&
         (std::isalnum(static_cast<unsigned char>(s[i])) != 0 || s[i] == '_' || s[i] == '-' || s[i] == '.')) {
    ++i;
  }
  return {s.substr(0, i), std::string(trim_chars(std::string_view(s).substr(i), " \t"))};
}

} // namespace

Result<CondaMapping> map_conda_package(const std::string& conda_name) {
  LS_TRY_ASSIGN(const auto* table, conda_names());
  auto it = table->find(conda_name);
  if (it == table->end()) {
    return CondaMapping{};
  }
  const CondaName& n = it->second;
  if (n.system) {
    return CondaMapping{CondaMapping::Kind::system, {}};
  }
  if (!n.pypi.empty()) {
    return CondaMapping{CondaMapping::Kind::pypi, n.pypi};
  }
  if (!n.apt.empty()) {
    return CondaMapping{CondaMapping::Kind::apt, n.apt};
  }
  return CondaMapping{CondaMapping::Kind::stack, n.stack};
}

Result<CondaEnv> read_conda_env(std::string_view text, const std::string& what) {
  LS_TRY_ASSIGN(const Node root, environment_root(text, what));
  const MapEntry* deps = root.find("dependencies");
  LS_TRY_ASSIGN(const auto* table, conda_names());
  const std::map<std::string, CondaName>& names = *table;
  CondaEnv out;
  std::vector<std::string> problems;
  std::vector<std::string> unknown;
  const auto where = [&what](const Node& n) { return fmt::format("{}:{}", what, n.location.line); };
  for (const Node& item : deps->value.items) {
    if (item.is_map()) {
      const MapEntry* pip = item.find("pip");
      if (pip == nullptr || item.entries.size() != 1 || !pip->value.is_sequence()) {
        problems.push_back(fmt::format("{}: expected a conda package or {{pip: [...]}}", where(item)));
        continue;
      }
      for (const Node& r : pip->value.items) {
        if (!r.is_scalar()) {
          problems.push_back(fmt::format("{}: expected a pip requirement", where(r)));
          continue;
        }
        if (r.scalar.starts_with("-")) {
          problems.push_back(
              fmt::format("{}: pip option '{}' is not supported in an environment file; put it "
                          "in the spec's repos",
                          where(r), r.scalar));
          continue;
        }
        Result<Requirement> req = Requirement::parse(r.scalar);
        if (!req) {
          problems.push_back(fmt::format("{}: {}", where(r), req.error().message));
          continue;
        }
        out.pip.push_back(ImportedRequirement{r.scalar, where(r)});
      }
      continue;
    }
    if (!item.is_scalar() || item.scalar.empty()) {
      problems.push_back(fmt::format("{}: expected a conda package (NAME, NAME=VERSION)", where(item)));
      continue;
    }
    auto [name, version] = split_match_spec(item.scalar);
    const std::string pep440 = conda_version_to_pep440(version);
    if (version.find('|') != std::string::npos || version.find('[') != std::string::npos) {
      problems.push_back(fmt::format("{}: '{}': conda's '|' and '[...]' forms are not supported; write one "
                                     "version range",
                                     where(item), item.scalar));
      continue;
    }
    if (name == "python") {
      std::string constraint = pep440.starts_with("==") ? pep440.substr(2) : pep440;
      if (constraint.ends_with(".*")) {
        constraint.resize(constraint.size() - 2);
      }
      out.python = ImportedRequirement{constraint, where(item)};
      continue;
    }
    auto row = names.find(name);
    if (row == names.end()) {
      unknown.push_back(fmt::format("{}: {}", where(item), name));
      continue;
    }
    const CondaName& n = row->second;
    if (n.system) {
      out.system.push_back(name);
    } else if (!n.pypi.empty()) {
      const std::string req = n.pypi + pep440;
      if (Result<Requirement> parsed = Requirement::parse(req); !parsed) {
        problems.push_back(fmt::format("{}: '{}' as a PyPI requirement: {}", where(item), item.scalar,
                                       parsed.error().message));
        continue;
      }
      out.pip.push_back(ImportedRequirement{req, where(item)});
    } else if (!n.apt.empty()) {
      out.apt.push_back(ImportedRequirement{n.apt, where(item)});
    } else {
      std::string constraint = pep440.starts_with("==") ? pep440.substr(2) : pep440;
      if (constraint.ends_with(".*")) {
        constraint.resize(constraint.size() - 2);
      }
      if (n.stack == "mpi") {
        constraint = constraint.empty() ? name : name + "@" + constraint;
      }
      out.stack[n.stack] = ImportedRequirement{constraint, where(item)};
    }
  }
  if (!unknown.empty()) {
    problems.push_back(fmt::format(
        "conda packages without a known PyPI or Debian equivalent (recipes/conda/conda-names.yaml):\n  {}\n"
        "if PyPI has them, move them to the environment's pip: section (with their PyPI names); if they are "
        "system libraries, add them to packages.apt by their Debian names",
        fmt::join(unknown, "\n  ")));
  }
  if (!problems.empty()) {
    return invalid_input("{}", fmt::join(problems, "\n"));
  }
  return out;
}

} // namespace lockstep::envspec
