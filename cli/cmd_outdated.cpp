// `lockstep outdated`: what the repositories offer now over the lock, per package, the security
// updates marked; exit 1 when anything moved (for CI). The comparison is builder/lock/relock.cpp's.
#include "builder/lock/relock.hpp"
#include "cli/cli.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace lockstep::cli {

namespace {

constexpr const char* k_examples = R"(Examples:
  lockstep outdated                       ./lockstep.yaml's lock against its repositories now
  lockstep outdated --json                the same as JSON, for CI
  lockstep outdated gpu/cuda.lock         that lock against its spec, gpu/cuda.yaml
  lockstep outdated gpu/lockstep.yaml --lock gpu/cuda.lock
Every index is read again and the spec resolved afresh, as `lockstep lock --update` would, but
nothing is written. Debian packages say which suite the newer version is in; those from a security
suite or archive (bookworm-security, jammy-security, security.debian.org) are marked. The image base
is outdated when its reference names another manifest now.

Exit codes: 0 nothing moved, 1 something did (the list says what), 2 a bad spec or no lock, 3 a
repository could not be read.)";

std::string shown(const std::string& version) {
  return version.empty() ? "-" : version;
}

Result<ExitCode> run_outdated(const builder::RelockRequest& args, const Context& ctx) {
  LS_TRY_ASSIGN(const builder::OutdatedReport report, builder::outdated(args));
  const auto security =
      static_cast<std::size_t>(std::count_if(report.entries.begin(), report.entries.end(),
                                             [](const builder::OutdatedEntry& e) { return e.security; }));
  if (ctx.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const builder::OutdatedEntry& e : report.entries) {
      nlohmann::ordered_json j{
          {"kind", e.kind}, {"name", e.name}, {"locked", e.locked}, {"available", e.available}};
      if (!e.suite.empty()) {
        j["suite"] = e.suite;
      }
      j["security"] = e.security;
      list.push_back(std::move(j));
    }
    nlohmann::ordered_json out{{"lock", report.lock_path.string()},
                               {"outdated", report.entries.size()},
                               {"security", security},
                               {"packages", std::move(list)}};
    std::printf("%s\n", out.dump(2).c_str());
  } else if (report.entries.empty()) {
    std::printf("%s is up to date with its repositories\n", report.lock_path.string().c_str());
  } else {
    for (const builder::OutdatedEntry& e : report.entries) {
      std::printf("%s\n", fmt::format("{:<6} {:<30} {} -> {}{}{}", e.kind, e.name, shown(e.locked),
                                      shown(e.available), e.suite.empty() ? "" : "  " + e.suite,
                                      e.security ? "  (security)" : "")
                              .c_str());
    }
    std::printf("%s\n", fmt::format("{} outdated in {}{}; `lockstep lock --update` moves everything, "
                                    "`lockstep lock --update NAME` one package",
                                    report.entries.size(), report.lock_path.string(),
                                    security == 0 ? ""
                                                  : fmt::format(" ({} security update{})", security,
                                                                security == 1 ? "" : "s"))
                            .c_str());
  }
  return report.entries.empty() ? ExitCode::ok : ExitCode::check_failed;
}

} // namespace

void register_outdated(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<builder::RelockRequest>();
  auto* cmd = app.add_subcommand("outdated", "What the repositories offer now over the lock, per package");
  auto path = std::make_shared<std::string>();
  cmd->add_option(
         "PATH", *path,
         "The spec file, or its lock (a .lock file: the spec is the .yaml of the same name beside it)")
      ->type_name("SPEC|LOCK");
  cmd->add_option("--lock", args->lock, "The lockfile (default: the spec's name with .lock)")
      ->type_name("FILE");
  cmd->add_flag("--allow-outside", args->allow_outside,
                "Allow host paths the spec reads (extends, copy, local repositories) outside its directory");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, path, &ctx] {
    if (path->ends_with(".lock")) {
      // `lockstep outdated gpu.lock`: the lock's spec is gpu.yaml (or gpu.yml) beside it.
      if (!args->lock.empty()) {
        throw CLI::ValidationError("PATH is a lock and --lock names another; give one of them");
      }
      args->lock = *path;
      std::filesystem::path spec = std::filesystem::path(*path).replace_extension(".yaml");
      if (std::error_code ec; !std::filesystem::exists(spec, ec)) {
        std::filesystem::path yml = std::filesystem::path(*path).replace_extension(".yml");
        spec = std::filesystem::exists(yml, ec) ? yml : spec;
      }
      args->spec = spec.string();
    } else if (!path->empty()) {
      args->spec = *path;
    }
    ctx.action = [args, &ctx] { return run_outdated(*args, ctx); };
  });
}

} // namespace lockstep::cli
