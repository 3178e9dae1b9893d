#include "runner/runtime/exec.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

// The value of NAME in a "K=V" list, or "<unset>".
std::string get(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& e : env) {
    if (e.rfind(name + "=", 0) == 0) {
      return e.substr(name.size() + 1);
    }
  }
  return "<unset>";
}

std::vector<std::string> compose(const EnvSources& s) {
  Result<std::vector<std::string>> r = compose_environment(s);
  REQUIRE(r.ok());
  return *r;
}

} // namespace

TEST_CASE("the environment follows Apptainer's order: host < image < LOCKSTEP_ENV_ < --env", "[exec][env]") {
  EnvSources s;
  s.host = {"HOSTONLY=h",
            "SHARED=host",
            "BOTH=host",
            "PATH=/host/bin",
            "LOCKSTEP_ENV_BOTH=prefixed",
            "LOCKSTEP_ENV_FROMPREFIX=p",
            "TERM=xterm"};
  s.image = {"SHARED=image", "BOTH=image", "PATH=/image/bin", "IMAGEONLY=i"};
  s.overrides = {"BOTH=flag", "NEW=n"};
  s.home = "/home/me";
  std::vector<std::string> env = compose(s);
  CHECK(get(env, "HOSTONLY") == "h");      // host variables pass through
  CHECK(get(env, "SHARED") == "image");    // the image wins over the host
  CHECK(get(env, "BOTH") == "flag");       // --env wins over LOCKSTEP_ENV_ and the image
  CHECK(get(env, "FROMPREFIX") == "p");    // LOCKSTEP_ENV_K=V sets K
  CHECK(get(env, "PATH") == "/image/bin"); // PATH comes from the image, never the host
  CHECK(get(env, "IMAGEONLY") == "i");
  CHECK(get(env, "NEW") == "n");
  CHECK(get(env, "HOME") == "/home/me"); // HOME from the caller when nothing sets it
  CHECK(get(env, "LOCKSTEP_ENV_BOTH") == "<unset>");
}

TEST_CASE("LOCKSTEP_ENV_ values override the image, and --env overrides them", "[exec][env]") {
  EnvSources s;
  s.host = {"LOCKSTEP_ENV_A=prefixed"};
  s.image = {"A=image"};
  CHECK(get(compose(s), "A") == "prefixed");
  s.overrides = {"A=flag"};
  CHECK(get(compose(s), "A") == "flag");
}

