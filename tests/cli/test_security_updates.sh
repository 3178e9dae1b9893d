#!/usr/bin/env bash
# Moving to fixes, and only to fixes (issue 37), over the Ubuntu-like archive of
# tests/fixtures/apt/make-ubuntu-repo.sh with its three suites (jammy, jammy-updates,
# jammy-security) served on 127.0.0.1, with apt itself as the judge (tests/cli/apt_oracle.sh):
#   - each deb in the lock records its suite, the security suite where one lists it (Ubuntu copies
#     each security update into -updates too);
#   - `lockstep outdated` (also given the lock's path) says nothing moved right after locking (exit
#     0); after the archive gains a security fix (libssl3 in jammy-security and jammy-updates) and
#     a plain update (nvtop in jammy-updates) it lists both, marks the fix, exits 1, writes nothing;
#   - `lockstep lock --update --security` moves libssl3 alone, printing the move with its suite,
#     which is what apt's security-only upgrade (the other suites pinned below the installed
#     versions) installs over the same packages; a second run finds nothing to move;
#   - `--security` without `--update` or with names is a usage error (exit 2); without a lock,
#     `outdated` and `--update --security` are exit 2 saying to lock first.
source "$(dirname "$0")/lib.sh"
# shellcheck source=apt_oracle.sh
source "$LOCKSTEP_SOURCE_DIR/tests/cli/apt_oracle.sh"
need jq gpg apt-get python3

MAKE="$LOCKSTEP_SOURCE_DIR/tests/fixtures/apt/make-ubuntu-repo.sh"
fixture_repo make-ubuntu-repo.sh ubuntu >"$WORK/make.log" 2>&1 || fail "make-ubuntu-repo.sh failed: $(cat "$WORK/make.log")"
start_http_server "$WORK/ubuntu"
cp "$WORK/ubuntu/keyring.gpg" keyring.gpg
cat >lockstep.yaml <<YAML
lockstep: 1
name: fixes
repos:
  - {apt: $HTTP_URL, suites: [jammy, jammy-updates, jammy-security], components: [main, universe], keyring: keyring.gpg}
packages:
  apt: [python3.10, nvtop, libnccl-dev]
YAML
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
cp lockstep.lock lock.1
assert_eq "libssl3 3.0.2-0ubuntu1.15 jammy-security|nvtop 1.2.2-1 jammy|python3.10 3.10.12-1~22.04.3 jammy-updates" \
  "$(jq -r '[.artifacts[] | select(.name == "libssl3" or .name == "nvtop" or .name == "python3.10") | "\(.name) \(.version) \(.suite)"] | sort | join("|")' lockstep.lock)" \
  "each deb records its suite, the security suite where jammy-updates lists the same .deb"
ls_run outdated
assert_eq 0 "$RC" "outdated right after locking: $ERR"
assert_contains "$OUT" "is up to date with its repositories" "nothing is outdated"
ls_run lock --update --security
assert_eq 0 "$RC" "lock --update --security with nothing to move: $ERR"
assert_contains "$ERR" "no locked package has a newer build in a security suite" "it says so"
cmp -s lock.1 lockstep.lock || fail "nothing is written when there is nothing to move"
pass "each deb records its suite; nothing is outdated right after locking"

# ---- the archive moves: a security fix and a plain update ----------------------------------------
"$MAKE" "$WORK/ubuntu" --with-security >"$WORK/make.log" 2>&1 || fail "make-ubuntu-repo.sh --with-security: $(cat "$WORK/make.log")"
ls_run outdated lockstep.lock
assert_eq 1 "$RC" "outdated after the archive moved: $ERR"
assert_contains "$OUT" "3.0.2-0ubuntu1.15 -> 3.0.2-0ubuntu1.16  jammy-security  (security)" "the fix, marked"
assert_contains "$OUT" "1.2.2-1 -> 1.2.2-1ubuntu0.1  jammy-updates" "the plain update"
assert_contains "$OUT" "2 outdated in $PWD/lockstep.lock (1 security update)" "a summary"
ls_run outdated --json
assert_eq 1 "$RC" "outdated --json: $ERR"
assert_eq "2 1|deb libssl3 3.0.2-0ubuntu1.15 3.0.2-0ubuntu1.16 jammy-security true|deb nvtop 1.2.2-1 1.2.2-1ubuntu0.1 jammy-updates false" \
  "$(jq -r '"\(.outdated) \(.security)|" + ([.packages[] | "\(.kind) \(.name) \(.locked) \(.available) \(.suite) \(.security)"] | join("|"))' <<<"$OUT")" \
  "--json lists both, the fix marked"
