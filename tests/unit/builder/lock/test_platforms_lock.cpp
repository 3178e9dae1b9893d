// A multi-platform lock: merging each platform's lock and taking each share back out gives that
// platform's lock byte for byte; a conda-lock.yml lists every platform.
#include "builder/lock/conda_export.hpp"
#include "builder/lock/platforms_lock.hpp"
#include "envspec/lock/lockfile.hpp"
#include "support/codec/digest.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;

namespace {

envspec::LockedArtifact deb(const std::string& name, const std::string& version, const std::string& arch) {
  envspec::LockedArtifact a;
  a.kind = "deb";
  a.name = name;
  a.version = version;
  a.arch = arch;
  a.group = "packages";
  a.url = "http://deb.example/pool/" + name + "_" + version + "_" + arch + ".deb";
  a.sha256 = sha256_of(a.url);
  a.repo = 0;
  a.reason = name == "ls-app" ? "requested" : "dependency of ls-app";
  return a;
}

envspec::LockedArtifact conda(const std::string& name, const std::string& subdir) {
  envspec::LockedArtifact a;
  a.kind = "conda";
  a.name = name;
  a.version = "1.0";
  a.url = "https://conda.example/forge/" + subdir + "/" + name + "-1.0-0.conda";
  a.sha256 = sha256_of(a.url);
  a.repo = 1;
  a.reason = "requested";
  envspec::LockedCondaRecord c;
  c.build = "0";
  c.subdir = subdir;
  c.md5 = std::string(32, 'a');
  a.conda = c;
  return a;
}

// The lock `platform` alone would have: its own debs, an Architecture: all deb, conda packages.
envspec::Lock single(const std::string& platform, const std::string& arch, const std::string& subdir) {
  envspec::Lock lock;
  lock.tool = "lockstep 0.1.0";
  lock.spec_digest = sha256_of("spec " + platform);
  lock.platform = platform;
  lock.inputs = nlohmann::json{{"platform", platform}, {"packages", {{"apt", {"ls-app"}}}}};
  envspec::LockedRepo apt;
  apt.kind = "apt";
  apt.url = "http://deb.example/debian";
  apt.suite = "bookworm";
  apt.components = {"main"};
  apt.release_date = "Sat, 01 Jun 2024 00:00:00 UTC";
  apt.release_sha256 = std::string(64, 'b');
  envspec::LockedRepo channel;
  channel.kind = "conda";
  channel.url = "https://conda.example/forge";
  channel.subdirs = {subdir, "noarch"};
  lock.repos = {apt, channel};
  lock.artifacts = {deb("ls-app", "1.0-1", arch), deb("ls-lib", "2.0-1", arch),
                    deb("ls-data", "1.0-1", "all"), conda("numpy", subdir), conda("tzdata", "noarch")};
  envspec::sort_artifacts(lock.artifacts);
  return lock;
}

} // namespace

TEST_CASE("Each platform's share of a merged lock is that platform's lock, byte for byte",
          "[lock][platforms]") {
  const envspec::Lock amd = single("linux/amd64", "amd64", "linux-64");
  const envspec::Lock arm = single("linux/arm64", "arm64", "linux-aarch64");
  auto merged = builder::merge_platform_locks({"linux/amd64", "linux/arm64"}, {amd, arm});
  REQUIRE(merged);
  merged->spec_digest = sha256_of("spec of both");
  merged->inputs =
      nlohmann::json{{"platforms", {"linux/amd64", "linux/arm64"}}, {"packages", {{"apt", {"ls-app"}}}}};
  CHECK(merged->platform_spec_digests == std::vector<Digest>{amd.spec_digest, arm.spec_digest});
  CHECK(merged->repos[1].subdirs == std::vector<std::string>{"linux-64", "noarch", "linux-aarch64"});
  // Shared: the Architecture: all deb and the noarch conda package, once, without platforms.
  CHECK(merged->artifacts.size() == 8);
  const auto parsed = envspec::parse_lock(envspec::render_lock(*merged), "both.lock");
  INFO((parsed ? std::string() : parsed.error().message));
  REQUIRE(parsed);
  CHECK(envspec::render_lock(envspec::lock_for_platform(*parsed, "linux/amd64")) ==
        envspec::render_lock(amd));
  CHECK(envspec::render_lock(envspec::lock_for_platform(*parsed, "linux/arm64")) ==
        envspec::render_lock(arm));
  // An image records its share's digest: that finds the share back.
  const auto found = envspec::lock_share_with_digest(*parsed, envspec::lock_digest(arm));
  REQUIRE(found);
  CHECK(found->platform == "linux/arm64");
  CHECK_FALSE(envspec::lock_share_with_digest(*parsed, envspec::lock_digest(*parsed)));
}

