#!/usr/bin/env bash
# Staging (docs/launch.md, "Staging"): `lockstep run` with an image only the launching node has
# copies it into every node's store before any rank starts, on the simulated cluster:
#   - mpirun: OCI and SIF through the rsh agent tree; the ranks on n1..n3 run the staged copy and read
#     the image's payload right; the next run finds the copies and sends nothing;
#   - a store every node shares (the same path, the digest there) needs no copy;
#   - a copy damaged on the way to n2 is refused by its digest: the launch stops naming n2, n2's store
#     has nothing of it, no rank starts;
#   - a staged copy damaged later on a node fails that node's digest check and is staged again;
#   - Slurm: sbcast of the SIF and of the OCI bundle, then one srun step, and the ranks run.
#   - a docker:// image, under mpirun and under Slurm: one pull on the head (the registry, in the
#     head's namespace at an address every node could reach, sees one manifest request and each blob
#     once), every node staged from the head, ranks read it.
# Each node gets a store of its own (a node hook binds $WORK/store-nK over the store path) and
# doesn't see the images' directory (a hook binds an empty directory over it).
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/cluster.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/registry.sh"
need jq docker-registry mpirun srun salloc sbcast munged slurmctld slurmd nsenter unshare ip python3 sha256sum mksquashfs

# ---- the image: busybox and a 3 MiB payload whose checksum the ranks print --------------------------
make_busybox_root rootfs
ln -sf busybox rootfs/bin/sha256sum
head -c 3145728 /dev/urandom >rootfs/payload
payload_sum=$(sha256sum rootfs/payload | cut -d' ' -f1)
cat >img.yaml <<'YAML'
lockstep: 1
name: stage
copy: [{from: ./rootfs, to: /, mode: preserve}]
outputs: {oci: img/out, sif: img/out.sif}
YAML
mkdir -p img
ls_run build img.yaml
assert_eq 0 "$RC" "build: $ERR"
oci_digest=$(last_line "$OUT")
IMG="oci:$WORK/img/out"
SIF="$WORK/img/out.sif"
sif_digest="sha256:$(sha256sum "$SIF" | cut -d' ' -f1)"

cluster_up 3
MPI_ARGS=(--launcher-arg=--mca --launcher-arg=btl_tcp_if_include "--launcher-arg=$CLUSTER_SUBNET"
  --launcher-arg=--mca --launcher-arg=oob_tcp_if_include "--launcher-arg=$CLUSTER_SUBNET")
