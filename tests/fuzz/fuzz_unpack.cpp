// Fuzz target for the layer unpacker: apply_tar_bytes() on arbitrary bytes, into a fresh root beside
// an "outside" directory holding a canary. Whatever the input, nothing may appear, change or be
// linked outside the root, the root must stay a directory, and remove_tree() must be able to remove
// it afterwards. A violation aborts (libFuzzer then saves the input).
//
// Built twice (tests/CMakeLists.txt): with clang -fsanitize=fuzzer,address as a libFuzzer binary
// (-DLOCKSTEP_FUZZ=ON), and with replay_main.cpp as a plain driver that ctest runs over the seed
// corpus in tests/fuzz/corpus/unpack/.
#include "runner/runtime/unpack.hpp"
#include "tests/fuzz/tar_checksums.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;
using lockstep::runner::UnpackOptions;

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz_unpack: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

struct stat lstat_or_die(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) {
    violation("can't lstat " + p.string());
  }
  return st;
}

// A per-process directory: BASE/root (recreated for each input) and BASE/outside/canary.
class Sandbox {
public:
  Sandbox() {
    std::string templ = (fs::temp_directory_path() / "lockstep-fuzz-XXXXXX").string();
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      violation("can't create a temporary directory");
    }
    m_base = buf.data();
    m_root = m_base / "root";
    m_outside = m_base / "outside";
    m_canary = m_outside / "canary";
    if (::mkdir(m_outside.c_str(), 0755) != 0 || ::chmod(m_outside.c_str(), 0755) != 0) {
      violation("can't create " + m_outside.string());
    }
    int fd = ::open(m_canary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, "canary", 6) != 6 || ::fchmod(fd, 0644) != 0) {
      violation("can't create " + m_canary.string());
    }
    ::close(fd);
    m_canary_st = lstat_or_die(m_canary);
    m_outside_st = lstat_or_die(m_outside);
  }
  ~Sandbox() { (void)lockstep::runner::remove_tree(m_base); }
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  void run(std::string_view input) {
    if (::mkdir(m_root.c_str(), 0755) != 0) {
      violation("can't create " + m_root.string());
    }
    int root_fd = ::open(m_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
      violation("can't open " + m_root.string());
    }
    UnpackOptions options;
    options.max_bytes = 64ULL << 20;
    // Both ownership policies get exercised (keep needs root); the choice is a function of the input.
    bool keep = ::geteuid() == 0 && !input.empty() && (static_cast<unsigned char>(input.back()) & 1U) != 0;
    options.ownership = keep ? UnpackOptions::Ownership::keep : UnpackOptions::Ownership::caller;
    (void)lockstep::runner::apply_tar_bytes(root_fd, lockstep::fuzz::with_valid_checksums(input), options);
    ::close(root_fd);
    check_outside();
    auto removed = lockstep::runner::remove_tree(m_root);
    if (!removed) {
      violation("remove_tree failed: " + removed.error().message);
    }
  }

private:
  void check_outside() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(m_base)) {
      names.push_back(e.path().filename().string());
    }
    if (names.size() != 2) {
      violation("something was created beside the root");
    }
    if (!S_ISDIR(lstat_or_die(m_root).st_mode)) {
      violation("the root is no longer a directory");
    }
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(m_outside)) {
      ++n;
    }
    if (n != 1) {
      violation("something was created in the outside directory");
    }
    struct stat st = lstat_or_die(m_canary);
    if (!S_ISREG(st.st_mode) || st.st_ino != m_canary_st.st_ino || st.st_mode != m_canary_st.st_mode ||
        st.st_nlink != 1 || st.st_uid != m_canary_st.st_uid || st.st_gid != m_canary_st.st_gid ||
        st.st_size != 6 || st.st_mtim.tv_sec != m_canary_st.st_mtim.tv_sec ||
        st.st_mtim.tv_nsec != m_canary_st.st_mtim.tv_nsec) {
      violation("the canary outside the root was changed or linked");
    }
    st = lstat_or_die(m_outside);
    if (st.st_mode != m_outside_st.st_mode || st.st_uid != m_outside_st.st_uid ||
        st.st_mtim.tv_sec != m_outside_st.st_mtim.tv_sec ||
        st.st_mtim.tv_nsec != m_outside_st.st_mtim.tv_nsec) {
      violation("the outside directory was changed");
    }
  }

  fs::path m_base, m_root, m_outside, m_canary;
  struct stat m_canary_st {};
  struct stat m_outside_st {};
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Sandbox sandbox;
  sandbox.run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
