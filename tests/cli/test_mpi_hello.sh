#!/usr/bin/env bash
# The real thing: examples/mpi-hello (Debian bookworm from deb.debian.org, openmpi-bin,
# python3-mpi4py) built from its committed lock with --locked, checked by skopeo, umoci and siftool,
# built a second time into an empty store with the same digest, and run with 4 MPI ranks inside the
# image with `lockstep exec`. Needs network access to deb.debian.org (exit 77 without it, except in
# CI where it is a failure).
source "$(dirname "$0")/lib.sh"
need jq skopeo umoci siftool curl

example="$LOCKSTEP_SOURCE_DIR/examples/mpi-hello"
[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] ||
  fail "/usr/share/keyrings/debian-archive-keyring.gpg is missing (scripts/install-deps.sh installs it)"
if ! curl -fsS --max-time 20 -o /dev/null http://deb.debian.org/debian/dists/bookworm/InRelease 2>/dev/null; then
  if [ -n "${CI:-}" ]; then
    fail "deb.debian.org is not reachable"
  fi
  echo "SKIP: deb.debian.org is not reachable" >&2
  exit 77
fi

# A copy of the example, so the outputs and any re-lock stay in the suite's directory.
cp -r "$example" ex
sed -i 's|oci: ../../build/examples/mpi-hello|oci: out|; s|sif: ../../build/examples/mpi-hello.sif|sif: out.sif|' \
  ex/lockstep.yaml

ls_run lock --check ex/lockstep.yaml
assert_eq 0 "$RC" "the committed lock matches the example's spec: $ERR"
ls_run build --locked ex/lockstep.yaml
assert_eq 0 "$RC" "build --locked examples/mpi-hello: $ERR"
digest=$(last_line "$OUT")
pass "examples/mpi-hello builds from its committed lock ($digest)"

skopeo inspect --raw oci:ex/out:latest | jq -e '.layers | length > 3' >/dev/null ||
  fail "skopeo can't read the image or it has too few layers"
skopeo copy --quiet oci:ex/out:latest oci-archive:"$WORK/copy.tar" || fail "skopeo can't copy the image"
umoci unpack --rootless --image ex/out:latest bundle >/dev/null 2>&1 || fail "umoci can't unpack the image"
[ -x bundle/rootfs/usr/bin/mpirun ] || [ -L bundle/rootfs/usr/bin/mpirun ] || fail "no mpirun in the unpacked image"
grep -q '^Package: python3-mpi4py$' bundle/rootfs/var/lib/dpkg/status || fail "dpkg status lacks python3-mpi4py"
siftool list ex/out.sif | grep -q Squashfs || fail "siftool doesn't see the squashfs partition"
pass "skopeo, umoci and siftool read the image; dpkg's database lists the packages"

# The same lock into an empty store: the same digest.
rm -rf ex/out ex/out.sif
LOCKSTEP_CACHE="$WORK/cache2" ls_run build --locked ex/lockstep.yaml
assert_eq 0 "$RC" "second build: $ERR"
assert_eq "$digest" "$(last_line "$OUT")" "a second build from the lock in an empty store gives the same digest"
pass "two builds from the lock give identical digests"

# 4 ranks inside the image (Open MPI's mpirun in the container, shared memory between ranks).
ls_run exec oci:ex/out -- mpirun --oversubscribe -n 4 python3 /opt/hello/hello.py
assert_eq 0 "$RC" "mpirun -n 4 in the image: $OUT $ERR"
assert_eq 4 "$(grep -c '^hello from rank' <<<"$OUT")" "four ranks said hello"
assert_contains "$OUT" "allreduce ok: 4 ranks, sum 10" "allreduce over 4 ranks gives 10"
pass "a 4-rank MPI job runs inside the image with lockstep exec"

done_testing
