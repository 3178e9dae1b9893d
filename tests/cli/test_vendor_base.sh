#!/usr/bin/env bash
# A "vendor" base like NVIDIA's CUDA images (issue 16), over the hermetic Ubuntu-like archive of
# tests/fixtures/apt/make-ubuntu-repo.sh (jammy + jammy-updates, main + universe): the base is built
# from jammy alone with CUDA-like packages, libnccl2 on hold (`dpkg --set-selections`, as the
# images' `apt-mark hold`) and its own python3.10. Specs over it name both suites. apt itself is the
# oracle: for every case, `apt-get -s install` over a copy of the base's dpkg status, with the same
# repositories (tests/cli/apt_oracle.sh), chooses the same packages and versions as lockstep, or
# refuses where lockstep refuses:
#   - requests that fit (nvtop from universe, needing libncursesw6 from main): only those added;
#   - an upgrade a request needs (python3.10 -> jammy-updates needs python3.10-minimal too): recorded;
#   - requests that would break the hold (libnccl-dev, whose newest build needs libnccl2 2.22.3):
#     refused, naming the hold; a pin that fits the hold works;
#   - the stack over the base: CUDA 12.4 from the base, NCCL 2.21 kept at the held version.
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/apt_oracle.sh"
need jq gpg dpkg-deb apt-get python3 xz

fixture_repo make-ubuntu-repo.sh ubuntu >make.log 2>&1 ||
  fail "make-ubuntu-repo.sh failed: $(cat make.log)"
# A shell and dpkg for the base (the archive's packages hold only small files).
fixture_repo make-repo.sh ubuntu/tools --with-tools >/dev/null 2>&1 ||
  fail "make-repo.sh failed"
start_http_server "$WORK/ubuntu"
U=$HTTP_URL

# ---- the vendor base -------------------------------------------------------------------------------
cat >vendor.yaml <<YAML
lockstep: 1
name: vendor
repos:
  - {apt: $U, suite: jammy, components: [main, universe], keyring: ubuntu/keyring.gpg}
  - {apt: $U/tools, suite: lstest, components: [main], keyring: ubuntu/tools/keyring.gpg}
packages:
  apt: [ls-dpkg, libc6, python3.10, cuda-cudart-12-4, libnccl2]
run:
  - sh: echo libnccl2 hold | /usr/bin/dpkg --set-selections
outputs: {oci: vendor}
YAML
ls_run build vendor.yaml
assert_eq 0 "$RC" "the vendor base: $ERR"
ls_run exec oci:vendor -- /bin/sh -c 'cat /var/lib/dpkg/status'
assert_eq 0 "$RC" "read the base's dpkg status: $ERR"
printf '%s\n' "$OUT" >base-status
grep -q '^Status: hold ok installed' base-status || fail "the base holds nothing: $(head -20 base-status)"
pass "a vendor base with CUDA-like packages, libnccl2 on hold and python3.10 (from jammy)"

apt_oracle_setup "$WORK/apt" \
  "deb [signed-by=$WORK/ubuntu/keyring.gpg] $U jammy main universe" \
  "deb [signed-by=$WORK/ubuntu/keyring.gpg] $U jammy-updates main universe"

over() { # APT [EXTRA]
  cat >lockstep.yaml <<YAML
lockstep: 1
name: over
base: {oci: vendor}
repos:
  - {apt: $U, suites: [jammy, jammy-updates], components: [main, universe], keyring: ubuntu/keyring.gpg}
packages:
  apt: [$1]
${2:-}
outputs: {oci: out}
YAML
  rm -f lockstep.lock
}
locked_debs() { jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' lockstep.lock | LC_ALL=C sort; }

# ---- requests that fit ---------------------------------------------------------------------------------
over "nvtop"
ls_run lock
assert_eq 0 "$RC" "lock nvtop over the vendor base: $ERR"
apt_set=$(apt_oracle_install base-status nvtop) || fail "apt refuses nvtop over the base"
assert_eq "$apt_set" "$(locked_debs)" "apt-get -s and lockstep add the same packages"
assert_eq "libncursesw6 6.3-2
nvtop 1.2.2-1" "$(locked_debs)" "only nvtop and what the base lacks"
rm -rf out
ls_run build --locked
assert_eq 0 "$RC" "build over the vendor base: $ERR"
ls_run exec oci:out -- /usr/bin/dpkg --audit
assert_eq "0:" "$RC:$OUT" "dpkg --audit is clean: $ERR"
# (verify is left to test_apt_over_base.sh and test_debian_base.sh: this base's libc6 stand-in and
# ls-dpkg's real C library share a path, so the base itself does not verify.)
pass "a request that fits adds only what the base lacks, as apt-get -s does; the image is clean"

# ---- an upgrade a request needs ------------------------------------------------------------------------
over "python3.10"
ls_run lock
assert_eq 0 "$RC" "lock python3.10 over the vendor base: $ERR"
apt_set=$(apt_oracle_install base-status python3.10) || fail "apt refuses python3.10 over the base"
assert_eq "$apt_set" "$(locked_debs)" "apt-get -s and lockstep upgrade the same packages"
assert_contains "$(jq -r '.artifacts[] | "\(.name): \(.reason)"' lockstep.lock)" \
  "python3.10-minimal: upgrades base's python3.10-minimal 3.10.4-3 -> 3.10.12-1~22.04.3, needed by python3.10 (Depends: python3.10-minimal (= 3.10.12-1~22.04.3))" \
  "the lock records the upgrade and why"
pass "an upgrade a request needs is made as apt makes it, and recorded"

# ---- the hold --------------------------------------------------------------------------------------------
over "libnccl-dev"
ls_run lock
assert_eq 2 "$RC" "libnccl-dev's newest build needs a libnccl2 the hold forbids"
assert_contains "$ERR" "the base image holds libnccl2 at 2.21.5-1+cuda12.4 (apt-mark hold), and lockstep never changes a held package" \
  "the refusal names the hold"
assert_contains "$ERR" "chain: packages.apt[0] -> libnccl-dev" "and the chain"
if apt_oracle_install base-status libnccl-dev >/dev/null 2>&1; then
  fail "apt-get -s installs libnccl-dev over the held libnccl2: $(cat "$APT_ORACLE_DIR/install.out")"
fi
over '"libnccl-dev=2.21.5-1+cuda12.4"'
ls_run lock
assert_eq 0 "$RC" "the libnccl-dev that fits the hold: $ERR"
apt_set=$(apt_oracle_install base-status libnccl-dev=2.21.5-1+cuda12.4) || fail "apt refuses the pinned libnccl-dev"
assert_eq "$apt_set" "$(locked_debs)" "apt-get -s and lockstep agree on the pinned libnccl-dev"
pass "a request that would break the hold is refused, as apt refuses it; one that fits works"

# ---- the stack over the base's CUDA, NCCL kept at the hold -------------------------------------------------
over "nvtop" 'stack: {cuda: "12.4", nccl: "2.21"}'
ls_run lock
assert_eq 0 "$RC" "stack over the vendor base: $ERR"
assert_eq "libnccl-dev 2.21.5-1+cuda12.4
libncursesw6 6.3-2
nvtop 1.2.2-1" "$(locked_debs)" "the base's CUDA and held NCCL are used; libnccl-dev at the held version"
assert_contains "$(jq -r '.stack.choices[] | select(.component == "cuda") | .facts | join("\n")' lockstep.lock)" \
  "the base image oci:vendor has CUDA 12.4 (cuda-cudart-12-4 12.4.127-1 installed)" "the CUDA facts name the base"
pass "the stack uses the base's CUDA and respects the held NCCL"

done_testing
