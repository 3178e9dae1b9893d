#!/usr/bin/env bash
# The hermetic apt repository laid out like NVIDIA's CUDA repository
# (tests/fixtures/apt/make-cuda-repo.sh), judged by real apt and gpgv, then locked by lockstep:
#   - the layout, a deterministic build, signatures gpgv accepts, a Release whose sums match;
#   - apt-get (in a scratch Dir, against file://) installs what the Depends say, and chooses the
#     same versions for version globs (libnccl2=2.18.*+cuda12.1) as lockstep;
#   - `lockstep lock` on a spec with the repository as a flat file:// repo pins exactly the asked
#     packages, and `build --locked` installs their files.
source "$(dirname "$0")/lib.sh"
need jq gpg gpgv dpkg-deb apt-get sha256sum tar

MAKE="$LOCKSTEP_SOURCE_DIR/tests/fixtures/apt/make-cuda-repo.sh"
fixture_repo make-cuda-repo.sh cuda >/dev/null 2>&1 || fail "make-cuda-repo.sh failed"
REPO="$WORK/cuda/repos/debian12/x86_64"

# ---- the repository ---------------------------------------------------------------------------------
for f in InRelease Release Release.gpg Packages Packages.gz keyring.gpg; do
  [ -f "$REPO/$f" ] || [ -f "$WORK/cuda/$f" ] || fail "make-cuda-repo.sh wrote no $f"
done
[ ! -e "$WORK/cuda/repos/debian12/x86_64/dists" ] || fail "a flat repository has no dists/"
assert_eq 31 "$(grep -c '^Package:' "$REPO/Packages")" "the number of packages"
assert_eq 31 "$(find "$REPO" -maxdepth 1 -name '*.deb' | wc -l)" "the .debs lie beside the index"
assert_eq "./libnccl2_2.18.3-1+cuda12.1_amd64.deb" \
  "$(awk '/^Package: libnccl2$/ {p=1} p && /^Version: 2.18.3-1\+cuda12.1$/ {v=1} p && v && /^Filename:/ {print $2; exit}' "$REPO/Packages")" \
  "Filename is ./NAME.deb, as NVIDIA's repo-debian.sh writes it"
assert_eq "libnccl2 (= 2.19.3-1+cuda12.2)" "$(dpkg-deb -f "$REPO/libnccl-dev_2.19.3-1+cuda12.2_amd64.deb" Depends)" \
  "libnccl-dev depends on the same libnccl2 build"
assert_eq "cuda-cudart-12-1 (>= 12.1.105), libcublas-12-1 (>= 12.1.3.1)" \
  "$(dpkg-deb -f "$REPO/cuda-libraries-12-1_12.1.1-1_amd64.deb" Depends)" "cuda-libraries-12-1's Depends"
assert_eq "./usr/local/cuda-12.1/targets/x86_64-linux/lib/libcudart.so.12.1.105" \
  "$(dpkg-deb -c "$REPO/cuda-cudart-12-1_12.1.105-1_amd64.deb" | awk '{print $6}' | grep libcudart)" \
  "cuda-cudart-12-1 installs the runtime at the real path"
grep -qx 'Acquire-By-Hash: no' "$REPO/Release" || fail "the Release says Acquire-By-Hash: no"
grep -qx 'Architecture: x86_64' "$REPO/Release" || fail "the Release names the repository's architecture"
for f in Packages Packages.gz; do
  grep -q "^ $(sha256sum "$REPO/$f" | cut -d' ' -f1) \+$(stat -c %s "$REPO/$f") $f\$" "$REPO/Release" ||
    fail "the Release's SHA256 line for $f"
done
gpgv --keyring "$WORK/cuda/keyring.gpg" "$REPO/InRelease" 2>/dev/null || fail "gpgv refuses InRelease"
gpgv --keyring "$WORK/cuda/keyring.gpg" "$REPO/Release.gpg" "$REPO/Release" 2>/dev/null ||
  fail "gpgv refuses Release.gpg"
"$MAKE" cuda2 >/dev/null 2>&1 || fail "make-cuda-repo.sh failed the second time"
assert_eq "$(cd "$REPO" && sha256sum ./*.deb Packages Packages.gz Release)" \
  "$(cd "$WORK/cuda2/repos/debian12/x86_64" && sha256sum ./*.deb Packages Packages.gz Release)" \
  "two builds give the same .debs, index and Release"
pass "the repository is laid out like NVIDIA's (flat, ./ file names, signed) and built deterministically"

# ---- apt ----------------------------------------------------------------------------------------------
APT="$WORK/apt"
mkdir -p "$APT/etc/apt/sources.list.d" "$APT/etc/apt/preferences.d" "$APT/etc/apt/apt.conf.d" \
  "$APT/var/lib/apt/lists/partial" "$APT/var/cache/apt/archives/partial" "$APT/var/lib/dpkg" "$APT/var/log/apt"
