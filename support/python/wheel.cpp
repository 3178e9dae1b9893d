#include "support/python/wheel.hpp"

#include "support/base/text.hpp"
#include "support/supplychain/spdx_license.hpp"

#include <algorithm>
#include <array>
#include <charconv>

namespace lockstep {

namespace {

constexpr std::size_t k_max_metadata_size = 16U << 20;
constexpr std::size_t k_max_record_size = 64U << 20;

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i <= s.size()) {
    std::size_t j = s.find(sep, i);
    if (j == std::string_view::npos) {
      j = s.size();
    }
    out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool valid_tag_part(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_ascii_alnum(c) || c == '_'; });
}

std::optional<std::pair<int, int>> parse_two_numbers(std::string_view text) {
  auto dot = text.find('.');
  if (dot == std::string_view::npos) {
    return std::nullopt;
  }
  int a = 0;
  int b = 0;
  auto r1 = std::from_chars(text.data(), text.data() + dot, a);
  auto r2 = std::from_chars(text.data() + dot + 1, text.data() + text.size(), b);
  if (r1.ec != std::errc() || r1.ptr != text.data() + dot || r2.ec != std::errc() ||
      r2.ptr != text.data() + text.size() || a < 0 || b < 0 || a > 1000 || b > 1000) {
    return std::nullopt;
  }
  return std::pair{a, b};
}

} // namespace

// ---- file names and tags -------------------------------------------------------------------------

Result<WheelName> WheelName::parse(std::string_view filename) {
  auto bad = [&](std::string_view why) {
    return invalid_input("'{}' is not a valid wheel file name: {}", filename, why);
  };
  if (filename.size() > 1024) {
    return invalid_input("wheel file name '{}...' is longer than 1024 bytes", filename.substr(0, 40));
  }
  if (filename.size() < 4 || filename.substr(filename.size() - 4) != ".whl") {
    return bad("it does not end in .whl");
  }
  auto parts = split(filename.substr(0, filename.size() - 4), '-');
  if (parts.size() != 5 && parts.size() != 6) {
    return bad("expected {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl");
  }
  WheelName w;
  w.filename = std::string(filename);
  w.distribution = std::string(parts[0]);
  if (w.distribution.empty() || !std::all_of(w.distribution.begin(), w.distribution.end(), [](char c) {
        return is_ascii_alnum(c) || c == '_' || c == '.';
      })) {
    return bad("the distribution name may only have letters, digits, '_' and '.'");
  }
  w.project = normalize_project_name(w.distribution);
  w.version_text = std::string(parts[1]);
  auto version = PyVersion::parse(w.version_text);
  if (!version) {
    return bad(version.error().message);
  }
  w.version = std::move(*version);
  if (parts.size() == 6) {
    std::string_view build = parts[2];
    std::size_t digits = 0;
    while (digits < build.size() && build[digits] >= '0' && build[digits] <= '9') {
      ++digits;
    }
    std::uint64_t number = 0;
    auto [end, ec] = std::from_chars(build.data(), build.data() + digits, number);
    if (digits == 0 || ec != std::errc() || end != build.data() + digits) {
      return bad("the build tag must start with a number");
    }
    w.build_number = number;
    w.build_tag = std::string(build);
  }
  const std::size_t first_tag = parts.size() - 3;
  auto pythons = split(parts[first_tag], '.');
  auto abis = split(parts[first_tag + 1], '.');
  auto platforms = split(parts[first_tag + 2], '.');
  for (const auto* set : {&pythons, &abis, &platforms}) {
    for (auto part : *set) {
      if (!valid_tag_part(part)) {
        return bad(fmt::format("invalid tag '{}'", part));
      }
    }
  }
  if (pythons.size() * abis.size() * platforms.size() > 1024) {
    return bad("too many compressed tags");
  }
  for (auto py : pythons) {
    for (auto abi : abis) {
      for (auto plat : platforms) {
        w.tags.push_back(WheelTag{ascii_lower(py), ascii_lower(abi), ascii_lower(plat)});
      }
    }
  }
  return w;
}

