#include "builder/lock/pypi_index.hpp"

#include "support/base/text.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"
#include "support/system/confine.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <map>

namespace lockstep::builder {

namespace {

constexpr std::size_t k_max_page_size = 64U << 20;
constexpr std::size_t k_max_files = 100000;
constexpr std::size_t k_max_url_length = 8192;
constexpr std::size_t k_max_filename_length = 255;

// ---- RFC 3986 ------------------------------------------------------------------------------------

// The five components of RFC 3986 Appendix B; "defined" flags tell an empty component from none.
struct UrlParts {
  std::optional<std::string> scheme;
  std::optional<std::string> authority;
  std::string path;
  std::optional<std::string> query;
  std::optional<std::string> fragment;
};

UrlParts split_url(std::string_view s) {
  UrlParts u;
  // scheme: [^:/?#]+ followed by ':'
  std::size_t colon = s.find_first_of(":/?#");
  if (colon != std::string_view::npos && colon > 0 && s[colon] == ':') {
    u.scheme = std::string(s.substr(0, colon));
    s.remove_prefix(colon + 1);
  }
  if (s.substr(0, 2) == "//") {
    s.remove_prefix(2);
    std::size_t end = s.find_first_of("/?#");
    end = end == std::string_view::npos ? s.size() : end;
    u.authority = std::string(s.substr(0, end));
    s.remove_prefix(end);
  }
  std::size_t end = s.find_first_of("?#");
  end = end == std::string_view::npos ? s.size() : end;
  u.path = std::string(s.substr(0, end));
  s.remove_prefix(end);
  if (!s.empty() && s.front() == '?') {
    std::size_t hash = s.find('#');
    hash = hash == std::string_view::npos ? s.size() : hash;
    u.query = std::string(s.substr(1, hash - 1));
    s.remove_prefix(hash);
  }
  if (!s.empty() && s.front() == '#') {
    u.fragment = std::string(s.substr(1));
  }
  return u;
}

// RFC 3986 section 5.2.4.
std::string remove_dot_segments(std::string_view input) {
  std::string out;
  while (!input.empty()) {
    if (input.substr(0, 3) == "../") {
      input.remove_prefix(3);
      // NOLINTNEXTLINE(bugprone-branch-clone): the RFC's rules one by one, in its order
    } else if (input.substr(0, 2) == "./") {
      input.remove_prefix(2);
    } else if (input.substr(0, 3) == "/./") {
      input.remove_prefix(2);
    } else if (input == "/.") {
      input = "/";
    } else if (input.substr(0, 4) == "/../" || input == "/..") {
      input = input.size() == 3 ? std::string_view("/") : input.substr(3);
      auto slash = out.rfind('/');
      out.resize(slash == std::string::npos ? 0 : slash);
    } else if (input == "." || input == "..") {
      input = {};
    } else {
      std::size_t next = input.find('/', input.front() == '/' ? 1 : 0);
      next = next == std::string_view::npos ? input.size() : next;
      out += input.substr(0, next);
      input.remove_prefix(next);
    }
  }
  return out;
}

std::string join_url(const UrlParts& u) {
  std::string out;
  if (u.scheme) {
    out += *u.scheme + ":";
  }
  if (u.authority) {
    out += "//" + *u.authority;
  }
  out += u.path;
  if (u.query) {
    out += "?" + *u.query;
  }
  if (u.fragment) {
    out += "#" + *u.fragment;
  }
  return out;
}

bool has_control_or_space(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f;
  });
}

