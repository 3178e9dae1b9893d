#include "support/debian/apt_packages.hpp"

#include "support/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace lockstep {

namespace {

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

const Deb822Field* find_field(const Deb822Paragraph& p, std::string_view name) {
  for (const Deb822Field& f : p.fields) {
    if (iequals(f.name, name)) {
      return &f;
    }
  }
  return nullptr;
}

bool valid_architecture(std::string_view arch) {
  return !arch.empty() && arch.size() <= 64 && std::all_of(arch.begin(), arch.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// A pool path: relative, no empty, "." or ".." component, no control characters or backslashes.
bool valid_filename(std::string_view path) {
  if (path.empty() || path.size() > 4096 || path.front() == '/') {
    return false;
  }
  if (std::any_of(path.begin(), path.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\'; })) {
    return false;
  }
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    std::string_view part =
        path.substr(start, slash == std::string_view::npos ? path.size() - start : slash - start);
    if (part.empty() || part == "." || part == "..") {
      return false;
    }
    if (slash == std::string_view::npos) {
      break;
    }
    start = slash + 1;
  }
  return true;
}

// Turns one parsed paragraph into a package; `line0` is added to the paragraph's own line numbers.
class ParagraphReader {
public:
  ParagraphReader(const Deb822Paragraph& p, std::string_view what, int line0)
      : m_p(p), m_what(what), m_line0(line0) {}

  // A dpkg status paragraph: Status instead of Filename, Size and SHA256; a package that is not
  // installed (not-installed, config-files) needs no Version or Architecture.
  Result<InstalledPackage> read_status(std::string control) {
    InstalledPackage out;
    const Deb822Field* name = find_field(m_p, "Package");
    if (name == nullptr) {
      return invalid_input("{}:{}: a paragraph without a Package field", m_what, m_line0 + m_p.line);
    }
    m_name = name->value;
    const Deb822Field* status = find_field(m_p, "Status");
    if (status == nullptr) {
      return invalid_input("{}:{}: {} has no Status field", m_what, m_line0 + m_p.line, m_name);
    }
    const std::vector<std::string_view> words = split_words(status->value);
    static constexpr std::array<std::string_view, 5> k_wants = {"unknown", "install", "hold", "deinstall",
                                                                "purge"};
    static constexpr std::array<std::string_view, 8> k_states = {
        "not-installed",   "config-files",     "half-installed",   "unpacked",
        "half-configured", "triggers-awaited", "triggers-pending", "installed"};
    if (words.size() != 3 || std::find(k_wants.begin(), k_wants.end(), words[0]) == k_wants.end() ||
        std::find(k_states.begin(), k_states.end(), words[2]) == k_states.end()) {
      return fail(*status,
                  fmt::format("Status '{}' is not 'WANT FLAG STATE' as dpkg writes it", status->value));
    }
    out.want = std::string(words[0]);
    out.flag = std::string(words[1]);
    out.state = std::string(words[2]);
    if (out.state == "not-installed" || out.state == "config-files") {
      if (!valid_debian_package_name(m_name)) {
        return fail(*name, fmt::format("'{}' is not a valid package name", m_name));
      }
      out.package.name = m_name;
      out.package.source = m_name;
      out.package.control = std::move(control);
      if (const Deb822Field* f = find_field(m_p, "Version"); f != nullptr) {
        if (auto v = DebianVersion::parse(f->value)) {
          out.package.version = std::move(*v);
        }
      }
      if (const Deb822Field* f = find_field(m_p, "Architecture"); f != nullptr) {
        out.package.architecture = f->value;
      }
      return out;
    }
    m_status = true;
    LS_TRY_ASSIGN(out.package, read(std::move(control), -1));
    return out;
  }

  Result<AptPackage> read(std::string control, int repo) {
    AptPackage pkg;
    pkg.repo = repo;
    const Deb822Field* name = find_field(m_p, "Package");
    if (name == nullptr) {
      return invalid_input("{}:{}: a paragraph without a Package field", m_what, m_line0 + m_p.line);
    }
    if (!valid_debian_package_name(name->value)) {
      return invalid_input("{}:{}: '{}' is not a valid package name (lowercase letters, digits, '+', '-' and "
                           "'.', at least two characters, starting with a letter or digit)",
                           m_what, m_line0 + name->line, name->value);
    }
    pkg.name = name->value;
    m_name = pkg.name;

    LS_TRY_ASSIGN(const Deb822Field* version, required("Version"));
    auto parsed_version = DebianVersion::parse(version->value);
    if (!parsed_version) {
      return fail(*version, parsed_version.error().message);
    }
    pkg.version = std::move(*parsed_version);

    LS_TRY_ASSIGN(const Deb822Field* arch, required("Architecture"));
    if (!valid_architecture(arch->value)) {
      return fail(*arch, fmt::format("'{}' is not a valid architecture", arch->value));
    }
    pkg.architecture = arch->value;

    if (const Deb822Field* f = find_field(m_p, "Multi-Arch")) {
      if (f->value == "same" || f->value == "foreign" || f->value == "allowed") {
        pkg.multi_arch = f->value;
      } else if (f->value != "no") {
        return fail(*f, fmt::format("Multi-Arch '{}' is not one of no, same, foreign, allowed", f->value));
      }
    }
    if (const Deb822Field* f = find_field(m_p, "Essential")) {
      if (f->value != "yes" && f->value != "no") {
        return fail(*f, fmt::format("Essential '{}' is neither yes nor no", f->value));
      }
      pkg.essential = f->value == "yes";
    }
    if (const Deb822Field* f = find_field(m_p, "Priority")) {
      pkg.priority = f->value;
    }
    if (const Deb822Field* f = find_field(m_p, "Section")) {
      pkg.section = f->value;
    }
    pkg.source = pkg.name;
    if (const Deb822Field* f = find_field(m_p, "Source")) {
      std::string_view source = std::string_view(f->value).substr(0, f->value.find(' '));
      if (!valid_debian_package_name(source)) {
        return fail(*f, fmt::format("Source '{}' does not start with a valid package name", f->value));
      }
      pkg.source = std::string(source);
    }

    LS_TRY_ASSIGN(pkg.pre_depends, relations("Pre-Depends"));
    LS_TRY_ASSIGN(pkg.depends, relations("Depends"));
    LS_TRY_ASSIGN(pkg.recommends, relations("Recommends"));
    LS_TRY_ASSIGN(pkg.conflicts, relations("Conflicts"));
    LS_TRY_ASSIGN(pkg.breaks, relations("Breaks"));
    LS_TRY_ASSIGN(pkg.replaces, relations("Replaces"));
    LS_TRY_ASSIGN(DebRelationField provides, relations("Provides"));
    for (auto& group : provides) {
      const Deb822Field* f = find_field(m_p, "Provides");
      if (group.size() != 1) {
        return fail(*f, "Provides can't list alternatives ('|')");
      }
      if (group.front().relation && *group.front().relation != VersionRelation::equal) {
        return fail(*f,
                    fmt::format("Provides: {}: a provided version must be exact ('=')", group.front().str()));
      }
      pkg.provides.push_back(std::move(group.front()));
    }

    if (m_status) {
      pkg.control = std::move(control);
      return pkg;
    }
    LS_TRY_ASSIGN(const Deb822Field* filename, required("Filename"));
    // Flat repositories made by apt-ftparchive or NVIDIA's repo-debian.sh (the CUDA repositories)
    // write "./NAME.deb": the leading "./" is dropped, so the URL is the file's own.
    std::string_view path = filename->value;
    while (path.substr(0, 2) == "./") {
      path.remove_prefix(2);
    }
    if (!valid_filename(path)) {
      return fail(*filename, fmt::format("Filename '{}' must be a relative path inside the repository (no "
                                         "'..', '.' or empty components, no leading '/')",
                                         filename->value));
    }
    pkg.filename = std::string(path);

    LS_TRY_ASSIGN(const Deb822Field* size, required("Size"));
    const std::string& s = size->value;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), pkg.size);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      return fail(*size, fmt::format("Size '{}' is not a number of bytes", s));
    }

    const Deb822Field* sha = find_field(m_p, "SHA256");
    if (sha == nullptr) {
      return invalid_input(
          "{}:{}: {} has no SHA256 field (lockstep checks every package against its SHA-256; "
          "MD5 and SHA1 are not trusted)",
          m_what, m_line0 + m_p.line, m_name);
    }
    std::string hex = sha->value;
    std::transform(hex.begin(), hex.end(), hex.begin(),
                   [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
    auto digest = Digest::parse("sha256:" + hex);
    if (hex.size() != 64 || !digest) {
      return fail(*sha, fmt::format("SHA256 '{}' is not 64 hexadecimal digits", sha->value));
    }
    pkg.sha256 = std::move(*digest);
    pkg.control = std::move(control);
    return pkg;
  }

private:
  Error fail(const Deb822Field& f, const std::string& message) const {
    return invalid_input("{}:{}: {}: {}", m_what, m_line0 + f.line, m_name, message);
  }

  Result<const Deb822Field*> required(std::string_view field) const {
    const Deb822Field* f = find_field(m_p, field);
    if (f == nullptr) {
      return invalid_input("{}:{}: {} has no {} field", m_what, m_line0 + m_p.line, m_name, field);
    }
    return f;
  }

  Result<DebRelationField> relations(std::string_view field) const {
    const Deb822Field* f = find_field(m_p, field);
    if (f == nullptr) {
      return DebRelationField{};
    }
    auto parsed = parse_relation_field(f->value);
    if (!parsed) {
      return fail(*f, fmt::format("{}: {}", field, parsed.error().message));
    }
    return std::move(*parsed);
  }

  static std::vector<std::string_view> split_words(std::string_view s) {
    std::vector<std::string_view> out;
    std::size_t pos = 0;
    while (pos < s.size()) {
      while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) {
        ++pos;
      }
      const std::size_t start = pos;
      while (pos < s.size() && s[pos] != ' ' && s[pos] != '\t') {
        ++pos;
      }
      if (pos > start) {
        out.push_back(s.substr(start, pos - start));
      }
    }
    return out;
  }

  const Deb822Paragraph& m_p;
  std::string_view m_what;
  int m_line0;
  std::string m_name;
  bool m_status = false; ///< reading a dpkg status paragraph (no Filename, Size, SHA256)
};

} // namespace