Result<std::vector<WheelTag>> supported_tags(std::string_view python, std::string_view glibc,
                                             std::string_view machine) {
  auto py = parse_two_numbers(python);
  if (!py || py->first != 3) {
    return invalid_input("python version '{}': expected 3.N (like 3.11)", python);
  }
  auto libc = parse_two_numbers(glibc);
  if (!libc || libc->first != 2) {
    return invalid_input("glibc version '{}': expected 2.N (like 2.36)", glibc);
  }
  static constexpr std::string_view machines[] = {"x86_64", "i686",    "aarch64", "ppc64le",    "ppc64",
                                                  "s390x",  "riscv64", "armv7l",  "loongarch64"};
  if (std::find(std::begin(machines), std::end(machines), machine) == std::end(machines)) {
    return invalid_input(
        "machine '{}' has no manylinux tags (known: x86_64, aarch64, ppc64le, s390x, riscv64, "
        "i686, armv7l, ppc64, loongarch64)",
        machine);
  }
  const int minor = py->second;
  const std::string arch(machine);

  // Platforms, best first (packaging's _linux_platforms and _manylinux.platform_tags).
  std::vector<std::string> platforms;
  const int oldest_glibc_minor = (arch == "x86_64" || arch == "i686") ? 5 : 17;
  for (int m = libc->second; m >= oldest_glibc_minor; --m) {
    platforms.push_back(fmt::format("manylinux_2_{}_{}", m, arch));
    if (m == 17) {
      platforms.push_back("manylinux2014_" + arch);
    } else if (m == 12) {
      platforms.push_back("manylinux2010_" + arch);
    } else if (m == 5) {
      platforms.push_back("manylinux1_" + arch);
    }
  }
  platforms.push_back("linux_" + arch);

  std::vector<WheelTag> tags;
  const std::string cp = fmt::format("cp3{}", minor);
  auto for_platforms = [&](const std::string& interpreter, const std::string& abi) {
    for (const auto& p : platforms) {
      tags.push_back(WheelTag{interpreter, abi, p});
    }
  };
  // cpython_tags: the interpreter's own ABI, the stable ABI, no ABI, the stable ABI of older minors.
  for_platforms(cp, cp);
  for_platforms(cp, "abi3");
  for_platforms(cp, "none");
  for (int m = minor - 1; m >= 2; --m) {
    for_platforms(fmt::format("cp3{}", m), "abi3");
  }
  // compatible_tags: pure-Python tags for this platform, then for any platform.
  std::vector<std::string> py_range = {fmt::format("py3{}", minor), "py3"};
  for (int m = minor - 1; m >= 0; --m) {
    py_range.push_back(fmt::format("py3{}", m));
  }
  for (const auto& p : py_range) {
    for_platforms(p, "none");
  }
  tags.push_back(WheelTag{cp, "none", "any"});
  for (const auto& p : py_range) {
    tags.push_back(WheelTag{p, "none", "any"});
  }
  return tags;
}

std::optional<std::size_t> best_tag_rank(const WheelName& wheel, const std::vector<WheelTag>& supported) {
  for (std::size_t i = 0; i < supported.size(); ++i) {
    if (std::find(wheel.tags.begin(), wheel.tags.end(), supported[i]) != wheel.tags.end()) {
      return i;
    }
  }
  return std::nullopt;
}

// ---- METADATA and WHEEL ------------------------------------------------------------------------------

Result<std::vector<std::pair<std::string, std::string>>> parse_email_headers(std::string_view text,
                                                                             std::string_view what) {
  if (text.size() > k_max_metadata_size) {
    return invalid_input("{}: larger than {} bytes", what, k_max_metadata_size);
  }
  std::vector<std::pair<std::string, std::string>> out;
  int line_number = 0;
  for (std::string_view line : text_lines(text)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (trim(line).empty()) {
      break; // the body starts
    }
    if (line.front() == ' ' || line.front() == '\t') {
      if (out.empty()) {
        return invalid_input("{}:{}: a continuation line before any header", what, line_number);
      }
      out.back().second += "\n" + std::string(trim(line));
      continue;
    }
    auto colon = line.find(':');
    std::string_view name = colon == std::string_view::npos ? std::string_view() : line.substr(0, colon);
    bool valid_name = !name.empty() && std::all_of(name.begin(), name.end(),
                                                   [](char c) { return c > ' ' && c < 127 && c != ':'; });
    if (!valid_name) {
      break; // as Python's email parser: a line that is not a header starts the body
    }
    out.emplace_back(std::string(name), std::string(trim(line.substr(colon + 1))));
  }
  return out;
}