std::string percent_encode_path(std::string_view s) {
  static constexpr std::string_view hex = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                c == '.' || c == '_' || c == '~' || c == '/' || c == '+' || c == '!' || c == ',' || c == '=';
    if (keep) {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}

// ---- common validation --------------------------------------------------------------------------

Result<void> check_filename(std::string_view name, std::string_view page_url) {
  bool bad = name.empty() || name.size() > k_max_filename_length || name == "." || name == ".." ||
             std::any_of(name.begin(), name.end(), [](char c) {
               auto u = static_cast<unsigned char>(c);
               return u < 0x20 || u == 0x7f || c == '/' || c == '\\';
             });
  if (bad) {
    return invalid_input("{}: invalid file name '{}' (a plain file name is required)", page_url, name);
  }
  return {};
}

Result<std::string> check_sha256(std::string_view hex, std::string_view filename, std::string_view page_url) {
  if (hex.size() != 64 || !is_hex(hex)) {
    return invalid_input("{}: file {} has a malformed sha256 '{}'", page_url, filename, hex);
  }
  return ascii_lower(hex);
}

// Resolves a file's URL and checks its scheme: http(s) always, file: only from a file: page.
Result<std::string> file_url(std::string_view page_url, std::string_view href, std::string_view filename) {
  if (href.size() > k_max_url_length) {
    return invalid_input("{}: the URL of {} is longer than {} bytes", page_url, filename, k_max_url_length);
  }
  auto resolved = resolve_url(page_url, href);
  if (!resolved) {
    return resolved.error().with_context(fmt::format("{}: the URL of {}", page_url, filename));
  }
  UrlParts u = split_url(*resolved);
  std::string scheme = ascii_lower(u.scheme.value_or(""));
  std::string page_scheme = ascii_lower(split_url(page_url).scheme.value_or(""));
  bool allowed = scheme == "https" || scheme == "http" || (scheme == "file" && page_scheme == "file");
  if (!allowed) {
    return invalid_input("{}: file {} has a URL with scheme '{}' ({}); only http(s) is allowed", page_url,
                         filename.empty() ? href : filename, scheme, *resolved);
  }
  u.fragment.reset();
  return join_url(u);
}

// Adds `f` unless an identical entry is there; a different entry with the same name is an error.
Result<void> add_file(std::vector<IndexFile>& files, std::map<std::string, std::size_t>& by_name, IndexFile f,
                      std::string_view page_url) {
  if (auto it = by_name.find(f.filename); it != by_name.end()) {
    if (files[it->second] == f) {
      return {};
    }
    return invalid_input("{}: file {} is listed twice with different URLs or hashes", page_url, f.filename);
  }
  if (files.size() >= k_max_files) {
    return invalid_input("{}: more than {} files", page_url, k_max_files);
  }
  by_name.emplace(f.filename, files.size());
  files.push_back(std::move(f));
  return {};
}

// ---- HTML ----------------------------------------------------------------------------------------

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    cp = 0xFFFD;
  }
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Character references: the five XML ones, decimal and hex. Others are left as written.
std::string html_unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    std::size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) {
      out += s[i];
      continue;
    }
    std::string_view name = s.substr(i + 1, semi - i - 1);
    static constexpr std::pair<std::string_view, char> named[] = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    bool done = false;
    for (const auto& [n, c] : named) {
      if (name == n) {
        out += c;
        done = true;
      }
    }
    if (!done && name.size() >= 2 && name[0] == '#') {
      bool hex = name[1] == 'x' || name[1] == 'X';
      std::string_view digits = name.substr(hex ? 2 : 1);
      std::uint32_t cp = 0;
      bool ok = !digits.empty();
      for (char c : digits) {
        if (hex ? !is_hex_digit(c) : !(c >= '0' && c <= '9')) {
          ok = false;
          break;
        }
        cp = std::min<std::uint32_t>(cp * (hex ? 16 : 10) + static_cast<std::uint32_t>(hex_value(c)),
                                     0x110000);
      }
      if (ok) {
        append_utf8(out, cp);
        done = true;
      }
    }
    if (done) {
      i = semi;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct Tag {
  std::string name;                              ///< lowercased
  std::map<std::string, std::string> attributes; ///< names lowercased, values unescaped; first one wins
};

bool html_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

// Reads the tag starting at body[pos] == '<'; returns the position after '>' (or npos if unclosed).
std::size_t read_tag(std::string_view body, std::size_t pos, Tag& tag) {
  std::size_t i = pos + 1;
  std::size_t start = i;
  while (i < body.size() && !html_space(body[i]) && body[i] != '>' && body[i] != '/') {
    ++i;
  }
  tag.name = ascii_lower(body.substr(start, i - start));
  tag.attributes.clear();
  while (i < body.size()) {
    while (i < body.size() && (html_space(body[i]) || body[i] == '/')) {
      ++i;
    }
    if (i >= body.size()) {
      break;
    }
    if (body[i] == '>') {
      return i + 1;
    }
    std::size_t name_start = i;
    while (i < body.size() && !html_space(body[i]) && body[i] != '=' && body[i] != '>' && body[i] != '/') {
      ++i;
    }
    std::string name = ascii_lower(body.substr(name_start, i - name_start));
    while (i < body.size() && html_space(body[i])) {
      ++i;
    }
    std::string value;
    if (i < body.size() && body[i] == '=') {
      ++i;
      while (i < body.size() && html_space(body[i])) {
        ++i;
      }
      if (i < body.size() && (body[i] == '"' || body[i] == '\'')) {
        char quote = body[i];
        std::size_t end = body.find(quote, i + 1);
        if (end == std::string_view::npos) {
          return std::string_view::npos;
        }
        value = html_unescape(body.substr(i + 1, end - i - 1));
        i = end + 1;
      } else {
        std::size_t v = i;
        while (i < body.size() && !html_space(body[i]) && body[i] != '>') {
          ++i;
        }
        value = html_unescape(body.substr(v, i - v));
      }
    }
    if (!name.empty()) {
      tag.attributes.emplace(std::move(name), std::move(value));
    }
  }
  return std::string_view::npos;
}

// PEP 658/714's attribute value: "true", or "<hashname>=<hashvalue>".
void read_metadata_attribute(const std::string& value, IndexFile& f) {
  if (value == "false") {
    return;
  }
  f.has_metadata = true;
  auto eq = value.find('=');
  if (eq != std::string::npos && ascii_lower(value.substr(0, eq)) == "sha256") {
    f.metadata_sha256 = value.substr(eq + 1);
  }
}

} // namespace