RUNS="$WORK/runs"
mkdir -p empty
# Every node: its own store, and no image directory. SHARED=1: the nodes share the head's store.
node_hooks() { # SHARED
  local n
  for n in $CLUSTER_NODES; do
    mkdir -p "$WORK/store-$n"
    {
      echo "mount --bind $WORK/empty $WORK/img"
      [ "$1" = 1 ] || echo "mount --bind $WORK/store-$n $LOCKSTEP_CACHE"
    } >"$CLUSTER_DIR/node-$n.sh"
  done
}
wipe_node_stores() { # empties them in place (slurmd's bind mounts keep the directories)
  mkdir -p "$WORK"/store-n{1,2,3}
  find "$WORK"/store-n{1,2,3} -mindepth 1 -maxdepth 1 -exec rm -rf {} +
}
head_run() {
  set +e
  OUT=$(on_head "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}
# The ranks print their node and the payload's checksum.
# shellcheck disable=SC2016 # expanded by the ranks' shell
RANK_CMD=(sh -c 'echo "rank $(hostname) $(sha256sum /payload | cut -d" " -f1)"')
# Runs the ranks on n1..n3 under mpirun, AGENT its rsh agent (and preflight's and staging's).
mpi_run() { # JOB AGENT IMAGE
  head_run run --runs-dir "$RUNS" --job "$1" --hostfile "$CLUSTER_DIR/hostfile" -N 3 -n 3 "${MPI_ARGS[@]}" \
    --launcher-arg=--mca --launcher-arg=plm_rsh_agent "--launcher-arg=$2" "$3" -- "${RANK_CMD[@]}"
}
ranks_ok() { # WHAT
  assert_eq "rank n1 $payload_sum
rank n2 $payload_sum
rank n3 $payload_sum" "$(grep '^rank ' <<<"$OUT" | sort)" "$1: the ranks on n1..n3 read the image"
}
record() { # JOB
  cat "$RUNS/$1/record.json"
}

node_hooks 0
wipe_node_stores
on_node n2 test ! -e "$WORK/img/out" || fail "the hook doesn't hide the image directory"

# ---- mpirun: the rsh agent tree -------------------------------------------------------------------
mpi_run oci-cold "$CLUSTER_AGENT" "$IMG"
assert_eq 0 "$RC" "staged OCI run: $OUT $ERR"
ranks_ok "OCI staged through the agent"
rec=$(record oci-cold)
staged="oci:$LOCKSTEP_CACHE/images/sha256-${oci_digest#sha256:}"
assert_eq "$staged rsh agent tree 3" \
  "$(jq -r '"\(.image.staged.ref) \(.image.staged.how) \([.image.staged.nodes[] | select(.ok)] | length)"' <<<"$rec")" \
  "the record says how the image was staged"
assert_eq "$oci_digest" "$(jq -r .image.digest <<<"$rec")" "the record keeps the image's digest"
for n in n1 n2 n3; do
  [ -f "$WORK/store-$n/images/sha256-${oci_digest#sha256:}/index.json" ] || fail "no staged layout in $n's store"
done
pass "an OCI image only the head has is staged into every node's store through the agent tree; ranks read it"

mpi_run oci-warm "$CLUSTER_AGENT" "$IMG"
assert_eq 0 "$RC" "second OCI run: $ERR"
ranks_ok "OCI already staged"
assert_eq "already there 0" "$(record oci-warm | jq -r '"\(.image.staged.how) \(.image.staged.nodes | length)"')" \
  "nothing copied the second time"
record oci-warm | jq -e '[.preflight.commands[] | map(select(contains("stage-receive"))) | length] | add == 0' \
  >/dev/null || fail "a stage-receive ran although every node had the image"
pass "the next run finds the staged copies and copies nothing"

mpi_run sif-cold "$CLUSTER_AGENT" "$SIF"
assert_eq 0 "$RC" "staged SIF run: $OUT $ERR"
ranks_ok "SIF staged through the agent"
for n in n1 n2 n3; do
  assert_eq "$sif_digest" "sha256:$(sha256sum "$WORK/store-$n/blobs/sha256/${sif_digest#sha256:}" | cut -d' ' -f1)" \
    "the SIF in $n's store"
done
pass "a SIF only the head has is staged into every node's store; ranks run it"

# ---- a store every node shares ---------------------------------------------------------------------
node_hooks 1
mpi_run shared "$CLUSTER_AGENT" "$SIF"
assert_eq 0 "$RC" "run with a shared store: $ERR"
ranks_ok "shared store"
assert_eq "already there 0" "$(record shared | jq -r '"\(.image.staged.how) \(.image.staged.nodes | length)"')" \
  "a shared store: nothing copied"
pass "a store on a shared file system needs no copy: the nodes see the head's (same path, same digest)"
node_hooks 0

# ---- a copy damaged on the way ----------------------------------------------------------------------
# An agent that flips one byte 200 KiB into the staging stream it carries to n2.
cat >corrupt-rsh <<EOF
#!/bin/sh
host=\$1
case "\$*" in
*stage-receive*)
  if [ "\$host" = n2 ]; then
    python3 -c '
import sys
data = sys.stdin.buffer.read()
i = 200 * 1024
sys.stdout.buffer.write(data[:i] + bytes([data[i] ^ 0xff]) + data[i + 1:])' | exec "$CLUSTER_AGENT" "\$@"
    exit
  fi ;;
esac
exec "$CLUSTER_AGENT" "\$@"
EOF
chmod +x corrupt-rsh
wipe_node_stores
mpi_run damaged "$WORK/corrupt-rsh" "$IMG"
assert_eq 1 "$RC" "a damaged copy must stop the launch: $OUT $ERR"
assert_contains "$ERR" "on n2 failed: blob sha256:" "the damaged copy is named"
assert_contains "$ERR" "the copy was damaged on the way, refused" "refused by its digest"
assert_contains "$ERR" "preflight failed on n2 (image): no rank was started" "the launch stops at n2"
! grep -q '^rank ' <<<"$OUT" || fail "a rank started: $OUT"
[ ! -e "$WORK/store-n2/images/sha256-${oci_digest#sha256:}" ] || fail "n2 placed the damaged image"
[ -z "$(ls "$WORK/store-n2/tmp")" ] || fail "n2 kept a partial blob: $(ls "$WORK/store-n2/tmp")"
[ -f "$WORK/store-n1/images/sha256-${oci_digest#sha256:}/index.json" ] || fail "n1 did not get its copy"
assert_eq "false" "$(record damaged | jq -r '.image.staged.nodes[] | select(.node == "n2") | .ok')" \
  "the record says n2's staging failed"
pass "a copy damaged on the way to n2 is refused by its digest; the launch stops naming n2; no rank starts"

# ---- a staged copy damaged later ------------------------------------------------------------------
mpi_run sif-again "$CLUSTER_AGENT" "$SIF"
assert_eq 0 "$RC" "staging the SIF: $ERR"
blob="$WORK/store-n3/blobs/sha256/${sif_digest#sha256:}"
chmod u+w "$blob"
printf 'X' | dd of="$blob" bs=1 seek=4096 conv=notrunc status=none
mpi_run sif-repaired "$CLUSTER_AGENT" "$SIF"
assert_eq 0 "$RC" "a damaged staged copy is staged again: $ERR"
ranks_ok "SIF restaged on n3"
assert_eq "n3" "$(record sif-repaired | jq -r '[.image.staged.nodes[].node] | join(" ")')" "only n3 was copied to"
assert_eq "$sif_digest" "sha256:$(sha256sum "$blob" | cut -d' ' -f1)" "n3's copy is whole again"
pass "a staged copy damaged later fails n3's digest check and is staged again (n3 only)"

# ---- a registry image: one pull on the head --------------------------------------------------------
registry_up hub plain netns="$CLUSTER_PREFIX-head" addr=10.78.0.10
on_head "$LOCKSTEP" push --tls-verify=false -q "$IMG" "docker://$REG_HUB_HOST/stage:1" >/dev/null
REF="docker://$REG_HUB_HOST/stage:1"
# Nothing of the image is left on the head either: the run must pull it.
find "$LOCKSTEP_CACHE" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
wipe_node_stores
manifests() { registry_requests hub 'GET|HEAD' '/v2/stage/manifests/.*'; }
blob_gets() { registry_requests hub GET '/v2/stage/blobs/.*'; }
mpi_run registry-refused "$CLUSTER_AGENT" "$REF"
assert_eq 3 "$RC" "a plain-HTTP registry needs --tls-verify=false: $ERR"
assert_contains "$ERR" "tls-verify" "the refusal says what to do"
before_manifests=$(manifests)
head_run run --tls-verify=false --runs-dir "$RUNS" --job registry-mpirun --hostfile "$CLUSTER_DIR/hostfile" -N 3 -n 3 \
  "${MPI_ARGS[@]}" --launcher-arg=--mca --launcher-arg=plm_rsh_agent "--launcher-arg=$CLUSTER_AGENT" "$REF" -- \
  "${RANK_CMD[@]}"
assert_eq 0 "$RC" "run docker:// under mpirun: $OUT $ERR"
ranks_ok "docker:// under mpirun"
assert_eq 1 "$(($(manifests) - before_manifests))" "one manifest request for the whole job"
image_blobs=$(jq '.layers | length + 1' "$WORK/img/out/blobs/sha256/${oci_digest#sha256:}")
assert_eq "$image_blobs" "$(blob_gets)" "each blob fetched once, by the head"
rec=$(record registry-mpirun)
assert_eq "$REF $oci_digest rsh agent tree 3" \
  "$(jq -r '"\(.image.pulled_from) \(.image.digest) \(.image.staged.how) \([.image.staged.nodes[] | select(.ok)] | length)"' <<<"$rec")" \
  "the record names the registry image, its digest and the staging"
pass "lockstep run docker:// under mpirun: one pull on the head, every node staged from it, ranks read the image"
# ---- Slurm: sbcast -----------------------------------------------------------------------------------
wipe_node_stores
slurm_up
# --preflight-timeout 600: the sanitizer pass runs every suite at once, and a preflight that stages
# the image through srun took more than the default 60 s there.
for kind in sif oci; do
  image=$SIF
  [ "$kind" = sif ] || image=$IMG
  set +e
  OUT=$(on_head salloc -N 3 -n 3 "$LOCKSTEP" run --preflight-timeout 600 --runs-dir "$RUNS" --job "slurm-$kind" "$image" -- \
    "${RANK_CMD[@]}" 2>"$WORK/.stderr")
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
  assert_eq 0 "$RC" "staged $kind under Slurm: $OUT $ERR"
  ranks_ok "$kind staged with sbcast"
  assert_eq "sbcast 3" "$(record "slurm-$kind" | jq -r '"\(.image.staged.how) \([.image.staged.nodes[] | select(.ok)] | length)"')" \
    "the $kind image went with sbcast to 3 nodes"
  record "slurm-$kind" | jq -e '[.preflight.commands[] | select(.[0] == "sbcast")] | length == 1' >/dev/null ||
    fail "no sbcast in the record's commands"
  for n in n1 n2 n3; do
    ! compgen -G "$WORK/store-$n/tmp/lockstep-stage-*" >/dev/null || fail "$n kept the sbcast file"
  done
done
pass "under Slurm the SIF and the OCI image go with sbcast, one srun step puts them into each store; ranks run"

wipe_node_stores
before_manifests=$(manifests)
before_blobs=$(blob_gets)
set +e
OUT=$(on_head salloc -N 3 -n 3 "$LOCKSTEP" run --preflight-timeout 600 --tls-verify=false --runs-dir "$RUNS" --job slurm-registry "$REF" -- \
  "${RANK_CMD[@]}" 2>"$WORK/.stderr")
RC=$?
set -e
ERR=$(cat "$WORK/.stderr")
assert_eq 0 "$RC" "run docker:// under Slurm: $OUT $ERR"
ranks_ok "docker:// under Slurm"
assert_eq "1 0" "$(($(manifests) - before_manifests)) $(($(blob_gets) - before_blobs))" \
  "one manifest request (the head resolving the tag), no blob fetched again"
assert_eq "$REF sbcast 3" \
  "$(record slurm-registry | jq -r '"\(.image.pulled_from) \(.image.staged.how) \([.image.staged.nodes[] | select(.ok)] | length)"')" \
  "the registry image went with sbcast to 3 nodes"
pass "lockstep run docker:// under Slurm: one registry request on the head, sbcast to every node, ranks run"

done_testing
