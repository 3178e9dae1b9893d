#include "envspec/load/merge.hpp"

#include "envspec/load/schema.hpp"
#include "envspec/load/spec_shape.hpp"
#include "envspec/spec/host_paths.hpp"
#include "support/base/text.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <system_error>

namespace lockstep::envspec {

namespace fs = std::filesystem;

Node merge_nodes(Node base, Node overlay, const std::string& path, bool (*is_atomic)(std::string_view path)) {
  if (is_atomic != nullptr && is_atomic(path)) {
    return overlay;
  }
  if (base.is_map() && overlay.is_map()) {
    for (MapEntry& e : overlay.entries) {
      auto it = std::find_if(base.entries.begin(), base.entries.end(),
                             [&](const MapEntry& b) { return b.key == e.key; });
      if (it == base.entries.end()) {
        base.entries.push_back(std::move(e));
      } else {
        it->value = merge_nodes(std::move(it->value), std::move(e.value), child_path(path, e.key), is_atomic);
        it->key_location = e.key_location;
      }
    }
    base.location = overlay.location;
    return base;
  }
  if (base.is_sequence() && overlay.is_sequence()) {
    for (Node& item : overlay.items) {
      base.items.push_back(std::move(item));
    }
    base.location = overlay.location;
    return base;
  }
  return overlay;
}

bool is_atomic_list(std::string_view path) {
  const shape::Key* key = shape::find_key(shape::spec(), path);
  return key != nullptr && key->merge == shape::Merge::replace;
}

namespace {

// A file may be read at most this many times through `extends` (diamonds count each time).
constexpr int k_max_extended_files = 256;

// The 1-based line and column of byte `offset`.
SourceLocation location_of_offset(const fs::path& file, std::string_view text, std::size_t offset) {
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return SourceLocation{file, line, static_cast<int>(offset - line_start) + 1, 1};
}

// The file's identity for cycle detection: symlinks resolved where the path exists.
fs::path identity(const fs::path& file) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(file, ec);
  return ec ? file : p;
}

// Reads specs and the files they extend, depth first.
class TreeLoader {
public:
  TreeLoader(Diagnostics& diags, fs::path top_dir, const LoadOptions& options)
      : m_diags(diags), m_top_dir(std::move(top_dir)), m_options(options) {}

  // The merged tree of `file` and everything it extends, or nullopt if `file` itself is unusable.
  std::optional<Node> load(const fs::path& file, const std::string& text, bool top) {
    std::optional<Node> parsed = top ? parse_spec(file, text) : parse_extended(file, text);
    if (!parsed) {
      m_complete = false;
      return std::nullopt;
    }
    Node root = std::move(*parsed);
    check_schema_version(root, file, top);
    root.erase("lockstep");

    Node merged;
    merged.kind = NodeKind::map;
    merged.location = root.location;
    if (const MapEntry* e = root.find("extends")) {
      Node extends = e->value;
      root.erase("extends");
      m_chain.push_back(Open{identity(file), file});
      for (const auto& [target_node, key_path] : extends_entries(extends)) {
        if (std::optional<Node> base = load_extended(file, *target_node, key_path)) {
          merged = merge_nodes(std::move(merged), std::move(*base), "", is_atomic_list);
        }
      }
      m_chain.pop_back();
    }
    m_order.push_back(file);
    return merge_nodes(std::move(merged), std::move(root), "", is_atomic_list);
  }

  [[nodiscard]] const std::vector<fs::path>& order() const { return m_order; }
  [[nodiscard]] bool complete() const { return m_complete; }

private:
  struct Open {
    fs::path identity;
    fs::path file;
  };

  // The top-level map of the spec file the command was given; nullopt after reporting.
  std::optional<Node> parse_spec(const fs::path& file, const std::string& text) {
    m_diags.set_source(file, text);
    if (auto bad = first_invalid_utf8(text)) {
      m_diags.error(location_of_offset(file, text, *bad), "",
                    fmt::format("not valid UTF-8 (byte {}); spec files must be UTF-8", *bad));
      return std::nullopt;
    }
    std::optional<Node> root = parse_yaml(text, file, m_diags);
    if (!root) {
      return std::nullopt;
    }
    if (root->is_null()) {
      m_diags.error(root->location, "", "empty spec file; a spec starts with 'lockstep: 1' and 'name: ...'");
      return std::nullopt;
    }
    if (!root->is_map()) {
      m_diags.error(root->location, "",
                    fmt::format("expected a map of spec keys at the top level, found {}", describe(*root)));
      return std::nullopt;
    }
    return root;
  }

  // The top-level map of a file named in `extends`; nullopt after reporting. Such a file may be any
  // file the spec can reach, so it must first show it is a spec: UTF-8 YAML whose top level is a map
  // with at least one spec key. Until then nothing of its text is shown: a file that is not a spec
  // gets one error with its location and what is wrong (docs/spec.md, "extends").
  std::optional<Node> parse_extended(const fs::path& file, const std::string& text) {
    const auto not_a_spec = [&](SourceLocation at, const std::string& why) {
      m_diags.withhold_source(file);
      m_diags.error(std::move(at), "",
                    why + " (lockstep shows the text of a file named in 'extends' only once it reads as a "
                          "spec: a YAML map of spec keys)");
      return std::nullopt;
    };
    if (auto bad = first_invalid_utf8(text)) {
      return not_a_spec(location_of_offset(file, text, *bad),
                        fmt::format("not valid UTF-8 (byte {}); spec files must be UTF-8", *bad));
    }
    Diagnostics parse_diags; // kept back until the file is known to be a spec
    std::optional<Node> root = parse_yaml(text, file, parse_diags);
    if (!root) {
      const Diagnostic& first = parse_diags.items().front();
      return not_a_spec(first.location, first.message);
    }
    if (root->is_null()) {
      return not_a_spec(root->location, "not a spec: the file is empty");
    }
    if (!root->is_map()) {
      return not_a_spec(root->location,
                        fmt::format("not a spec: its top level is {}, not a map", describe(*root)));
    }
    if (std::none_of(root->entries.begin(), root->entries.end(),
                     [](const MapEntry& e) { return is_top_level_key(e.key); })) {
      return not_a_spec(root->location, "not a spec: none of its top-level keys is a spec key");
    }
    m_diags.set_source(file, text);
    for (const Diagnostic& d : parse_diags.items()) {
      m_diags.error(d.location, d.key_path, d.message);
    }
    return root;
  }