Result<std::string> resolve_url(std::string_view base, std::string_view reference) {
  if (has_control_or_space(base) || has_control_or_space(reference)) {
    return invalid_input("URL '{}' (relative to '{}') contains a space or control character", reference,
                         base);
  }
  UrlParts b = split_url(base);
  if (!b.scheme) {
    return invalid_input("base URL '{}' is not absolute", base);
  }
  UrlParts r = split_url(reference);
  UrlParts t;
  if (r.scheme) {
    t.scheme = r.scheme;
    t.authority = r.authority;
    t.path = remove_dot_segments(r.path);
    t.query = r.query;
  } else {
    if (r.authority) {
      t.authority = r.authority;
      t.path = remove_dot_segments(r.path);
      t.query = r.query;
    } else {
      if (r.path.empty()) {
        t.path = b.path;
        t.query = r.query ? r.query : b.query;
      } else {
        if (r.path.front() == '/') {
          t.path = remove_dot_segments(r.path);
        } else {
          // Merge (section 5.2.3).
          std::string merged;
          if (b.authority && b.path.empty()) {
            merged = "/" + r.path;
          } else {
            auto slash = b.path.rfind('/');
            merged = (slash == std::string::npos ? std::string() : b.path.substr(0, slash + 1)) + r.path;
          }
          t.path = remove_dot_segments(merged);
        }
        t.query = r.query;
      }
      t.authority = b.authority;
    }
    t.scheme = b.scheme;
  }
  t.fragment = r.fragment;
  return join_url(t);
}

