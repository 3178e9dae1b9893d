#!/usr/bin/env bash
# One spec, one lock, an image index for linux/amd64 and linux/arm64 (issue 38; docs/multi-platform.md):
# examples/mpi-hello with `platforms: [linux/amd64, linux/arm64]`, locked from deb.debian.org's
# amd64 and arm64 indexes and built here, the arm64 image's maintainer scripts under qemu-user.
# Peers judge it:
#   - skopeo inspect --raw shows an OCI image index with both platforms; skopeo picks the arm64
#     image out of it (--override-arch) and umoci unpacks that one; its programs are aarch64 ELF;
#   - dpkg --root --verify and --audit find the arm64 root clean and configured;
#   - mmdebstrap --arch=arm64 --simulate over the same packages installs the same closure;
#   - wheels (a local index) and conda packages (a channel packed by conda-package-handling) lock
#     per platform: manylinux x86_64/aarch64 wheels and linux-64/linux-aarch64 records each for
#     its platform, py3-none-any and noarch once; conda-lock.yml lists both platforms;
#   - verify, diff, sbom and export read the image's (or --platform's) share of the lock;
#   - `lockstep exec --platform linux/arm64` runs python3 (platform.machine() is aarch64) and a
#     2-rank mpi4py allreduce under emulation; without --platform this machine's image runs;
#   - one SIF per platform (outputs.sif: out-{arch}.sif; siftool reads each one's architecture),
#     a docker-archive whose manifest.json lists both images;
#   - the index's amd64 image is the one a build of `platform: linux/amd64` alone gives;
#   - the arm64 image's provenance pins the qemu-user interpreter by sha256;
#   - build --push and push put the index and both images in a real docker-registry; a spec over
#     that index as its image base locks each platform's manifest and builds over it;
#   - preflight takes the node's platform: the index passes, an image without it fails naming both;
#   - bad input: `platform` with `platforms`, a platform twice, a SIF path without {arch}.
# Exit 77 without deb.debian.org (never in CI), or without binfmt_misc per user namespace.
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/registry.sh"
need jq skopeo umoci siftool mmdebstrap docker-registry cph
need_arm64_emulation
need_debian_mirror

mkdir ex
cp "$LOCKSTEP_SOURCE_DIR/examples/mpi-hello/lockstep.yaml" "$LOCKSTEP_SOURCE_DIR/examples/mpi-hello/hello.py" ex/
sed -i 's|^platform: linux/amd64|platforms: [linux/amd64, linux/arm64]|; s|oci: ../../build/examples/mpi-hello|oci: out|;
        s|sif: ../../build/examples/mpi-hello.sif|sif: out-{arch}.sif\n  docker_archive: out.tar|' ex/lockstep.yaml
grep -q '^platforms: \[linux/amd64, linux/arm64\]' ex/lockstep.yaml || fail "the example's platform line moved"

# ---- the lock: every platform's packages, shared ones once ------------------------------------------
ls_run lock ex/lockstep.yaml
assert_eq 0 "$RC" "lock of two platforms: $ERR"
assert_eq '["linux/amd64","linux/arm64"]' "$(jq -c .platforms ex/lockstep.lock)" "the lock names both platforms"
n_arm=$(jq '[.artifacts[] | select(.arch == "arm64" and .platforms == ["linux/arm64"])] | length' ex/lockstep.lock)
n_amd=$(jq '[.artifacts[] | select(.arch == "amd64" and .platforms == ["linux/amd64"])] | length' ex/lockstep.lock)
n_all=$(jq '[.artifacts[] | select(.arch == "all" and (has("platforms") | not))] | length' ex/lockstep.lock)
[ "$n_arm" -gt 50 ] && [ "$n_amd" -gt 50 ] && [ "$n_all" -gt 10 ] ||
  fail "per-platform debs ($n_amd amd64, $n_arm arm64) and shared Architecture: all debs ($n_all)"
assert_eq 0 "$(jq '[.artifacts[] | select(.arch == "arm64" and .platforms != ["linux/arm64"])] | length' ex/lockstep.lock)" \
  "an arm64 deb is the arm64 image's only"
