#pragma once
// Keeping a spec's lockfile current (docs/lockfile.md): where the lock of a spec lies, whether it is
// stale (the spec's lock inputs changed since it was locked, or its image base moved), and what is
// done about it: `lockstep lock` re-resolves only what it must (or what --update names) and writes the
// lock only when its text changes; `lock --check` and `build --locked` refuse a stale lock; a build
// without --locked locks first. The resolving itself is lock.hpp's make_lock.
#include "builder/lock/lock_options.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::builder {

/// The lock of the spec at `spec_file`: `lock_arg` (made absolute), else the spec's name with .lock.
std::filesystem::path lock_path_of(const std::filesystem::path& spec_file, const std::string& lock_arg);

/// What `lockstep lock` is asked to do.
struct RelockRequest {
  std::string spec = "lockstep.yaml";
  std::string lock;                ///< --lock; "" beside the spec
  bool check = false;              ///< --check: only say whether the lock is current
  std::vector<std::string> update; ///< --update NAME...: move only these ("base": the image base)
  bool update_given = false;       ///< --update was given (with no names: move everything)
  bool refresh = false;            ///< --refresh: read every Python index page again
  /// --update --security: move exactly the debs with a newer build in a security suite (and what
  /// their new versions need), nothing else.
  bool security = false;
  bool allow_outside = false; ///< host paths the spec reads may lie outside its directory
  std::size_t resolver_steps = LockOptions{}.resolver_steps;
  std::chrono::seconds resolver_timeout = LockOptions{}.resolver_timeout;
};

/// What `lockstep lock` did.
enum class RelockAction {
  checked,   ///< --check: nothing written
  kept,      ///< the lock was current and nothing asked to move: nothing resolved or written
  unchanged, ///< re-resolved to the same lock: nothing written
  written,   ///< a new lock written
};

/// What `lockstep lock` leaves its command to print.
struct RelockOutcome {
  RelockAction action = RelockAction::checked;
  std::filesystem::path lock_path;
  /// --check: how the spec (or its base) moved since it was locked, empty when the lock is current;
  /// else the lock's changes ("~ libc6 2.36-9 -> 2.36-10") against the previous lock.
  std::vector<std::string> changes;
  Digest digest;             ///< the lock's digest (not for --check)
  std::size_t artifacts = 0; ///< the lock's artifacts
  /// --check of a stale lock: the error (check_failed) the check ends with, naming what changed.
  std::optional<Error> stale;
  /// --security found no deb with a newer build in a security suite: nothing was moved.
  bool no_security_updates = false;
};

/// `lockstep lock`: reads the spec and its lock; with `check`, judges the lock; else keeps a current
/// lock untouched (unless --update or SOURCE_DATE_EPOCH), or resolves the spec (the previous lock's
/// versions kept for what --update does not name) and writes the lock when its text changed. An
/// --update name that is not in the new lock is invalid_input, before anything is written.
Result<RelockOutcome> relock(const RelockRequest& request);

/// One package the repositories now offer at another version than the lock pins (`lockstep
/// outdated`).
struct OutdatedEntry {
  std::string kind;      ///< "deb", "wheel", "conda", "git" or "base"
  std::string name;      ///< a deb of a foreign architecture as NAME:ARCH; base: the image reference
  std::string locked;    ///< the lock's version ("" for a package a re-lock would add)
  std::string available; ///< what a re-lock would take ("" for a package it would drop)
  std::string suite;     ///< deb: the suite of the available version ("bookworm-security")
  bool security = false; ///< the available version comes from a security suite or archive
};

/// The lock against what its repositories offer now.
struct OutdatedReport {
  std::filesystem::path lock_path;
  std::vector<OutdatedEntry> entries; ///< by kind, then name
};

/// `lockstep outdated`: reads the spec and its lock (which must exist), resolves the spec afresh
/// (every index read again, nothing kept from the lock) without writing anything, and lists what
/// moved: debs, wheels, conda packages, git sources and the image base.
Result<OutdatedReport> outdated(const RelockRequest& request);

/// The lock a build of `spec` uses: none when the spec has nothing to lock; else the lock at
/// `lock_arg` (default beside the spec). With `locked`, a missing or stale lock is an error (exit 1);
/// without, a missing or stale lock is (re)made first and written.
Result<std::optional<envspec::Lock>> lock_for_build(const envspec::Spec& spec, const std::string& lock_arg,
                                                    bool locked);

} // namespace lockstep::builder
