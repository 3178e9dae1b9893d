#include "support/registry/host_config.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

using namespace lockstep;
using namespace lockstep::registry;
using lockstep::test::ScopedEnv;
using lockstep::test::TempDirFixture;

namespace {

namespace fs = std::filesystem;

HostSettings settings_of(const HostConfigFiles& files, const std::string& host,
                         std::optional<bool> tls_verify = std::nullopt) {
  auto r = host_settings(files, host, tls_verify);
  REQUIRE_OK(r);
  return *r;
}

std::string error_of(const HostConfigFiles& files, const std::string& host) {
  auto r = host_settings(files, host, std::nullopt);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  return r.error().message;
}

} // namespace

TEST_CASE("HostConfigFiles: CONTAINERS_REGISTRIES_CONF replaces the standard locations; LOCKSTEP_CERTS_D is "
          "not support's to read",
          "[host_config]") {
  ScopedEnv conf("CONTAINERS_REGISTRIES_CONF", "/tmp/x/registries.conf");
  ScopedEnv certs("LOCKSTEP_CERTS_D", "/tmp/a::/tmp/b");
  HostConfigFiles files = HostConfigFiles::from_environment();
  CHECK(files.registries_conf == std::vector<fs::path>{"/tmp/x/registries.conf"});
  CHECK(std::find(files.certs_dirs.begin(), files.certs_dirs.end(), fs::path("/tmp/a")) ==
        files.certs_dirs.end());
}

TEST_CASE("HostConfigFiles: the user's registries.conf replaces /etc's, its drop-ins follow in name order",
          "[host_config]") {
  TempDirFixture tmp;
  ScopedEnv conf("CONTAINERS_REGISTRIES_CONF", nullptr);
  ScopedEnv certs("LOCKSTEP_CERTS_D", nullptr);
  ScopedEnv home("HOME", tmp.dir());
  const fs::path user = tmp.dir() / ".config/containers";
  tmp.write(".config/containers/registries.conf.d/20-b.conf", "");
  tmp.write(".config/containers/registries.conf.d/10-a.conf", "");
  tmp.write(".config/containers/registries.conf.d/30-c.txt", "");
  SECTION("without the user's file, /etc's comes first and the user's drop-ins last") {
    HostConfigFiles files = HostConfigFiles::from_environment();
    REQUIRE(files.registries_conf.size() >= 3);
    CHECK(files.registries_conf.front() == "/etc/containers/registries.conf");
    CHECK(std::vector<fs::path>(files.registries_conf.end() - 2, files.registries_conf.end()) ==
          std::vector<fs::path>{user / "registries.conf.d/10-a.conf", user / "registries.conf.d/20-b.conf"});
  }
  SECTION("with it, only it and its drop-ins") {
    tmp.write(".config/containers/registries.conf", "");
    HostConfigFiles files = HostConfigFiles::from_environment();
    CHECK(files.registries_conf == std::vector<fs::path>{user / "registries.conf",
                                                         user / "registries.conf.d/10-a.conf",
                                                         user / "registries.conf.d/20-b.conf"});
  }
  HostConfigFiles files = HostConfigFiles::from_environment();
  const std::vector<fs::path> system = {"/etc/containers/certs.d", "/etc/docker/certs.d"};
  if (::geteuid() == 0) {
    CHECK(files.certs_dirs == system);
  } else {
    CHECK(files.certs_dirs == std::vector<fs::path>{user / "certs.d", system[0], system[1]});
  }
}

TEST_CASE("registries.conf: a [[registry]] with insecure = true makes exactly that HOST:PORT insecure",
          "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.registries_conf = {tmp.dir() / "missing.conf",
                           tmp.write("registries.conf", R"(unqualified-search-registries = ["docker.io"]

[[registry]]
location = "localhost:5000"
insecure = true

[[registry]]
location = "secure.example.com"
insecure = false
)")};
  HostSettings s = settings_of(files, "localhost:5000");
  CHECK(s.insecure);
  CHECK_FALSE(s.tls.verify);
  CHECK(s.insecure_source ==
        (tmp.dir() / "registries.conf").string() + ":3: [[registry]] location=\"localhost:5000\"");
  CHECK_FALSE(settings_of(files, "localhost:5001").insecure);
  CHECK_FALSE(settings_of(files, "localhost").insecure);
  s = settings_of(files, "secure.example.com");
  CHECK_FALSE(s.insecure);
  CHECK(s.tls.verify);
  CHECK(s.insecure_source.empty());
}

