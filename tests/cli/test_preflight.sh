#!/usr/bin/env bash
# `lockstep preflight`: the node checks before a launch, against this machine's real Open MPI,
# PMIx and user namespaces, and against stand-ins where the machine can't vary: an mpirun of another
# version first on PATH, a fake NVIDIA driver tree (LOCKSTEP_GPU_HOST_ROOT), an image relabelled
# with other facts. Image digests are judged by skopeo and sha256sum; the JSON line by jq.
source "$(dirname "$0")/lib.sh"
need jq skopeo mpirun

# ---------------------------------------------------------------------------------------------
# Images: an OCI layout and a SIF built by lockstep, a root directory, and the layout relabelled
# with the facts `lockstep build` records from a lock (dev.lockstep.*).
mkdir -p img/rootfs/etc
printf 'preflight\n' >img/rootfs/etc/marker
cat >img/lockstep.yaml <<'YAML'
lockstep: 1
name: pf
copy:
  - {from: ./rootfs, to: /}
env: {PATH: /bin}
outputs:
  oci: out/layout
  sif: out/pf.sif
YAML
"$LOCKSTEP" build -q img/lockstep.yaml >/dev/null
LAYOUT="oci:$WORK/img/out/layout"
SIF="$WORK/img/out/pf.sif"

# relabel SRC DST LABELS_JSON: a copy of layout SRC whose config has LABELS_JSON added.
relabel() {
  local src=$1 dst=$2 labels=$3 manifest config digest size
  cp -r "$src" "$dst"
  manifest=$(jq -r '.manifests[0].digest' "$dst/index.json")
  config=$(jq -r '.config.digest' "$dst/blobs/sha256/${manifest#sha256:}")
  jq -cj --argjson l "$labels" '.config.Labels = ((.config.Labels // {}) + $l)' \
    "$dst/blobs/sha256/${config#sha256:}" >"$WORK/blob"
  digest=$(sha256sum <"$WORK/blob" | cut -c1-64)
  size=$(stat -c %s "$WORK/blob")
  mv "$WORK/blob" "$dst/blobs/sha256/$digest"
  jq -cj --arg d "sha256:$digest" --argjson s "$size" '.config.digest = $d | .config.size = $s' \
    "$dst/blobs/sha256/${manifest#sha256:}" >"$WORK/blob"
  digest=$(sha256sum <"$WORK/blob" | cut -c1-64)
  size=$(stat -c %s "$WORK/blob")
  mv "$WORK/blob" "$dst/blobs/sha256/$digest"
  jq -c --arg d "sha256:$digest" --argjson s "$size" '.manifests[0].digest = $d | .manifests[0].size = $s' \
    "$dst/index.json" >"$WORK/blob"
  mv "$WORK/blob" "$dst/index.json"
}
MPI_LABELS='{"dev.lockstep.mpi.impl":"openmpi","dev.lockstep.mpi.version":"5.0.3","dev.lockstep.pmix.version":"4.2.7"}'
relabel img/out/layout img/mpi5 "$MPI_LABELS"
relabel img/out/layout img/badlabel '{"dev.lockstep.mpi.impl":"lam","dev.lockstep.mpi.version":"7.1"}'
assert_eq "5.0.3" "$(skopeo inspect --config "oci:$WORK/img/mpi5" | jq -r '.config.Labels["dev.lockstep.mpi.version"]')" \
  "skopeo reads the relabelled image"
pass "built the test images (OCI layout, SIF, relabelled layouts)"

# The host's Open MPI and PMIx as their own tools and packages report them.
HOST_MPI=$(mpirun --version | sed -n 's/^mpirun (Open MPI) \([^ ]*\).*/\1/p' | head -n 1)
[ -n "$HOST_MPI" ] || fail "can't read this host's Open MPI version from mpirun --version"