assert_eq "$(jq -r '.artifacts[] | select(.name == "openmpi-bin" and .arch == "amd64") | .version' ex/lockstep.lock | sed 's/+b[0-9]*$//')" \
  "$(jq -r '.artifacts[] | select(.name == "openmpi-bin" and .arch == "arm64") | .version' ex/lockstep.lock | sed 's/+b[0-9]*$//')" \
  "the requested packages are the same versions on both platforms"
pass "one lock: $n_amd amd64 and $n_arm arm64 debs, $n_all Architecture: all debs shared"

# The closure is the one mmdebstrap (apt) installs for arm64: the apt variant plus the packages.
# (--simulate runs apt-get --simulate only: no emulation needed; its "Inst NAME (VERSION ..." lines.)
mmdebstrap --verbose --simulate --skip=check/qemu --variant=apt --arch=arm64 --include=openmpi-bin,python3-mpi4py \
  bookworm /dev/null "deb http://deb.debian.org/debian bookworm bookworm-updates main" \
  "deb http://deb.debian.org/debian-security bookworm-security main" >mm.out 2>&1 ||
  fail "mmdebstrap --simulate failed: $(tail -5 mm.out)"
sed -n 's/^Inst \([^ :]*\)[^ ]* (\([^ ]*\) .*/\1=\2/p' mm.out | LC_ALL=C sort -u >mm.names
jq -r '.artifacts[] | select(.kind == "deb" and (.platforms == null or .platforms == ["linux/arm64"])) |
  "\(.name)=\(.version)"' ex/lockstep.lock | LC_ALL=C sort -u >ours.names
[ "$(wc -l <mm.names)" -gt 100 ] || fail "mmdebstrap listed $(wc -l <mm.names) packages: $(tail -3 mm.out)"
assert_eq "" "$(diff mm.names ours.names)" "the arm64 closure and versions are mmdebstrap's"
pass "the arm64 closure is the one mmdebstrap --arch=arm64 installs ($(wc -l <ours.names) packages, same versions)"

# ---- wheels: each platform's own, pure-Python ones shared --------------------------------------------
python3 - "$WORK/www/wheels" <<PY
import sys
sys.path.insert(0, "$LOCKSTEP_SOURCE_DIR/tests/cli")
import py_index
index = py_index.Index(sys.argv[1])
# numlite has a wheel per machine; on x86_64 it also needs x86only (a marker), on both purelib.
for machine in ["x86_64", "aarch64"]:
    index.wheel("numlite", "1.26.4", ["purelib>=1", 'x86only; platform_machine == "x86_64"'],
                tag=f"cp311-cp311-manylinux_2_17_{machine}.manylinux2014_{machine}")
index.wheel("numlite", "1.26.4", [], tag="cp311-cp311-win_amd64")
index.wheel("purelib", "1.2", [])
index.wheel("x86only", "0.1", [], tag="py3-none-manylinux_2_17_x86_64")
index.write(["numlite"])
PY
start_http_server "$WORK/www" "$LOCKSTEP_SOURCE_DIR/tests/cli/py_index.py"
mkdir py
cp ex/lockstep.yaml ex/lockstep.lock ex/hello.py py/
sed -i "s|^repos:|repos:\n  - {pypi: $HTTP_URL/wheels/simple}|; s|^  apt: \[openmpi-bin, python3-mpi4py\]|&\n  pip: [numlite==1.26.4]|" py/lockstep.yaml
ls_run lock py/lockstep.yaml
assert_eq 0 "$RC" "lock wheels for two platforms: $ERR"
wheels=$(jq -r '.artifacts[] | select(.kind == "wheel") | "\(.name) \(.url | sub(".*/"; "")) \(.platforms // ["all"] | join(","))"' py/lockstep.lock | LC_ALL=C sort)
assert_eq "numlite numlite-1.26.4-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl linux/arm64
numlite numlite-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl linux/amd64
purelib purelib-1.2-py3-none-any.whl all
x86only x86only-0.1-py3-none-manylinux_2_17_x86_64.whl linux/amd64" "$wheels" \
  "each platform's manylinux wheel, the marker's dependency on x86_64 alone, the pure-Python one shared"
