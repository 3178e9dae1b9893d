#pragma once
// Shared fixtures for unit tests.
#include "support/codec/compress.hpp"

#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

/// Fails the test with the error's message when the Result `r` is an error.
#define REQUIRE_OK(r)                                                                                        \
  do {                                                                                                       \
    const auto& ls_r = (r);                                                                                  \
    INFO((ls_r.ok() ? std::string() : ls_r.error().message));                                                \
    REQUIRE(ls_r.ok());                                                                                      \
  } while (false)

namespace lockstep::test {

/// A ByteSink that keeps everything written to it.
class StringSink final : public ByteSink {
public:
  void write(const void* data, std::size_t size) override {
    out.append(static_cast<const char*>(data), size);
  }
  std::string out;
};

/// An ar archive as dpkg-deb writes one (deb(5)'s container), for hand-made hostile packages.
std::string ar_archive(const std::vector<std::pair<std::string, std::string>>& members);

/// A fresh temporary directory per test, removed afterwards.
class TempDirFixture {
public:
  TempDirFixture();
  ~TempDirFixture();
  TempDirFixture(const TempDirFixture&) = delete;
  TempDirFixture& operator=(const TempDirFixture&) = delete;

  [[nodiscard]] const std::filesystem::path& dir() const { return m_dir; }
  /// Writes `content` to dir()/rel (creating parents) and returns the full path.
  std::filesystem::path write(const std::string& rel, const std::string& content) const;

private:
  std::filesystem::path m_dir;
};

/// Sets (or, with nullptr, unsets) an environment variable for one scope, restoring it afterwards.
class ScopedEnv {
public:
  ScopedEnv(const char* name, const char* value);
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
  const char* m_name;
  std::optional<std::string> m_old;
};

/// The source tree the tests were built from (its tests/, recipes/ and docs/ are read by some
/// tests). Defined in test_support.cpp alone, so that no other test's compile line names the
/// checkout's path and a compiler cache serves every other test to a clone in another folder.
std::filesystem::path source_dir();

/// Reads a whole file.
std::string slurp(const std::filesystem::path& p);

/// Whether run_command() checks the command's exit status.
enum class ExitCheck { must_succeed, ignore };
/// Runs a shell command line and returns its stdout (stderr goes to the test log); with
/// ExitCheck::must_succeed a non-zero exit fails the test.
std::string run_command(const std::string& cmd, ExitCheck check = ExitCheck::must_succeed);
/// True if `tool` is on the PATH.
bool have_tool(const char* tool);

/// How many regular files are under `dir`, recursively.
std::size_t count_files(const std::filesystem::path& dir);

/// `text` split into lines at '\n' (a final newline adds no empty line).
std::vector<std::string> lines_of(const std::string& text);

/// Runs `python3 SCRIPT ARGS...` with run_command() and returns its stdout.
std::string run_python(const std::filesystem::path& script, const std::vector<std::string>& args = {},
                       ExitCheck check = ExitCheck::must_succeed);

/// The reference implementation for the PEP 440/508 peer checks: "packaging" (python3's) or the copy
/// pip vendors ("pip._vendor.packaging"), the first in which every one of `submodules` (e.g.
/// "version", "specifiers") imports. Empty when python3 or both are missing; the peer comparisons
/// then only warn.
std::string python_packaging(std::initializer_list<const char*> submodules);

} // namespace lockstep::test
