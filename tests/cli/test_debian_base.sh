#!/usr/bin/env bash
# A real vendor-style base (issue 16): Debian bookworm made by mmdebstrap (--variant=apt, fixed
# SOURCE_DATE_EPOCH) from deb.debian.org, turned into a one-layer image by skopeo's tarball
# transport and pushed to the real docker-registry. examples/mpi-hello's packages are then locked
# and built over `base: {image: docker://…}`:
#   - the base's installed packages plus the lock's debs are exactly the set examples/mpi-hello gets
#     on lockstep's own Debian base (both locked now, from the same mirror);
#   - inside the image `dpkg --audit` prints nothing and `apt-get check` passes, and
#     `lockstep verify --lock` passes for the base's and the new packages alike;
#   - the image runs the 4-rank MPI job.
# Needs network access to deb.debian.org (exit 77 without it, except in CI where it is a failure).
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/registry.sh"
need jq skopeo mmdebstrap docker-registry curl

if ! curl -fsS --max-time 20 -o /dev/null http://deb.debian.org/debian/dists/bookworm/InRelease 2>/dev/null; then
  if [ -n "${CI:-}" ]; then
    fail "deb.debian.org is not reachable"
  fi
  echo "SKIP: deb.debian.org is not reachable" >&2
  exit 77
fi
example="$LOCKSTEP_SOURCE_DIR/examples/mpi-hello"

# ---- the base image, in the registry ------------------------------------------------------------------
# From Debian's standard sources, as the example's (and as Debian's own bookworm images are made).
SOURCE_DATE_EPOCH=1700000000 mmdebstrap --quiet --variant=apt bookworm base.tar \
  "deb http://deb.debian.org/debian bookworm main" "deb http://deb.debian.org/debian bookworm-updates main" \
  "deb http://deb.debian.org/debian-security bookworm-security main" \
  >/dev/null 2>mmdebstrap.log || fail "mmdebstrap failed: $(tail -5 mmdebstrap.log)"
skopeo copy --quiet tarball:base.tar oci:base-layout:bookworm || fail "skopeo can't make an image of the tarball"
registry_up hub plain
skopeo copy --quiet --dest-tls-verify=false oci:base-layout:bookworm "docker://$REG_HUB_HOST/debian:bookworm" ||
  fail "skopeo can't push the base"
pass "a bookworm base made by mmdebstrap is in the test registry"

# ---- examples/mpi-hello's packages over it, and on lockstep's own Debian base --------------------------
mkdir own over
cp "$example/hello.py" own/
cp "$example/hello.py" over/
sed 's|oci: ../../build/examples/mpi-hello|oci: out|; /sif: /d' "$example/lockstep.yaml" >own/lockstep.yaml
sed "s|^base: {debian: bookworm, variant: apt}|base: {image: \"docker://$REG_HUB_HOST/debian:bookworm\"}|" \
  own/lockstep.yaml >over/lockstep.yaml
grep -q "^base: {image:" over/lockstep.yaml || fail "the example's base line changed; update this test"
ls_run lock own/lockstep.yaml
assert_eq 0 "$RC" "lock the example on lockstep's Debian base: $ERR"
ls_run lock --tls-verify=false over/lockstep.yaml
assert_eq 0 "$RC" "lock the example over the registry base: $ERR"
tar -xOf base.tar ./var/lib/dpkg/status >base-status
own_set=$(jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' own/lockstep.lock | sort)
over_set=$({
  awk '/^Package: /{p=$2} /^Version: /{print p, $2}' base-status
  jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' over/lockstep.lock
} | sort -u)
assert_eq "$own_set" "$over_set" "the base's packages plus the lock's are examples/mpi-hello's own set"
n_over=$(jq '[.artifacts[] | select(.kind == "deb")] | length' over/lockstep.lock)
[ "$n_over" -gt 0 ] && [ "$n_over" -lt "$(wc -l <<<"$own_set")" ] || fail "the lock over the base has $n_over debs"
pass "over the base, only what is missing is locked ($n_over debs), and the result is the example's set"

# ---- the image over the base --------------------------------------------------------------------------
ls_run build --locked --tls-verify=false over/lockstep.yaml
assert_eq 0 "$RC" "build over the registry base: $ERR"
ls_run exec oci:over/out -- dpkg --audit
assert_eq "0:" "$RC:$OUT" "dpkg --audit inside the image prints nothing: $ERR"
ls_run exec oci:over/out -- apt-get check -q
assert_eq 0 "$RC" "apt-get check inside the image: $OUT $ERR"
ls_run exec oci:over/out -- dpkg-query -W -f '${Package} ${Version}\n'
assert_eq "$own_set" "$(sort <<<"$OUT")" "dpkg inside the image knows exactly the example's packages"
ls_run verify oci:over/out --lock over/lockstep.lock
assert_eq 0 "$RC" "verify --lock over the base: $OUT $ERR"
pass "dpkg --audit and apt-get check are clean inside; verify --lock passes for base and new packages"

ls_run exec oci:over/out -- mpirun --oversubscribe -n 4 python3 /opt/hello/hello.py
assert_eq 0 "$RC" "mpirun -n 4 in the image: $OUT $ERR"
assert_eq 4 "$(grep -c '^hello from rank' <<<"$OUT")" "four ranks said hello"
assert_contains "$OUT" "allreduce ok: 4 ranks, sum 10" "allreduce over 4 ranks gives 10"
pass "the image over the registry base runs the 4-rank MPI job"

done_testing
