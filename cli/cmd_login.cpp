// `lockstep login HOST` and `lockstep logout HOST`: registry credentials in containers' auth.json,
// written as podman writes it (docs/registry.md, "Credentials").
#include "cli/cli.hpp"
#include "support/base/json.hpp"
#include "support/base/text.hpp"
#include "support/oci/oci.hpp"
#include "support/registry/client.hpp"
#include "support/registry/credentials.hpp"
#include "support/system/fs.hpp"

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

namespace lockstep::cli {

namespace {

constexpr const char* k_login_footer = R"(Examples:
  lockstep login registry.example.com -u ci --password-stdin < token.txt
  echo "$TOKEN" | lockstep login ghcr.io -u octocat   stdin is not a terminal: one line is the password
  lockstep login quay.io/team -u robot               a namespace: used for quay.io/team/* only
  lockstep login 127.0.0.1:5000                      on a terminal: asks for the user name and password

The credential is written to $REGISTRY_AUTH_FILE, else $XDG_RUNTIME_DIR/containers/auth.json, else
~/.config/containers/auth.json (mode 0600; other entries are kept), where podman, skopeo and buildah
find it too. It is never printed. docs/registry.md, "Credentials", says where lockstep looks for
credentials and which one wins.)";

constexpr const char* k_logout_footer = R"(Examples:
  lockstep logout registry.example.com
  lockstep logout quay.io/team
  lockstep logout --all                 every registry in the file login writes

Only the file login writes is changed; credentials in ~/.docker/config.json stay (docker logout
removes those). Exit codes: 0 removed, 1 not logged in there, 2/3/4 as for every command.)";

struct LoginArgs {
  std::string host;
  std::string username;
  bool password_stdin = false;
};

struct LogoutArgs {
  std::string host;
  bool all = false;
};

// Reads one line from stdin without its line ending; with `echo` false and stdin a terminal, the
// typed characters are not shown.
Result<std::string> read_line(bool echo) {
  termios saved{};
  const bool hide = !echo && ::isatty(STDIN_FILENO) != 0 && ::tcgetattr(STDIN_FILENO, &saved) == 0;
  if (hide) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  std::string line;
  const bool got = static_cast<bool>(std::getline(std::cin, line));
  if (hide) {
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    std::fputc('\n', stderr);
  }
  if (!got && line.empty()) {
    return invalid_input("stdin ended before a line was read");
  }
  return std::string(trim_chars(line, "\r"));
}

// All of stdin, without trailing line endings (`--password-stdin`, as podman reads it).
std::string read_all_stdin() {
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

Result<ExitCode> run_login(const LoginArgs& args, const Context& ctx) {
  const bool terminal = ::isatty(STDIN_FILENO) != 0;
  registry::Credential credential;
  credential.username = args.username;
  if (credential.username.empty()) {
    if (!terminal || args.password_stdin) {
      return invalid_input(
          "give the user name with --username (stdin is not a terminal or holds the password)");
    }
    std::fputs("Username: ", stderr);
    LS_TRY_ASSIGN(credential.username, read_line(true));
  }
  if (credential.username.empty()) {
    return invalid_input("empty user name: give it with --username");
  }
  if (args.password_stdin) {
    credential.secret = read_all_stdin();
  } else {
    if (terminal) {
      std::fputs("Password: ", stderr);
    }
    LS_TRY_ASSIGN(credential.secret, read_line(false));
  }
  if (credential.secret.empty()) {
    return invalid_input("empty password for {}: give it on stdin (nothing was stored)",
                         escape_controls(args.host));
  }
  const registry::AuthFiles files = registry::AuthFiles::from_environment();
  // The credential must work before it is stored.
  oci::RegistryRef ref;
  const std::size_t slash = args.host.find('/');
  ref.host = args.host.substr(0, slash);
  if (ref.host == "index.docker.io" || ref.host == "registry-1.docker.io") {
    ref.host = std::string(oci::k_docker_hub);
  }
  if (!oci::valid_registry_host(ref.host)) {
    return invalid_input("'{}' is not a registry host (HOST[:PORT][/NAMESPACE])", escape_controls(args.host));
  }
  LS_TRY(registry::check_login(ref, credential, registry::default_client_options()));
  LS_TRY(registry::store_credential(files, args.host, credential));
  if (ctx.json) {
    nlohmann::json out = {
        {"registry", args.host}, {"username", credential.username}, {"auth_file", files.login_file.string()}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (!ctx.quiet) {
    std::printf("Login Succeeded: %s as %s (stored in %s)\n", escape_controls(args.host).c_str(),
                escape_controls(credential.username).c_str(), files.login_file.c_str());
  }
  return ExitCode::ok;
}

// The keys of the `auths` object of the file login writes (none when it does not exist).
Result<std::vector<std::string>> logged_in_keys(const registry::AuthFiles& files) {
  std::error_code ec;
  if (files.login_file.empty() || !std::filesystem::exists(files.login_file, ec)) {
    return std::vector<std::string>();
  }
  LS_TRY_ASSIGN(std::string text, read_file(files.login_file, 4ULL << 20));
  if (trim(text).empty()) {
    return std::vector<std::string>();
  }
  LS_TRY_ASSIGN(nlohmann::json doc, parse_json(text, files.login_file.string()));
  std::vector<std::string> keys;
  if (doc.is_object() && doc.contains("auths") && doc["auths"].is_object()) {
    for (const auto& [key, entry] : doc["auths"].items()) {
      keys.push_back(key);
    }
  }
  return keys;
}

Result<ExitCode> run_logout(const LogoutArgs& args, const Context& ctx) {
  const registry::AuthFiles files = registry::AuthFiles::from_environment();
  std::vector<std::string> removed;
  if (args.all) {
    LS_TRY_ASSIGN(std::vector<std::string> keys, logged_in_keys(files));
    for (const std::string& key : keys) {
      LS_TRY_ASSIGN(bool gone, registry::remove_credential(files, key));
      if (gone) {
        removed.push_back(key);
      }
    }
  } else {
    LS_TRY_ASSIGN(bool gone, registry::remove_credential(files, args.host));
    if (!gone) {
      return Error{ExitCode::check_failed,
                   fmt::format("not logged in to {}: {} has no entry for it", escape_controls(args.host),
                               files.login_file.string())};
    }
    removed.push_back(args.host);
  }
  if (ctx.json) {
    nlohmann::json out = {{"removed", removed}, {"auth_file", files.login_file.string()}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (!ctx.quiet) {
    for (const std::string& key : removed) {
      std::printf("Removed login credentials for %s\n", escape_controls(key).c_str());
    }
  }
  return ExitCode::ok;
}

} // namespace

void register_login(CLI::App& app, Context& ctx) {
  auto login = std::make_shared<LoginArgs>();
  auto* cmd = app.add_subcommand("login", "Store credentials for a registry (containers' auth.json)");
  cmd->add_option("HOST", login->host, "The registry: HOST[:PORT], or HOST[:PORT]/NAMESPACE")->required();
  cmd->add_option("-u,--username", login->username, "The user name (asked for on a terminal when not given)")
      ->type_name("USER");
  cmd->add_flag("--password-stdin", login->password_stdin,
                "Read the password (or token) from stdin, all of it, trailing newlines removed");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_login_footer);
  cmd->callback([login, &ctx] { ctx.action = [login, &ctx] { return run_login(*login, ctx); }; });

  auto logout = std::make_shared<LogoutArgs>();
  auto* out = app.add_subcommand("logout", "Remove the credentials login stored for a registry");
  auto* host = out->add_option("HOST", logout->host, "The registry: HOST[:PORT], or HOST[:PORT]/NAMESPACE");
  auto* all = out->add_flag("--all", logout->all, "Remove every registry's credentials from that file");
  host->excludes(all);
  add_common_flags(*out, ctx);
  out->footer(k_logout_footer);
  out->callback([logout, &ctx] {
    ctx.action = [logout, &ctx]() -> Result<ExitCode> {
      if (logout->host.empty() && !logout->all) {
        return invalid_input("logout: name a registry (HOST) or give --all");
      }
      return run_logout(*logout, ctx);
    };
  });
}

} // namespace lockstep::cli
