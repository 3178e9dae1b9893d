// `stack:` (docs/spec.md): version constraints per component, the recipes repository, and what
// environment files said about the stack.
#include "envspec/load/schema_walker.hpp"
#include "envspec/stack/recipes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <regex>

namespace lockstep::envspec::detail {

// `stack:` (docs/spec.md): version constraints per component; the solver checks them against
// the recipes later (envspec/stack/stack.hpp), this only checks their form.
void SchemaWalker::stack(const Node& v, StackRequest& out) {
  if (!expect_map(v, "stack", "a map, e.g. {cuda: \"12.1\", nccl: \"2.18\", framework: pytorch@2.1}")) {
    return;
  }
  const auto constraint = [this](const Node& value, const std::string& path, std::string_view text,
                                 StackRequest::Item& item, std::size_t offset) {
    if (text.empty()) {
      error(value.location, path, "expected a version after '@', e.g. openmpi@4.1");
      return;
    }
    Result<VersionConstraint> c = VersionConstraint::parse(text);
    if (!c) {
      error(sub_location(value, offset, text.size()), path, c.error().message);
      return;
    }
    item.text = std::string(text);
    item.location = sub_location(value, offset, text.size());
  };
  // `NAME[@VERSION]` for mpi and framework.
  const auto named = [&](const Node& value, const std::string& path,
                         std::initializer_list<std::string_view> names, std::string& name,
                         StackRequest::Item& version) {
    const std::string* s = nonempty_string(value, path, "NAME or NAME@VERSION");
    if (s == nullptr) {
      return;
    }
    const std::size_t at = s->find('@');
    const std::string n = s->substr(0, at);
    if (std::find(names.begin(), names.end(), n) == names.end()) {
      error(sub_location(value, 0, n.size()), path,
            fmt::format("unknown {} '{}'; expected one of: {}", path == "stack.mpi" ? "MPI" : "framework", n,
                        fmt::join(names, ", ")));
      return;
    }
    name = n;
    if (at != std::string::npos) {
      constraint(value, path, std::string_view(*s).substr(at + 1), version, at + 1);
    }
  };
  for (const MapEntry& e : v.entries) {
    const std::string path = "stack." + e.key;
    const Node& value = e.value;
    if (e.key == "cuda" || e.key == "cudnn" || e.key == "nccl" || e.key == "python") {
      StackRequest::Item& item = e.key == "cuda"    ? out.cuda
                                 : e.key == "cudnn" ? out.cudnn
                                 : e.key == "nccl"  ? out.nccl
                                                    : out.python;
      const std::string* s = nonempty_string(value, path, "a version, e.g. \"12.1\"");
      if (s != nullptr) {
        constraint(value, path, *s, item, 0);
      }
    } else if (e.key == "mpi") {
      out.mpi_location = value.location;
      named(value, path, {"openmpi", "mpich"}, out.mpi, out.mpi_version);
    } else if (e.key == "framework") {
      out.framework_location = value.location;
      named(value, path, {"pytorch", "tensorflow", "jax"}, out.framework, out.framework_version);
    } else if (e.key == "cuda_flavor") {
      const std::string* s = nonempty_string(value, path, "base, runtime or devel");
      if (s != nullptr && *s != "base" && *s != "runtime" && *s != "devel") {
        error(value.location, path,
              fmt::format("unknown CUDA flavor '{}'; expected base (the CUDA runtime library), runtime (all "
                          "CUDA libraries) or devel (the whole toolkit)",
                          *s));
      } else if (s != nullptr) {
        out.cuda_flavor = *s;
      }
    } else if (e.key == "recipes") {
      stack_recipes(value, out);
    } else {
      unknown_key(e, "stack", m_shapes.stack);
    }
  }
  if ((out.cudnn.given() || out.nccl.given()) && !out.cuda.given() && out.framework.empty()) {
    const StackRequest::Item& first = out.cudnn.given() ? out.cudnn : out.nccl;
    error(first.location, out.cudnn.given() ? "stack.cudnn" : "stack.nccl",
          "needs stack.cuda (or a framework): cuDNN and NCCL are built for one CUDA version; add e.g. "
          "cuda: \"12.1\"");
  }
}

// `stack.recipes: {git: URL, rev: REV}`.
void SchemaWalker::stack_recipes(const Node& v, StackRequest& out) {
  out.recipes_location = v.location;
  if (!expect_map(v, "stack.recipes", "a map {git: URL, rev: COMMIT}")) {
    return;
  }
  for (const MapEntry& e : v.entries) {
    const std::string path = "stack.recipes." + e.key;
    if (e.key == "git") {
      CopyItem tmp;
      if (copy_git(e.value, path, tmp)) {
        out.recipes_git = tmp.git;
        out.recipes_git_text = tmp.git_text;
      }
    } else if (e.key == "rev") {
      const std::string* s = nonempty_string(e.value, path, "a commit id or tag");
      static const std::regex rev_re("[A-Za-z0-9._/+-]+");
      if (s != nullptr && (!std::regex_match(*s, rev_re) || s->find("..") != std::string::npos)) {
        error(e.value.location, path,
              fmt::format("invalid rev '{}': expected a commit id, tag or branch", *s));
      } else if (s != nullptr) {
        out.recipes_rev = *s;
      }
    } else {
      unknown_key(e, "stack.recipes", m_shapes.stack_recipes);
    }
  }
  if (v.find("git") == nullptr || v.find("rev") == nullptr) {
    error(v.location, "stack.recipes",
          "needs both 'git' (the recipes repository) and 'rev' (the commit to use), e.g. {git: "
          "https://git.example.org/ml/recipes, rev: 3f2a9c1...}");
  }
}

// Applies what environment files said about the stack: each key only where `stack:` leaves it
// unset; a different value there is an error naming both.
void SchemaWalker::apply_conda_stack(Spec& spec) {
  for (PendingStack& p : m_conda_stack) {
    std::vector<std::pair<std::string, ImportedRequirement>> items(p.env.stack.begin(), p.env.stack.end());
    if (p.env.python) {
      items.emplace_back("python", *p.env.python);
    }
    if (items.empty()) {
      continue;
    }
    if (!spec.stack) {
      spec.stack.emplace();
      spec.stack->location = p.location;
    }
    StackRequest& st = *spec.stack;
    for (const auto& [key, r] : items) {
      StackRequest::Item* slot = key == "cuda"     ? &st.cuda
                                 : key == "cudnn"  ? &st.cudnn
                                 : key == "nccl"   ? &st.nccl
                                 : key == "python" ? &st.python
                                                   : nullptr;
      if (key == "mpi") {
        const std::string impl = r.text.substr(0, r.text.find('@'));
        const std::string version =
            r.text.find('@') == std::string::npos ? "" : r.text.substr(r.text.find('@') + 1);
        if (st.mpi.empty()) {
          st.mpi = impl;
          st.mpi_version = StackRequest::Item{version, p.location};
          st.mpi_location = p.location;
        } else if (st.mpi != impl) {
          error(p.location, p.key_path,
                fmt::format("{} asks for {} but stack.mpi is {}", r.where, impl, st.mpi));
        }
        continue;
      }
      if (slot == nullptr) {
        continue;
      }
      if (!slot->given()) {
        *slot = StackRequest::Item{r.text, p.location};
      } else if (slot->text != r.text && !r.text.empty()) {
        error(p.location, p.key_path,
              fmt::format("{} asks for {} {} but stack.{} is \"{}\"; make them agree", r.where, key, r.text,
                          key, slot->text));
      }
    }
  }
}

} // namespace lockstep::envspec::detail