cmp -s lock.1 lockstep.lock || fail "outdated writes nothing"
pass "outdated lists the fix (marked) and the plain update, exit 1, and writes nothing"

ls_run lock --update --security
assert_eq 0 "$RC" "lock --update --security: $ERR"
assert_contains "$ERR" "~ libssl3 3.0.2-0ubuntu1.15 -> 3.0.2-0ubuntu1.16 (jammy-security)" "the move, with its suite"
assert_not_contains "$ERR" "nvtop" "nvtop is not moved"
moved=$(diff <(jq -r '.artifacts[] | "\(.name) \(.version)"' lock.1 | LC_ALL=C sort) \
  <(jq -r '.artifacts[] | "\(.name) \(.version)"' lockstep.lock | LC_ALL=C sort) | sed -n 's/^> //p' || true)
assert_eq "libssl3 3.0.2-0ubuntu1.16" "$moved" "exactly the fix moved"

# apt's security-only upgrade: the lock's packages installed, jammy-security at its default
# priority, the other suites pinned below an installed version's 100.
status="$WORK/status"
jq -r '.artifacts[] | select(.kind == "deb") |
  "Package: \(.name)\nStatus: install ok installed\nVersion: \(.version)\nArchitecture: \(.arch)\n"' lock.1 >"$status"
apt_oracle_setup "$WORK/apt" \
  "deb [signed-by=$WORK/ubuntu/keyring.gpg] $HTTP_URL jammy main universe" \
  "deb [signed-by=$WORK/ubuntu/keyring.gpg] $HTTP_URL jammy-updates main universe" \
  "deb [signed-by=$WORK/ubuntu/keyring.gpg] $HTTP_URL jammy-security main universe"
printf 'Package: *\nPin: release a=%s\nPin-Priority: 50\n\n' jammy jammy-updates >"$APT_ORACLE_DIR/etc/preferences"
APT_CONFIG="$APT_ORACLE_DIR/apt.conf" apt-get -q -s upgrade -o Dir::State::status="$status" \
  >"$WORK/upgrade.out" 2>&1 || fail "apt-get -s upgrade: $(cat "$WORK/upgrade.out")"
assert_eq "$moved" "$(sed -n 's/^Inst \([^ ]*\) \[[^]]*\] (\([^ ]*\) .*/\1 \2/p' "$WORK/upgrade.out" | LC_ALL=C sort)" \
  "the move is apt's security-only upgrade"
ls_run lock --update --security
assert_eq 0 "$RC" "lock --update --security again: $ERR"
assert_contains "$ERR" "no locked package has a newer build in a security suite" "nothing more to move"
ls_run outdated
assert_eq 1 "$RC" "the plain update is still outdated: $ERR"
assert_contains "$OUT" "1 outdated" "only nvtop"
pass "lock --update --security moves exactly the fix, as apt's security-only upgrade does"

ls_run lock --security
assert_eq 2 "$RC" "--security without --update: $ERR"
assert_contains "$ERR" "--security goes with --update" "it says how"
ls_run lock --update nvtop --security
assert_eq 2 "$RC" "--security with names: $ERR"
mkdir nolock
cp lockstep.yaml keyring.gpg nolock/
ls_run outdated nolock/lockstep.yaml
assert_eq 2 "$RC" "outdated without a lock: $ERR"
assert_contains "$ERR" "no lock to compare with; run \`lockstep lock\` first" "it says what to do"
ls_run lock --update --security nolock/lockstep.yaml
assert_eq 2 "$RC" "lock --update --security without a lock: $ERR"
assert_contains "$ERR" "--security: $PWD/nolock/lockstep.lock has no lock to update; run \`lockstep lock\` first" \
  "it says what to do"
[ ! -e nolock/lockstep.lock ] || fail "no lock is written"
pass "--security without --update, or with names, is a usage error; without a lock, outdated and --security say to lock first"

done_testing