TEST_CASE("Platforms that solve the stack differently keep each platform's", "[lock][platforms][stack]") {
  envspec::Lock amd = single("linux/amd64", "amd64", "linux-64");
  envspec::Lock arm = single("linux/arm64", "arm64", "linux-aarch64");
  envspec::LockedStack stack;
  stack.recipes = "builtin";
  stack.recipes_digest = sha256_of("recipes");
  stack.cuda = "12.8";
  stack.choices.push_back({"framework", "pytorch", "2.7.1", "cu128", "wheels", {"torch==2.7.1"}, {"a fact"}});
  arm.stack = stack;
  stack.choices.back().packages.emplace_back("nvidia-nccl-cu12==2.26.2"); // the x86_64 wheels' pins
  amd.stack = stack;
  auto merged = builder::merge_platform_locks({"linux/amd64", "linux/arm64"}, {amd, arm});
  REQUIRE(merged);
  merged->spec_digest = sha256_of("spec of both");
  merged->inputs =
      nlohmann::json{{"platforms", {"linux/amd64", "linux/arm64"}}, {"packages", {{"apt", {"ls-app"}}}}};
  CHECK_FALSE(merged->stack);
  REQUIRE(merged->stacks.size() == 2);
  const std::string text = envspec::render_lock(*merged);
  CHECK_THAT(text,
             Catch::Contains("\"stacks\": [\n    {\"platform\":\"linux/amd64\",\"recipes\":\"builtin\""));
  const auto parsed = envspec::parse_lock(text, "both.lock");
  INFO((parsed ? std::string() : parsed.error().message));
  REQUIRE(parsed);
  CHECK(envspec::render_lock(*parsed) == text);
  CHECK(envspec::render_lock(envspec::lock_for_platform(*parsed, "linux/amd64")) ==
        envspec::render_lock(amd));
  CHECK(envspec::render_lock(envspec::lock_for_platform(*parsed, "linux/arm64")) ==
        envspec::render_lock(arm));
  // The same stack on both is written once.
  arm.stack = amd.stack;
  auto alike = builder::merge_platform_locks({"linux/amd64", "linux/arm64"}, {amd, arm});
  REQUIRE(alike);
  CHECK(alike->stack == amd.stack);
  CHECK(alike->stacks.empty());
  // Stacks out of the order of the platforms are refused.
  std::string swapped = text;
  const std::string amd_head = "{\"platform\":\"linux/amd64\",\"recipes\"";
  const std::size_t first = swapped.find(amd_head);
  REQUIRE(first != std::string::npos);
  swapped.replace(first, amd_head.size(), "{\"platform\":\"linux/arm64\",\"recipes\"");
  const auto refused = envspec::parse_lock(swapped, "both.lock");
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("stacks[0].platform: expected one stack per platform"));
  // A lock of one platform has `stack`, never `stacks`.
  std::string single_text = envspec::render_lock(amd);
  const std::size_t at = single_text.find("  \"stack\": ");
  REQUIRE(at != std::string::npos);
  single_text.replace(at, 11, "  \"stacks\": [");
  single_text.insert(single_text.find("]},\n", at) + 2, "]");
  const auto single_refused = envspec::parse_lock(single_text, "one.lock");
  REQUIRE_FALSE(single_refused);
  CHECK_THAT(single_refused.error().message,
             Catch::Contains("stacks: only a multi-platform lock has 'stacks'"));
}

TEST_CASE("A conda-lock.yml of a multi-platform lock lists every platform", "[lock][platforms][conda]") {
  auto merged = builder::merge_platform_locks(
      {"linux/amd64", "linux/arm64"},
      {single("linux/amd64", "amd64", "linux-64"), single("linux/arm64", "arm64", "linux-aarch64")});
  REQUIRE(merged);
  builder::CondaExportOptions options;
  options.format = builder::CondaExportFormat::conda_lock;
  const auto text = builder::export_conda(*merged, options);
  REQUIRE(text);
  CHECK_THAT(*text, Catch::Contains("platforms: [linux-64, linux-aarch64]"));
  CHECK_THAT(*text, Catch::Contains("linux-64/numpy-1.0-0.conda"));
  CHECK_THAT(*text, Catch::Contains("linux-aarch64/numpy-1.0-0.conda"));
  CHECK_THAT(*text, Catch::Contains("    platform: linux-aarch64\n"));
  // The noarch package is listed for each platform, as conda-lock does.
  std::size_t tzdata = 0;
  for (std::size_t at = text->find("noarch/tzdata"); at != std::string::npos;
       at = text->find("noarch/tzdata", at + 1)) {
    ++tzdata;
  }
  CHECK(tzdata == 2);
  options.format = builder::CondaExportFormat::explicit_file;
  const auto refused = builder::export_conda(*merged, options);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("give --platform"));
}