  // `lockstep:` must be the integer 1; the spec file must have it, extended files may.
  void check_schema_version(const Node& root, const fs::path& file, bool top) {
    const MapEntry* e = root.find("lockstep");
    if (e == nullptr) {
      if (top) {
        m_diags.error(SourceLocation{file, 1, 1, 1}, "lockstep",
                      "missing 'lockstep: 1' (the schema version)");
      }
      return;
    }
    const Node& v = e->value;
    const bool digits =
        v.is_scalar() && !v.quoted && !v.scalar.empty() &&
        std::all_of(v.scalar.begin(), v.scalar.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      m_diags.error(
          v.location, "lockstep",
          fmt::format("expected the schema version as an integer (lockstep: 1), found {}", describe(v)));
      return;
    }
    int version = 0;
    auto [ptr, ec] = std::from_chars(v.scalar.data(), v.scalar.data() + v.scalar.size(), version);
    if (ec != std::errc() || ptr != v.scalar.data() + v.scalar.size() || version != 1) {
      m_diags.error(v.location, "lockstep",
                    fmt::format("unsupported schema version {}; this lockstep reads version 1", v.scalar));
    }
  }

  // The entries of an `extends:` value (a path or a list of paths) with their key paths.
  std::vector<std::pair<const Node*, std::string>> extends_entries(const Node& extends) {
    std::vector<std::pair<const Node*, std::string>> out;
    if (extends.is_scalar()) {
      out.emplace_back(&extends, "extends");
    } else if (extends.is_sequence()) {
      for (std::size_t i = 0; i < extends.items.size(); ++i) {
        out.emplace_back(&extends.items[i], item_path("extends", i));
      }
    } else {
      m_diags.error(extends.location, "extends",
                    fmt::format("expected a path or a list of paths, found {}", describe(extends)));
    }
    return out;
  }

  // Loads one `extends` entry of `from`; nullopt (after reporting) when it can't be used.
  std::optional<Node> load_extended(const fs::path& from, const Node& entry, const std::string& key_path) {
    if (!entry.is_scalar() || entry.scalar.empty()) {
      m_diags.error(entry.location, key_path, fmt::format("expected a path, found {}", describe(entry)));
      return std::nullopt;
    }
    const fs::path target = (from.parent_path() / entry.scalar).lexically_normal();
    // Confined like copy.from (envspec/spec/host_paths.hpp), before anything looks into the file.
    if (!m_options.allow_outside) {
      if (auto problem = outside_problem(target, entry.scalar, from.parent_path().lexically_normal())) {
        m_diags.error(entry.location, key_path, *problem);
        m_complete = false;
        return std::nullopt;
      }
    }
    const fs::path id = identity(target);
    auto open = std::find_if(m_chain.begin(), m_chain.end(), [&](const Open& o) { return o.identity == id; });
    if (open != m_chain.end()) {
      std::string chain;
      for (auto it = open; it != m_chain.end(); ++it) {
        chain += display(it->file) + " -> ";
      }
      m_diags.error(entry.location, key_path, "extends cycle: " + chain + display(target));
      return std::nullopt;
    }
    std::error_code ec;
    if (!fs::exists(target, ec)) {
      m_diags.error(
          entry.location, key_path,
          fmt::format("no such file or directory: {} (resolved to {})", entry.scalar, target.string()));
      m_complete = false;
      return std::nullopt;
    }
    if (++m_loads > k_max_extended_files) {
      m_diags.error(entry.location, key_path,
                    fmt::format("more than {} files read through 'extends'", k_max_extended_files));
      m_complete = false;
      return std::nullopt;
    }
    Result<std::string> text = read_file(target, 1ULL << 20);
    if (!text) {
      m_diags.error(entry.location, key_path, text.error().message);
      m_complete = false;
      return std::nullopt;
    }
    return load(target, *text, false);
  }

  // How a file is named in messages: relative to the spec's directory.
  std::string display(const fs::path& file) const {
    fs::path rel = file.lexically_relative(m_top_dir);
    return rel.empty() ? file.string() : rel.string();
  }

  Diagnostics& m_diags;
  fs::path m_top_dir;
  const LoadOptions& m_options;
  std::vector<Open> m_chain;
  std::vector<fs::path> m_order;
  int m_loads = 0;
  bool m_complete = true;
};

} // namespace

MergedTree load_merged_tree(const fs::path& file, const std::string& text, const LoadOptions& options,
                            Diagnostics& diags) {
  TreeLoader loader(diags, file.parent_path(), options);
  MergedTree tree;
  std::optional<Node> root = loader.load(file, text, true);
  tree.complete = loader.complete() && root.has_value();
  if (root) {
    tree.root = std::move(*root);
  }
  tree.files.push_back(file);
  for (const fs::path& f : loader.order()) {
    if (std::find(tree.files.begin(), tree.files.end(), f) == tree.files.end()) {
      tree.files.push_back(f);
    }
  }
  return tree;
}

} // namespace lockstep::envspec
