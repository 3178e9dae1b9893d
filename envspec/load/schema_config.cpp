// The image config keys (docs/spec.md): `env`, `labels`, `entrypoint`, `cmd`, `workdir`, `user`.
#include "envspec/load/schema_walker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

namespace lockstep::envspec::detail {

namespace {

constexpr const char* k_argv_hint = R"(write it as a list, e.g. ["/bin/sh", "-c", "..."])";

} // namespace

// A scalar map value (env, labels); nullptr after reporting.
const std::string* SchemaWalker::map_value(const Node& v, const std::string& path) {
  if (v.is_null()) {
    error(v.location, path, "expected a value, found nothing; write \"\" for an empty string");
    return nullptr;
  }
  return string(v, path);
}

void SchemaWalker::env(const Node& v, std::vector<std::pair<std::string, std::string>>& out) {
  if (!expect_map(v, "env")) {
    return;
  }
  static const std::regex name_re("[A-Za-z_][A-Za-z0-9_]*");
  for (const MapEntry& e : v.entries) {
    const std::string path = child_path("env", e.key);
    if (!std::regex_match(e.key, name_re)) {
      error(e.key_location, path,
            fmt::format("invalid variable name '{}': use letters, digits and '_', not starting with a digit",
                        e.key));
      continue;
    }
    if (const std::string* value = map_value(e.value, path)) {
      out.emplace_back(e.key, *value);
    }
  }
  std::sort(out.begin(), out.end());
}

void SchemaWalker::labels(const Node& v, std::map<std::string, std::string>& out) {
  if (!expect_map(v, "labels")) {
    return;
  }
  for (const MapEntry& e : v.entries) {
    const std::string path = child_path("labels", e.key);
    if (e.key.empty()) {
      error(e.key_location, "labels", "a label key can't be empty");
      continue;
    }
    if (const std::string* value = map_value(e.value, path)) {
      out[e.key] = *value;
    }
  }
}

// `entrypoint` and `cmd`: argv lists.
void SchemaWalker::argv(const Node& v, const std::string& path,
                        std::optional<std::vector<std::string>>& out) {
  if (v.is_scalar()) {
    error(v.location, path, fmt::format("expected a list, found {}; {}", describe(v), k_argv_hint));
    return;
  }
  if (!expect_list(v, path)) {
    return;
  }
  std::vector<std::string> args;
  bool ok = true;
  for (std::size_t i = 0; i < v.items.size(); ++i) {
    if (const std::string* s = string(v.items[i], item_path(path, i))) {
      args.push_back(*s);
    } else {
      ok = false;
    }
  }
  if (ok) {
    out = std::move(args);
  }
}

void SchemaWalker::workdir(const Node& v, std::optional<std::string>& out) {
  if (std::optional<std::string> dir = image_path(v, "workdir")) {
    out = *dir;
  }
}

void SchemaWalker::user(const Node& v, std::optional<std::string>& out) {
  const std::string* s = nonempty_string(v, "user", "a user");
  if (s == nullptr) {
    return;
  }
  static const std::regex user_re("[^:\\s]+(:[^:\\s]+)?");
  if (!std::regex_match(*s, user_re)) {
    error(v.location, "user",
          fmt::format("invalid user '{}': expected NAME or UID, optionally followed by :GROUP or :GID, "
                      "without spaces",
                      *s));
    return;
  }
  out = *s;
}

} // namespace lockstep::envspec::detail
