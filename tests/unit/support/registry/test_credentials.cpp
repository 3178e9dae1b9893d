#include "support/base/json.hpp"
#include "support/codec/base64.hpp"
#include "support/registry/credentials.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

using namespace lockstep;
using namespace lockstep::registry;
using lockstep::test::ScopedEnv;
using lockstep::test::slurp;
using lockstep::test::TempDirFixture;

namespace {

namespace fs = std::filesystem;

oci::RegistryRef ref_of(const std::string& text) {
  auto r = oci::RegistryRef::parse(text);
  REQUIRE_OK(r);
  return *r;
}

std::string auth_entry(const std::string& user, const std::string& password) {
  return R"({"auth":")" + base64_encode(user + ":" + password) + R"("})";
}

// The credential find_credential gives for `ref` (it must succeed).
std::optional<Credential> lookup(const AuthFiles& files, const std::string& ref) {
  auto r = find_credential(files, ref_of(ref));
  REQUIRE_OK(r);
  return *r;
}

// A directory on PATH holding docker-credential-NAME scripts.
class HelperDir {
public:
  explicit HelperDir(const TempDirFixture& tmp)
      : m_dir(tmp.dir() / "bin"), m_path("PATH", path_with(m_dir)) {}

  // A helper that records its arguments and stdin in DIR/NAME.log and runs `body` (sh).
  void add(const std::string& name, const std::string& body) const {
    fs::create_directories(m_dir);
    fs::path script = m_dir / ("docker-credential-" + name);
    std::string text = "#!/bin/sh\nprintf '%s|' \"$@\" > '" + log_of(name).string() + "'\ncat >> '" +
                       log_of(name).string() + "'\n" + body + "\n";
    std::FILE* f = std::fopen(script.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    fs::permissions(script, fs::perms::owner_all);
  }
  [[nodiscard]] fs::path log_of(const std::string& name) const { return m_dir / (name + ".log"); }

private:
  static std::string path_with(const fs::path& dir) {
    const char* old = std::getenv("PATH");
    return dir.string() + ":" + (old != nullptr ? old : "/usr/bin:/bin");
  }
  fs::path m_dir;
  ScopedEnv m_path;
};

} // namespace

TEST_CASE("AuthFiles lists REGISTRY_AUTH_FILE alone when it is set, and login writes it", "[credentials]") {
  ScopedEnv file("REGISTRY_AUTH_FILE", "/somewhere/auth.json");
  ScopedEnv home("HOME", "/home/u");
  AuthFiles files = AuthFiles::from_environment();
  CHECK(files.files == std::vector<fs::path>{"/somewhere/auth.json"});
  CHECK(files.login_file == "/somewhere/auth.json");
}

TEST_CASE(
    "AuthFiles lists containers' files, then Docker's, and login writes under XDG_RUNTIME_DIR when it exists",
    "[credentials]") {
  TempDirFixture tmp;
  ScopedEnv file("REGISTRY_AUTH_FILE", nullptr);
  ScopedEnv home("HOME", tmp.dir() / "home");
  ScopedEnv runtime("XDG_RUNTIME_DIR", tmp.dir() / "run");
  ScopedEnv docker("DOCKER_CONFIG", nullptr);
  const fs::path h = tmp.dir() / "home";
  const std::vector<fs::path> expected = {tmp.dir() / "run/containers/auth.json",
                                          h / ".config/containers/auth.json", h / ".docker/config.json",
                                          h / ".dockercfg"};
  SECTION("the runtime directory does not exist: login writes ~/.config/containers/auth.json") {
    AuthFiles files = AuthFiles::from_environment();
    CHECK(files.files == expected);
    CHECK(files.login_file == h / ".config/containers/auth.json");
  }
  SECTION("the runtime directory exists: login writes there") {
    fs::create_directories(tmp.dir() / "run");
    AuthFiles files = AuthFiles::from_environment();
    CHECK(files.files == expected);
    CHECK(files.login_file == tmp.dir() / "run/containers/auth.json");
  }
  SECTION("DOCKER_CONFIG names Docker's directory") {
    ScopedEnv docker_dir("DOCKER_CONFIG", tmp.dir() / "dc");
    AuthFiles files = AuthFiles::from_environment();
    REQUIRE(files.files.size() == 4);
    CHECK(files.files[2] == tmp.dir() / "dc/config.json");
  }
}

TEST_CASE("find_credential decodes auths.KEY.auth, username/password fields and identitytoken",
          "[credentials]") {
  TempDirFixture tmp;
  AuthFiles files;
  files.files = {tmp.write("auth.json", R"({"auths":{
      "127.0.0.1:5000": )" + auth_entry("ci", "pa:ss") +
                                            R"(,
      "fields.example.com": {"username": "bob", "password": "hunter2"},
      "token.example.com": {"auth": ")" + base64_encode("00000000-0000-0000-0000-000000000000:") +
                                            R"(", "identitytoken": "refresh-me"}}})")};
  auto c = lookup(files, "127.0.0.1:5000/app:1");
  REQUIRE(c);
  CHECK(c->username == "ci");
  CHECK(c->secret == "pa:ss"); // split at the first ':'
  CHECK_FALSE(c->identity_token);
  CHECK(c->source == (tmp.dir() / "auth.json").string() + " (auths \"127.0.0.1:5000\")");
  c = lookup(files, "fields.example.com/x");
  REQUIRE(c);
  CHECK(c->username == "bob");
  CHECK(c->secret == "hunter2");
  c = lookup(files, "token.example.com/x");
  REQUIRE(c);
  CHECK(c->identity_token);
  CHECK(c->secret == "refresh-me");
  CHECK_FALSE(lookup(files, "other.example.com/x"));
}

