// Rank reports and run-record helpers for `lockstep run` (docs/launch.md).
#include "runner/launch/run_record.hpp"

#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <ctime>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

std::optional<int> int_env(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
      continue;
    }
    int value = 0;
    std::string_view s(v);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec == std::errc() && end == s.data() + s.size() && value >= 0) {
      return value;
    }
  }
  return std::nullopt;
}

// "2026-11-30T23:59:01" (iso) or "20261130T235901Z" (compact), UTC.
std::string utc_stamp(std::int64_t ns, bool compact) {
  std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  if (compact) {
    return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                       tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec);
}

// The rank this process is, from the launcher's environment (nullopt outside a launcher).
std::optional<int> rank_from_environment() {
  return int_env({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"});
}

// The node-local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or MPI_LOCALRANKID).
std::optional<int> local_rank_from_environment() {
  return int_env({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"});
}

} // namespace

std::int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string iso8601_utc(std::int64_t ns) {
  return fmt::format("{}.{:03}Z", utc_stamp(ns, false), (ns / 1000000) % 1000);
}

nlohmann::ordered_json to_json(const RankReport& r) {
  nlohmann::ordered_json j;
  j["rank"] = r.rank;
  j["local_rank"] = r.local_rank;
  j["node"] = r.node;
  j["exit_code"] = r.exit_code;
  if (!r.error.empty()) {
    j["error"] = r.error;
  }
  j["start_ns"] = r.start_ns;
  j["end_ns"] = r.end_ns;
  return j;
}

Result<RankReport> rank_report_from_json(std::string_view text, std::string_view origin) {
  Result<nlohmann::json> parsed = parse_json(text, std::string(origin));
  if (!parsed) {
    return parsed.error();
  }
  const nlohmann::json j = std::move(*parsed);
  if (!j.is_object()) {
    return invalid_input("{}: not a JSON object", origin);
  }
  RankReport r;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    auto want_int = [&](auto& field, std::int64_t lo, std::int64_t hi) -> Result<void> {
      if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
        return invalid_input("{}: '{}' must be an integer in [{}, {}]", origin, key, lo, hi);
      }
      field = static_cast<std::remove_reference_t<decltype(field)>>(v.get<std::int64_t>());
      return {};
    };
    if (key == "rank") {
      LS_TRY(want_int(r.rank, 0, 1 << 24));
    } else if (key == "local_rank") {
      LS_TRY(want_int(r.local_rank, -1, 1 << 24));
    } else if (key == "exit_code") {
      LS_TRY(want_int(r.exit_code, 0, 255));
    } else if (key == "start_ns") {
      LS_TRY(want_int(r.start_ns, 0, INT64_MAX));
    } else if (key == "end_ns") {
      LS_TRY(want_int(r.end_ns, 0, INT64_MAX));
    } else if (key == "node" || key == "error") {
      if (!v.is_string() || v.get_ref<const std::string&>().size() > 4096) {
        return invalid_input("{}: '{}' must be a string of at most 4096 bytes", origin, key);
      }
      (key == "node" ? r.node : r.error) = v.get<std::string>();
    } else {
      return invalid_input("{}: unknown key '{}'", origin, key);
    }
  }
  if (r.rank < 0) {
    return invalid_input("{}: 'rank' is missing", origin);
  }
  return r;
}

Result<void> make_record_dirs(const fs::path& dir) {
  fs::path path;
  for (const fs::path& part : dir.lexically_normal()) {
    path /= part;
    if (::mkdir(path.c_str(), 0700) == 0) {
      if (::chmod(path.c_str(), 0700) != 0) { // mkdir's mode went through the umask
        return errno_error("can't chmod " + path.string(), errno);
      }
    } else if (errno != EEXIST) {
      return errno_error("can't create directory " + path.string(), errno);
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return io_error("can't create directory {}: a file of that name is in the way", dir.string());
  }
  return {};
}

Result<void> write_unsynced(const fs::path& path, const std::string& data, mode_t mode) {
  const fs::path temp = path.parent_path() / fmt::format(".{}.{}.tmp", path.filename().string(), ::getpid());
  (void)::unlink(temp.c_str()); // a leftover of a process that had this pid
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd.valid()) {
    return errno_error("can't create " + temp.string(), errno);
  }
  Result<void> written = ::fchmod(fd.get(), mode) == 0
                             ? write_all(fd.get(), data.data(), data.size(), temp.string())
                             : errno_error("can't chmod " + temp.string(), errno);
  fd.reset();
  if (written && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = errno_error("can't rename " + temp.string() + " to " + path.string(), errno);
  }
  if (!written) {
    (void)::unlink(temp.c_str());
  }
  return written;
}

Result<void> write_rank_report(const fs::path& dir, const RankReport& report) {
  const fs::path path = dir / fmt::format("rank-{}.json", report.rank);
  const std::string data =
      to_json(report).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  // Every rank of a job writes one: usually the directory is there and no report of this rank is,
  // so the file is created in place (a reader reads reports only once the launcher has ended).
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, k_record_file_mode));
  if (fd.valid()) {
    Result<void> written = ::fchmod(fd.get(), k_record_file_mode) == 0
                               ? write_all(fd.get(), data.data(), data.size(), path.string())
                               : errno_error("can't chmod " + path.string(), errno);
    if (!written) {
      (void)::unlink(path.c_str());
    }
    return written;
  }
  if (errno != ENOENT && errno != EEXIST) {
    return errno_error("can't create " + path.string(), errno);
  }
  LS_TRY(make_record_dirs(dir));
  return write_unsynced(path, data, k_record_file_mode); // replaces an earlier report of this rank
}