# ---------------------------------------------------------------------------------------------
ls_run preflight --json "$LAYOUT"
assert_eq 0 "$RC" "preflight of a present image ($ERR)"
assert_eq "$(skopeo inspect "$LAYOUT" | jq -r .Digest)" "$(jq -r '.checks[0].detail' <<<"$OUT")" \
  "the image check names the manifest digest skopeo sees"
assert_eq "$(hostname)" "$(jq -r .node <<<"$OUT")" "the node is the host name"
assert_eq "image driver gpus mpi pmix userns space" "$(jq -r '[.checks[].name] | join(" ")' <<<"$OUT")" \
  "the checks, in order"
assert_eq "true openmpi $HOST_MPI" "$(jq -r '"\(.ok) \(.host.mpi_impl) \(.host.mpi_version)"' <<<"$OUT")" \
  "ok and the host's MPI"
assert_eq 1 "$(printf '%s\n' "$OUT" | wc -l)" "--json prints one line"
pass "--json: one line, the manifest digest skopeo reports, the host's Open MPI as mpirun --version says"

ls_run preflight --json "$SIF"
assert_eq 0 "$RC" "preflight of a SIF ($ERR)"
assert_eq "sha256:$(sha256sum <"$SIF" | cut -c1-64)" "$(jq -r '.checks[0].detail' <<<"$OUT")" "SIF digest"
ls_run preflight --json --digest "sha256:$(sha256sum <"$SIF" | cut -c1-64)" "sif:$SIF"
assert_eq 0 "$RC" "the SIF's own digest is accepted ($ERR)"
pass "a SIF's digest is sha256 of the file, as sha256sum says"

WRONG=sha256:$(printf 'other' | sha256sum | cut -c1-64)
ls_run preflight --node n1 --digest "$WRONG" "$LAYOUT"
assert_eq 1 "$RC" "a wrong digest fails"
assert_contains "$OUT" "n1  image: $(skopeo inspect "$LAYOUT" | jq -r .Digest) found, $WRONG expected (copy the same image to every node)" \
  "digest mismatch line"
pass "another digest than --digest fails with both digests named"

ls_run preflight --node n1 --launcher slurm --gpus-per-node 1 "$WORK/no-such.sif"
assert_eq 1 "$RC" "a missing image fails"
assert_eq "NODE  image  driver  gpus  mpi  pmix  userns  space
n1    FAIL   -       FAIL  -    -     ok      ok

n1  image: missing: $WORK/no-such.sif
n1  gpus: no NVIDIA driver, 1 GPU requested per node" "$OUT" "table for a missing image on a node without GPUs"
ls_run preflight --json "oci:$WORK/no-such-layout:v1"
assert_eq 1 "$RC" "a missing layout fails"
assert_eq "fail|missing: $WORK/no-such-layout|false" \
  "$(jq -r '"\(.checks[0].status)|\(.checks[0].detail)|\(.ok)"' <<<"$OUT")" "missing layout in JSON"
pass "a missing image is a failed check (exit 1), not an error"

mkdir -p rootfs
ls_run preflight --json rootfs
assert_eq "0 a directory (no digest)" "$RC $(jq -r '.checks[0].detail' <<<"$OUT")" "directory image"
ls_run preflight --json --digest "$WRONG" rootfs
assert_eq "1 a directory has no digest, $WRONG expected" "$RC $(jq -r '.checks[0].detail' <<<"$OUT")" \
  "directory with --digest"
pass "a directory has no digest: fine unless one is required"

# ---------------------------------------------------------------------------------------------
# MPI: the host's real mpirun, then stand-ins first on PATH.
ls_run preflight --json --expect-mpi "openmpi@$HOST_MPI" "$LAYOUT"
assert_eq "0 ok Open MPI $HOST_MPI on host and image" "$RC $(jq -r '.checks[3] | "\(.status) \(.detail)"' <<<"$OUT")" \
  "host and image agree"
pass "the host's own Open MPI matches an image recording the same version"

mkdir -p fakebin mpich
printf '#!/bin/sh\necho "mpirun (Open MPI) 5.0.3"\necho\necho "Report bugs to https://www.open-mpi.org/community/help/"\n' \
  >fakebin/mpirun