Result<std::vector<IndexFile>> parse_simple_json(std::string_view body, std::string_view page_url) {
  if (body.size() > k_max_page_size) {
    return invalid_input("{}: project page is larger than {} bytes", page_url, k_max_page_size);
  }
  LS_TRY_ASSIGN(auto doc, oci::parse_json(body, std::string(page_url)));
  if (!doc.is_object()) {
    return invalid_input("{}: project page is not a JSON object", page_url);
  }
  const auto meta = doc.find("meta");
  if (meta == doc.end() || !meta->is_object() || !meta->contains("api-version") ||
      !(*meta)["api-version"].is_string()) {
    return invalid_input("{}: project page has no meta.api-version (not a PEP 691 page)", page_url);
  }
  std::string api = (*meta)["api-version"].get<std::string>();
  if (api.substr(0, 2) != "1.") {
    return invalid_input("{}: simple API version {} is not supported (lockstep reads 1.x)", page_url, api);
  }
  const auto files_it = doc.find("files");
  if (files_it == doc.end() || !files_it->is_array()) {
    return invalid_input("{}: project page has no 'files' array", page_url);
  }
  std::vector<IndexFile> files;
  std::map<std::string, std::size_t> by_name;
  std::size_t index = 0;
  for (const auto& j : *files_it) {
    std::string where = fmt::format("{}: files[{}]", page_url, index++);
    if (!j.is_object() || !j.contains("filename") || !j["filename"].is_string() || !j.contains("url") ||
        !j["url"].is_string()) {
      return invalid_input("{}: expected an object with string 'filename' and 'url'", where);
    }
    IndexFile f;
    f.filename = j["filename"].get<std::string>();
    LS_TRY(check_filename(f.filename, page_url));
    LS_TRY_ASSIGN(f.url, file_url(page_url, j["url"].get<std::string>(), f.filename));
    if (auto h = j.find("hashes"); h != j.end()) {
      if (!h->is_object()) {
        return invalid_input("{} ({}): 'hashes' is not an object", where, f.filename);
      }
      if (auto s = h->find("sha256"); s != h->end()) {
        if (!s->is_string()) {
          return invalid_input("{} ({}): hashes.sha256 is not a string", where, f.filename);
        }
        LS_TRY_ASSIGN(f.sha256, check_sha256(s->get<std::string>(), f.filename, page_url));
      }
    }
    if (auto rp = j.find("requires-python"); rp != j.end() && !rp->is_null()) {
      if (!rp->is_string()) {
        return invalid_input("{} ({}): 'requires-python' is not a string", where, f.filename);
      }
      f.requires_python = rp->get<std::string>();
    }
    if (auto y = j.find("yanked"); y != j.end()) {
      if (y->is_boolean()) {
        f.yanked = y->get<bool>();
      } else if (y->is_string()) {
        f.yanked = true;
        f.yanked_reason = y->get<std::string>();
      } else {
        return invalid_input("{} ({}): 'yanked' is neither a boolean nor a string", where, f.filename);
      }
    }
    // PEP 714 renamed dist-info-metadata to core-metadata; the new name wins.
    for (const char* key : {"core-metadata", "dist-info-metadata"}) {
      auto m = j.find(key);
      if (m == j.end()) {
        continue;
      }
      if (m->is_boolean()) {
        f.has_metadata = m->get<bool>();
      } else if (m->is_object()) {
        f.has_metadata = true;
        if (auto s = m->find("sha256"); s != m->end() && s->is_string()) {
          LS_TRY_ASSIGN(f.metadata_sha256,
                        check_sha256(s->get<std::string>(), f.filename + ".metadata", page_url));
        }
      } else {
        return invalid_input("{} ({}): '{}' is neither a boolean nor an object", where, f.filename, key);
      }
      break;
    }
    if (auto sz = j.find("size"); sz != j.end()) {
      if (!sz->is_number_unsigned()) {
        return invalid_input("{} ({}): 'size' is not a non-negative integer", where, f.filename);
      }
      f.size = sz->get<std::uint64_t>();
    }
    LS_TRY(add_file(files, by_name, std::move(f), page_url));
  }
  return files;
}

