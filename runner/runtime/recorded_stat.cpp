#include "runner/runtime/recorded_stat.hpp"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <charconv>

namespace lockstep::runner {

namespace {

constexpr std::size_t k_max_text = 96;

bool parse_number(std::string_view s, std::uint32_t& out, int base = 10) {
  if (s.empty() || s.size() > 10) {
    return false;
  }
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size() || v > 0xFFFFFFFEULL) {
    return false;
  }
  out = static_cast<std::uint32_t>(v);
  return true;
}

Error malformed(std::string_view text, std::string_view why) {
  return Error{ExitCode::invalid_input,
               fmt::format("malformed {} xattr '{}': {}", k_recorded_stat_xattr, text, why)};
}

} // namespace

std::string RecordedStat::text() const {
  std::string s;
  auto field = [&](const std::string& f) {
    if (!s.empty()) {
      s += ' ';
    }
    s += f;
  };
  if (owner) {
    field(fmt::format("owner={}:{}", owner->first, owner->second));
  }
  if (mode) {
    field(fmt::format("mode={:04o}", *mode & 07777));
  }
  if (device) {
    field(fmt::format("dev={}:{}:{}", device->type, device->major, device->minor));
  }
  return s;
}

Result<RecordedStat> RecordedStat::parse(std::string_view text) {
  if (text.size() > k_max_text) {
    return malformed(text.substr(0, k_max_text), "too long");
  }
  RecordedStat r;
  int last = -1;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const std::string_view f = text.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t eq = f.find('=');
    if (eq == std::string_view::npos) {
      return malformed(text, "a field without '='");
    }
    const std::string_view key = f.substr(0, eq);
    const std::string_view value = f.substr(eq + 1);
    const int order = key == "owner" ? 0 : key == "mode" ? 1 : key == "dev" ? 2 : -1;
    if (order < 0) {
      return malformed(text, fmt::format("unknown field '{}'", key));
    }
    if (order <= last) {
      return malformed(text, "fields repeated or out of order");
    }
    last = order;
    if (order == 0) {
      const std::size_t colon = value.find(':');
      std::uint32_t uid = 0;
      std::uint32_t gid = 0;
      if (colon == std::string_view::npos || !parse_number(value.substr(0, colon), uid) ||
          !parse_number(value.substr(colon + 1), gid)) {
        return malformed(text, "owner is not UID:GID");
      }
      r.owner = std::pair{uid, gid};
    } else if (order == 1) {
      std::uint32_t m = 0;
      if (value.size() != 4 || !parse_number(value, m, 8) || m > 07777) {
        return malformed(text, "mode is not four octal digits");
      }
      r.mode = static_cast<mode_t>(m);
    } else {
      Device d;
      if (value.size() < 5 || (value[0] != 'c' && value[0] != 'b') || value[1] != ':') {
        return malformed(text, "dev is not c:MAJ:MIN or b:MAJ:MIN");
      }
      d.type = value[0];
      const std::string_view nums = value.substr(2);
      const std::size_t colon = nums.find(':');
      if (colon == std::string_view::npos || !parse_number(nums.substr(0, colon), d.major) ||
          !parse_number(nums.substr(colon + 1), d.minor) || d.major > 0xFFF || d.minor > 0xFFFFF) {
        return malformed(text, "dev is not c:MAJ:MIN or b:MAJ:MIN");
      }
      r.device = d;
    }
  }
  return r;
}

mode_t caller_mode(mode_t image_mode, bool is_dir) {
  mode_t mode = image_mode & 07777 & ~static_cast<mode_t>(S_ISUID | S_ISGID);
  return mode | (is_dir ? S_IRWXU : (S_IRUSR | S_IWUSR));
}

RecordedStat image_record(std::uint32_t uid, std::uint32_t gid, mode_t mode, bool is_dir) {
  RecordedStat r;
  if (uid != 0 || gid != 0) {
    r.owner = std::pair{uid, gid};
  }
  mode &= 07777;
  if (caller_mode(mode, is_dir) != mode) {
    r.mode = mode;
  }
  return r;
}

namespace {

Result<std::optional<RecordedStat>> parse_read(const char* buf, ssize_t n, int err, const std::string& what) {
  if (n < 0) {
    if (err == ENODATA || err == ENOTSUP || err == EPERM) {
      return std::optional<RecordedStat>{};
    }
    if (err == ERANGE) {
      return malformed(what, "too long");
    }
    return errno_error("can't read the " + std::string(k_recorded_stat_xattr) + " xattr of " + what, err);
  }
  LS_TRY_ASSIGN(RecordedStat r, RecordedStat::parse(std::string_view(buf, static_cast<std::size_t>(n))));
  return std::optional<RecordedStat>{r};
}

} // namespace

Result<std::optional<RecordedStat>> read_recorded_stat(int fd) {
  char buf[k_max_text + 1];
  ssize_t n = ::fgetxattr(fd, k_recorded_stat_xattr, buf, sizeof buf);
  return parse_read(buf, n, errno, fmt::format("fd {}", fd));
}

Result<std::optional<RecordedStat>> read_recorded_stat(const std::string& path) {
  char buf[k_max_text + 1];
  ssize_t n = ::lgetxattr(path.c_str(), k_recorded_stat_xattr, buf, sizeof buf);
  return parse_read(buf, n, errno, path);
}

Result<void> write_recorded_stat(int fd, const RecordedStat& stat) {
  if (stat.empty()) {
    if (::fremovexattr(fd, k_recorded_stat_xattr) != 0 && errno != ENODATA) {
      return errno_error(fmt::format("can't remove the {} xattr", k_recorded_stat_xattr), errno);
    }
    return {};
  }
  const std::string text = stat.text();
  if (::fsetxattr(fd, k_recorded_stat_xattr, text.data(), text.size(), 0) != 0) {
    const int err = errno;
    return errno_error(fmt::format("can't record '{}' in the {} xattr{}", text, k_recorded_stat_xattr,
                                   err == ENOTSUP ? " (the filesystem has no user xattrs; put "
                                                    "LOCKSTEP_CACHE on ext4, xfs, btrfs or tmpfs)"
                                                  : ""),
                       err);
  }
  return {};
}

} // namespace lockstep::runner