printf '#!/bin/sh\necho "HYDRA build details:"\necho "    Version:                                 4.0.2"\n' >mpich/mpirun
chmod 0755 fakebin/mpirun mpich/mpirun
PATH="$WORK/fakebin:$PATH" ls_run preflight --node n1 --expect-mpi "openmpi@$HOST_MPI" "$LAYOUT"
assert_eq 1 "$RC" "another Open MPI on the host fails"
assert_contains "$OUT" "n1    ok     -       -     FAIL" "the mpi cell"
assert_contains "$OUT" "n1  mpi: host Open MPI 5.0.3, image Open MPI $HOST_MPI: the hybrid model needs the same major.minor (rebuild the image with the host's MPI or use --mpi-model container)" \
  "the mpi line"
PATH="$WORK/mpich:$PATH" ls_run preflight --node n1 --expect-mpi "openmpi@$HOST_MPI" "$LAYOUT"
assert_eq 1 "$RC" "MPICH on the host fails"
assert_contains "$OUT" "n1  mpi: host MPICH 4.0.2, image Open MPI $HOST_MPI: the hybrid model needs the host's MPI in the image" \
  "MPICH line"
PATH="$WORK/fakebin:$PATH" ls_run preflight --json --launcher slurm --expect-mpi "openmpi@$HOST_MPI" "$LAYOUT"
assert_eq "0 skipped" "$RC $(jq -r '.checks[3].status' <<<"$OUT")" "under Slurm the host's mpirun is not used"
PATH="$WORK/fakebin:$PATH" ls_run preflight --json --mpi-model container --expect-mpi "openmpi@$HOST_MPI" "$LAYOUT"
assert_eq "0 skipped" "$RC $(jq -r '.checks[3].status' <<<"$OUT")" "the container model uses the image's mpirun"
pass "an mpirun of another version or implementation fails the hybrid model, not Slurm or the container model"

PATH="$WORK/fakebin:/usr/bin:/bin" ls_run preflight --node n1 "oci:$WORK/img/mpi5"
assert_eq 0 "$RC" "facts from the labels ($ERR)"
assert_contains "$OUT" "n1    ok     -       -     ok" "labels say 5.0.3 like the fake mpirun"
ls_run preflight --node n1 "oci:$WORK/img/mpi5"
assert_eq 1 "$RC" "the host's real MPI against an image recording 5.0.3"
assert_contains "$OUT" "n1  mpi: host Open MPI $HOST_MPI, image Open MPI 5.0.3: the hybrid model needs the same major.minor" \
  "the image's facts come from its labels"
ls_run preflight "oci:$WORK/img/badlabel"
assert_eq 2 "$RC" "a malformed label is malformed input"
assert_contains "$ERR" "label dev.lockstep.mpi.impl: 'lam' is not an MPI implementation lockstep knows" "bad label"
pass "without --expect-* flags the image's dev.lockstep labels give the facts; a malformed one is exit 2"

# `mpirun --version` is asked once while the program is unchanged (remembered in the store by its
# path and file identity); a changed program is asked again. A program changed in the last 2 s is
# never remembered, so the stand-in ages first.
mkdir -p counted
printf '#!/bin/sh\necho x >>"%s/mpirun-calls"\necho "mpirun (Open MPI) 5.0.3"\n' "$WORK" >counted/mpirun
chmod 0755 counted/mpirun
sleep 2.1
for _ in 1 2 3; do
  PATH="$WORK/counted:$PATH" ls_run preflight --json --expect-mpi "openmpi@5.0.3" "$LAYOUT"
  assert_eq "0 ok" "$RC $(jq -r '.checks[3].status' <<<"$OUT")" "the stand-in's 5.0.3 matches"