stop_http_server
pass "wheels: manylinux x86_64 and aarch64 per platform, markers per platform, py3-none-any once"

# ---- conda: each platform's subdir, noarch shared ----------------------------------------------------
cat >channel.json <<'JSON'
{"packages": [
 {"name": "python", "version": "3.11.9", "build": "h1_0_cpython", "files": {"bin/python3.11": "py311 x86_64"},
  "depends": ["__glibc >=2.17,<3.0.a0", "libzlib >=1.2.13,<2.0a0"]},
 {"name": "python", "version": "3.11.9", "build": "h1_0_cpython", "subdir": "linux-aarch64", "files": {"bin/python3.11": "py311 aarch64"},
  "depends": ["__glibc >=2.17,<3.0.a0", "libzlib >=1.2.13,<2.0a0"]},
 {"name": "libzlib", "version": "1.3.1", "build": "h4ab18f5_1", "files": {"lib/libz.so.1": "zlib x86_64"}},
 {"name": "libzlib", "version": "1.3.1", "build": "h68df207_1", "subdir": "linux-aarch64", "files": {"lib/libz.so.1": "zlib aarch64"}},
 {"name": "six", "version": "1.16.0", "build": "pyhd8ed1ab_0", "subdir": "noarch", "noarch": "python",
  "depends": ["python >=3.7"], "files": {"site-packages/six.py": "x = 1\n"}}
]}
JSON
python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/conda_channel.py" www/conda channel.json || fail "conda_channel.py failed"
start_http_server "$WORK/www" "$LOCKSTEP_SOURCE_DIR/tests/cli/py_index.py"
mkdir conda
cat >conda/lockstep.yaml <<YAML
lockstep: 1
name: conda-multi
platforms: [linux/amd64, linux/arm64]
repos:
  - {conda: $HTTP_URL/conda}
packages:
  conda: [python=3.11, six]
conda: {virtual_packages: {glibc: "2.36"}}
outputs: {oci: out}
YAML
ls_run lock conda/lockstep.yaml
assert_eq 0 "$RC" "lock conda packages for two platforms: $ERR"
assert_eq "libzlib linux-64 linux/amd64
libzlib linux-aarch64 linux/arm64
python linux-64 linux/amd64
python linux-aarch64 linux/arm64
six noarch all" "$(jq -r '.artifacts[] | "\(.name) \(.subdir) \(.platforms // ["all"] | join(","))"' conda/lockstep.lock | LC_ALL=C sort)" \
  "each platform's subdir, the noarch package once"
assert_eq '["linux-64","noarch","linux-aarch64"]' "$(jq -c '.repos[0].subdirs' conda/lockstep.lock)" "the channel's subdirs"
ls_run export --conda-lock - conda/lockstep.lock
assert_eq 0 "$RC" "export --conda-lock of two platforms: $ERR"
assert_contains "$OUT" "platforms: [linux-64, linux-aarch64]" "conda-lock.yml lists both platforms"
assert_eq 6 "$(grep -c '^  - name:' <<<"$OUT")" "three packages for each platform"
ls_run export --explicit - conda/lockstep.lock
assert_eq 2 "$RC" "an explicit file of two platforms"
ls_run export --explicit - --platform linux/arm64 conda/lockstep.lock
assert_eq 0 "$RC" "export --explicit --platform linux/arm64: $ERR"
assert_contains "$OUT" "# platform: linux-aarch64" "the arm64 share's explicit file"
ls_run export --explicit - --platform linux/riscv64 conda/lockstep.lock
assert_eq 2 "$RC" "a platform the lock has not"
assert_contains "$ERR" "export: --platform linux/riscv64: $WORK/conda/lockstep.lock is for linux/amd64, linux/arm64" \
  "the error names the lock's platforms"
