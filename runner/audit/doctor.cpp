// `lockstep doctor`'s entry points (doctor.hpp): the options from the environment, and a capture
// as a list of passes: open the root (root_fs), read the host (host_facts), read the Python
// environment (python_env), bound the warnings. The snapshot's JSON is in snapshot.cpp, the
// target's verdict and the report in doctor_report.cpp.
#include "runner/audit/doctor.hpp"

#include "runner/audit/doctor_text.hpp"
#include "runner/audit/python_env.hpp"
#include "runner/audit/root_fs.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace lockstep::runner {

namespace fs = std::filesystem;
using namespace doctor_detail; // doctor's internals (doctor_text.hpp, root_fs.hpp, host_facts.hpp,
                               // python_env.hpp)

// ---------------------------------------------------------------------------------------------
// Capturing

DoctorOptions doctor_options_from_env() {
  DoctorOptions options;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  options.virtual_env = env("VIRTUAL_ENV");
  options.conda_prefix = env("CONDA_PREFIX");
  options.path_list = env("PATH");
  if (options.path_list.empty()) {
    options.path_list = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  }
  return options;
}

Result<Capture> capture(const DoctorOptions& options) {
  log::Timer timer("doctor: capture");
  std::error_code ec;
  if (!fs::is_directory(options.host_root, ec)) {
    return invalid_input("--host-root {}: not a directory", options.host_root.string());
  }
  LS_TRY_ASSIGN(const RootFs root, RootFs::open(fs::absolute(options.host_root, ec).lexically_normal()));
  Capture c;
  c.snapshot.tool = fmt::format("lockstep {}", k_version);
  c.snapshot.host = probe_host_facts(root, options, c);
  LS_TRY_ASSIGN(c.snapshot.python, read_python(root, options, c));
  for (std::string& w : c.warnings) {
    w = printable_ascii(w, 2 * k_max_text);
  }
  return c;
}

Result<std::optional<PythonEnv>> capture_python(const DoctorOptions& options,
                                                std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!fs::is_directory(options.host_root, ec)) {
    return invalid_input("--host-root {}: not a directory", options.host_root.string());
  }
  LS_TRY_ASSIGN(const RootFs root, RootFs::open(fs::absolute(options.host_root, ec).lexically_normal()));
  Capture c;
  LS_TRY_ASSIGN(std::optional<PythonEnv> env, read_python(root, options, c));
  warnings = std::move(c.warnings);
  return env;
}

} // namespace lockstep::runner
