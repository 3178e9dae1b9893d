// `copy:` (docs/spec.md): host paths and git repositories copied into the image, with mode and
// owner policies.
#include "envspec/load/schema_walker.hpp"
#include "support/net/http.hpp"

#include <fmt/format.h>

#include <charconv>
#include <regex>
#include <system_error>

namespace lockstep::envspec::detail {

namespace {

// Parses a decimal number that fits in 32 bits (excluding 2^32-1, which means "no id").
std::optional<std::uint32_t> parse_id(std::string_view text) {
  std::uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || v == 0xFFFFFFFFu) {
    return std::nullopt;
  }
  return v;
}

} // namespace

void SchemaWalker::copy(const Node& v, std::vector<CopyItem>& out) {
  if (!expect_list(v, "copy")) {
    return;
  }
  for (std::size_t i = 0; i < v.items.size(); ++i) {
    if (std::optional<CopyItem> item = copy_item(v.items[i], item_path("copy", i))) {
      out.push_back(std::move(*item));
    }
  }
}

std::optional<CopyItem> SchemaWalker::copy_item(const Node& v, const std::string& path) {
  if (!expect_map(v, path, "a map {from: HOST_PATH, to: IMAGE_PATH}")) {
    return std::nullopt;
  }
  CopyItem item;
  item.location = v.location;
  bool ok = true;
  const bool is_git = v.find("git") != nullptr;
  if (is_git && v.find("from") != nullptr) {
    error(v.location, path, "an item copies either 'from' a host path or a 'git' repository, not both");
    return std::nullopt;
  }
  if (is_git && v.find("rev") == nullptr) {
    error(v.location, path, "missing 'rev' (a full commit id or a tag; the lock pins it to a commit)");
    ok = false;
  }
  for (std::string_view required : {"from", "to"}) {
    if (is_git && required == "from") {
      continue;
    }
    if (v.find(required) == nullptr) {
      error(v.location, path,
            fmt::format("missing '{}' ({})", required,
                        required == "from" ? "the file or directory to copy"
                                           : "the absolute path in the image"));
      ok = false;
    }
  }
  for (const MapEntry& e : v.entries) {
    const std::string key_path = child_path(path, e.key);
    if (e.key == "from") {
      ok = copy_from(e.value, key_path, item) && ok;
    } else if (e.key == "to") {
      ok = copy_to(e.value, key_path, item) && ok;
    } else if (e.key == "mode") {
      ok = copy_mode(e.value, key_path, item) && ok;
    } else if (e.key == "owner") {
      ok = copy_owner(e.value, key_path, item) && ok;
    } else if (e.key == "git") {
      ok = copy_git(e.value, key_path, item) && ok;
    } else if (e.key == "rev") {
      if (!is_git) {
        error(e.key_location, key_path, fmt::format("'{}' goes with 'git: URL'", e.key));
        ok = false;
        continue;
      }
      const std::string* s =
          nonempty_string(e.value, key_path, e.key == "rev" ? "a commit id or tag" : "true or false");
      static const std::regex rev_re("[A-Za-z0-9._/+-]+");
      if (s == nullptr) {
        ok = false;
      } else if (e.key == "rev" && (!std::regex_match(*s, rev_re) || s->find("..") != std::string::npos)) {
        error(e.value.location, key_path,
              fmt::format("invalid rev '{}': expected a commit id, tag or branch", *s));
        ok = false;
      } else {
        item.rev = *s;
      }
    } else {
      unknown_key(e, path, m_shapes.copy_item);
      ok = false;
    }
  }
  return ok ? std::optional<CopyItem>(std::move(item)) : std::nullopt;
}