stop_http_server
pass "conda: linux-64 and linux-aarch64 per platform, noarch once; conda-lock.yml of both"

# ---- the build: an index, one image per platform ------------------------------------------------------
ls_run build ex/lockstep.yaml
assert_eq 0 "$RC" "build of two platforms: $ERR"
assert_contains "$ERR" "emulating linux/arm64 on this linux/amd64 machine with qemu-user" "the build says it emulates"
index=$(last_line "$OUT")
raw=$(skopeo inspect --raw oci:ex/out:latest)
assert_eq "application/vnd.oci.image.index.v1+json" "$(jq -r .mediaType <<<"$raw")" "skopeo sees an image index"
assert_eq "$index" "sha256:$(printf '%s' "$raw" | sha256sum | cut -d' ' -f1)" "the digest printed is the index's"
assert_eq "linux/amd64 linux/arm64" "$(jq -r '[.manifests[].platform | "\(.os)/\(.architecture)"] | join(" ")' <<<"$raw")" \
  "the index names both platforms, in the spec's order"
amd64=$(jq -r '.manifests[0].digest' <<<"$raw")
arm64=$(jq -r '.manifests[1].digest' <<<"$raw")
skopeo --override-arch arm64 copy -q oci:ex/out:latest oci:arm:latest || fail "skopeo can't pick the arm64 image"
assert_eq "arm64" "$(skopeo inspect oci:arm:latest | jq -r .Architecture)" "skopeo picked the arm64 image"
umoci unpack --rootless --image arm:latest bundle >/dev/null || fail "umoci can't unpack the arm64 image"
# e_machine, bytes 18-19 of the ELF header: 0xb7 is EM_AARCH64.
assert_eq "b700" "$(od -An -tx1 -j18 -N2 bundle/rootfs/usr/bin/dash | tr -d ' \n')" "dash is an aarch64 program"
assert_eq "" "$(dpkg --root=bundle/rootfs --verify 2>&1)" "dpkg --verify finds every file as its package has it"
assert_eq "" "$(dpkg --root=bundle/rootfs --audit 2>&1)" "dpkg --audit: every package configured"
assert_eq "arm64" "$(cat bundle/rootfs/var/lib/dpkg/arch 2>/dev/null || dpkg --root=bundle/rootfs --print-architecture)" \
  "the root's dpkg is arm64's"
pass "an image index (skopeo), the arm64 image unpacked by umoci, its dpkg state clean"

ls_run exec --platform linux/arm64 oci:ex/out -- python3 -c 'import platform; print(platform.machine())'
assert_eq 0 "$RC" "exec --platform linux/arm64: $ERR"
assert_eq aarch64 "$OUT" "python3 runs as aarch64"
assert_contains "$ERR" "emulating linux/arm64" "exec says it emulates"
ls_run exec --platform linux/arm64 oci:ex/out -- mpirun --oversubscribe -n 2 python3 /opt/hello/hello.py
assert_eq 0 "$RC" "a 2-rank mpi4py job in the arm64 image: $ERR"
assert_contains "$OUT" "allreduce ok: 2 ranks, sum 3" "the allreduce under emulation"
ls_run exec oci:ex/out -- python3 -c 'import platform; print(platform.machine())'
assert_eq "0 x86_64" "$RC $OUT" "without --platform, this machine's image"
pass "exec --platform linux/arm64 runs python3 and a 2-rank mpi4py allreduce under qemu-user"

assert_contains "$(siftool header ex/out-arm64.sif)" "Primary Architecture: arm64" "the arm64 SIF"
assert_contains "$(siftool header ex/out-amd64.sif)" "Primary Architecture: amd64" "the amd64 SIF"
assert_eq "examples/mpi-hello:latest examples/mpi-hello:latest-amd64|examples/mpi-hello:latest-arm64" \
  "$(tar -xOf ex/out.tar manifest.json | jq -r '[.[].RepoTags | join(" ")] | join("|")')" \
  "the docker-archive lists both images"
