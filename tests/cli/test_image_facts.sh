#!/usr/bin/env bash
# What an image records of its MPI and CUDA stack (docs/spec.md, "What the image records"), judged
# by peers: an image built from a lock with Open MPI, PMIx, UCX, libfabric and the CUDA runtime
# (stand-ins from tests/fixtures/apt/make-repo.sh --with-mpi-facts) carries
#   - the dev.lockstep.* config labels (skopeo inspect --config), also in the SIF's labels object;
#   - /.lockstep/facts.json (umoci raw unpack; unsquashfs of the SIF), 0644 root:root, exact text;
# the facts layer is reused when an application file changes and rebuilt when the lock moves Open
# MPI; LOCKSTEP_RECIPES_DIR replaces the CUDA driver table; a spec can't set dev.lockstep.* labels;
# an image without MPI or CUDA packages records nothing.
source "$(dirname "$0")/lib.sh"
need jq tar gpg dpkg-deb python3 xz skopeo umoci siftool unsquashfs

fixture_repo make-repo.sh repo --with-mpi-facts >/dev/null 2>&1 ||
  fail "make-repo.sh --with-mpi-facts failed"
start_http_server "$WORK/repo"

mkdir app
echo one >app/data.txt
touch -d 2020-01-01 app/data.txt

write_spec() { # PACKAGES [EXTRA]
  cat >lockstep.yaml <<YAML
lockstep: 1
name: factstest
repos:
  - {apt: $HTTP_URL, suite: lstest, components: [main], keyring: repo/keyring.gpg}
packages:
  apt: [$1]
copy:
  - {from: ./app/data.txt, to: /opt/app/data.txt}
labels: {org.opencontainers.image.title: factstest}
${2:-}
outputs: {oci: out, sif: out.sif}
YAML
}

# The config of the image in ./out.
config() { skopeo inspect --config oci:out:latest; }
# The index of the facts layer (from the config's history, one entry per layer here).
facts_layer_index() {
  config | jq '[.history[].created_by] | map(test("image facts")) | index(true)'
}
unpack() { # DIR
  rm -rf "$1"
  umoci raw unpack --rootless --image out:latest "$1" >/dev/null 2>&1 || fail "umoci raw unpack failed"
}

# ---- the labels and the file -----------------------------------------------------------------------
write_spec "openmpi-bin, libopenmpi3=4.1.4-3+b1, cuda-cudart-12-1, ls-data"
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
ls_run build --locked --json
assert_eq 0 "$RC" "build --locked: $ERR"
build1=$OUT

labels=$(config | jq -c '.config.Labels')
assert_eq '{"dev.lockstep.cuda.driver-floor":"530.30.02","dev.lockstep.cuda.version":"12.1","dev.lockstep.libfabric.version":"1.17.0","dev.lockstep.mpi.impl":"openmpi","dev.lockstep.mpi.version":"4.1.4","dev.lockstep.pmix.version":"4.2.2","dev.lockstep.ucx.version":"1.13.1","org.opencontainers.image.title":"factstest"}' \
  "$(jq -cS . <<<"$labels")" "the config labels (skopeo inspect --config)"
pass "the image config carries the dev.lockstep.* facts labels next to the spec's own"

expected_file='{
  "schema": 1,
  "mpi": {
    "impl": "openmpi",
    "version": "4.1.4",
    "from": "libopenmpi3 4.1.4-3+b1"
  },
  "pmix": {
    "version": "4.2.2",
    "from": "libpmix2 4.2.2-1+deb12u1"
  },
  "ucx": {
    "version": "1.13.1",
    "from": "libucx0 1.13.1-1"
  },
  "libfabric": {
    "version": "1.17.0",
    "from": "libfabric1 1:1.17.0-3"
  },
  "cuda": {
    "version": "12.1",
    "driver_floor": "530.30.02",
    "from": "cuda-cudart-12-1 12.1.105-1"
  }
}'
unpack root
assert_eq "$expected_file" "$(cat root/.lockstep/facts.json)" "/.lockstep/facts.json (umoci raw unpack)"
[ "$(tail -c 1 root/.lockstep/facts.json | od -An -c | tr -d ' ')" = '\n' ] || fail "facts.json lacks a final newline"
assert_eq "755 644" "$(stat -c %a root/.lockstep) $(stat -c %a root/.lockstep/facts.json)" "modes"
index=$(facts_layer_index)
[ "$index" != null ] || fail "no history entry names the facts layer"
manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
digest=$(jq -r ".layers[$index].digest" out/blobs/sha256/"$manifest" | cut -d: -f2)
assert_eq "drwxr-xr-x 0/0 .lockstep/
-rw-r--r-- 0/0 .lockstep/facts.json" \
  "$(zcat out/blobs/sha256/"$digest" | tar -tv --numeric-owner | awk '{ print $1, $2, $6 }')" \
  "the facts layer: the directory and the file, owned 0:0"
epoch=$(jq -r .epoch lockstep.lock)
assert_eq "$epoch" "$(zcat out/blobs/sha256/"$digest" | tar -tv --numeric-owner --full-time --utc |
  awk '{ print $4 " " $5 }' | sort -u | xargs -I{} date -u -d {} +%s)" "mtimes are the image epoch"
# The layer right before it is the dpkg database (the packages it describes come first).
assert_contains "$(config | jq -r ".history[$((index - 1))].created_by")" "dpkg database" \
  "the facts layer follows the dpkg database layer"
pass "/.lockstep/facts.json: exact text, 0755/0644, 0:0, mtime the epoch, right after the packages"