// `copy[].git`: a URL (http, https, git, file) or a host path to a repository.
bool SchemaWalker::copy_git(const Node& v, const std::string& path, CopyItem& item) {
  const std::string* s = nonempty_string(v, path, "a repository URL or path");
  if (s == nullptr) {
    return false;
  }
  item.git_text = *s;
  static const std::regex scheme_re("([A-Za-z][A-Za-z0-9+.-]*)://.*");
  std::smatch m;
  if (std::regex_match(*s, m, scheme_re)) {
    const std::string scheme = m[1].str();
    if (scheme != "http" && scheme != "https" && scheme != "git" && scheme != "file") {
      error(v.location, path,
            fmt::format("unsupported URL scheme '{}': use https, http, git or file", scheme));
      return false;
    }
    if (scheme == "file") {
      Result<std::optional<fs::path>> local = local_url_path(*s);
      if (!local) {
        error(v.location, path, local.error().message);
        return false;
      }
      if (!git_confined(v, path, **local, *s)) {
        return false;
      }
    }
    item.git = *s;
    return true;
  }
  const fs::path local = resolve_host_path(v);
  if (!git_confined(v, path, local, *s)) {
    return false;
  }
  item.git = local.string();
  return true;
}

// confined() for a local git repository, and every repository it makes git read (alternates...).
bool SchemaWalker::git_confined(const Node& v, const std::string& key_path, const fs::path& repo,
                                std::string_view text) {
  if (m_options.allow_outside) {
    return true;
  }
  if (auto problem = git_outside_problem(repo, text, v.location.file.parent_path().lexically_normal())) {
    error(v.location, key_path, *problem);
    return false;
  }
  return true;
}

bool SchemaWalker::copy_from(const Node& v, const std::string& path, CopyItem& item) {
  const std::string* s = nonempty_string(v, path, "a path");
  if (s == nullptr) {
    return false;
  }
  item.from_text = *s;
  item.from_location = v.location;
  item.from = resolve_host_path(v);
  if (!confined(v, path, item.from, *s)) {
    return false;
  }
  std::error_code ec;
  if (!fs::exists(item.from, ec)) {
    error(v.location, path,
          fmt::format("no such file or directory: {} (resolved to {})", *s, item.from.string()));
    return false;
  }
  return true;
}

bool SchemaWalker::copy_to(const Node& v, const std::string& path, CopyItem& item) {
  std::optional<std::string> to = image_path(v, path);
  if (!to) {
    return false;
  }
  item.to = *to;
  item.to_is_dir = v.scalar.back() == '/';
  return true;
}

bool SchemaWalker::copy_mode(const Node& v, const std::string& path, CopyItem& item) {
  const std::string* s = string(v, path);
  if (s == nullptr) {
    return false;
  }
  if (*s == "preserve") {
    item.mode_policy = ModePolicy::preserve;
    return true;
  }
  std::uint32_t mode = 0;
  auto [ptr, ec] = std::from_chars(s->data(), s->data() + s->size(), mode, 8);
  if (s->empty() || s->size() > 5 || ec != std::errc() || ptr != s->data() + s->size() || mode > 07777) {
    error(v.location, path,
          fmt::format("invalid mode '{}': expected octal permission bits like 0755 or 0644 (at most 07777), "
                      "or 'preserve'",
                      *s));
    return false;
  }
  item.mode_policy = ModePolicy::fixed;
  item.mode = mode;
  return true;
}

bool SchemaWalker::copy_owner(const Node& v, const std::string& path, CopyItem& item) {
  const std::string* s = string(v, path);
  if (s == nullptr) {
    return false;
  }
  if (*s == "preserve") {
    item.owner_policy = OwnerPolicy::preserve;
    return true;
  }
  const std::size_t colon = s->find(':');
  std::optional<std::uint32_t> uid = parse_id(std::string_view(*s).substr(0, colon));
  std::optional<std::uint32_t> gid =
      colon == std::string::npos ? uid : parse_id(std::string_view(*s).substr(colon + 1));
  if (!uid || !gid) {
    error(v.location, path, fmt::format("owner must be numeric UID[:GID] or 'preserve', found '{}'", *s));
    return false;
  }
  item.owner_policy = OwnerPolicy::fixed;
  item.uid = *uid;
  item.gid = *gid;
  return true;
}

} // namespace lockstep::envspec::detail
