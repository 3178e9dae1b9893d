#pragma once
// OpenPGP signature checks of apt repository metadata (InRelease, Release + Release.gpg), done by
// gpgv (GnuPG) or, where gpgv is missing, sqv (Sequoia); lockstep never parses signatures itself.
//
// Policy (apt's, methods/gpgv.cc): a file is authentic when at least one signature is good and
// made by a key in the keyring, with a trusted digest (not MD5, SHA-1 or RIPEMD-160), and no
// signature is bad. Signatures by keys outside the keyring are ignored next to a good one, since
// archives sign with several keys at once (Debian signs with the keys of two releases). The
// verifier runs without a shell, with a private GNUPGHOME, and its output is bounded.
#include "support/base/result.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace lockstep {

/// Checks the clearsigned message `inrelease` (an apt InRelease file) against the keys in
/// `keyring` (binary .gpg or ASCII-armored .asc) and returns the signed text exactly as the
/// verifier printed it: only that text may be trusted. `what` names the file in messages
/// ("http://deb.debian.org/debian/dists/bookworm/InRelease"). A bad, missing or untrusted
/// signature, or text outside the one signed message, is ExitCode::invalid_input; no verifier
/// installed is ExitCode::external; an unreadable keyring is ExitCode::io.
Result<std::string> verify_clearsigned(std::string_view inrelease, const std::filesystem::path& keyring,
                                       std::string_view what);

/// Checks the detached signature `signature` (binary or armored, e.g. Release.gpg) of `data`
/// (e.g. Release, of a flat repository) against `keyring`. Errors as for verify_clearsigned.
Result<void> verify_detached(std::string_view data, std::string_view signature,
                             const std::filesystem::path& keyring, std::string_view what);

/// The binary OpenPGP packets of an ASCII-armored key block (or several concatenated): armor
/// headers and the CRC-24 line dropped, the base64 decoded. `what` names the source in errors.
/// gpgv 2.2 reads only binary keyrings, so armored ones are converted with this first.
Result<std::string> dearmor_keyring(std::string_view armored, std::string_view what);

} // namespace lockstep