Result<CoreMetadata> parse_core_metadata(std::string_view text, std::string_view what) {
  LS_TRY_ASSIGN(auto headers, parse_email_headers(text, what));
  CoreMetadata md;
  bool have_name = false;
  bool have_version = false;
  for (const auto& [name, value] : headers) {
    std::string key = ascii_lower(name);
    if (key == "metadata-version") {
      md.metadata_version = value;
    } else if (key == "name") {
      if (!valid_project_name(value)) {
        return invalid_input("{}: invalid Name '{}'", what, value);
      }
      md.name = value;
      md.project = normalize_project_name(value);
      have_name = true;
    } else if (key == "version") {
      auto v = PyVersion::parse(value);
      if (!v) {
        return invalid_input("{}: invalid Version: {}", what, v.error().message);
      }
      md.version = std::move(*v);
      have_version = true;
    } else if (key == "requires-dist") {
      auto r = Requirement::parse(value);
      if (!r) {
        return invalid_input("{}: Requires-Dist: {}", what, r.error().message);
      }
      md.requires_dist.push_back(std::move(*r));
    } else if (key == "requires-python") {
      auto s = SpecifierSet::parse(value);
      if (!s) {
        return invalid_input("{}: Requires-Python: {}", what, s.error().message);
      }
      md.requires_python = std::move(*s);
    } else if (key == "provides-extra") {
      if (!valid_project_name(value)) {
        return invalid_input("{}: invalid Provides-Extra '{}'", what, value);
      }
      md.provides_extra.push_back(normalize_project_name(value));
    }
  }
  if (!have_name || !have_version) {
    return invalid_input("{}: no {} field", what, have_name ? "Version" : "Name");
  }
  return md;
}

std::string metadata_license(std::string_view metadata) {
  auto headers = parse_email_headers(metadata, "METADATA");
  if (!headers) {
    return "";
  }
  std::string license;
  std::vector<std::string> classifiers;
  for (const auto& [name, value] : *headers) {
    const std::string key = ascii_lower(name);
    if (key == "license-expression") {
      if (auto e = normalize_license_expression(value)) {
        return *e;
      }
    } else if (key == "license" && value.find('\n') == std::string::npos) {
      license = value;
    } else if (key == "classifier" && value.starts_with("License ::")) {
      classifiers.push_back(value);
    }
  }
  if (auto named = license_of_name(license); named && !license.empty()) {
    return *named;
  }
  if (classifiers.size() == 1) {
    const std::string& c = classifiers.front();
    if (auto named = license_of_name(c.substr(c.rfind("::") + 2))) {
      return *named;
    }
  }
  return "";
}

Result<WheelInfo> parse_wheel_info(std::string_view text, std::string_view what) {
  LS_TRY_ASSIGN(auto headers, parse_email_headers(text, what));
  WheelInfo info;
  bool have_version = false;
  for (const auto& [name, value] : headers) {
    std::string key = ascii_lower(name);
    if (key == "wheel-version") {
      auto v = parse_two_numbers(value);
      if (!v) {
        return invalid_input("{}: invalid Wheel-Version '{}' (expected like 1.0)", what, value);
      }
      info.version_major = v->first;
      info.version_minor = v->second;
      have_version = true;
    } else if (key == "root-is-purelib") {
      info.root_is_purelib = ascii_lower(value) == "true";
    } else if (key == "tag") {
      info.tags.push_back(value);
    } else if (key == "generator") {
      info.generator = value;
    } else if (key == "build") {
      info.build = value;
    }
  }
  if (!have_version) {
    return invalid_input("{}: no Wheel-Version field", what);
  }
  if (info.version_major != 1) {
    return invalid_input("{}: wheel format version {}.{} is not supported (lockstep installs 1.x wheels)",
                         what, info.version_major, info.version_minor);
  }
  return info;
}

// ---- entry_points.txt ----------------------------------------------------------------------------

