#include "envspec/settings/settings.hpp"
#include "support/codec/compress.hpp"
#include "support/registry/client.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <vector>

namespace fs = std::filesystem;
using namespace lockstep;
using lockstep::test::ScopedEnv;

TEST_CASE("settings: the store root is LOCKSTEP_CACHE, else XDG_CACHE_HOME/lockstep, else ~/.cache/lockstep",
          "[settings]") {
  {
    ScopedEnv cache("LOCKSTEP_CACHE", "/tmp/store");
    CHECK(settings::store_root() == fs::path("/tmp/store"));
  }
  ScopedEnv cache("LOCKSTEP_CACHE", "");
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/xdg");
    CHECK(settings::store_root() == fs::path("/tmp/xdg/lockstep"));
  }
  ScopedEnv xdg("XDG_CACHE_HOME", "relative"); // not absolute: ignored, as the XDG spec says
  ScopedEnv home("HOME", "/home/u");
  CHECK(settings::store_root() == fs::path("/home/u/.cache/lockstep"));
}

TEST_CASE("settings: LOCKSTEP_THREADS and LOCKSTEP_CERTS_D reach support/ through apply_to_support",
          "[settings]") {
  {
    ScopedEnv threads("LOCKSTEP_THREADS", "3");
    ScopedEnv certs("LOCKSTEP_CERTS_D", "/tmp/a::/tmp/b");
    CHECK(settings::threads() == 3U);
    CHECK(settings::certs_dirs() == std::vector<fs::path>{"/tmp/a", "/tmp/b"});
    const std::vector<fs::path> before = registry::default_client_options().config.certs_dirs;
    settings::apply_to_support();
    CHECK(default_thread_count() == 3U);
    CHECK(registry::default_client_options().config.certs_dirs == std::vector<fs::path>{"/tmp/a", "/tmp/b"});
    registry::default_client_options().config.certs_dirs = before;
  }
  ScopedEnv threads("LOCKSTEP_THREADS", "0"); // out of range: all cores
  CHECK_FALSE(settings::threads());
  set_default_thread_count(0);
  CHECK(default_thread_count() >= 1U);
}
