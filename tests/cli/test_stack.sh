#!/usr/bin/env bash
# `stack:` end to end, against the hermetic apt repository laid out like NVIDIA's CUDA repository
# (tests/fixtures/apt/make-cuda-repo.sh): `lockstep check` solves offline and refuses an impossible
# stack at its key; `stack: {cuda: "12.1", nccl: "2.18"}` locks the real package names at the
# newest matching builds, records the choices and their facts in the lock, and builds an image
# whose config carries NVIDIA_REQUIRE_CUDA and the stack labels (skopeo reads them back); changing
# the stack makes the lock stale.
source "$(dirname "$0")/lib.sh"
need jq gpg gpgv dpkg-deb skopeo

fixture_repo make-cuda-repo.sh cuda >/dev/null 2>&1 || fail "make-cuda-repo.sh failed"
REPO="$WORK/cuda/repos/debian12/x86_64"

write_spec() { # STACK
  cat >lockstep.yaml <<YAML
lockstep: 1
name: cuda-stack
repos:
  - {apt: file://$REPO/, flat: true, keyring: cuda/keyring.gpg}
stack: $1
outputs: {oci: out}
YAML
}
locked() { jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' lockstep.lock | LC_ALL=C sort; }

# ---- check: offline, from the recipes alone ------------------------------------------------------
write_spec '{cuda: "12.1", nccl: "2.18"}'
ls_run check
assert_eq 0 "$RC" "check a solvable stack: $ERR"
assert_contains "$OUT" "nccl       2.18                   apt     libnccl2=2.18*-*+cuda12.1 libnccl-dev=2.18*-*+cuda12.1" \
  "check prints the NCCL choice and its package requests"
assert_contains "$OUT" "env        NVIDIA_REQUIRE_CUDA=cuda>=12.1,driver>=530.30.02,arch>=5.0" "and NVIDIA_REQUIRE_CUDA"
ls_run check --json
assert_eq "12.1 530.30.02 cuda-cudart-12-1" \
  "$(jq -r '"\(.stack.cuda) \(.stack."driver-floor") \(.stack.choices[0].packages[0])"' <<<"$OUT")" "check --json"
write_spec '{cuda: "11.8", nccl: "2.18"}'
ls_run check
assert_eq 2 "$RC" "an impossible stack is a spec error"
assert_contains "$ERR" "lockstep.yaml:5:16: error: stack.cuda: CUDA 11.8 does not fit the rest of the stack (the recipes know NCCL 2.18.1 for CUDA 12.1, 12); what would work: cuda: " \
  "located at stack.cuda, saying why"
assert_contains "$ERR" '; or nccl: "2.16.2", ' "and what would work instead"
[ ! -e lockstep.lock ] || fail "check wrote a lock"
pass "check solves the stack offline and reports an impossible one at its key (exit 2)"

# ---- lock: real names, newest matching builds, choices with facts ----------------------------------
write_spec '{cuda: "12.1", nccl: "2.18"}'
ls_run lock
assert_eq 0 "$RC" "lock the stack: $ERR"
assert_eq "cuda-cudart-12-1 12.1.105-1
libnccl-dev 2.18.3-1+cuda12.1
libnccl2 2.18.3-1+cuda12.1" "$(locked)" "the newest 2.18 builds for exactly CUDA 12.1 (not +cuda12.2)"
assert_eq "stack.nccl" "$(jq -r '.artifacts[] | select(.name == "libnccl2") | .reason' lockstep.lock | sed 's/^requested by //')" \
  "the artifacts say the stack asked for them"
assert_eq "builtin 12.1 530.30.02 cuda,nccl" \
  "$(jq -r '.stack | "\(.recipes) \(.cuda) \(."driver-floor") \([.choices[].component] | join(","))"' lockstep.lock)" \
  "the lock records the choices"
assert_contains "$(jq -r '.stack.choices[1].facts[0]' lockstep.lock)" \
  "NCCL 2.18.1 is published for CUDA 12.1, 12 (recipes/nccl/nccl.yaml:" "with the facts behind them and their sources"
assert_contains "$(grep -c '"component":' lockstep.lock)" "2" "one choice per line"
ls_run lock --check
assert_eq 0 "$RC" "the lock is up to date: $ERR"
pass "lock turns {cuda: 12.1, nccl: 2.18} into cuda-cudart-12-1 and libnccl2 2.18.3-1+cuda12.1 with the facts"

# ---- build: the image records the stack ------------------------------------------------------------
ls_run build --locked
assert_eq 0 "$RC" "build from the stack's lock: $ERR"
cfg=$(skopeo inspect --config oci:out)
assert_contains "$(jq -r '.config.Env[]' <<<"$cfg")" "NVIDIA_REQUIRE_CUDA=cuda>=12.1,driver>=530.30.02,arch>=5.0" \
  "skopeo reads NVIDIA_REQUIRE_CUDA from the config"
assert_eq "12.1 530.30.02 2.18 5.0" \
  "$(jq -r '.config.Labels | "\(."dev.lockstep.cuda.version") \(."dev.lockstep.cuda.driver-floor") \(."dev.lockstep.stack.nccl") \(."dev.lockstep.gpu.min-cc")"' <<<"$cfg")" \
  "and the CUDA, driver floor, NCCL and GPU labels"
ls_run inspect oci:out --json
assert_eq 0 "$RC" "inspect: $ERR"
pass "the image carries NVIDIA_REQUIRE_CUDA and the stack labels"

# ---- staleness and repository misses ------------------------------------------------------------------
write_spec '{cuda: "12.2", nccl: "2.18"}'
ls_run lock --check
assert_eq 1 "$RC" "a changed stack makes the lock stale"
assert_contains "$ERR" 'stack: {"cuda":"12.1","nccl":"2.18"} -> {"cuda":"12.2","nccl":"2.18"}' "naming the change"
ls_run lock
assert_eq 0 "$RC" "re-lock for CUDA 12.2: $ERR"
assert_contains "$(locked)" "libnccl2 2.18.3-1+cuda12.2" "the CUDA 12.2 build of NCCL 2.18"
write_spec '{cuda: "12.4", nccl: "2.19"}'
ls_run lock
assert_eq 2 "$RC" "NCCL 2.19 has no +cuda12.4 build in the repository"
assert_contains "$ERR" "stack.nccl asks for libnccl2=2.19*-*+cuda12.4, but no version of libnccl2 matches" \
  "the resolver names the stack's request"
pass "changing the stack re-locks; a build the repository lacks is refused naming the stack key"

# ---- linux/arm64 (Grace): NVIDIA's sbsa repository, the frameworks' aarch64 wheels ------------------
SBSA="$WORK/cuda/repos/debian12/sbsa"
write_spec '{cuda: "12.1", nccl: "2.18"}'
sed -i 's|^name: cuda-stack|name: cuda-stack\nplatform: linux/arm64|' lockstep.yaml
ls_run check
assert_eq 2 "$RC" "an arm64 stack over the x86_64 repository alone"
assert_contains "$ERR" "error: repos: linux/arm64 takes CUDA from NVIDIA's sbsa repository" "names the sbsa repository"
sed -i "s|file://$REPO/|file://$SBSA/|" lockstep.yaml
ls_run lock
assert_eq 0 "$RC" "lock an arm64 stack from the sbsa repository: $ERR"
assert_eq "cuda-cudart-12-1 12.1.105-1 arm64
libnccl-dev 2.18.3-1+cuda12.1 arm64
libnccl2 2.18.3-1+cuda12.1 arm64" \
  "$(jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version) \(.arch)"' lockstep.lock | LC_ALL=C sort)" \
  "the same names and builds, for arm64"
ls_run build --locked
assert_eq 0 "$RC" "build the arm64 stack: $ERR"
cfg=$(skopeo inspect --config oci:out)
assert_eq "arm64 cuda>=12.1,driver>=530.30.02,arch>=5.0" \
  "$(jq -r '"\(.architecture) \(.config.Env[] | select(startswith("NVIDIA_REQUIRE_CUDA=")) | sub("NVIDIA_REQUIRE_CUDA="; ""))"' <<<"$cfg")" \
  "an arm64 image with NVIDIA_REQUIRE_CUDA"
rm -rf out lockstep.lock
# Both platforms: each solves from its own repository; one stack, one lock, an index.
sed -i "s|^platform: linux/arm64|platforms: [linux/amd64, linux/arm64]|; s|  - {apt: file://$SBSA/|  - {apt: file://$REPO/, flat: true, keyring: cuda/keyring.gpg}\n&|" lockstep.yaml
ls_run lock
assert_eq 0 "$RC" "lock the stack for two platforms: $ERR"
assert_eq "3 3 2" "$(jq -r '[([.artifacts[] | select(.arch == "amd64")] | length), ([.artifacts[] | select(.arch == "arm64")] | length), (.stack.choices | length)] | join(" ")' lockstep.lock)" \
  "each platform's debs, one stack"
ls_run build --locked
assert_eq 0 "$RC" "build the index: $ERR"
assert_eq "linux/amd64 linux/arm64" "$(skopeo inspect --raw oci:out | jq -r '[.manifests[].platform | "\(.os)/\(.architecture)"] | join(" ")')" \
  "an index of both"
# The Jetson line is not Grace's; a framework release without aarch64 CUDA wheels names the platform.
sed -i "s|file://$SBSA/|file://$WORK/cuda/repos/debian12/arm64/|" lockstep.yaml
ls_run check
assert_eq 2 "$RC" "the arm64 (Jetson) repository"
assert_contains "$ERR" "is NVIDIA's Jetson (L4T) line" "says which line it is"
cat >fw.yaml <<YAML
lockstep: 1
name: grace-torch
platform: linux/arm64
base: {debian: bookworm}
repos:
  - {apt: http://deb.debian.org/debian, suite: bookworm, components: [main], keyring: /usr/share/keyrings/debian-archive-keyring.gpg}
  - {pypi: https://download.pytorch.org/whl/cu126}
stack: {framework: pytorch@2.6}
YAML
ls_run check fw.yaml
assert_eq 2 "$RC" "torch 2.6 has no aarch64 CUDA wheels"
assert_contains "$ERR" "stack.framework: pytorch 2.6 has no wheels for linux/arm64 in the recipes (its builds for linux/arm64: " \
  "the error names the platform and what it has"
sed -i 's|pytorch@2.6|pytorch@2.7.1|' fw.yaml
ls_run check fw.yaml --json
assert_eq 0 "$RC" "torch 2.7.1 cu128 for linux/arm64: $ERR"
assert_eq "cu128 torch==2.7.1" "$(jq -r '.stack.choices[] | select(.component == "framework") | "\(.variant) \(.packages | join(" "))"' <<<"$OUT")" \
  "the aarch64 wheel alone: the x86_64 wheels' nvidia-* pins are not requested"
sed -i 's|^platform: linux/arm64|platforms: [linux/amd64, linux/arm64]|' fw.yaml
ls_run check fw.yaml --json
assert_eq 0 "$RC" "torch 2.7.1 for both platforms: $ERR"
assert_eq "true torch==2.7.1" \
  "$(jq -r '"\([.stack.choices[] | select(.component == "framework") | .packages[] | startswith("nvidia-")] | any) \(.stacks["linux/arm64"].choices[] | select(.component == "framework") | .packages | join(" "))"' <<<"$OUT")" \
  "each platform's stack: the x86_64 pins on amd64, the aarch64 wheel alone on arm64"
sed -i 's|^platforms: \[linux/amd64, linux/arm64\]|platform: linux/arm64|' fw.yaml
sed -i 's|^platform: linux/arm64|platform: linux/riscv64|' fw.yaml
ls_run check fw.yaml
assert_eq 2 "$RC" "a stack for riscv64"
assert_contains "$ERR" "the recipes cover linux/amd64 and linux/arm64" "names what they cover"
pass "linux/arm64 stacks: CUDA from the sbsa repository (alone or beside x86_64's in one index), aarch64 framework wheels"

# ---- a team's recipes repository, pinned by commit ------------------------------------------------
need git
TEAM="$WORK/team-recipes"
mkdir -p "$TEAM/recipes/nccl"
# The team knows a build the shipped recipes don't (2.18.3 for CUDA 12.1), and doesn't trust 2.18.1.
sed -e 's|^  - {nccl: "2.18.1", cuda: \["12.1", "12"\], source: \[pt-builder-1668, pip-logs\]|  - {nccl: "2.18.3", cuda: ["12.1"], source: cuda-images}\n&, confidence: unverified|' \
  "$LOCKSTEP_SOURCE_DIR/recipes/nccl/nccl.yaml" >"$TEAM/recipes/nccl/nccl.yaml"
grep -q '"2.18.3"' "$TEAM/recipes/nccl/nccl.yaml" || fail "the team recipe edit did not apply"
git -C "$TEAM" init -q && git -C "$TEAM" add -A &&
  git -C "$TEAM" -c user.name=t -c user.email=t@example.org commit -qm "NCCL 2.18.3" && git -C "$TEAM" tag v1
commit=$(git -C "$TEAM" rev-parse HEAD)
write_spec '{cuda: "12.1", nccl: "2.18.3"}'
ls_run check
assert_eq 2 "$RC" "the shipped recipes don't know NCCL 2.18.3"
write_spec "{cuda: \"12.1\", nccl: \"2.18.3\", recipes: {git: $TEAM, rev: v1}}"
ls_run check
assert_eq 3 "$RC" "check can't read a recipes repository it hasn't fetched (offline)"
assert_contains "$ERR" "run \`lockstep lock\` once" "and says what to do"
ls_run lock
assert_eq 0 "$RC" "lock with the team's recipes: $ERR"
assert_eq "git $TEAM $commit" "$(jq -r '.stack | "\(.recipes) \(."recipes-commit")"' lockstep.lock)" \
  "the lock records the recipes repository and its commit"
assert_contains "$(locked)" "libnccl2 2.18.3-1+cuda12.1" "the team's NCCL"
assert_contains "$(jq -r '.stack.choices[1].facts[0]' lockstep.lock)" "NCCL 2.18.3 is published for CUDA 12.1 ($TEAM@${commit:0:12}/nccl/nccl.yaml:" \
  "the facts point into the team's repository"
ls_run check
assert_eq 0 "$RC" "check reads the fetched recipes at the locked commit, offline: $ERR"
ls_run vendor --to "$WORK/svend"
assert_eq 0 "$RC" "vendor a lock solved from a team's recipes: $ERR"
rsha=$(jq -r '.files[] | select(.kind == "recipes") | .sha256' "$WORK/svend/lockstep-vendor.json")
tar -xOf "$WORK/svend/blobs/sha256/$rsha" recipes/nccl/nccl.yaml | cmp -s - "$TEAM/recipes/nccl/nccl.yaml" ||
  fail "the vendored recipes are not the team's at the locked commit"
write_spec "{cuda: \"12.1\", nccl: \"2.18.1\", recipes: {git: $TEAM, rev: $commit}}"
ls_run check
assert_eq 2 "$RC" "a row marked unverified is never used"
assert_contains "$ERR" 'the recipes know no NCCL matching "2.18.1"' "the unverified 2.18.1 is not offered"
pass "a team's recipes repository is fetched at its commit, recorded in the lock, read offline by check, and vendored at that commit"

done_testing