TEST_CASE("Docker Hub's URL key and host aliases are credentials for docker.io", "[credentials]") {
  TempDirFixture tmp;
  AuthFiles files;
  SECTION("https://index.docker.io/v1/") {
    files.files = {tmp.write("config.json", R"({"auths":{"https://index.docker.io/v1/": )" +
                                                auth_entry("hubuser", "s1") + "}}")};
  }
  SECTION("registry-1.docker.io") {
    files.files = {tmp.write("config.json",
                             R"({"auths":{"registry-1.docker.io": )" + auth_entry("hubuser", "s1") + "}}")};
  }
  SECTION("~/.dockercfg, Docker's old format without \"auths\"") {
    files.files = {
        tmp.write(".dockercfg", R"({"https://index.docker.io/v1/": )" + auth_entry("hubuser", "s1") + "}")};
  }
  auto c = lookup(files, "debian:bookworm");
  REQUIRE(c);
  CHECK(c->username == "hubuser");
  CHECK_FALSE(lookup(files, "quay.io/debian"));
}

TEST_CASE("The most specific key wins: repository over namespace over host, whichever file holds it",
          "[credentials]") {
  TempDirFixture tmp;
  AuthFiles files;
  files.files = {tmp.write("first.json", R"({"auths":{"quay.io": )" + auth_entry("host-user", "a") + "}}"),
                 tmp.write("second.json", R"({"auths":{"quay.io/team": )" + auth_entry("team-user", "b") +
                                              R"(, "https://quay.io/team/app/": )" +
                                              auth_entry("wrong", "url") + R"(, "quay.io/team/app": )" +
                                              auth_entry("app-user", "c") + "}}")};
  CHECK(lookup(files, "quay.io/team/app:1")->username == "app-user");
  CHECK(lookup(files, "quay.io/team/app/sub")->username == "app-user");
  CHECK(lookup(files, "quay.io/team/other")->username == "team-user");
  // Keys compare at '/' boundaries: "quay.io/team" is not a prefix of "quay.io/teamster".
  CHECK(lookup(files, "quay.io/teamster/app")->username == "host-user");
  CHECK(lookup(files, "quay.io/solo")->username == "host-user");
}

TEST_CASE("Within one key the first file in lookup order wins, and an entry without a credential is skipped",
          "[credentials]") {
  TempDirFixture tmp;
  AuthFiles files;
  files.files = {tmp.dir() / "missing.json", tmp.write("marker.json", R"({"auths":{"ghcr.io": {}}})"),
                 tmp.write("empty.json", "\n"),
                 tmp.write("first.json", R"({"auths":{"ghcr.io": )" + auth_entry("first", "1") + "}}"),
                 tmp.write("second.json", R"({"auths":{"ghcr.io": )" + auth_entry("second", "2") + "}}")};
  auto c = lookup(files, "ghcr.io/o/r");
  REQUIRE(c);
  CHECK(c->username == "first");
  files.files = {tmp.dir() / "missing.json"};
  CHECK_FALSE(lookup(files, "ghcr.io/o/r"));
}

TEST_CASE("Credential helpers: credHelpers beats credsStore and auths, gets the server on stdin",
          "[credentials]") {
  TempDirFixture tmp;
  HelperDir helpers(tmp);
  helpers.add("per-host", R"(echo '{"ServerURL":"x","Username":"helper-user","Secret":"helper-secret"}')");
  helpers.add("store", R"(echo '{"ServerURL":"x","Username":"store-user","Secret":"store-secret"}')");
  AuthFiles files;
  files.files = {
      tmp.write("config.json", R"({"credsStore":"store","credHelpers":{"127.0.0.1:5000":"per-host"},
      "auths":{"127.0.0.1:5000": )" +
                                   auth_entry("file-user", "f") + R"(, "other.example.com/ns": )" +
                                   auth_entry("ns-user", "n") + "}}")};
  auto c = lookup(files, "127.0.0.1:5000/app");
  REQUIRE(c);
  CHECK(c->username == "helper-user");
  CHECK(c->secret == "helper-secret");
  CHECK(c->source.find("docker-credential-per-host") != std::string::npos);
  CHECK(c->source.find("credHelpers") != std::string::npos);
  CHECK(slurp(helpers.log_of("per-host")) == "get|127.0.0.1:5000");

  c = lookup(files, "debian");
  REQUIRE(c);
  CHECK(c->username == "store-user");
  CHECK(slurp(helpers.log_of("store")) == "get|https://index.docker.io/v1/");
  // A namespace key in auths is more specific than the host's helper.
  CHECK(lookup(files, "other.example.com/ns/app")->username == "ns-user");
}

TEST_CASE("A helper without a credential falls through; its \"<token>\" user name is an identity token",
          "[credentials]") {
  TempDirFixture tmp;
  HelperDir helpers(tmp);
  helpers.add("none", "echo 'credentials not found in native keychain'; exit 1");
  helpers.add("token", R"(echo '{"ServerURL":"x","Username":"<token>","Secret":"refresh"}')");
  AuthFiles files;
  files.files = {tmp.write("a.json", R"({"credHelpers":{"a.example.com":"none","t.example.com":"token"},
      "auths":{"a.example.com": )" + auth_entry("fallback", "f") +
                                         "}}")};
  CHECK(lookup(files, "a.example.com/x")->username == "fallback");
  auto c = lookup(files, "t.example.com/x");
  REQUIRE(c);
  CHECK(c->identity_token);
  CHECK(c->username.empty());
  CHECK(c->secret == "refresh");
  files.files = {tmp.write("b.json", R"({"credsStore":"none"})")};
  CHECK_FALSE(lookup(files, "a.example.com/x"));
}

TEST_CASE("A missing or failing helper is an error naming the helper and the file that named it",
          "[credentials]") {
  TempDirFixture tmp;
  HelperDir helpers(tmp);
  helpers.add("broken", "echo 'keychain locked' >&2; exit 3");
  AuthFiles files;
  const fs::path config = tmp.write("config.json", R"({"credHelpers":{"a.example.com":"absent",
      "b.example.com":"broken"}})");
  files.files = {config};
  auto r = find_credential(files, ref_of("a.example.com/x"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message == "credential helper docker-credential-absent (credHelpers \"a.example.com\" in " +
                                 config.string() +
                                 ") is not on PATH: install it, or remove it from that file");
  r = find_credential(files, ref_of("b.example.com/x"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message == "credential helper docker-credential-broken (credHelpers \"b.example.com\" in " +
                                 config.string() +
                                 ") failed for b.example.com (exit status 3): keychain locked");
}

TEST_CASE("Malformed auth files are invalid input naming the file and the entry", "[credentials]") {
  TempDirFixture tmp;
  AuthFiles files;
  auto error_of = [&](const std::string& text) {
    files.files = {tmp.write("auth.json", text)};
    auto r = find_credential(files, ref_of("quay.io/x"));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  const std::string f = (tmp.dir() / "auth.json").string();
  CHECK(error_of("{") == f + ": not valid JSON");
  CHECK(error_of("[]") == f + ": expected a JSON object");
  CHECK(error_of(R"({"auths":[]})") == f + ": \"auths\" must be an object");
  CHECK(error_of(R"({"auths":{"quay.io":{"auth":"!!!"}}})") ==
        f + ": auths entry \"quay.io\": \"auth\" is not valid base64");
  CHECK(error_of(R"({"auths":{"quay.io":{"auth":")" + base64_encode("nocolon") + R"("}}})") ==
        f + ": auths entry \"quay.io\": \"auth\" is not base64 of USER:PASSWORD");
  CHECK(error_of(R"({"auths":{"quay.io":{"password":7}}})") ==
        f + ": auths entry \"quay.io\": \"password\" must be a string");
  CHECK(error_of(R"({"credHelpers":{"quay.io":"../evil"}})") ==
        f + ": credHelpers entry \"quay.io\" must name a helper (docker-credential-NAME)");
}

TEST_CASE("No error message holds a secret", "[credentials]") {
  TempDirFixture tmp;
  HelperDir helpers(tmp);
  const std::string secret = "S3cr3t-Pa55";
  const std::string user_secret = base64_encode("user:" + secret);
  // Helpers that fail or answer garbage, with the secret in their output.
  helpers.add("garbage", "echo '{\"Username\":\"user\",\"Secret\":\"" + secret + "\"'");
  helpers.add("nosecret", "echo '{\"Username\":\"" + secret + "\"}'");
  helpers.add("array", "echo '[\"" + secret + "\"]'");
  const std::vector<std::string> texts = {
      R"({"auths":{"quay.io":{"auth":")" + user_secret + R"(", "password": )" + "7}}",
      R"({"auths":{"quay.io":{"auth":")" + secret + R"("}}})",
      R"({"auths":{"quay.io":{"auth":")" + base64_encode(secret) + R"("}}})",
      R"({"auths":{"quay.io":{"auth":")" + user_secret + R"("}}, )",
      R"({"auths":{"quay.io":{"auth":")" + user_secret + R"(", "identitytoken": ["x"]}}})",
      R"({"auths":{"quay.io":")" + secret + R"("}})",
      R"({"auths":")" + secret + R"("})",
      R"({"credHelpers":{"quay.io":")" + secret + R"(/x"}})",
      R"({"credsStore":")" + secret + R"(/x"})",
      R"({"credHelpers":{"quay.io":"garbage"}})",
      R"({"credHelpers":{"quay.io":"nosecret"}})",
      R"({"credHelpers":{"quay.io":"array"}})",
      "\"" + secret + "\"",
      secret,
  };
  std::size_t errors = 0;
  for (const std::string& text : texts) {
    AuthFiles files;
    files.files = {tmp.write("auth.json", text)};
    auto r = find_credential(files, ref_of("quay.io/team/app"));
    if (!r) {
      ++errors;
      INFO(text);
      CHECK(r.error().message.find(secret) == std::string::npos);
      CHECK(r.error().message.find(user_secret) == std::string::npos);
    }
  }
  CHECK(errors == texts.size());
  // Storing refuses a bad key or user name without repeating the password.
  AuthFiles files;
  files.login_file = tmp.dir() / "login/auth.json";
  for (const auto& [key, user] : {std::pair{"not a host", "user"}, std::pair{"quay.io", "us:er"}}) {
    auto r = store_credential(files, key, Credential{user, secret, false, ""});
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find(secret) == std::string::npos);
  }
}

TEST_CASE("store_credential writes auths.KEY.auth as podman does: 0600 in a 0700 directory, other keys kept",
          "[credentials]") {
  TempDirFixture tmp;
  AuthFiles files;
  files.login_file = tmp.dir() / "new/containers/auth.json";
  files.files = {files.login_file};
  REQUIRE_OK(store_credential(files, "127.0.0.1:5000", Credential{"ci", "pw", false, ""}));
  struct stat st {};
  REQUIRE(::stat(files.login_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  REQUIRE(::stat(files.login_file.parent_path().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(::stat(files.login_file.parent_path().parent_path().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  auto doc = parse_json(slurp(files.login_file), "auth.json");
  REQUIRE_OK(doc);
  CHECK(*doc ==
        nlohmann::json::parse(R"({"auths":{"127.0.0.1:5000":{"auth":")" + base64_encode("ci:pw") + "\"}}}"));
  CHECK(lookup(files, "127.0.0.1:5000/x")->secret == "pw");

  // Another login keeps the file's other entries and keys it does not know; the key is normalised.
  tmp.write("new/containers/auth.json", R"({"auths":{"quay.io":{"auth":"b2xkOm9sZA=="},
      "ghcr.io":{"auth":"a2VlcDprZWVw","email":"x@example.com"}},"credHelpers":{"gcr.io":"gcloud"},"x-custom":[1]})");
  REQUIRE_OK(store_credential(files, "https://Quay.io/v1/", Credential{"new", "secret", false, ""}));
  REQUIRE_OK(store_credential(files, "quay.io/team", Credential{"team", "t", false, ""}));
  doc = parse_json(slurp(files.login_file), "auth.json");
  REQUIRE_OK(doc);
  CHECK(*doc == nlohmann::json::parse(R"({"auths":{"quay.io":{"auth":")" + base64_encode("new:secret") +
                                      R"("},"quay.io/team":{"auth":")" + base64_encode("team:t") + R"("},
      "ghcr.io":{"auth":"a2VlcDprZWVw","email":"x@example.com"}},"credHelpers":{"gcr.io":"gcloud"},"x-custom":[1]})"));
  // Written atomically: no temporary file is left beside it.
  CHECK(lockstep::test::count_files(files.login_file.parent_path()) == 1);

  auto r = store_credential(files, "quay.io/Team", Credential{"u", "p", false, ""});
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        "'quay.io/Team' is not a registry namespace (HOST[:PORT]/NAMESPACE, lower case)");
  r = store_credential(files, "quay.io", Credential{"u", "", false, ""});
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "quay.io: refusing to store an empty password");
  r = store_credential(files, "quay.io", Credential{"a:b", "p", false, ""});
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "a registry user name can't contain ':' (it is stored as USER:PASSWORD)");
}

