#pragma once
// Subordinate ids (/etc/subuid, /etc/subgid) for rootless builds: `--userns auto|subuid|single`
// (docs/rootless.md). With a range, the build sandbox maps the caller's uid to 0 and the range to
// 1.. through the setuid newuidmap/newgidmap (shadow's uidmap package), so ids switch for real;
// without one, a single id is mapped and the supervisor records owners.
#include "support/base/result.hpp"

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::runner {

/// The caller's ranges and the tools that map them.
struct SubordinateIds {
  std::uint32_t uid_first = 0;
  std::uint32_t uid_count = 0;
  std::uint32_t gid_first = 0;
  std::uint32_t gid_count = 0;
  std::string newuidmap; ///< absolute paths
  std::string newgidmap;
};

/// How an unprivileged build maps ids.
enum class UsernsMode {
  automatic, ///< `auto`: subuid when the caller has both ranges and the tools exist, else single
  subuid,    ///< the caller's subordinate ranges; an error when they or the tools are missing
  single,    ///< the caller's own uid and gid only (the supervisor records owners)
};

/// "auto", "subuid" or "single"; anything else is invalid_input naming the choices.
Result<UsernsMode> parse_userns_mode(std::string_view text);

/// The ranges of the user named `user` (or numbered `uid`) in the subuid/subgid files' text: the
/// first entry of each file that names it, by name or number, with a non-zero count.
struct SubidEntry {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};
std::optional<SubidEntry> find_subid_range(std::string_view file_text, std::string_view user,
                                           std::uint32_t uid);

/// Maps the user namespace of `pid` (a child that just made one): 0 to the caller, 1.. to the
/// ranges, with newuidmap and newgidmap. Their failure is an external error with what they said.
Result<void> write_subid_maps(const SubordinateIds& ids, pid_t pid);

/// Runs `work` in a child process that is root of a new user namespace mapped as write_subid_maps()
/// does, and waits for it: files a subuid step left owned by other ids can be changed there. The
/// child's error comes back as this call's. Must be called while the process runs a single thread.
Result<void> run_in_subid_namespace(const SubordinateIds& ids, const std::function<Result<void>()>& work);

/// What an unprivileged build maps in `mode`: the caller's ranges, or nullopt for a single id.
/// `subuid` without a range or the tools is an external error saying what to do.
Result<std::optional<SubordinateIds>> choose_subordinate_ids(UsernsMode mode);

} // namespace lockstep::runner