namespace {

bool valid_dotted_identifier(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  for (auto part : split(s, '.')) {
    if (part.empty() || (part.front() >= '0' && part.front() <= '9') ||
        !std::all_of(part.begin(), part.end(), [](char c) {
          return is_ascii_alnum(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
        })) {
      return false;
    }
  }
  return true;
}

} // namespace

Result<std::vector<EntryPoint>> parse_entry_points(std::string_view text, std::string_view what) {
  if (text.size() > k_max_metadata_size) {
    return invalid_input("{}: larger than {} bytes", what, k_max_metadata_size);
  }
  std::vector<EntryPoint> out;
  std::string group;
  int line_number = 0;
  for (auto raw : split(text, '\n')) {
    ++line_number;
    std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') {
      continue;
    }
    if (line.front() == '[') {
      if (line.back() != ']') {
        return invalid_input("{}:{}: malformed section header '{}'", what, line_number, line);
      }
      group = std::string(trim(line.substr(1, line.size() - 2)));
      continue;
    }
    auto eq = line.find('=');
    if (eq == std::string_view::npos || group.empty()) {
      return invalid_input("{}:{}: expected 'name = module:attr' in a [section], found '{}'", what,
                           line_number, line);
    }
    EntryPoint ep;
    ep.group = group;
    ep.name = std::string(trim(line.substr(0, eq)));
    std::string_view value = trim(line.substr(eq + 1));
    if (auto bracket = value.find('['); bracket != std::string_view::npos) {
      if (value.back() != ']') {
        return invalid_input("{}:{}: malformed extras in '{}'", what, line_number, line);
      }
      for (auto extra : split(value.substr(bracket + 1, value.size() - bracket - 2), ',')) {
        if (!trim(extra).empty()) {
          ep.extras.emplace_back(trim(extra));
        }
      }
      value = trim(value.substr(0, bracket));
    }
    auto colon = value.find(':');
    ep.module = std::string(trim(value.substr(0, colon)));
    if (colon != std::string_view::npos) {
      ep.attr = std::string(trim(value.substr(colon + 1)));
    }
    if (ep.name.empty() || !valid_dotted_identifier(ep.module) ||
        (colon != std::string_view::npos && !valid_dotted_identifier(ep.attr))) {
      return invalid_input("{}:{}: malformed entry point '{}' (expected 'name = module:attr [extras]')", what,
                           line_number, line);
    }
    out.push_back(std::move(ep));
  }
  return out;
}

// ---- RECORD --------------------------------------------------------------------------------------

namespace {

constexpr std::string_view k_b64_alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string urlsafe_b64_nopad(const std::uint8_t* data, std::size_t size) {
  std::string out;
  for (std::size_t i = 0; i < size; i += 3) {
    std::uint32_t n = static_cast<std::uint32_t>(data[i]) << 16;
    if (i + 1 < size) {
      n |= static_cast<std::uint32_t>(data[i + 1]) << 8;
    }
    if (i + 2 < size) {
      n |= data[i + 2];
    }
    out += k_b64_alphabet[(n >> 18) & 63];
    out += k_b64_alphabet[(n >> 12) & 63];
    if (i + 1 < size) {
      out += k_b64_alphabet[(n >> 6) & 63];
    }
    if (i + 2 < size) {
      out += k_b64_alphabet[n & 63];
    }
  }
  return out;
}

std::optional<std::vector<std::uint8_t>> urlsafe_b64_decode(std::string_view s) {
  while (!s.empty() && s.back() == '=') {
    s.remove_suffix(1);
  }
  if (s.size() % 4 == 1) {
    return std::nullopt;
  }
  std::vector<std::uint8_t> out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    auto k = k_b64_alphabet.find(c);
    if (k == std::string_view::npos) {
      return std::nullopt;
    }
    acc = (acc << 6) | static_cast<std::uint32_t>(k);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<std::uint8_t>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string csv_field(const std::string& f) {
  if (f.find_first_of(",\"\r\n") == std::string::npos) {
    return f;
  }
  std::string out = "\"";
  for (char c : f) {
    out += c;
    if (c == '"') {
      out += '"';
    }
  }
  return out + "\"";
}

} // namespace

std::string record_hash(const Digest& digest) {
  std::array<std::uint8_t, 32> raw{};
  const std::string& hex = digest.hex();
  for (std::size_t i = 0; i < raw.size() && 2 * i + 1 < hex.size(); ++i) {
    std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, raw[i], 16);
  }
  return "sha256=" + urlsafe_b64_nopad(raw.data(), raw.size());
}