done
assert_eq 1 "$(wc -l <mpirun-calls)" "mpirun --version asked once for three preflights"
printf '#!/bin/sh\necho x >>"%s/mpirun-calls"\necho "mpirun (Open MPI) 5.0.4"\n' "$WORK" >counted/mpirun
PATH="$WORK/counted:$PATH" ls_run preflight --json --expect-mpi "openmpi@5.0.3" "$LAYOUT"
assert_eq "0 warn" "$RC $(jq -r '.checks[3].status' <<<"$OUT")" "the changed stand-in's 5.0.4 is seen"
assert_eq 2 "$(wc -l <mpirun-calls)" "a changed mpirun is asked again"
pass "the host's mpirun --version is remembered while the program is unchanged, asked again once it changes"

# The PMIx and UCX versions come from loading the libraries (their constructors run), remembered the
# same way by the identity of the file the loader would load; a changed library is loaded again.
mkdir -p fakepmix
fake_pmix() { # VERSION
  printf '#include <stdio.h>\n__attribute__((constructor)) static void loaded(void) { FILE* f = fopen("%s/pmix-loads", "a"); if (f) { fputs("x\\n", f); fclose(f); } }\nconst char* PMIx_Get_version(void) { return "OpenPMIx %s (fake)"; }\n' \
    "$WORK" "$1" >fakepmix/pmix.c
  cc -shared -fPIC -o fakepmix/libpmix.so.2.new fakepmix/pmix.c && mv fakepmix/libpmix.so.2.new fakepmix/libpmix.so.2
}
fake_pmix 9.1.0
sleep 2.1
for _ in 1 2 3; do
  LD_LIBRARY_PATH="$WORK/fakepmix" ls_run preflight --json --expect-mpi "openmpi@$HOST_MPI" "$LAYOUT"
  assert_eq "9.1.0" "$(jq -r .host.pmix <<<"$OUT")" "the fake libpmix's version: $OUT $ERR"
done
assert_eq 1 "$(wc -l <pmix-loads)" "libpmix loaded once for three preflights"
fake_pmix 9.2.0
LD_LIBRARY_PATH="$WORK/fakepmix" ls_run preflight --json --expect-mpi "openmpi@$HOST_MPI" "$LAYOUT"
assert_eq "9.2.0" "$(jq -r .host.pmix <<<"$OUT")" "the changed libpmix's version"
assert_eq 2 "$(wc -l <pmix-loads)" "a changed libpmix is loaded again"
pass "the host's PMIx version is remembered by the library's identity, read again once it changes"

if [ "$(ldconfig -p | grep -c 'libpmix.so.2 ')" -gt 0 ]; then
  HOST_PMIX=$(dpkg-query -W -f='${Version}' libpmix2 2>/dev/null | sed 's/-.*//')
  PMIX_MAJOR=${HOST_PMIX%%.*}
  ls_run preflight --node n1 --expect-mpi "openmpi@$HOST_MPI" --expect-pmix "$((PMIX_MAJOR - 1)).2.3" "$LAYOUT"
  assert_eq 1 "$RC" "another PMIx major fails"
  assert_contains "$OUT" "n1  pmix: host PMIx $HOST_PMIX" "pmix line names the host's PMIx"
  assert_contains "$OUT" "image PMIx $((PMIX_MAJOR - 1)).2.3: the major versions differ" "pmix reason"
  ls_run preflight --json --expect-mpi "openmpi@$HOST_MPI" --expect-pmix "$PMIX_MAJOR.99.0" "$LAYOUT"
  assert_eq "0 warn" "$RC $(jq -r '.checks[4].status' <<<"$OUT")" "another PMIx minor warns"
  pass "the host's libpmix (PMIx $HOST_PMIX): another major fails, another minor warns"
fi

# ---------------------------------------------------------------------------------------------
# GPUs: a fake driver tree with an old driver and one GPU.
FAKE=$WORK/fake-host
mkdir -p "$FAKE/proc/driver/nvidia/gpus/0000:3b:00.0"
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.57.02  Tue Jul 13 16:14:05 UTC 2021\n' \
  >"$FAKE/proc/driver/nvidia/version"
