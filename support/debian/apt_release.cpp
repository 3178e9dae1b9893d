#include "support/debian/apt_release.hpp"

#include "support/debian/deb822.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace lockstep {

namespace {

std::vector<std::string> words(const std::string* value) {
  std::vector<std::string> out;
  if (value == nullptr) {
    return out;
  }
  std::istringstream in(*value);
  std::string w;
  while (in >> w) {
    out.push_back(w);
  }
  return out;
}

std::string text_of(const std::string* value) {
  return value == nullptr ? std::string() : *value;
}

} // namespace

bool AptRelease::supports_architecture(std::string_view arch) const {
  if (arch == "all" && no_support_for_architecture_all == "Packages") {
    return false;
  }
  if (architectures.empty()) {
    return true;
  }
  return std::find(architectures.begin(), architectures.end(), arch) != architectures.end();
}

Result<AptRelease> AptRelease::parse(std::string_view text, std::string_view what) {
  LS_TRY_ASSIGN(auto paragraphs, parse_deb822(text, what));
  if (paragraphs.size() != 1) {
    return invalid_input("{}: expected one paragraph in a Release file, found {}", what, paragraphs.size());
  }
  const Deb822Paragraph& p = paragraphs.front();
  AptRelease r;
  r.origin = text_of(p.find("Origin"));
  r.label = text_of(p.find("Label"));
  r.suite = text_of(p.find("Suite"));
  r.codename = text_of(p.find("Codename"));
  r.version = text_of(p.find("Version"));
  r.date = text_of(p.find("Date"));
  r.valid_until = text_of(p.find("Valid-Until"));
  r.architectures = words(p.find("Architectures"));
  r.components = words(p.find("Components"));
  r.no_support_for_architecture_all = text_of(p.find("No-Support-for-Architecture-all"));
  const std::string* by_hash = p.find("Acquire-By-Hash");
  r.acquire_by_hash = by_hash != nullptr && *by_hash == "yes";
  const std::string* sums = p.find("SHA256");
  if (sums == nullptr) {
    return invalid_input("{}: no SHA256 field; lockstep only trusts SHA-256 index checksums", what);
  }
  std::istringstream lines(*sums);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) {
      continue;
    }
    ++n;
    std::istringstream fields(line);
    std::string hash, size_text, path, extra;
    fields >> hash >> size_text >> path;
    std::uint64_t size = 0;
    auto [ptr, ec] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size);
    auto digest = Digest::parse("sha256:" + hash);
    if (path.empty() || (fields >> extra) || ec != std::errc() ||
        ptr != size_text.data() + size_text.size() || !digest) {
      return invalid_input("{}: SHA256 entry {} is not 'HASH SIZE PATH': '{}'", what, n, line);
    }
    r.sha256[path] = AptIndexEntry{*digest, size};
  }
  if (r.sha256.empty()) {
    return invalid_input("{}: the SHA256 field lists no files", what);
  }
  return r;
}

Result<AptIndexEntry> AptRelease::index(std::string_view path) const {
  if (auto it = sha256.find(std::string(path)); it != sha256.end()) {
    return it->second;
  }
  std::string dir(path.substr(0, path.rfind('/') + 1));
  std::string near;
  for (const auto& [p, e] : sha256) {
    if (!dir.empty() && p.compare(0, dir.size(), dir) == 0) {
      near += near.empty() ? p : ", " + p;
    }
  }
  return invalid_input("the Release file of '{}' lists no {}{}", suite.empty() ? codename : suite, path,
                       near.empty() ? std::string() : " (it has: " + near + ")");
}

Result<std::string> clearsigned_text(std::string_view inrelease, std::string_view what) {
  constexpr std::string_view begin = "-----BEGIN PGP SIGNED MESSAGE-----\n";
  constexpr std::string_view sig = "\n-----BEGIN PGP SIGNATURE-----";
  if (inrelease.substr(0, begin.size()) != begin) {
    return invalid_input("{}: not a clearsigned message (no '-----BEGIN PGP SIGNED MESSAGE-----' line)",
                         what);
  }
  std::size_t pos = begin.size();
  // Armor headers ("Hash: SHA512") end at the first empty line.
  std::size_t blank = inrelease.find("\n\n", pos - 1);
  std::size_t end = inrelease.find(sig, pos);
  if (blank == std::string_view::npos || end == std::string_view::npos || blank > end) {
    return invalid_input("{}: malformed clearsigned message (no header end or no signature)", what);
  }
  std::string_view body = inrelease.substr(blank + 2, end - (blank + 2));
  std::string out;
  out.reserve(body.size() + 1);
  std::size_t i = 0;
  while (i <= body.size() && i < body.size() + 1) {
    std::size_t nl = body.find('\n', i);
    std::string_view line = body.substr(i, nl == std::string_view::npos ? std::string_view::npos : nl - i);
    if (line.substr(0, 2) == "- ") {
      line.remove_prefix(2); // dash-escaping (RFC 4880 §7.1)
    }
    out += line;
    out += '\n';
    if (nl == std::string_view::npos) {
      break;
    }
    i = nl + 1;
  }
  return out;
}

} // namespace lockstep