Result<std::vector<IndexFile>> parse_simple_html(std::string_view body, std::string_view page_url) {
  if (body.size() > k_max_page_size) {
    return invalid_input("{}: project page is larger than {} bytes", page_url, k_max_page_size);
  }
  std::string base(page_url);
  std::vector<IndexFile> files;
  std::map<std::string, std::size_t> by_name;
  std::size_t pos = 0;
  Tag tag;
  while ((pos = body.find('<', pos)) != std::string_view::npos) {
    if (body.substr(pos, 4) == "<!--") {
      std::size_t end = body.find("-->", pos + 4);
      if (end == std::string_view::npos) {
        break;
      }
      pos = end + 3;
      continue;
    }
    std::size_t next = read_tag(body, pos, tag);
    if (next == std::string_view::npos) {
      break;
    }
    pos = next;
    if (tag.name == "base") {
      if (auto it = tag.attributes.find("href"); it != tag.attributes.end()) {
        LS_TRY_ASSIGN(base, resolve_url(page_url, trim(it->second)));
      }
      continue;
    }
    if (tag.name != "a") {
      continue;
    }
    auto href = tag.attributes.find("href");
    if (href == tag.attributes.end()) {
      continue;
    }
    std::string_view link = trim(href->second);
    UrlParts parts = split_url(link);
    std::string path = parts.path;
    while (!path.empty() && path.back() == '/') {
      path.pop_back();
    }
    IndexFile f;
    f.filename = percent_decode(path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1));
    LS_TRY(check_filename(f.filename, page_url));
    LS_TRY_ASSIGN(f.url, file_url(base, link, f.filename));
    if (parts.fragment) {
      auto eq = parts.fragment->find('=');
      if (eq != std::string::npos && ascii_lower(parts.fragment->substr(0, eq)) == "sha256") {
        LS_TRY_ASSIGN(f.sha256, check_sha256(parts.fragment->substr(eq + 1), f.filename, page_url));
      }
    }
    if (auto rp = tag.attributes.find("data-requires-python"); rp != tag.attributes.end()) {
      f.requires_python = std::string(trim(rp->second));
    }
    if (auto y = tag.attributes.find("data-yanked"); y != tag.attributes.end()) {
      f.yanked = true;
      f.yanked_reason = y->second;
    }
    if (auto m = tag.attributes.find("data-core-metadata"); m != tag.attributes.end()) {
      read_metadata_attribute(m->second, f);
    } else if (auto d = tag.attributes.find("data-dist-info-metadata"); d != tag.attributes.end()) {
      read_metadata_attribute(d->second, f);
    }
    if (!f.metadata_sha256.empty()) {
      LS_TRY_ASSIGN(f.metadata_sha256, check_sha256(f.metadata_sha256, f.filename + ".metadata", page_url));
    }
    LS_TRY(add_file(files, by_name, std::move(f), page_url));
  }
  return files;
}

Result<std::vector<IndexFile>> parse_project_page(std::string_view body, std::string_view content_type,
                                                  std::string_view page_url) {
  std::string type = ascii_lower(trim(content_type.substr(0, content_type.find(';'))));
  if (type == k_simple_json_type) {
    return parse_simple_json(body, page_url);
  }
  if (type == "text/html" || type == k_simple_html_type) {
    return parse_simple_html(body, page_url);
  }
  return external_error("{}: unexpected content type '{}' for a project page (expected {} or text/html)",
                        page_url, content_type, k_simple_json_type);
}

Result<std::vector<IndexFile>> scan_wheelhouse(const std::filesystem::path& dir,
                                               const std::vector<std::filesystem::path>& roots) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path absolute = fs::absolute(dir, ec);
  if (ec) {
    return errno_error("can't resolve " + dir.string(), ec.value());
  }
  std::vector<std::string> names;
  fs::directory_iterator it(absolute, ec);
  if (ec) {
    return Error{ec == std::errc::no_such_file_or_directory ? ExitCode::invalid_input : ExitCode::io,
                 fmt::format("can't list wheelhouse {}: {}", absolute.string(), ec.message())};
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) {
      return io_error("can't list wheelhouse {}: {}", absolute.string(), ec.message());
    }
    std::string name = it->path().filename().string();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".whl") {
      if (names.size() >= k_max_files) {
        return invalid_input("wheelhouse {} has more than {} wheels", absolute.string(), k_max_files);
      }
      names.push_back(std::move(name));
    }
  }
  std::sort(names.begin(), names.end());
  std::vector<IndexFile> files;
  for (const auto& name : names) {
    LS_TRY_ASSIGN(Confinement where, confine_path(absolute / name, roots));
    if (!where.inside()) {
      return invalid_input("wheelhouse {}: {} leads outside the spec's directory and the local repositories "
                           "it names (to {}); nothing was read. Put the wheel itself in the wheelhouse",
                           absolute.string(), name, where.real.string());
    }
    const fs::path p = where.real;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      return errno_error("can't stat " + p.string(), errno);
    }
    if (!S_ISREG(st.st_mode)) {
      continue;
    }
    LS_TRY(check_filename(name, absolute.string()));
    LS_TRY_ASSIGN(Digest digest, sha256_of_file(p));
    IndexFile f;
    f.filename = name;
    f.url = "file://" + percent_encode_path((absolute / name).lexically_normal().string());
    f.sha256 = digest.hex();
    f.size = static_cast<std::uint64_t>(st.st_size);
    files.push_back(std::move(f));
  }
  return files;
}

} // namespace lockstep::builder
