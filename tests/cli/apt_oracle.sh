# shellcheck shell=bash
# apt itself as the judge of what lockstep resolves (sourced by the CLI suites, after lib.sh, as
# `source "$LOCKSTEP_SOURCE_DIR/tests/cli/apt_oracle.sh"`: lib.sh changes directory): a
# hermetic apt configuration under a directory of the suite's, `apt-get update` against the given
# sources, then `apt-get -s install` over a given dpkg status file. Nothing of the host's apt
# (configuration, sources, keys, preferences, lists, cache, dpkg status) is read or written.
#
#   apt_oracle_setup DIR SOURCES_LINE...
#       writes DIR/apt.conf and DIR/sources.list (one-line sources: "deb [signed-by=KEYRING] URL
#       SUITE COMPONENT..."), runs `apt-get update` and fails the suite when apt errs or warns.
#   apt_oracle_install STATUS_FILE PKG...
#       what `apt-get -s install --no-install-recommends --no-remove PKG...` would install over
#       STATUS_FILE (an empty file for an empty system, or a base image's /var/lib/dpkg/status), as
#       "name version" lines sorted (an upgrade prints its new version). Returns non-zero, with
#       apt's output on stderr, when apt refuses: an error, a package it would remove, or "The
#       following held packages will be changed" (which apt -s only reports). apt's last stdout and
#       stderr stay in $APT_ORACLE_DIR/install.out and install.err.
#
# The options that make apt decide as lockstep does (docs/apt-resolver.md): amd64 only, no
# Recommends or Suggests, no pins (empty preferences), and phased updates always included
# (APT::Get::Always-Include-Phased-Updates), so a phased version is a candidate like any other.
# Needs apt-get (apt).

APT_ORACLE_DIR=""

apt_oracle_setup() { # DIR SOURCES_LINE...
  local dir=$1 line
  shift
  need apt-get
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  APT_ORACLE_DIR=$dir
  mkdir -p "$dir/etc/apt.conf.d" "$dir/etc/preferences.d" "$dir/etc/sources.list.d" \
    "$dir/etc/trusted.gpg.d" "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/log"
  : >"$dir/etc/preferences"
  : >"$dir/status.empty"
  : >"$dir/sources.list"
  for line in "$@"; do
    printf '%s\n' "$line" >>"$dir/sources.list"
  done
  # Read through APT_CONFIG, before apt looks at /etc/apt/apt.conf.d: the host's configuration
  # parts and main file are replaced, not added to.
  cat >"$dir/apt.conf" <<CONF
Dir::Etc::main "$dir/etc/apt.conf";
Dir::Etc::parts "$dir/etc/apt.conf.d";
Dir::Etc::SourceList "$dir/sources.list";
Dir::Etc::SourceParts "$dir/etc/sources.list.d";
Dir::Etc::Preferences "$dir/etc/preferences";
Dir::Etc::PreferencesParts "$dir/etc/preferences.d";
Dir::Etc::Trusted "$dir/etc/trusted.gpg";
Dir::Etc::TrustedParts "$dir/etc/trusted.gpg.d";
Dir::State "$dir";
Dir::State::Lists "$dir/lists";
Dir::State::status "$dir/status.empty";
Dir::State::extended_states "$dir/extended_states";
Dir::Cache "$dir/cache";
Dir::Log "$dir/log";
Debug::NoLocking "true";
APT::Sandbox::User "root";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
APT::Install-Recommends "false";
APT::Install-Suggests "false";
APT::Get::Always-Include-Phased-Updates "true";
Acquire::Languages "none";
Acquire::http::Proxy "DIRECT";
Acquire::Retries "0";
CONF
  if ! APT_CONFIG="$dir/apt.conf" apt-get -q update >"$dir/update.log" 2>&1; then
    fail "apt_oracle_setup: apt-get update failed: $(cat "$dir/update.log")"
  fi
  if grep -q '^[WE]:' "$dir/update.log"; then
    fail "apt_oracle_setup: apt-get update warns: $(cat "$dir/update.log")"
  fi
}

apt_oracle_install() { # STATUS_FILE PKG...
  local status=$1 dir=$APT_ORACLE_DIR rc=0
  shift
  [ -n "$dir" ] || fail "apt_oracle_install: call apt_oracle_setup first"
  [ -f "$status" ] || fail "apt_oracle_install: no status file $status"
  APT_CONFIG="$dir/apt.conf" apt-get -q -s install --no-install-recommends --no-remove \
    -o Dir::State::status="$(realpath "$status")" "$@" >"$dir/install.out" 2>"$dir/install.err" || rc=$?
  if [ "$rc" = 0 ] && grep -q '^The following held packages will be changed:' "$dir/install.out"; then
    rc=100
  fi
  if [ "$rc" = 0 ] && grep -q '^Remv ' "$dir/install.out"; then
    rc=100
  fi
  if [ "$rc" != 0 ]; then
    echo "apt_oracle_install: apt-get -s install $* refuses (exit $rc):" >&2
    cat "$dir/install.out" "$dir/install.err" >&2
    return "$rc"
  fi
  # "Inst NAME [OLD] (NEW ARCHIVE [ARCH])": the new version.
  sed -n 's/^Inst \([^ ]*\) \(\[[^]]*\] \)\{0,1\}(\([^ ]*\) .*/\1 \3/p' "$dir/install.out" | LC_ALL=C sort
}
