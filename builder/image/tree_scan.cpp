#include "builder/image/tree_scan.hpp"

#include "support/base/interrupt.hpp"
#include "support/system/fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace lockstep::builder {

namespace {

// A directory waiting to be scanned: opened relative to its parent's fd (one name to look up,
// not a whole path), which stays open until all its subdirectories are opened.
struct PendingDir {
  std::shared_ptr<UniqueFd> parent;
  std::string name;
  std::string path;
};

// Lists and lstat()s one directory; returns its fd for opening the subdirectories.
Result<std::vector<ScannedEntry>> scan_directory(const PendingDir& dir, std::shared_ptr<UniqueFd>& fd_out) {
  const std::string& path = dir.path;
  constexpr int k_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int fd = dir.parent ? ::openat(dir.parent->get(), dir.name.c_str(), k_flags) : -1;
  if (fd < 0) {
    fd = ::open(path.c_str(), k_flags);
  }
  if (fd < 0) {
    return errno_error("can't open directory " + path, errno);
  }
  fd_out = std::make_shared<UniqueFd>(fd);
  std::vector<ScannedEntry> out;
  alignas(8) char buf[32768];
  for (;;) {
    ssize_t n = ::getdents64(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno_error("can't read directory " + path, errno);
    }
    if (n == 0) {
      break;
    }
    for (ssize_t off = 0; off < n;) {
      auto* de = reinterpret_cast<struct dirent64*>(buf + off);
      off += de->d_reclen;
      std::string_view name = de->d_name;
      if (name == "." || name == "..") {
        continue;
      }
      ScannedEntry& e = out.emplace_back();
      e.name = std::string(name);
      if (::fstatat(fd, de->d_name, &e.st, AT_SYMLINK_NOFOLLOW) != 0) {
        return errno_error("can't stat " + path + "/" + e.name, errno);
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ScannedEntry& a, const ScannedEntry& b) { return a.name < b.name; });
  return out;
}

// A shared queue of directories; workers add the subdirectories they find.
class Scanner {
public:
  explicit Scanner(std::unordered_map<std::string, std::vector<ScannedEntry>>& out) : m_out(out) {}

  void run(const std::string& root, unsigned threads) {
    m_pending.push_back(PendingDir{nullptr, root, root});
    std::vector<std::thread> workers;
    for (unsigned i = 1; i < threads; ++i) {
      workers.emplace_back([this] { work(); });
    }
    work();
    for (auto& t : workers) {
      t.join();
    }
  }

  std::optional<Error> error;

private:
  void work() {
    std::unique_lock lock(m_mutex);
    for (;;) {
      m_cv.wait(lock, [this] { return !m_pending.empty() || m_active == 0 || error; });
      if (error || (m_pending.empty() && m_active == 0)) {
        m_cv.notify_all();
        return;
      }
      // Last in, first out: the frontier (and the parent fds it holds open) stays small.
      PendingDir dir = std::move(m_pending.back());
      m_pending.pop_back();
      ++m_active;
      lock.unlock();
      std::shared_ptr<UniqueFd> fd;
      Result<std::vector<ScannedEntry>> listing =
          interrupted() ? Result<std::vector<ScannedEntry>>(check_interrupted().error())
                        : scan_directory(dir, fd);
      dir.parent.reset();
      std::vector<PendingDir> subdirs;
      if (listing) {
        for (const auto& e : *listing) {
          if (S_ISDIR(e.st.st_mode)) {
            subdirs.push_back(PendingDir{fd, e.name, dir.path + "/" + e.name});
          }
        }
      }
      lock.lock();
      --m_active;
      if (!listing) {
        if (!error) {
          error = std::move(listing).error();
        }
      } else {
        m_out.emplace(std::move(dir.path), std::move(*listing));
        for (auto& s : subdirs) {
          m_pending.push_back(std::move(s));
        }
      }
      m_cv.notify_all();
    }
  }

  std::unordered_map<std::string, std::vector<ScannedEntry>>& m_out;
  std::vector<PendingDir> m_pending;
  std::size_t m_active = 0;
  std::mutex m_mutex;
  std::condition_variable m_cv;
};

} // namespace

Result<TreeScan> TreeScan::scan(const std::string& root, unsigned threads) {
  TreeScan result;
  Scanner scanner(result.m_dirs);
  scanner.run(root, threads == 0 ? 1 : threads);
  if (scanner.error) {
    return *scanner.error;
  }
  return result;
}

const std::vector<ScannedEntry>* TreeScan::listing(const std::string& path) const {
  auto it = m_dirs.find(path);
  return it == m_dirs.end() ? nullptr : &it->second;
}

} // namespace lockstep::builder