TEST_CASE("registries.conf: --tls-verify wins over the file both ways", "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.registries_conf = {
      tmp.write("registries.conf", "[[registry]]\nlocation = \"lab:5000\"\ninsecure = true\n")};
  HostSettings s = settings_of(files, "lab:5000", true);
  CHECK_FALSE(s.insecure);
  CHECK(s.tls.verify);
  s = settings_of(files, "quay.io", false);
  CHECK(s.insecure);
  CHECK_FALSE(s.tls.verify);
  CHECK(s.insecure_source == "--tls-verify=false");
}

TEST_CASE("registries.conf: *.example.com prefixes match subdomains on any port; an exact host beats them",
          "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.registries_conf = {tmp.write("registries.conf", R"(
[[registry]]
prefix = "*.example.com"
insecure = true

[[registry]]
prefix = "*.prod.example.com"
insecure = false

[[registry]]
location = "strict.example.com"
)")};
  CHECK(settings_of(files, "a.example.com").insecure);
  CHECK(settings_of(files, "b.a.example.com:5000").insecure);
  CHECK_FALSE(settings_of(files, "example.com").insecure);
  CHECK_FALSE(settings_of(files, "notexample.com").insecure);
  CHECK_FALSE(settings_of(files, "x.prod.example.com").insecure);
  CHECK_FALSE(settings_of(files, "strict.example.com").insecure);
}

TEST_CASE("registries.conf: path prefixes and location rewrites to another host do not make a host insecure",
          "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.registries_conf = {tmp.write("registries.conf", R"(
[[registry]]
prefix = "team.example.com/ns"
insecure = true

[[registry]]
prefix = "rewritten.example.com"
location = "mirror.local:5000"
insecure = true

[[registry]]
prefix = "same.example.com"
location = "same.example.com/base"
insecure = true
)")};
  CHECK_FALSE(settings_of(files, "team.example.com").insecure);
  CHECK_FALSE(settings_of(files, "rewritten.example.com").insecure);
  CHECK_FALSE(settings_of(files, "mirror.local:5000").insecure);
  CHECK(settings_of(files, "same.example.com").insecure);
}

TEST_CASE("registries.conf: a later drop-in's entry with the same prefix replaces an earlier one",
          "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.registries_conf = {
      tmp.write("registries.conf", "[[registry]]\nlocation = \"a.lab\"\ninsecure = true\n"
                                   "[[registry]]\nlocation = \"b.lab\"\ninsecure = true\n"),
      tmp.write("registries.conf.d/10.conf", "[[registry]]\nlocation = \"a.lab\"\n"),
      tmp.write("registries.conf.d/20.conf", "[[registry]]\nlocation = \"c.lab\"\ninsecure = true\n")};
  CHECK_FALSE(settings_of(files, "a.lab").insecure);
  CHECK(settings_of(files, "b.lab").insecure);
  HostSettings s = settings_of(files, "c.lab");
  CHECK(s.insecure);
  CHECK(s.insecure_source ==
        (tmp.dir() / "registries.conf.d/20.conf").string() + ":1: [[registry]] location=\"c.lab\"");
}

TEST_CASE("registries.conf: the v1 [registries.insecure] list makes its hosts insecure", "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.registries_conf = {tmp.write("registries.conf", R"([registries.search]
registries = ["docker.io"]

[registries.insecure]
registries = ["old.lab:5000", "Other.Lab"]
)")};
  HostSettings s = settings_of(files, "old.lab:5000");
  CHECK(s.insecure);
  CHECK(s.insecure_source ==
        (tmp.dir() / "registries.conf").string() + ":5: [registries.insecure] \"old.lab:5000\"");
  CHECK(settings_of(files, "other.lab").insecure);
  CHECK_FALSE(settings_of(files, "docker.io").insecure);
}