bool is_security_suite(std::string_view suite) {
  return suite.ends_with("-security") || suite.ends_with("/updates");
}

bool is_security_source(std::string_view suite, std::string_view url) {
  return is_security_suite(suite) || url.find("debian-security") != std::string_view::npos ||
         url.find("security.debian.org") != std::string_view::npos ||
         url.find("security.ubuntu.com") != std::string_view::npos;
}

bool valid_debian_package_name(std::string_view name) {
  if (name.size() < 2 || name.size() > 255) {
    return false;
  }
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front())) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alnum(c) || c == '+' || c == '-' || c == '.'; });
}

namespace {

// Calls `each(chunk, first_line)` for every paragraph of `text` (cut out verbatim, so its exact
// bytes can be kept, and parsed on its own, which keeps memory to one paragraph's fields).
template <typename Each>
Result<void> for_each_paragraph(std::string_view text, std::string_view what, std::size_t max_paragraphs,
                                Each&& each) {
  std::size_t count = 0;
  auto paragraph = [&](std::size_t begin, std::size_t end, int first_line) -> Result<void> {
    std::string_view chunk = text.substr(begin, end - begin);
    if (chunk.size() > k_max_apt_paragraph) {
      return invalid_input("{}:{}: a paragraph of {} bytes, more than the {} lockstep accepts", what,
                           first_line, chunk.size(), k_max_apt_paragraph);
    }
    auto parsed = parse_deb822(chunk, what);
    if (!parsed) {
      // Parse the text up to here again for the error with the index's own line numbers.
      auto whole = parse_deb822(text.substr(0, end), what);
      return whole ? std::move(parsed).error() : std::move(whole).error();
    }
    if (parsed->empty()) {
      return {}; // only comments
    }
    if (++count > max_paragraphs) {
      return invalid_input("{}: more than {} packages; lockstep refuses an index this large", what,
                           max_paragraphs);
    }
    std::string control(chunk);
    if (control.back() != '\n') {
      control += '\n';
    }
    return each(parsed->front(), std::move(control), first_line);
  };
  std::size_t pos = 0;
  std::size_t begin = std::string_view::npos;
  int line_no = 0;
  int first_line = 0;
  while (pos < text.size()) {
    std::size_t newline = text.find('\n', pos);
    std::size_t next = newline == std::string_view::npos ? text.size() : newline + 1;
    ++line_no;
    if (blank(text.substr(pos, next - pos - (newline == std::string_view::npos ? 0 : 1)))) {
      if (begin != std::string_view::npos) {
        LS_TRY(paragraph(begin, pos, first_line));
        begin = std::string_view::npos;
      }
    } else if (begin == std::string_view::npos) {
      begin = pos;
      first_line = line_no;
    }
    pos = next;
  }
  if (begin != std::string_view::npos) {
    LS_TRY(paragraph(begin, text.size(), first_line));
  }
  return {};
}

} // namespace

