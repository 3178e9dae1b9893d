// `run:` (docs/spec.md): the build steps.
#include "envspec/load/schema_walker.hpp"

#include <fmt/format.h>

namespace lockstep::envspec::detail {

// `run: [STEP...]`, each step "COMMAND" or {sh: COMMAND, network: BOOL}.
void SchemaWalker::run(const Node& v, std::vector<RunStep>& out) {
  if (!expect_list(v, "run", "a list of commands")) {
    return;
  }
  for (std::size_t i = 0; i < v.items.size(); ++i) {
    const Node& item = v.items[i];
    const std::string path = fmt::format("run[{}]", i);
    RunStep step;
    step.location = item.location;
    if (item.is_scalar()) {
      if (const std::string* s = nonempty_string(item, path, "a shell command")) {
        step.sh = *s;
        out.push_back(std::move(step));
      }
      continue;
    }
    if (!expect_map(item, path, "a shell command or a map {sh: COMMAND, network: BOOL}")) {
      continue;
    }
    if (item.find("sh") == nullptr) {
      error(item.location, path, "missing 'sh' (the shell command to run)");
    }
    bool ok = true;
    for (const MapEntry& e : item.entries) {
      const std::string key_path = child_path(path, e.key);
      if (e.key == "sh") {
        const std::string* s = nonempty_string(e.value, key_path, "a shell command");
        ok = ok && s != nullptr;
        if (s != nullptr) {
          step.sh = *s;
        }
      } else if (e.key == "network") {
        step.network = boolean(e.value, key_path).value_or(step.network);
      } else {
        unknown_key(e, path, m_shapes.run_step);
      }
    }
    if (ok && !step.sh.empty()) {
      out.push_back(std::move(step));
    }
  }
}

} // namespace lockstep::envspec::detail
