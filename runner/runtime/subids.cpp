#include "runner/runtime/subids.hpp"

#include "support/base/text.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <charconv>
#include <csignal>
#include <vector>

namespace lockstep::runner {

Result<UsernsMode> parse_userns_mode(std::string_view text) {
  if (text == "auto") {
    return UsernsMode::automatic;
  }
  if (text == "subuid") {
    return UsernsMode::subuid;
  }
  if (text == "single") {
    return UsernsMode::single;
  }
  return invalid_input("--userns {}: expected auto, subuid or single", text);
}

namespace {

bool parse_u32(std::string_view s, std::uint32_t& out) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v > 0xFFFFFFFFULL) {
    return false;
  }
  out = static_cast<std::uint32_t>(v);
  return true;
}

} // namespace

std::optional<SubidEntry> find_subid_range(std::string_view text, std::string_view user, std::uint32_t uid) {
  const std::string uid_text = std::to_string(uid);
  std::optional<SubidEntry> found;
  for_each_line(text, [&](std::string_view line) {
    const std::size_t a = line.find(':');
    const std::size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) {
      return true;
    }
    const std::string_view who = line.substr(0, a);
    SubidEntry e;
    if ((who != user && who != uid_text) || !parse_u32(line.substr(a + 1, b - a - 1), e.first) ||
        !parse_u32(line.substr(b + 1), e.count) || e.count == 0) {
      return true;
    }
    found = e;
    return false;
  });
  return found;
}

Result<void> write_subid_maps(const SubordinateIds& ids, pid_t pid) {
  const std::string target = std::to_string(pid);
  const std::vector<std::vector<std::string>> tools = {
      {ids.newuidmap, target, "0", std::to_string(::geteuid()), "1", "1", std::to_string(ids.uid_first),
       std::to_string(ids.uid_count)},
      {ids.newgidmap, target, "0", std::to_string(::getegid()), "1", "1", std::to_string(ids.gid_first),
       std::to_string(ids.gid_count)}};
  for (const auto& argv : tools) {
    LS_TRY_ASSIGN(CaptureResult r, run_capture(argv));
    if (r.status != 0) {
      return Error{
          ExitCode::external,
          fmt::format("{} failed (exit {}): {}; check /etc/subuid and /etc/subgid, or use --userns single",
                      argv[0], r.status, trim(r.err))};
    }
  }
  return {};
}

Result<void> run_in_subid_namespace(const SubordinateIds& ids, const std::function<Result<void>()>& work) {
  int ask[2];
  int answer[2];
  int report[2];
  if (::pipe2(ask, O_CLOEXEC) < 0 || ::pipe2(answer, O_CLOEXEC) < 0 || ::pipe2(report, O_CLOEXEC) < 0) {
    return errno_error("can't create a pipe", errno);
  }
  const pid_t child = ::fork();
  if (child < 0) {
    return errno_error("can't fork", errno);
  }
  if (child == 0) {
    ::close(ask[0]);
    ::close(answer[1]);
    ::close(report[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    char b = 0;
    if (::unshare(CLONE_NEWUSER) != 0 || ::write(ask[1], "m", 1) != 1 || ::read(answer[0], &b, 1) != 1 ||
        b != 'k') {
      _exit(3);
    }
    Result<void> r = work();
    if (!r) {
      const std::string& m = r.error().message;
      (void)::write(report[1], m.data(), m.size());
      _exit(static_cast<int>(r.error().code) & 0xff);
    }
    _exit(0);
  }
  ::close(ask[1]);
  ::close(answer[0]);
  ::close(report[1]);
  UniqueFd ask_read(ask[0]);
  UniqueFd answer_write(answer[1]);
  UniqueFd report_read(report[0]);
  char b = 0;
  Result<void> mapped = ::read(ask_read.get(), &b, 1) == 1
                            ? write_subid_maps(ids, child)
                            : Result<void>(errno_error("can't make a user namespace", errno));
  (void)::write(answer_write.get(), mapped ? "k" : "x", 1);
  answer_write.reset();
  std::string message(4096, '\0');
  auto got = read_full(report_read.get(), message.data(), message.size(), "the helper's report");
  message.resize(got ? *got : 0);
  const int code = wait_exit_code(child);
  if (!mapped) {
    return mapped.error();
  }
  if (code != 0) {
    return Error{code == static_cast<int>(ExitCode::io) ? ExitCode::io : ExitCode::internal,
                 message.empty() ? fmt::format("the subordinate id helper exited with status {}", code)
                                 : message};
  }
  return {};
}

Result<std::optional<SubordinateIds>> choose_subordinate_ids(UsernsMode mode) {
  if (mode == UsernsMode::single) {
    return std::optional<SubordinateIds>{};
  }
  const uid_t uid = ::geteuid();
  std::string user;
  if (const struct passwd* pw = ::getpwuid(uid); pw != nullptr) {
    user = pw->pw_name;
  }
  auto missing = [&](const std::string& what) -> Result<std::optional<SubordinateIds>> {
    if (mode == UsernsMode::automatic) {
      return std::optional<SubordinateIds>{};
    }
    return Error{ExitCode::external, fmt::format("--userns subuid: {}; use --userns single (no range needed, "
                                                 "docs/rootless.md)",
                                                 what)};
  };
  SubordinateIds ids;
  ids.newuidmap = find_program("newuidmap").value_or("").string();
  ids.newgidmap = find_program("newgidmap").value_or("").string();
  if (ids.newuidmap.empty() || ids.newgidmap.empty()) {
    return missing("newuidmap and newgidmap are not installed (apt-get install uidmap)");
  }
  auto range = [&](const char* file) -> std::optional<SubidEntry> {
    auto text = read_file(file);
    return text ? find_subid_range(*text, user, uid) : std::nullopt;
  };
  const std::optional<SubidEntry> u = range("/etc/subuid");
  const std::optional<SubidEntry> g = range("/etc/subgid");
  if (!u || !g) {
    return missing(fmt::format("{} has no range in {} (an administrator adds one: usermod --add-subuids "
                               "FIRST-LAST --add-subgids FIRST-LAST {})",
                               user.empty() ? "uid " + std::to_string(uid) : user,
                               !u ? "/etc/subuid" : "/etc/subgid",
                               user.empty() ? std::to_string(uid) : user));
  }
  ids.uid_first = u->first;
  ids.uid_count = u->count;
  ids.gid_first = g->first;
  ids.gid_count = g->count;
  return std::optional<SubordinateIds>{ids};
}

} // namespace lockstep::runner