TEST_CASE("remove_credential removes the key and its URL forms, keeping the rest; false when absent",
          "[credentials]") {
  TempDirFixture tmp;
  AuthFiles files;
  files.login_file = tmp.dir() / "auth.json";
  CHECK(*remove_credential(files, "quay.io") == false); // no file
  tmp.write("auth.json", R"({"auths":{"quay.io":{"auth":"YTpi"},"https://quay.io/v1/":{"auth":"YTpi"},
      "quay.io/team":{"auth":"YTpi"},"docker.io":{"auth":"YTpi"}},"x-custom":true})");
  auto r = remove_credential(files, "quay.io");
  REQUIRE_OK(r);
  CHECK(*r);
  auto doc = parse_json(slurp(files.login_file), "auth.json");
  REQUIRE_OK(doc);
  CHECK(*doc ==
        nlohmann::json::parse(R"({"auths":{"quay.io/team":{"auth":"YTpi"},"docker.io":{"auth":"YTpi"}},
      "x-custom":true})"));
  CHECK(*remove_credential(files, "quay.io") == false);
  CHECK(*remove_credential(files, "index.docker.io"));
  CHECK(*remove_credential(files, "quay.io/team"));
  doc = parse_json(slurp(files.login_file), "auth.json");
  REQUIRE_OK(doc);
  CHECK(*doc == nlohmann::json::parse(R"({"auths":{},"x-custom":true})"));
}
