#pragma once
// The choices a `lockstep lock` command line makes (lock.hpp), shared by every locker it runs.
#include "envspec/lock/lockfile.hpp"
#include "support/registry/client.hpp"
#include "support/solver/pubgrub.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace lockstep::builder {

struct LockOptions {
  /// The lock being replaced, if any: its versions are kept for every package whose name is not in
  /// `update` (when the repositories still have them and they fit), so re-locking moves nothing
  /// unasked.
  std::optional<envspec::Lock> previous;
  /// Package names (or git URLs) to move to their newest candidates (`lock --update NAME...`);
  /// "base" moves an image base to what its reference names now.
  std::set<std::string> update;
  /// Ignore `previous` entirely (`lock --update` without names).
  bool update_all = false;
  /// Read every Python index page again, even those the HTTP cache holds fresh (`lock --refresh`).
  /// `update` and `update_all`, which ask for the newest versions, do so too.
  bool refresh = false;
  /// Bounds on the Python solver's work (`lock --resolver-steps N --resolver-timeout SECONDS`).
  std::size_t resolver_steps = pubgrub::Limits{}.max_steps;
  std::chrono::seconds resolver_timeout =
      std::chrono::duration_cast<std::chrono::seconds>(pubgrub::Limits{}.max_time);
  std::int64_t epoch = 0;
  /// How an image base in a registry is reached (TLS, credentials).
  registry::ClientOptions registry = registry::default_client_options();
};

} // namespace lockstep::builder
