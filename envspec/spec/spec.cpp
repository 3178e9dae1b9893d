#include "envspec/spec/spec.hpp"

#include "support/codec/digest.hpp"
#include "support/system/fs.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <exception>
#include <functional>
#include <map>
#include <system_error>

namespace lockstep::envspec {

namespace fs = std::filesystem;

bool Spec::needs_lock() const {
  return base.kind == BaseImage::Kind::debian || base.kind == BaseImage::Kind::registry ||
         !packages.apt.empty() || !packages.pip.empty() || !packages.conda.empty() || stack.has_value() ||
         std::any_of(copy.begin(), copy.end(), [](const CopyItem& c) { return !c.git.empty(); });
}

Spec spec_for_platform(const Spec& spec, const oci::Platform& platform) {
  Spec one = spec;
  one.platform = platform;
  one.platforms = {platform};
  if (one.canonical.is_object()) {
    one.canonical.erase("platforms");
    one.canonical["platform"] = platform.str();
    one.digest = sha256_of(one.canonical.dump());
  }
  return one;
}

std::string debian_arch(const oci::Platform& platform) {
  if (platform.os != "linux") {
    return "";
  }
  // OCI/Go architecture names -> dpkg architecture names (dpkg-architecture -L).
  static const std::map<std::string, std::string, std::less<>> names = {
      {"amd64", "amd64"},       {"arm64", "arm64"},   {"386", "i386"},
      {"ppc64le", "ppc64el"},   {"s390x", "s390x"},   {"riscv64", "riscv64"},
      {"mips64le", "mips64el"}, {"mipsle", "mipsel"}, {"loong64", "loong64"},
  };
  if (platform.architecture == "arm") {
    return platform.variant == "v5" ? "armel" : "armhf";
  }
  auto it = names.find(platform.architecture);
  return it == names.end() ? "" : it->second;
}

} // namespace lockstep::envspec

namespace lockstep::envspec {

std::string known_snapshot_base(std::string_view url) {
  std::string_view rest = url;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (rest.starts_with(scheme)) {
      rest.remove_prefix(scheme.size());
    }
  }
  while (rest.ends_with('/')) {
    rest.remove_suffix(1);
  }
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return "";
  }
  const std::string_view host = rest.substr(0, slash);
  const std::string_view archive = rest.substr(slash + 1);
  if (archive.empty() || archive.find('/') != std::string_view::npos) {
    return "";
  }
  if (host == "deb.debian.org" || host == "ftp.debian.org" || host == "security.debian.org") {
    return "https://snapshot.debian.org/archive/" + std::string(archive);
  }
  if ((host == "archive.ubuntu.com" || host == "security.ubuntu.com") && archive == "ubuntu") {
    return "https://snapshot.ubuntu.com/ubuntu";
  }
  return "";
}

std::string snapshot_file_url(std::string_view base, std::string_view repo_url, std::string_view file_url,
                              std::string_view release_date) {
  std::string prefix(repo_url);
  while (!prefix.empty() && prefix.back() == '/') {
    prefix.pop_back();
  }
  prefix += '/';
  if (base.empty() || !file_url.starts_with(prefix)) {
    return "";
  }
  // "Sat, 11 Jul 2026 10:16:37 UTC": day, month name, year, time (the weekday and zone are ignored;
  // Release dates are UTC).
  static constexpr std::array<std::string_view, 12> k_months = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                                "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::string_view d = release_date;
  if (const std::size_t comma = d.find(','); comma != std::string_view::npos) {
    d.remove_prefix(comma + 1);
  }
  unsigned day = 0;
  unsigned year = 0;
  unsigned hh = 0;
  unsigned mm = 0;
  unsigned ss = 0;
  char month[4] = {};
  const std::string copy(d);
  // NOLINTNEXTLINE(cert-err34-c): all six fields must be read, and each is range-checked below
  if (std::sscanf(copy.c_str(), " %u %3s %u %u:%u:%u", &day, month, &year, &hh, &mm, &ss) != 6) {
    return "";
  }
  int mon = -1;
  for (std::size_t i = 0; i < k_months.size(); ++i) {
    if (k_months[i] == month) {
      mon = static_cast<int>(i);
    }
  }
  if (mon < 0 || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60 || year < 1970 || year > 9999) {
    return "";
  }
  std::tm tm{};
  tm.tm_year = static_cast<int>(year) - 1900;
  tm.tm_mon = mon;
  tm.tm_mday = static_cast<int>(day);
  tm.tm_hour = static_cast<int>(hh);
  tm.tm_min = static_cast<int>(mm);
  tm.tm_sec = static_cast<int>(ss);
  const std::time_t after = ::timegm(&tm) + std::time_t{6} * 3600;
  std::tm out{};
  ::gmtime_r(&after, &out);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &out);
  std::string b(base);
  while (!b.empty() && b.back() == '/') {
    b.pop_back();
  }
  return b + "/" + stamp + "/" + std::string(file_url.substr(prefix.size()));
}

std::string conda_subdir(const oci::Platform& platform) {
  if (platform.os != "linux") {
    return "";
  }
  if (platform.architecture == "amd64") {
    return "linux-64";
  }
  if (platform.architecture == "arm64") {
    return "linux-aarch64";
  }
  if (platform.architecture == "386") {
    return "linux-32";
  }
  if (platform.architecture == "ppc64le" || platform.architecture == "s390x" ||
      platform.architecture == "riscv64") {
    return "linux-" + platform.architecture;
  }
  if (platform.architecture == "arm") {
    return platform.variant == "v6" ? "linux-armv6l" : "linux-armv7l";
  }
  return "";
}

} // namespace lockstep::envspec