Result<std::vector<AptPackage>> parse_packages_index(std::string_view text, std::string_view what, int repo) {
  if (text.size() > k_max_apt_index_size) {
    return invalid_input("{}: the index is {} bytes, more than the {} lockstep accepts", what, text.size(),
                         k_max_apt_index_size);
  }
  std::vector<AptPackage> out;
  LS_TRY(
      for_each_paragraph(text, what, k_max_apt_index_paragraphs,
                         [&](const Deb822Paragraph& p, std::string control, int first_line) -> Result<void> {
                           ParagraphReader reader(p, what, first_line - 1);
                           LS_TRY_ASSIGN(AptPackage pkg, reader.read(std::move(control), repo));
                           out.push_back(std::move(pkg));
                           return {};
                         }));
  return out;
}

Result<std::vector<InstalledPackage>> parse_dpkg_status(std::string_view text, std::string_view what) {
  if (text.size() > k_max_apt_index_size) {
    return invalid_input("{}: {} bytes, more than the {} lockstep accepts", what, text.size(),
                         k_max_apt_index_size);
  }
  std::vector<InstalledPackage> out;
  LS_TRY(
      for_each_paragraph(text, what, k_max_apt_index_paragraphs,
                         [&](const Deb822Paragraph& p, std::string control, int first_line) -> Result<void> {
                           ParagraphReader reader(p, what, first_line - 1);
                           LS_TRY_ASSIGN(InstalledPackage pkg, reader.read_status(std::move(control)));
                           out.push_back(std::move(pkg));
                           return {};
                         }));
  return out;
}

} // namespace lockstep
