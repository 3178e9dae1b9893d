#pragma once
// lockstep's settings from its environment variables, read here and handed to support/ by its
// callers (support/ knows no LOCKSTEP_* name): where the store is, how many threads to use, which
// certs.d directories to trust. docs/configuration.md lists them.
#include <filesystem>
#include <optional>
#include <vector>

namespace lockstep::settings {

/// The store's root: $LOCKSTEP_CACHE, else $XDG_CACHE_HOME/lockstep (when absolute), else
/// ~/.cache/lockstep, else /tmp/lockstep-cache-UID. Read at every call (tests point it elsewhere).
std::filesystem::path store_root();

/// $LOCKSTEP_THREADS when it is a number from 1 to 1024, else nothing (all cores).
std::optional<unsigned> threads();

/// $LOCKSTEP_CERTS_D split at ':' (empty entries dropped), when set: the certs.d directories to
/// use instead of the standard ones (tests set it so they never read /etc).
std::optional<std::vector<std::filesystem::path>> certs_dirs();

/// Hands the settings above to support/'s process-wide defaults (compression and hashing threads,
/// the registry client's certs.d). Called once by the command line before any command runs.
void apply_to_support();

} // namespace lockstep::settings
