#!/usr/bin/env bash
# Snapshot archives (docs/vendor.md, "Snapshots"), against a local server laid out like
# snapshot.debian.org (tests/cli/snapshot_server.py: snapshot/archive/NAME/<timestamp>/, any
# timestamp answered from the newest snapshot at or before it):
#   - a lock made from the live mirror builds after the mirror dropped its pool files: each file
#     gone (404) is fetched from the snapshot of its Release's date, same digest;
#   - `snapshot: TIMESTAMP` locks and builds against the snapshot itself, with the live mirror gone;
#   - a malformed timestamp, or a snapshot without a known service, is a located error (exit 2).
source "$(dirname "$0")/lib.sh"
need jq gpg gpgconf dpkg-deb dpkg python3

fixture_repo make-repo.sh www/live >/dev/null 2>&1 || fail "make-repo.sh failed"
# The snapshot service's copy, taken when the Release (Date: 2024-01-01 00:00 UTC) was published.
mkdir -p www/snapshot/archive/live
cp -r www/live www/snapshot/archive/live/20240101T000000Z
start_http_server "$WORK/www" "$LOCKSTEP_SOURCE_DIR/tests/cli/snapshot_server.py"
cp www/live/keyring.gpg keyring.gpg

spec() { # DIR EXTRA-REPO-KEYS
  mkdir -p "$1"
  cp keyring.gpg "$1/"
  cat >"$1/lockstep.yaml" <<YAML
lockstep: 1
name: snaptest
repos:
  - {apt: $HTTP_URL/live, suite: lstest, components: [main], keyring: keyring.gpg$2}
packages:
  apt: [ls-app]
YAML
}

# ---- a live lock whose pool files are gone upstream ----------------------------------------------
spec live ", snapshot_url: $HTTP_URL/snapshot/archive/live"
ls_run lock live/lockstep.yaml
assert_eq 0 "$RC" "lock against the live mirror: $ERR"
assert_contains "$(jq -r '.artifacts[0].url' live/lockstep.lock)" "$HTTP_URL/live/pool/" "the lock names the live mirror"
ls_run build --locked live/lockstep.yaml --oci live/out
assert_eq 0 "$RC" "online build: $ERR"
online=$(last_line "$OUT")
find www/live/pool -name '*.deb' -delete
LOCKSTEP_CACHE="$WORK/c1" ls_run build --locked live/lockstep.yaml --oci live/out2
assert_eq 0 "$RC" "build after the mirror dropped the files: $ERR"
assert_eq "$online" "$(last_line "$OUT")" "the same digest, from the snapshot"
assert_contains "$ERR" "trying $HTTP_URL/snapshot/archive/live/20240101T060000Z/pool/" \
  "each file gone is asked of the snapshot after its Release's date"
grep -q 'GET /snapshot/archive/live/20240101T060000Z/pool/.*\.deb HTTP/1.1" 200' "$HTTP_LOG" ||
  fail "the snapshot server did not serve the pool files"
pass "a lock from the live mirror builds from the snapshot archive when the mirror dropped its files"

# Without a snapshot service for the repository, a dropped file is a clear download error.
spec bare ""
cp live/lockstep.lock bare/lockstep.lock
LOCKSTEP_CACHE="$WORK/c2" ls_run build --locked bare/lockstep.yaml --oci bare/out
assert_eq 3 "$RC" "no snapshot service: the download fails"
assert_contains "$ERR" "not found (HTTP 404)" "says the file is gone"
pass "without a snapshot service, a file gone upstream is exit 3 naming it"

# ---- a repository pinned to a snapshot timestamp ------------------------------------------------
rm -rf www/live
spec pinned ", snapshot: 20240315T120000Z, snapshot_url: $HTTP_URL/snapshot/archive/live"
LOCKSTEP_CACHE="$WORK/c3" ls_run lock pinned/lockstep.yaml
assert_eq 0 "$RC" "lock against a snapshot: $ERR"
assert_eq "$HTTP_URL/snapshot/archive/live/20240315T120000Z" "$(jq -r '.repos[0].url' pinned/lockstep.lock)" \
  "the lock's repository is the snapshot"
LOCKSTEP_CACHE="$WORK/c3" ls_run build --locked pinned/lockstep.yaml --oci pinned/out
assert_eq 0 "$RC" "build from the snapshot: $ERR"
layers() { # LAYOUT: the layer digests of its image
  local m
  m=$(jq -r '.manifests[0].digest' "$1/index.json" | cut -d: -f2)
  jq -c '[.layers[].digest]' "$1/blobs/sha256/$m"
}
assert_eq "$(layers live/out)" "$(layers pinned/out)" \
  "the snapshot's packages give the same layers (the image records another lock, with the snapshot's URLs)"
pass "snapshot: TIMESTAMP locks and builds against the snapshot archive (the live mirror gone)"

# ---- bad input -----------------------------------------------------------------------------------
spec badstamp ", snapshot: yesterday"
ls_run check badstamp/lockstep.yaml
assert_eq 2 "$RC" "a malformed timestamp"
assert_contains "$ERR" "repos[0].snapshot" "located at the key"
assert_contains "$ERR" "YYYYMMDDTHHMMSSZ" "says the form"
spec unknown ", snapshot: 20240101T000000Z"
ls_run check unknown/lockstep.yaml
assert_eq 2 "$RC" "a snapshot without a known service"
assert_contains "$ERR" "give its URL with snapshot_url" "says what to add"
pass "a malformed timestamp or an unknown snapshot service is exit 2, located"

done_testing