TEST_CASE("registries.conf: malformed files are invalid input located at file, line and column",
          "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  const std::string f = (tmp.dir() / "registries.conf").string();
  auto error_for = [&](const std::string& text) {
    files.registries_conf = {tmp.write("registries.conf", text)};
    return error_of(files, "quay.io");
  };
  CHECK(error_for("[[registry]]\nlocation = \"a\"\ninsecure = yes\n").starts_with(f + ":3:12: "));
  CHECK(error_for("[[registry]]\nlocation = \"a\"\ninsecure = \"true\"\n") ==
        f + ":3:12: [[registry]]: \"insecure\" must be true or false");
  CHECK(error_for("[[registry]]\nlocation = 5\n") ==
        f + ":2:12: [[registry]]: \"location\" must be a string");
  CHECK(error_for("\n[[registry]]\ninsecure = true\n") ==
        f + ":2:1: [[registry]] needs a \"location\" or a \"prefix\"");
  CHECK(error_for("registry = 1\n") == f + ":1:12: \"registry\" must be an array of tables ([[registry]])");
  CHECK(error_for("[registries.insecure]\nregistries = [1]\n") ==
        f + ":2:15: [registries.insecure]: \"registries\" must be an array of hosts");
  CHECK(error_for("[registries.insecure]\nregistries = []\n[[registry]]\nlocation = \"a\"\n")
            .starts_with(f + ":1:1: mixes the v1 [registries.*] tables with v2 [[registry]] tables"));
}

TEST_CASE("certs.d: *.crt files are CAs, a *.cert with its *.key the client pair, in the HOST:PORT directory",
          "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.certs_dirs = {tmp.dir() / "user", tmp.dir() / "system"};
  const fs::path d = tmp.dir() / "system/lab.example.com:5000";
  tmp.write("system/lab.example.com:5000/zz.crt", "x");
  tmp.write("system/lab.example.com:5000/ca.crt", "x");
  tmp.write("system/lab.example.com:5000/client.cert", "x");
  tmp.write("system/lab.example.com:5000/client.key", "x");
  tmp.write("system/lab.example.com:5000/README", "x");
  tmp.write("system/lab.example.com/other.crt", "x");
  HostSettings s = settings_of(files, "lab.example.com:5000");
  CHECK(s.tls.verify);
  CHECK(s.tls.ca_files == std::vector<fs::path>{d / "ca.crt", d / "zz.crt"});
  CHECK(s.tls.client_cert == d / "client.cert");
  CHECK(s.tls.client_key == d / "client.key");
  // The port must match exactly: no directory for :5001, and lab.example.com has its own.
  CHECK(settings_of(files, "lab.example.com:5001").tls == TlsSettings{});
  CHECK(settings_of(files, "lab.example.com").tls.ca_files ==
        std::vector<fs::path>{tmp.dir() / "system/lab.example.com/other.crt"});
  // The first certs.d that has the host's directory is the one used.
  tmp.write("user/lab.example.com:5000/user.crt", "x");
  s = settings_of(files, "lab.example.com:5000");
  CHECK(s.tls.ca_files == std::vector<fs::path>{tmp.dir() / "user/lab.example.com:5000/user.crt"});
  CHECK(s.tls.client_cert.empty());
}

TEST_CASE("certs.d: a client certificate without its key (or a key without its certificate) names both",
          "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.certs_dirs = {tmp.dir()};
  const fs::path d = tmp.dir() / "lab:5000";
  tmp.write("lab:5000/client.cert", "x");
  CHECK(error_of(files, "lab:5000") == d.string() + ": client certificate " + (d / "client.cert").string() +
                                           " has no key " + (d / "client.key").string());
  fs::remove(d / "client.cert");
  tmp.write("lab:5000/other.key", "x");
  CHECK(error_of(files, "lab:5000") == d.string() + ": client key " + (d / "other.key").string() +
                                           " has no certificate " + (d / "other.cert").string());
}

TEST_CASE("host_settings refuses a host that is not HOST[:PORT]", "[host_config]") {
  TempDirFixture tmp;
  HostConfigFiles files;
  files.certs_dirs = {tmp.dir() / "certs.d"};
  tmp.write("secret/x.crt", "x");
  CHECK(error_of(files, "../secret") == "'../secret' is not a registry host (HOST[:PORT])");
  tmp.write("certs.d/x.crt", "x");
  CHECK(error_of(files, "..") == "'..' is not a registry host (HOST[:PORT])");
  CHECK(error_of(files, "..:5000") == "'..:5000' is not a registry host (HOST[:PORT])");
  CHECK(error_of(files, "") == "'' is not a registry host (HOST[:PORT])");
}