assert_eq arm64 "$(skopeo inspect docker-archive:ex/out.tar:examples/mpi-hello:latest-arm64 | jq -r .Architecture)" \
  "skopeo reads the arm64 image of the docker-archive"
pass "one SIF per platform (out-{arch}.sif), a docker-archive of both"

# ---- preflight: each node's platform ------------------------------------------------------------------
ls_run preflight --digest "$index" oci:ex/out
assert_eq 0 "$RC" "preflight of the index on this node: $OUT $ERR"
assert_contains "$OUT" "ok" "the index passes, pinned by its own digest (the one every node shares)"
ls_run preflight oci:arm
assert_eq 1 "$RC" "preflight of an arm64-only image on this amd64 node"
assert_contains "$OUT" "is a linux/arm64 image and this node is linux/amd64" "the failure names both platforms"
# An index without this node's platform.
cp -a ex/out armidx
jq -c '.manifests |= [.[1]]' "ex/out/blobs/sha256/${index#sha256:}" >armidx.json
only=$(sha256sum armidx.json | cut -d' ' -f1)
cp armidx.json "armidx/blobs/sha256/$only"
jq -c --arg d "sha256:$only" --argjson s "$(stat -c %s armidx.json)" '.manifests[0].digest = $d | .manifests[0].size = $s' \
  ex/out/index.json >armidx/index.json
ls_run preflight oci:armidx
assert_eq 1 "$RC" "preflight of an index without linux/amd64"
assert_contains "$OUT" "no image for platform linux/amd64" "the failure names this node's platform"
assert_contains "$OUT" "available: linux/arm64" "and the index's"
pass "preflight takes the node's platform: an index passes, an image without it fails naming both"

# ---- each platform's image is the one its platform alone gives ---------------------------------------
mkdir one
cp ex/hello.py one/
sed 's|^platforms: \[linux/amd64, linux/arm64\]|platform: linux/amd64|' ex/lockstep.yaml >one/lockstep.yaml
cp ex/lockstep.lock one/lockstep.lock # its amd64 share is kept
ls_run lock one/lockstep.yaml
assert_eq 0 "$RC" "lock of linux/amd64 alone: $ERR"
ls_run build one/lockstep.yaml --oci one/out
assert_eq 0 "$RC" "build of linux/amd64 alone: $ERR"
assert_eq "$amd64" "$(last_line "$OUT")" "the index's amd64 image is the single-platform build's"
pass "the index's amd64 image is the one a linux/amd64 build gives alone"

# ---- the commands that read a lock take each image's platform's share ---------------------------------
ls_run verify oci:ex/out --lock ex/lockstep.lock
assert_eq 0 "$RC" "verify of the host's image against the multi-platform lock: $OUT $ERR"
assert_contains "$OUT" "against ex/lockstep.lock (linux/amd64): ok" "verify names the share it compared"
ls_run verify --platform linux/arm64 oci:ex/out --lock ex/lockstep.lock --json
assert_eq 0 "$RC" "verify --platform linux/arm64 against the multi-platform lock: $OUT $ERR"
assert_eq "linux/arm64 true" "$(jq -r '"\(."lock-platform") \(.ok)"' <<<"$OUT")" "the arm64 image is its share"
ls_run verify one/out --lock ex/lockstep.lock
assert_eq 0 "$RC" "the single-platform image records the amd64 share's digest: $OUT $ERR"
ls_run diff ex/lockstep.lock one/lockstep.lock
assert_eq 0 "$RC" "the amd64 share is what linux/amd64 alone locks: $OUT $ERR"
ls_run diff ex/lockstep.lock oci:ex/out
assert_eq 0 "$RC" "diff of the lock and the index's image for this host: $OUT $ERR"
ls_run sbom oci:ex/out --lock ex/lockstep.lock --format cyclonedx-json
assert_eq 0 "$RC" "sbom of an image with its multi-platform lock: $ERR"
ls_run export --dockerfile ex/lockstep.lock
assert_eq 2 "$RC" "a Dockerfile of two platforms"
assert_contains "$ERR" "give --platform" "the error says what to do"
ls_run export --dockerfile --platform linux/arm64 ex/lockstep.lock
assert_eq 0 "$RC" "export --dockerfile --platform linux/arm64: $ERR"
assert_contains "$OUT" "_arm64.deb" "the arm64 share's debs"
pass "verify, diff, sbom and export take the image's or the given platform's share of the lock"