siftool dump 2 out.sif >sif-labels.json
assert_eq "4.1.4 530.30.02" \
  "$(jq -r '[.["dev.lockstep.mpi.version"], .["dev.lockstep.cuda.driver-floor"]] | join(" ")' sif-labels.json)" \
  "the SIF's labels object"
siftool dump 5 out.sif >out.sqfs
unsquashfs -no-progress -d sq-root out.sqfs >/dev/null
assert_eq "$expected_file" "$(cat sq-root/.lockstep/facts.json)" "/.lockstep/facts.json in the SIF's squashfs"
pass "the SIF carries the labels and the file too"

# ---- rebuild caching ----------------------------------------------------------------------------------
facts_digest=$(jq -r ".layers[$index].digest" <<<"$build1")
echo two >app/data.txt
touch -d 2020-01-01 app/data.txt
sleep 2.1 # a source changed within 2 s is "racy" and not recorded (docs/ARCHITECTURE.md)
ls_run build --locked --json
assert_eq 0 "$RC" "rebuild after an application change: $ERR"
[ "$(jq -r .manifest_digest <<<"$OUT")" != "$(jq -r .manifest_digest <<<"$build1")" ] ||
  fail "the application change did not change the image"
assert_eq "$facts_digest true" "$(jq -r ".layers[$index] | \"\(.digest) \(.cached)\"" <<<"$OUT")" \
  "the facts layer after an application change"
pass "an application change reuses the facts layer from the cache"

write_spec "openmpi-bin, libopenmpi3=4.1.5-1, cuda-cudart-12-1, ls-data"
ls_run lock
assert_eq 0 "$RC" "re-lock with Open MPI 4.1.5: $ERR"
ls_run build --locked --json
assert_eq 0 "$RC" "build with Open MPI 4.1.5: $ERR"
assert_eq "false" "$(jq -r ".layers[$index].cached" <<<"$OUT")" "the facts layer is rebuilt"
[ "$(jq -r ".layers[$index].digest" <<<"$OUT")" != "$facts_digest" ] || fail "the facts layer did not change"
assert_eq "4.1.5" "$(config | jq -r '.config.Labels["dev.lockstep.mpi.version"]')" "the new MPI version label"
unpack root2
assert_eq '{"impl":"openmpi","version":"4.1.5","from":"libopenmpi3 4.1.5-1"}' \
  "$(jq -c .mpi root2/.lockstep/facts.json)" "the new MPI in facts.json"
pass "a lock that moves Open MPI rebuilds the facts layer and changes the labels"

# ---- the driver table comes from the recipe ----------------------------------------------------------
mkdir -p recipes/cuda
cat >recipes/cuda/drivers.yaml <<'YAML'
recipe: cuda-drivers
sources: {test: a test table}
toolkit_drivers:
  - {cuda: "12.1.0", release: GA, linux: "999.1", source: test}
YAML
LOCKSTEP_RECIPES_DIR="$WORK/recipes" ls_run build --locked
assert_eq 0 "$RC" "build with LOCKSTEP_RECIPES_DIR: $ERR"
assert_eq "999.1" "$(config | jq -r '.config.Labels["dev.lockstep.cuda.driver-floor"]')" "the floor from the override"
sed -i 's/"12.1.0"/"12.2.0"/' recipes/cuda/drivers.yaml
LOCKSTEP_RECIPES_DIR="$WORK/recipes" ls_run build --locked
assert_eq 0 "$RC" "build with a table that lacks CUDA 12.1: $ERR"
assert_contains "$ERR" "CUDA 12.1 (cuda-cudart-12-1 12.1.105-1) is not in lockstep's CUDA driver table" \
  "a CUDA the table lacks is reported"
assert_eq "null 12.1" "$(config | jq -r '.config.Labels | "\(.["dev.lockstep.cuda.driver-floor"]) \(.["dev.lockstep.cuda.version"])"')" \
  "no driver floor without a row"
sed -i 's/release: GA/release: Beta/' recipes/cuda/drivers.yaml
LOCKSTEP_RECIPES_DIR="$WORK/recipes" ls_run build --locked
assert_eq 2 "$RC" "a malformed driver table"
assert_contains "$ERR" "$WORK/recipes/cuda/drivers.yaml:4:" "the table error is located"
assert_contains "$ERR" "expected GA, RC or Update N, found 'Beta'" "the table error says what is wrong"
pass "LOCKSTEP_RECIPES_DIR replaces the CUDA driver table; a CUDA it lacks records no floor"

# ---- a spec can't set lockstep's labels ----------------------------------------------------------------
sed -i 's/^labels: .*/labels: {dev.lockstep.mpi.version: "9.9"}/' lockstep.yaml
rm -rf out
ls_run build --locked
assert_eq 2 "$RC" "a spec label under dev.lockstep."
assert_contains "$ERR" "labels.dev.lockstep.mpi.version: labels under 'dev.lockstep.' are written by lockstep" \
  "the reserved label is named"
[ ! -e out ] || fail "a refused build wrote output"
pass "a spec label under dev.lockstep. is refused"

# ---- nothing to record ---------------------------------------------------------------------------------
write_spec "ls-data"
ls_run lock
assert_eq 0 "$RC" "lock without MPI or CUDA: $ERR"
ls_run build --locked
assert_eq 0 "$RC" "build without MPI or CUDA: $ERR"
assert_eq '{"org.opencontainers.image.title":"factstest"}' "$(config | jq -c .config.Labels)" "no facts labels"
assert_eq "null" "$(facts_layer_index)" "no facts layer"
unpack root3
[ ! -e root3/.lockstep ] || fail "an image without MPI or CUDA has /.lockstep"
pass "an image without MPI or CUDA packages records nothing"

done_testing