Result<Digest> parse_record_hash(std::string_view text) {
  auto eq = text.find('=');
  std::string algorithm = ascii_lower(text.substr(0, eq == std::string_view::npos ? 0 : eq));
  if (eq == std::string_view::npos) {
    return invalid_input("hash '{}' is not ALGORITHM=VALUE", text);
  }
  if (algorithm != "sha256") {
    return invalid_input("hash algorithm '{}' is not supported (lockstep checks sha256)", algorithm);
  }
  auto raw = urlsafe_b64_decode(text.substr(eq + 1));
  if (!raw || raw->size() != 32) {
    return invalid_input("hash '{}' is not a sha256 digest in urlsafe base64", text);
  }
  std::array<std::uint8_t, 32> bytes{};
  std::copy(raw->begin(), raw->end(), bytes.begin());
  return Digest::from_sha256_bytes(bytes);
}

Result<std::vector<RecordEntry>> parse_record(std::string_view text, std::string_view what) {
  if (text.size() > k_max_record_size) {
    return invalid_input("{}: larger than {} bytes", what, k_max_record_size);
  }
  std::vector<RecordEntry> out;
  std::size_t pos = 0;
  int row_number = 0;
  while (pos < text.size()) {
    ++row_number;
    // One CSV row (Python's excel dialect): fields separated by ',', optionally quoted with '"'
    // ("" inside quotes is a quote; quoted fields may span lines).
    std::vector<std::string> fields(1);
    bool quoted = false;
    bool was_quoted = false;
    while (pos < text.size()) {
      char c = text[pos];
      if (quoted) {
        if (c == '"') {
          if (pos + 1 < text.size() && text[pos + 1] == '"') {
            fields.back() += '"';
            pos += 2;
            continue;
          }
          quoted = false;
          ++pos;
          continue;
        }
        fields.back() += c;
        ++pos;
        continue;
      }
      if (c == '\n' || c == '\r') {
        ++pos;
        if (c == '\r' && pos < text.size() && text[pos] == '\n') {
          ++pos;
        }
        break;
      }
      ++pos;
      if (c == ',') {
        fields.emplace_back();
        was_quoted = false;
      } else if (c == '"' && fields.back().empty() && !was_quoted) {
        quoted = true;
        was_quoted = true;
      } else {
        fields.back() += c;
      }
    }
    if (quoted) {
      return invalid_input("{}: row {}: unterminated quoted field", what, row_number);
    }
    if (fields.size() == 1 && fields[0].empty()) {
      continue;
    }
    if (fields.size() != 3) {
      return invalid_input("{}: row {}: expected 3 fields (path,hash,size), found {}", what, row_number,
                           fields.size());
    }
    RecordEntry e;
    e.path = fields[0];
    if (e.path.empty()) {
      return invalid_input("{}: row {}: empty path", what, row_number);
    }
    if (!fields[1].empty()) {
      auto h = parse_record_hash(fields[1]);
      if (!h) {
        return invalid_input("{}: row {} ({}): {}", what, row_number, e.path, h.error().message);
      }
      e.hash = *h;
    }
    if (!fields[2].empty()) {
      std::uint64_t size = 0;
      const std::string& f = fields[2];
      auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), size);
      if (ec != std::errc() || end != f.data() + f.size()) {
        return invalid_input("{}: row {} ({}): invalid size '{}'", what, row_number, e.path, f);
      }
      e.size = size;
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string write_record(const std::vector<RecordEntry>& rows) {
  std::string out;
  for (const auto& r : rows) {
    out += csv_field(r.path);
    out += ',';
    if (r.hash) {
      out += record_hash(*r.hash);
    }
    out += ',';
    if (r.size) {
      out += std::to_string(*r.size);
    }
    out += "\r\n";
  }
  return out;
}

} // namespace lockstep