# ---- push: the index and both images ------------------------------------------------------------------
registry_up hub plain
ref="docker://$REG_HUB_HOST/multi/mpi-hello:1"
ls_run build --tls-verify=false ex/lockstep.yaml --push "$ref" --provenance "prov-{arch}.json"
assert_eq 0 "$RC" "build --push of the index: $ERR"
assert_eq "qemu-aarch64 file://$(readlink -f /usr/bin/qemu-aarch64-static) $(sha256sum </usr/bin/qemu-aarch64-static | cut -d' ' -f1)" \
  "$(jq -r '.predicate.runDetails.builder.builderDependencies[] | "\(.name) \(.uri) \(.digest.sha256)"' prov-arm64.json)" \
  "the arm64 image's provenance pins the qemu-user that ran its steps"
assert_eq null "$(jq -c .predicate.runDetails.builder.builderDependencies prov-amd64.json)" "the amd64 one ran none"
pushed=$(skopeo inspect --tls-verify=false --raw "$ref")
assert_eq "$index" "sha256:$(printf '%s' "$pushed" | sha256sum | cut -d' ' -f1)" "the registry holds the index, byte for byte"
assert_eq arm64 "$(skopeo --override-arch arm64 inspect --tls-verify=false "$ref" | jq -r .Architecture)" \
  "skopeo resolves the arm64 image through the pushed index"
for digest in "$amd64" "$arm64"; do
  assert_eq "$digest" "sha256:$(skopeo inspect --tls-verify=false --raw "docker://$REG_HUB_HOST/multi/mpi-hello@$digest" |
    sha256sum | cut -d' ' -f1)" "each platform's image is in the registry by its digest"
done
ref2="docker://$REG_HUB_HOST/multi/pushed:1"
ls_run push --tls-verify=false oci:ex/out "$ref2"
assert_eq 0 "$RC" "push of the index layout: $ERR"
assert_eq "$index" "$(last_line "$OUT")" "push prints the index's digest"
assert_eq "$raw" "$(skopeo inspect --tls-verify=false --raw "$ref2")" "lockstep push puts the same index there"
ls_run push --tls-verify=false --platform linux/arm64 oci:ex/out "docker://$REG_HUB_HOST/multi/arm:1"
assert_eq "0 $arm64" "$RC $(last_line "$OUT")" "push --platform pushes that platform's image alone"
# Signed: push --key signs the index and attaches each image's provenance; verify --key --lock
# checks the image of the platform asked for against that platform's share of the lock.
printf 'pass\n' >pass.txt
ls_run generate-key --output-prefix mk --passphrase-file pass.txt
ref3="docker://$REG_HUB_HOST/multi/signed:1"
ls_run push --tls-verify=false oci:ex/out "$ref3" --key mk.key --passphrase-file pass.txt
assert_eq 0 "$RC" "push --key of the index: $ERR"
for platform in linux/amd64 linux/arm64; do
  ls_run verify --tls-verify=false --platform "$platform" "$ref3" --key mk.pub --lock ex/lockstep.lock
  assert_eq 0 "$RC" "verify --key --lock of the $platform image: $OUT $ERR"
  assert_contains "$OUT" "provenance ok: built by pkg:generic/lockstep@" "the $platform image's provenance is checked"
done
ls_run verify --tls-verify=false --platform linux/arm64 "$ref3" --key mk.pub --lock one/lockstep.lock
assert_eq 1 "$RC" "the arm64 image against a lock of linux/amd64 alone"
ls_run verify --tls-verify=false --platform linux/riscv64 "$ref3" --key mk.pub --lock ex/lockstep.lock
assert_eq 2 "$RC" "a platform the signed index lacks"
assert_contains "$ERR" "no image for platform linux/riscv64" "the error names the platform asked for"
assert_contains "$ERR" "linux/amd64" "and the platforms the index has"
pass "build --push and push put the index and both images in docker-registry; push --key signs them"

