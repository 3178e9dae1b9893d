#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace lockstep::test {

namespace fs = std::filesystem;

std::string ar_archive(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out = "!<arch>\n";
  for (const auto& [name, data] : members) {
    out += fmt::format("{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n", name, 0, 0, 0, 100644, data.size());
    out += data;
    if (data.size() % 2 != 0) {
      out += '\n';
    }
  }
  return out;
}

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

ScopedEnv::ScopedEnv(const char* name, const char* value) : m_name(name) {
  if (const char* old = std::getenv(name)) {
    m_old = old;
  }
  if (value != nullptr) {
    ::setenv(name, value, 1);
  } else {
    ::unsetenv(name);
  }
}

ScopedEnv::~ScopedEnv() {
  if (m_old) {
    ::setenv(m_name, m_old->c_str(), 1);
  } else {
    ::unsetenv(m_name);
  }
}

fs::path source_dir() {
  return LOCKSTEP_SOURCE_DIR;
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

std::size_t count_files(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    n += e.is_regular_file() ? 1 : 0;
  }
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

std::string run_python(const fs::path& script, const std::vector<std::string>& args, ExitCheck check) {
  std::string cmd = "python3 " + script.string();
  for (const std::string& arg : args) {
    cmd += " " + arg;
  }
  return run_command(cmd, check);
}

std::string python_packaging(std::initializer_list<const char*> submodules) {
  if (!have_tool("python3")) {
    return {};
  }
  for (const char* module : {"packaging", "pip._vendor.packaging"}) {
    std::string imports;
    for (const char* sub : submodules) {
      imports += (imports.empty() ? "" : ", ") + std::string(module) + "." + sub;
    }
    if (run_command("python3 -c 'import " + imports + "' >/dev/null 2>&1 && echo yes", ExitCheck::ignore) ==
        "yes\n") {
      return module;
    }
  }
  return {};
}

} // namespace lockstep::test
