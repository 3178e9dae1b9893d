// Files inside the captured root (root_fs.hpp): openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS),
// or openat joined to the root before Linux 5.6.
#include "runner/audit/root_fs.hpp"

#include "runner/audit/doctor_text.hpp"
#include "support/base/text.hpp"

#include <dirent.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace lockstep::runner::doctor_detail {

namespace fs = std::filesystem;

Result<RootFs> RootFs::open(const fs::path& root) {
  LS_TRY_ASSIGN(UniqueFd fd, open_file(root, O_PATH | O_DIRECTORY));
  std::error_code ec;
  const bool live = fs::equivalent(root, "/", ec);
  return RootFs(std::move(fd), root, live);
}

std::string RootFs::shown(std::string_view path) const {
  if (m_live) {
    return std::string(path);
  }
  return (m_root / std::string(path).substr(path.starts_with('/') ? 1 : 0)).string();
}

Result<UniqueFd> RootFs::open_at(std::string_view path, int flags) const {
  std::string rel(path);
  rel.erase(0, rel.find_first_not_of('/'));
  if (rel.empty()) {
    rel = ".";
  }
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd = -1;
  do {
    fd = ::syscall(SYS_openat2, m_fd.get(), rel.c_str(), &how, sizeof how);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == ENOSYS) {
    fd = ::openat(m_fd.get(), rel.c_str(), flags | O_CLOEXEC);
  }
  if (fd < 0) {
    return errno_error("can't open " + shown(path), errno);
  }
  return UniqueFd(static_cast<int>(fd));
}

Result<std::string> RootFs::read(std::string_view path, std::size_t limit, bool whole) const {
  LS_TRY_ASSIGN(UniqueFd fd, open_at(path, O_RDONLY | O_NOCTTY | O_NONBLOCK));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_error("can't stat " + shown(path), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("{} is not a regular file", shown(path));
  }
  std::string out(std::min<std::size_t>(limit + 1, 1 << 16), '\0');
  std::size_t used = 0;
  while (true) {
    if (used == out.size()) {
      if (out.size() > limit) {
        break;
      }
      out.resize(std::min(out.size() * 2, limit + 1));
    }
    LS_TRY_ASSIGN(const std::size_t n,
                  read_some(fd.get(), out.data() + used, out.size() - used, shown(path)));
    if (n == 0) {
      break;
    }
    used += n;
  }
  if (used > limit) {
    if (whole) {
      return invalid_input("{} is larger than {} bytes", shown(path), limit);
    }
    used = limit;
  }
  out.resize(used);
  return out;
}

std::string RootFs::first_line_of(std::string_view path) const {
  Result<std::string> text = read(path, 4096, false);
  return text ? printable_ascii(first_line(*text), k_max_text) : std::string();
}

std::optional<std::vector<std::string>> RootFs::list(std::string_view path, bool& truncated) const {
  truncated = false;
  Result<UniqueFd> fd = open_at(path, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    return std::nullopt;
  }
  DIR* dir = ::fdopendir(fd->get());
  if (dir == nullptr) {
    return std::nullopt;
  }
  fd->release();
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") {
      continue;
    }
    if (names.size() == k_max_dir_entries) {
      truncated = true;
      break;
    }
    names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string join(std::string_view a, std::string_view b) {
  std::string out(a);
  if (out.empty() || out.back() != '/') {
    out += '/';
  }
  out += b;
  return out;
}

} // namespace lockstep::runner::doctor_detail