printf 'Model: \t\t NVIDIA A100-SXM4-40GB\nDevice Minor: \t 0\n' >"$FAKE/proc/driver/nvidia/gpus/0000:3b:00.0/information"
LOCKSTEP_GPU_HOST_ROOT=$FAKE ls_run preflight --node n1 --launcher slurm --gpus-per-node 2 --cuda 12.1 \
  --cuda-floor 530.30.02 "$LAYOUT"
assert_eq 1 "$RC" "an old driver fails"
assert_eq "NODE  image  driver  gpus  mpi  pmix  userns  space
n1    ok     FAIL    FAIL  -    -     ok      ok

n1  driver: driver 470.57.02 is older than 530.30.02, the floor of the image's CUDA 12.1 (update the driver or use an image built for an older CUDA)
n1  gpus: 1 GPU on this node, 2 requested per node" "$OUT" "old driver table"
LOCKSTEP_GPU_HOST_ROOT=$FAKE ls_run preflight --json --launcher slurm --gpus-per-node 1 --cuda-floor 470.57.02 "$LAYOUT"
assert_eq "0 ok ok 470.57.02 1" "$RC $(jq -r '"\(.checks[1].status) \(.checks[2].status) \(.host.driver) \(.host.gpus)"' <<<"$OUT")" \
  "a driver at the floor"
pass "the driver is compared with --cuda-floor and the GPUs counted from the driver's procfs files"

# ---------------------------------------------------------------------------------------------
ls_run preflight --json --unpack-bytes 1000000000000000000 "$LAYOUT"
assert_eq "1 fail" "$RC $(jq -r '.checks[6].status' <<<"$OUT")" "not enough space"
assert_contains "$(jq -r '.checks[6].detail' <<<"$OUT")" " free in $LOCKSTEP_CACHE, 1000444.2 TiB needed" "space detail"
assert_contains "$(jq -r '.checks[6].detail' <<<"$OUT")" "(free some space or point LOCKSTEP_CACHE at a larger disk)" \
  "space advice"
pass "free space in the cache's file system is checked against --unpack-bytes"

if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null; then
  chmod 0755 "$WORK"
  install -m 0755 "$LOCKSTEP" "$WORK/lockstep-copy"
  peer=fail
  runuser -u nobody -- unshare --user true 2>/dev/null && peer=ok
  set +e
  OUT=$(cd / && runuser -u nobody -- env LOCKSTEP_CACHE="$WORK/nobody-cache" "$WORK/lockstep-copy" preflight \
    --json "$WORK/rootfs" 2>"$WORK/.stderr")
  set -e
  assert_eq "$peer" "$(jq -r '.checks[5].status' <<<"$OUT")" "userns as nobody, as util-linux unshare finds"
  pass "as an unprivileged user the user namespace check agrees with unshare --user ($peer)"
fi
ls_run preflight --json "$LAYOUT"
assert_eq "$([ "$(id -u)" = 0 ] && echo 'not needed (root)' || echo allowed)" "$(jq -r '.checks[5].detail' <<<"$OUT")" \
  "userns detail"

# ---------------------------------------------------------------------------------------------
ls_run preflight --mpi-model bind "$LAYOUT"
assert_eq 2 "$RC" "unknown model"
ls_run preflight --expect-mpi lam@7.1 "$LAYOUT"
assert_eq 2 "$RC" "unknown MPI"
assert_contains "$ERR" "invalid --expect-mpi 'lam@7.1': expected openmpi@VERSION or mpich@VERSION" "--expect-mpi message"
ls_run preflight --digest sha256:abc "$LAYOUT"
assert_eq 2 "$RC" "malformed digest"
ls_run preflight --node 'a b' "$LAYOUT"
assert_eq 2 "$RC" "node name with a space"
ls_run preflight --help
assert_contains "$OUT" "lockstep preflight --gpus-per-node 4 oci:build/train" "--help has examples"
pass "bad usage exits 2 with a message; --help shows examples"

done_testing
