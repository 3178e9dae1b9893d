// doctor's shared text rules (doctor_text.hpp).
#include "runner/audit/doctor_text.hpp"

#include "support/base/text.hpp"
#include "support/python/pep508.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lockstep::runner::doctor_detail {

std::string_view first_line(std::string_view s) {
  return trim_chars(s.substr(0, s.find('\n')), " \t\r");
}

std::string version_token(std::string_view word) {
  if (word.empty() || word.front() < '0' || word.front() > '9' || word.size() > k_max_version) {
    return {};
  }
  const bool valid = std::all_of(word.begin(), word.end(), [](char c) {
    return is_ascii_alnum(c) || c == '.' || c == '+' || c == '~' || c == '_' || c == '-';
  });
  return valid ? std::string(word) : std::string();
}

std::string three_numbers(std::string_view v) {
  std::string out;
  std::size_t pos = 0;
  for (int part = 0; part < 3 && pos < v.size(); ++part) {
    const std::size_t end = std::min(v.find('.', pos), v.size());
    const std::string_view n = v.substr(pos, end - pos);
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string_view::npos) {
      break;
    }
    out += (part == 0 ? "" : ".") + std::string(n);
    pos = end + 1;
  }
  return out;
}

std::string mpi_display(std::string_view impl, std::string_view version) {
  std::string name(impl);
  if (impl == "openmpi") {
    name = "Open MPI";
  } else if (impl == "mpich") {
    name = "MPICH";
  }
  return version.empty() ? name : name + " " + std::string(version);
}

std::string plural(std::size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

bool valid_package_name(std::string_view name) {
  return name.size() <= k_max_name && valid_project_name(name);
}

} // namespace lockstep::runner::doctor_detail