: >"$APT/var/lib/dpkg/status"
echo "deb [signed-by=$WORK/cuda/keyring.gpg] file://$REPO/ /" >"$APT/etc/apt/sources.list"
apt_() {
  apt-get -q -o Dir="$APT" -o Dir::State::status="$APT/var/lib/dpkg/status" -o Debug::NoLocking=1 \
    -o APT::Architecture=amd64 -o APT::Architectures=amd64 -o APT::Sandbox::User=root \
    -o Dir::Etc::SourceParts="$APT/etc/apt/sources.list.d" -o Dir::Etc::Parts="$APT/etc/apt/apt.conf.d" \
    -o Dir::Etc::PreferencesParts="$APT/etc/apt/preferences.d" "$@"
}
# "name version" of what `apt-get install -s` would install, sorted.
apt_installs() {
  apt_ install -s --no-install-recommends "$@" 2>&1 | awk '/^Inst / {print $2, substr($3, 2)}' | LC_ALL=C sort
}
apt_ update >"$WORK/apt-update.log" 2>&1 || fail "apt-get update: $(cat "$WORK/apt-update.log")"
grep -q '^W:\|^E:' "$WORK/apt-update.log" && fail "apt-get update warns: $(cat "$WORK/apt-update.log")"
assert_eq "cuda-cudart-12-1 12.1.105-1
libnccl2 2.18.3-1+cuda12.1" "$(apt_installs cuda-cudart-12-1 libnccl2=2.18.3-1+cuda12.1)" "apt: the two packages"
assert_eq "cuda-cudart-12-1 12.1.105-1
cuda-libraries-12-1 12.1.1-1
cuda-toolkit-12-1 12.1.1-1
libcublas-12-1 12.1.3.1-1" "$(apt_installs cuda-toolkit-12-1)" "apt: the toolkit metapackage's closure"
pass "apt-get update verifies the repository and installs the Depends closure"

# ---- lockstep -------------------------------------------------------------------------------------------
write_spec() { # PACKAGES
  cat >lockstep.yaml <<YAML
lockstep: 1
name: cuda
repos:
  - {apt: file://$REPO/, flat: true, keyring: cuda/keyring.gpg}
packages:
  apt: [$1]
outputs: {oci: out}
YAML
}
# "name version" of the lock's debs, sorted.
locked() { jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' lockstep.lock | LC_ALL=C sort; }

write_spec 'cuda-cudart-12-1, "libnccl2=2.18.3-1+cuda12.1"'
ls_run lock
assert_eq 0 "$RC" "lock against the CUDA repository: $ERR"
assert_eq "cuda-cudart-12-1 12.1.105-1
libnccl2 2.18.3-1+cuda12.1" "$(locked)" "the lock pins exactly the asked packages"
# Beside the index, and relative to the spec's directory, which holds the repository here.
assert_eq "cuda/repos/debian12/x86_64/libnccl2_2.18.3-1+cuda12.1_amd64.deb" \
  "$(jq -r '.artifacts[] | select(.name == "libnccl2") | .url' lockstep.lock)" "the URL is beside the index"
assert_eq "$(sha256sum "$REPO/libnccl2_2.18.3-1+cuda12.1_amd64.deb" | cut -d' ' -f1)" \
  "$(jq -r '.artifacts[] | select(.name == "libnccl2") | .sha256' lockstep.lock)" "the lock pins the sha256"
assert_eq "cuda cuda" "$(jq -r '[.artifacts[].group] | join(" ")' lockstep.lock)" "CUDA packages go in the cuda group"
ls_run build --locked
assert_eq 0 "$RC" "build from the CUDA lock: $ERR"
manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
files=$(for d in $(jq -r '.layers[].digest' out/blobs/sha256/"$manifest" | cut -d: -f2); do
  zcat -f out/blobs/sha256/"$d" | tar -t
done)
assert_contains "$files" "usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3" "the image has libnccl2's file"
assert_contains "$files" "usr/local/cuda-12.1/targets/x86_64-linux/lib/libcudart.so.12.1.105" "and cudart's"
pass "lock pins cuda-cudart-12-1 and libnccl2=2.18.3-1+cuda12.1 from the flat repository, and the image has them"

# Version globs choose what apt-get chooses for the same requests.
globs=("libnccl2=2.18.*+cuda12.1" "libnccl-dev=2.18.*+cuda12.1" "libcudnn8=8.9.*" "libcudnn9-cuda-12=9.*"
  "cuda-toolkit-12-4=12.4*")
write_spec "$(printf '"%s", ' "${globs[@]}" | sed 's/, $//')"
rm -f lockstep.lock
ls_run lock
assert_eq 0 "$RC" "lock with version globs: $ERR"
assert_eq "$(apt_installs "${globs[@]}")" "$(locked)" "lockstep and apt-get choose the same versions for the globs"
assert_contains "$(locked)" "libcudnn8 8.9.7.29-1+cuda12.2" "the highest matching version"
write_spec '"libnccl2=2.17.*"'
ls_run lock
assert_eq 2 "$RC" "a glob nothing matches"
assert_contains "$ERR" "packages.apt[0] asks for libnccl2=2.17.*, but no version of libnccl2 matches '2.17.*'; the repositories have libnccl2 2.20.5-1+cuda12.4, 2.19.3-1+cuda12.2, 2.18.3-1+cuda12.2, 2.18.3-1+cuda12.1, 2.18.1-1+cuda12.1, 2.16.2-1+cuda11.8" \
  "the error lists the versions there are, newest first"
assert_contains "$(apt_ install -s 'libnccl2=2.17.*' 2>&1 || true)" "Version '2.17.*' for 'libnccl2' was not found" \
  "apt-get refuses it too"
pass "version globs lock the versions apt-get would install, and one nothing matches is refused"

done_testing
