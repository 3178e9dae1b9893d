#pragma once
// What every part of `lockstep doctor` shares (runner/audit/doctor.hpp): the bounds on what a
// snapshot holds (names, versions, paths, text, GPUs, packages) and the small text rules that judge
// and show versions and names. Not part of the audit room's public API.
#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep::runner::doctor_detail {

inline constexpr std::size_t k_small_file = 64ULL * 1024; // /proc, os-release, pyvenv.cfg, INSTALLER
inline constexpr std::size_t k_max_dir_entries = 100000;  // per directory listed
inline constexpr std::size_t k_max_packages = 100000;     // per environment

inline constexpr std::size_t k_max_name = 256;
inline constexpr std::size_t k_max_version = 128;
inline constexpr std::size_t k_max_path = 4096;
inline constexpr std::size_t k_max_text = 1024;
inline constexpr std::size_t k_max_gpus = 4096;

/// The first line of `s`, without surrounding blanks.
std::string_view first_line(std::string_view s);

/// A version word: a digit first, then [0-9A-Za-z.+~_-], at most k_max_version bytes; "" otherwise.
std::string version_token(std::string_view word);

/// The leading "X.Y.Z" of a version with more parts ("3.11.2.final.0" -> "3.11.2").
std::string three_numbers(std::string_view v);

/// "Open MPI 4.1.4", "MPICH 4.0.2": an MPI implementation and version for people.
std::string mpi_display(std::string_view impl, std::string_view version);

/// "1 package", "3 packages".
std::string plural(std::size_t n, std::string_view word);

/// A distribution name as records may spell it (PEP 508's rule, which conda names also follow).
bool valid_package_name(std::string_view name);

} // namespace lockstep::runner::doctor_detail
