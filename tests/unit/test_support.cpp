#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace lockstep::test {

namespace fs = std::filesystem;

TempDirFixture::TempDirFixture() {
  std::string templ = (fs::temp_directory_path() / "lockstep-unit-XXXXXX").string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed");
  }
  m_dir = buf.data();
}

TempDirFixture::~TempDirFixture() {
  std::error_code ec;
  fs::remove_all(m_dir, ec);
}

fs::path TempDirFixture::write(const std::string& rel, const std::string& content) const {
  fs::path p = m_dir / rel;
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << content;
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string run_command(const std::string& cmd, ExitCheck check) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
    out.append(buf.data(), n);
  }
  const int status = ::pclose(p);
  if (check == ExitCheck::must_succeed) {
    INFO(cmd);
    REQUIRE(status == 0);
  }
  return out;
}

bool have_tool(const char* tool) {
  return std::system(("command -v " + std::string(tool) + " >/dev/null 2>&1").c_str()) == 0;
}

} // namespace lockstep::test
