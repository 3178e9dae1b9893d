#pragma once
// Shared fixtures for unit tests.
#include "support/compress.hpp"

#include <filesystem>
#include <string>

namespace lockstep::test {

/// A ByteSink that keeps everything written to it.
class StringSink final : public ByteSink {
public:
  void write(const void* data, std::size_t size) override {
    out.append(static_cast<const char*>(data), size);
  }
  std::string out;
};

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

/// Reads a whole file.
std::string slurp(const std::filesystem::path& p);

/// Whether run_command() checks the command's exit status.
enum class ExitCheck { must_succeed, ignore };
/// Runs a shell command line and returns its stdout (stderr goes to the test log); with
/// ExitCheck::must_succeed a non-zero exit fails the test.
std::string run_command(const std::string& cmd, ExitCheck check = ExitCheck::must_succeed);
/// True if `tool` is on the PATH.
bool have_tool(const char* tool);

} // namespace lockstep::test