TEST_CASE("cleanenv drops the host's variables but keeps TERM and the overrides", "[exec][env]") {
  EnvSources s;
  s.host = {"SECRET=x", "TERM=vt100", "HOME=/elsewhere", "LOCKSTEP_ENV_KEEP=1"};
  s.image = {"FROMIMAGE=1"};
  s.overrides = {"FLAG=1"};
  s.clean = true;
  s.home = "/home/me";
  std::vector<std::string> env = compose(s);
  CHECK(get(env, "SECRET") == "<unset>");
  CHECK(get(env, "TERM") == "vt100");
  CHECK(get(env, "FROMIMAGE") == "1");
  CHECK(get(env, "KEEP") == "1");
  CHECK(get(env, "FLAG") == "1");
  CHECK(get(env, "HOME") == "/home/me");
  CHECK(get(env, "PATH") == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
}

TEST_CASE("the environment keeps the order in which names first appear", "[exec][env]") {
  EnvSources s;
  s.host = {"B=1", "A=1"};
  s.image = {"C=1", "B=2"};
  std::vector<std::string> env = compose(s);
  REQUIRE(env.size() == 4);
  CHECK(env[0] == "B=2");
  CHECK(env[1] == "A=1");
  CHECK(env[2] == "C=1");
  CHECK(env[3].rfind("PATH=", 0) == 0);
}

TEST_CASE("a malformed NAME=VALUE is refused with the accepted form", "[exec][env]") {
  for (const char* bad : {"NOVALUE", "=x", "1A=x", "A-B=x", "A B=x"}) {
    EnvSources s;
    s.overrides = {bad};
    Result<std::vector<std::string>> r = compose_environment(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(r.error().message, Catch::Contains("NAME=VALUE"));
  }
  EnvSources s;
  s.overrides = {"EMPTY=", "EQ=a=b"};
  std::vector<std::string> env = compose(s);
  CHECK(get(env, "EMPTY").empty());
  CHECK(get(env, "EQ") == "a=b");
}

TEST_CASE("a bind is SRC, SRC:DST or SRC:DST:ro|rw", "[exec][bind]") {
  Result<BindSpec> b = parse_bind("/data");
  REQUIRE(b.ok());
  CHECK(b->source == "/data");
  CHECK(b->target == "/data");
  CHECK(b->access == BindSpec::Access::read_write);

  b = parse_bind("/data:/mnt/data:ro");
  REQUIRE(b.ok());
  CHECK(b->source == "/data");
  CHECK(b->target == "/mnt/data");
  CHECK(b->access == BindSpec::Access::read_only);

  b = parse_bind("/data:/mnt//x/./y/:rw");
  REQUIRE(b.ok());
  CHECK(b->target == "/mnt/x/y");
  CHECK(b->access == BindSpec::Access::read_write);

  b = parse_bind("rel/dir:/r");
  REQUIRE(b.ok());
  CHECK(b->source == fs::current_path() / "rel/dir");
}

TEST_CASE("an invalid bind says what is wrong and the expected form", "[exec][bind]") {
  struct Case {
    const char* spec;
    const char* why;
  };
  for (const Case& c :
       {Case{"", "no source"}, Case{":/x", "no source"}, Case{"/a:", "empty destination"},
        Case{"/a:rel", "absolute"}, Case{"/a:/x/../../etc", "'..'"}, Case{"/a:/", "root"},
        Case{"/a:/b:rx", "unknown option 'rx'"}, Case{"/a:/b:ro:x", "too many"}, Case{"rel", "absolute"}}) {
    Result<BindSpec> b = parse_bind(c.spec);
    INFO(c.spec);
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().code == ExitCode::invalid_input);
    CHECK_THAT(b.error().message, Catch::Contains(c.why) && Catch::Contains("SRC[:DST][:ro|rw]"));
  }
}

TEST_CASE("the user is numeric UID[:GID], GID defaulting to UID", "[exec][user]") {
  Result<UserSpec> u = parse_user("1000");
  REQUIRE(u.ok());
  CHECK(u->uid == 1000);
  CHECK(u->gid == 1000);
  u = parse_user("0:100");
  REQUIRE(u.ok());
  CHECK(u->uid == 0);
  CHECK(u->gid == 100);
  for (const char* bad : {"", "root", "1000:", ":5", "1:2:3", "-1", "4294967295", "99999999999"}) {
    INFO(bad);
    CHECK_FALSE(parse_user(bad).ok());
  }
}

TEST_CASE("IMAGE names an OCI image, a SIF or a root directory", "[exec][image]") {
  test::TempDirFixture tmp;
  fs::create_directories(tmp.dir() / "rootfs/bin");
  fs::create_directories(tmp.dir() / "layout");
  tmp.write("layout/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  tmp.write("image.sif", "not really a sif");
  std::string magic(32, '\0');
  magic += "SIF_MAGIC";
  magic += std::string(16, '\0');
  tmp.write("renamed.img", magic);
  tmp.write("notes.txt", "hello");

  Result<ImageArg> a = parse_image_arg("oci:" + (tmp.dir() / "layout").string() + ":v1");
  REQUIRE(a.ok());
  CHECK(a->kind == ImageArg::Kind::oci);
  CHECK(a->ref.tag == "v1");

  a = parse_image_arg("docker-archive:x.tar");
  REQUIRE(a.ok());
  CHECK(a->ref.transport == oci::ImageRef::Transport::docker_archive);

  a = parse_image_arg("oci-archive:x.tar");
  REQUIRE(a.ok());
  CHECK(a->ref.transport == oci::ImageRef::Transport::oci_archive);

  a = parse_image_arg((tmp.dir() / "rootfs").string());
  REQUIRE(a.ok());
  CHECK(a->kind == ImageArg::Kind::directory);

  a = parse_image_arg("dir:" + (tmp.dir() / "rootfs").string());
  REQUIRE(a.ok());
  CHECK(a->kind == ImageArg::Kind::directory);

  a = parse_image_arg((tmp.dir() / "image.sif").string());
  REQUIRE(a.ok());
  CHECK(a->kind == ImageArg::Kind::sif);

  a = parse_image_arg((tmp.dir() / "renamed.img").string()); // recognised by its magic
  REQUIRE(a.ok());
  CHECK(a->kind == ImageArg::Kind::sif);

  a = parse_image_arg("sif:" + (tmp.dir() / "notes.txt").string());
  REQUIRE(a.ok());
  CHECK(a->kind == ImageArg::Kind::sif);

  // A bare OCI layout directory is an OCI image for every command (exec and run included).
  a = parse_image_arg((tmp.dir() / "layout").string());
  REQUIRE(a.ok());
  CHECK(a->kind == ImageArg::Kind::oci);
  CHECK(a->ref.transport == oci::ImageRef::Transport::oci_dir);
  CHECK(a->ref.path == tmp.dir() / "layout");
}

TEST_CASE("an IMAGE that names nothing usable is refused with the accepted forms", "[exec][image]") {
  test::TempDirFixture tmp;
  fs::create_directories(tmp.dir() / "layout");
  tmp.write("layout/oci-layout", "{}");
  tmp.write("notes.txt", "hello");

  Result<ImageArg> a = parse_image_arg((tmp.dir() / "missing").string());
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().code == ExitCode::invalid_input);
  CHECK_THAT(a.error().message, Catch::Contains("no image at") && Catch::Contains("oci:DIR[:TAG]"));

  a = parse_image_arg((tmp.dir() / "notes.txt").string());
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.error().message,
             Catch::Contains("is not an image") && Catch::Contains("OCI layout directory"));

  for (const std::string& bad :
       {"sif:" + (tmp.dir() / "missing.sif").string(), "dir:" + (tmp.dir() / "missing").string(),
        "dir:" + (tmp.dir() / "notes.txt").string(), "sif:" + (tmp.dir() / "layout").string()}) {
    INFO(bad);
    a = parse_image_arg(bad);
    REQUIRE_FALSE(a.ok());
    CHECK(a.error().code == ExitCode::invalid_input);
  }
  CHECK_FALSE(parse_image_arg("").ok());
  CHECK_FALSE(parse_image_arg("sif:").ok());
  CHECK_FALSE(parse_image_arg("oci:").ok());
}