# ---- an image base of two platforms: each platform builds over its own manifest -----------------------
mkdir over
echo "over the index" >over/note.txt
cat >over/lockstep.yaml <<YAML
lockstep: 1
name: over-index
platforms: [linux/amd64, linux/arm64]
base: {image: "$ref"}
copy:
  - {from: ./note.txt, to: /opt/note.txt}
outputs: {oci: out}
YAML
ls_run lock --tls-verify=false over/lockstep.yaml
assert_eq 0 "$RC" "lock over a two-platform base: $ERR"
assert_eq "linux/amd64 $amd64,linux/arm64 $arm64" \
  "$(jq -r '[.bases[] | "\(.platform) \(.manifest)"] | join(",")' over/lockstep.lock)" \
  "bases: each platform's manifest of the base's index"
ls_run build --tls-verify=false over/lockstep.yaml
assert_eq 0 "$RC" "build over a two-platform base: $ERR"
for arch in amd64 arm64; do
  base_layers=$(skopeo --override-arch "$arch" inspect --tls-verify=false "$ref" | jq -c .Layers)
  ours=$(skopeo --override-arch "$arch" inspect oci:over/out | jq -c --argjson n "$(jq length <<<"$base_layers")" '.Layers[:$n]')
  assert_eq "$base_layers" "$ours" "the $arch image starts with the $arch base's layers"
done
# vendor gathers each platform's base; an offline build from that mirror alone gives the same index.
ls_run vendor --tls-verify=false over/lockstep.lock --to overvend --json
assert_eq 0 "$RC" "vendor of a lock over a two-platform base: $ERR"
for digest in "$amd64" "$arm64"; do
  assert_eq 1 "$(jq --arg d "$digest" '[.files[] | select(.sha256 == ($d | ltrimstr("sha256:")))] | length' \
    overvend/lockstep-vendor.json)" "the vendored files hold the base's manifest $digest"
done
LOCKSTEP_CACHE="$WORK/overcache" ls_run build --locked --offline --mirror overvend over/lockstep.yaml --oci over/offline
assert_eq 0 "$RC" "offline build over the vendored bases: $ERR"
assert_eq "$(jq -r '.manifests[0].digest' over/out/index.json)" "$(jq -r '.manifests[0].digest' over/offline/index.json)" \
  "the offline build gives the same index"
pass "an image base of two platforms: bases in the lock, each image over its platform's manifest, vendored"

# ---- bad input ---------------------------------------------------------------------------------------
mkdir bad
cp ex/hello.py bad/
sed 's|^platforms:|platform: linux/amd64\nplatforms:|' ex/lockstep.yaml >bad/lockstep.yaml
ls_run lock bad/lockstep.yaml
assert_eq 2 "$RC" "platform and platforms"
assert_contains "$ERR" "give 'platform: linux/amd64' or 'platforms: [...]', not both" "the error says which"
sed 's|^platforms: .*|platforms: [linux/amd64, linux/arm64/v8, linux/arm64]|' ex/lockstep.yaml >bad/lockstep.yaml
ls_run lock bad/lockstep.yaml
assert_eq 2 "$RC" "a platform twice"
assert_contains "$ERR" "linux/arm64 is listed twice" "linux/arm64/v8 and linux/arm64 are one platform"
sed 's|out-{arch}.sif|out.sif|' ex/lockstep.yaml >bad/lockstep.yaml
cp ex/lockstep.lock bad/
ls_run build bad/lockstep.yaml
assert_eq 2 "$RC" "a SIF path without {arch}"
assert_contains "$ERR" "name the architecture with {arch} in the path" "the error says what to do"
pass "bad input: platform with platforms, a platform twice, one SIF path for two platforms"

done_testing
