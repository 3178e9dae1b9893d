#!/usr/bin/env bash
# The ctest fixture `mpi_hello` (docs/testing.md): examples/mpi-hello built once per test run from its
# committed lock (Debian bookworm from deb.debian.org), as an OCI layout and a SIF (outputs out and
# out.sif beside the copied spec), for the suites that need the image rather than the act of
# building it (test_mpi_hello judges this build, test_run runs it on the simulated cluster,
# test_rootless compares a rootless build with it).
# Kept under $LOCKSTEP_BUILD_DIR/test-fixtures/mpi-hello/KEY, KEY the sha256 of the lockstep binary
# and the example's files: a later run with the same inputs reuses it, any change builds it anew.
# Suites read it through mpi_hello_fixture (lib.sh). Exit 77 without deb.debian.org, except in CI.
# When a locked .deb has left the security archive (it keeps only the newest build), the fixture
# moves to the fixes with `lock --update --security` and leaves a `relocked` marker saying so.
source "$(dirname "$0")/lib.sh"
: "${LOCKSTEP_BUILD_DIR:?}"

if ! curl -fsS --max-time 20 -o /dev/null http://deb.debian.org/debian/dists/bookworm/InRelease 2>/dev/null; then
  [ -z "${CI:-}" ] || fail "deb.debian.org is not reachable"
  echo "SKIP: deb.debian.org is not reachable" >&2
  exit 77
fi

root="$LOCKSTEP_BUILD_DIR/test-fixtures/mpi-hello"
key=$(mpi_hello_fixture_key)
if [ -f "$root/$key/digest" ]; then
  echo "examples/mpi-hello: reusing $root/$key ($(cat "$root/$key/digest"))"
  exit 0
fi
mkdir -p "$root"
rm -rf "${root:?}"/* # earlier keys: other binaries or another example
# Built under the suite's temporary directory, as the suites build, not in the checkout: a spec in a
# git work tree records its commit in the image (docs/spec.md, provenance).
tmp="$WORK/fixture"
mkdir -p "$tmp"
cp -r "$LOCKSTEP_SOURCE_DIR/examples/mpi-hello" "$tmp/ex"
sed -i 's|oci: ../../build/examples/mpi-hello|oci: out|; s|sif: ../../build/examples/mpi-hello.sif|sif: out.sif|' \
  "$tmp/ex/lockstep.yaml"
LOCKSTEP_CACHE="$WORK/store" ls_run build --locked "$tmp/ex/lockstep.yaml"
if [ "$RC" = 3 ] && grep -q "debian-security" <<<"$ERR"; then
  # The security archive keeps only the newest build of each package: a fix published since the
  # example was locked took the locked .deb away (snapshot.debian.org, lockstep's fallback, is
  # not reachable from every test machine). Move to the fixes, as a user would, and say so; the
  # suites that compare with the committed lock see the marker.
  echo "examples/mpi-hello: a locked .deb left the security archive; building after lock --update --security" >&2
  LOCKSTEP_CACHE="$WORK/store" ls_run lock --update --security "$tmp/ex/lockstep.yaml"
  assert_eq 0 "$RC" "lock --update --security examples/mpi-hello: $ERR"
  printf "%s\n" "$ERR" >"$tmp/ex/relocked"
  LOCKSTEP_CACHE="$WORK/store" ls_run build --locked "$tmp/ex/lockstep.yaml"
fi
assert_eq 0 "$RC" "build --locked examples/mpi-hello: $ERR"
last_line "$OUT" >"$tmp/digest"
rm -rf "$root/.$key.$$"
cp -a "$tmp" "$root/.$key.$$"
mv "$root/.$key.$$" "$root/$key"
echo "examples/mpi-hello: built into $root/$key ($(cat "$root/$key/digest"))"