TEST_CASE("the image config gives env, entrypoint, cmd and workdir", "[exec][image]") {
  nlohmann::json config = {{"Env", {"A=1", "PATH=/bin"}},
                           {"Entrypoint", {"/bin/app"}},
                           {"Cmd", {"--flag"}},
                           {"WorkingDir", "/srv"}};
  Result<ImageRuntime> rt = image_runtime(config);
  REQUIRE(rt.ok());
  CHECK(rt->env == std::vector<std::string>{"A=1", "PATH=/bin"});
  CHECK(rt->entrypoint == std::vector<std::string>{"/bin/app"});
  CHECK(rt->cmd == std::vector<std::string>{"--flag"});
  CHECK(rt->workdir == "/srv");

  rt = image_runtime(nlohmann::json{{"Entrypoint", nullptr}, {"Cmd", nullptr}});
  REQUIRE(rt.ok());
  CHECK(rt->entrypoint.empty());
  CHECK(rt->cmd.empty());

  CHECK_FALSE(image_runtime(nlohmann::json{{"Env", "A=1"}}).ok());
  CHECK_FALSE(image_runtime(nlohmann::json{{"Cmd", {1, 2}}}).ok());
  CHECK_FALSE(image_runtime(nlohmann::json{{"WorkingDir", 5}}).ok());
  CHECK_FALSE(image_runtime(nlohmann::json::array()).ok());
}