std::vector<RankReport> read_rank_reports(const fs::path& dir) {
  std::vector<RankReport> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  std::size_t seen = 0;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (++seen > (1U << 20)) {
      break;
    }
    const std::string name = it->path().filename().string();
    if (!name.starts_with("rank-") || !name.ends_with(".json")) {
      continue;
    }
    Result<std::string> text = read_file(it->path(), 1U << 20);
    if (!text) {
      log::warn("run record: {}", text.error().message);
      continue;
    }
    Result<RankReport> r = rank_report_from_json(*text, it->path().string());
    if (!r) {
      log::warn("run record: {}", r.error().message);
      continue;
    }
    out.push_back(std::move(*r));
  }
  std::sort(out.begin(), out.end(), [](const RankReport& a, const RankReport& b) { return a.rank < b.rank; });
  return out;
}

std::optional<RankReport> first_failure(const std::vector<RankReport>& reports) {
  std::optional<RankReport> best;
  for (const RankReport& r : reports) {
    if (r.exit_code == 0 && r.error.empty()) {
      continue;
    }
    if (!best || r.end_ns < best->end_ns || (r.end_ns == best->end_ns && r.rank < best->rank)) {
      best = r;
    }
  }
  return best;
}

fs::path default_runs_dir() {
  if (const char* v = std::getenv("LOCKSTEP_RUNS"); v != nullptr && *v != '\0') {
    return v;
  }
  if (const char* v = std::getenv("XDG_STATE_HOME"); v != nullptr && *v == '/') {
    return fs::path(v) / "lockstep" / "runs";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr && *home == '/' ? home : "/tmp") / ".local" / "state" / "lockstep" / "runs";
}

namespace {

std::string host_name() {
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  return host.data();
}

} // namespace

std::string new_job_id(const std::optional<std::string>& slurm_job_id) {
  const std::string stamp = utc_stamp(wall_clock_ns(), true);
  if (slurm_job_id) {
    return fmt::format("slurm-{}-{}-{}", *slurm_job_id, stamp, ::getpid());
  }
  std::string h = host_name();
  for (char& c : h) {
    if (c == '/' || c == ' ') {
      c = '_';
    }
  }
  return fmt::format("{}-{}-{}", stamp, h.empty() ? "host" : h, ::getpid());
}

Result<int> run_reporting_rank(const std::filesystem::path& dir, const std::function<Result<int>()>& run) {
  RankReport report;
  report.rank = rank_from_environment().value_or(0);
  report.local_rank = local_rank_from_environment().value_or(-1);
  report.node = host_name();
  report.start_ns = wall_clock_ns();
  Result<int> code = run();
  report.end_ns = wall_clock_ns();
  if (code) {
    report.exit_code = *code & 0xff;
  } else {
    report.exit_code = static_cast<int>(code.error().code) & 0xff;
    report.error = code.error().message.substr(0, 4000);
  }
  if (Result<void> w = write_rank_report(dir, report); !w) {
    log::warn("rank {}: can't write the rank report: {}", report.rank, w.error().message);
  }
  return code;
}

} // namespace lockstep::runner
