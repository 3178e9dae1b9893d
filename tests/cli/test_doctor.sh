#!/usr/bin/env bash
# `lockstep doctor`: the host snapshot from a fake node (tests/fixtures/doctor/node copied into a
# temp dir, read with --host-root) with stand-in nvidia-smi, mpirun and sinfo first on PATH; a venv
# and a conda environment written by the suite; the verdict for a hand-written lockstep.lock and a
# relabelled image both ways (driver too old -> exit 1 with the reason, new enough -> 0); bad usage;
# and real peers: a venv made by /usr/bin/python3 -m venv and the system's dist-packages, each
# compared with what importlib.metadata lists. The JSON is read with /usr/bin/python3's json module.
source "$(dirname "$0")/lib.sh"
need jq
[ -x /usr/bin/python3 ] || {
  [ -z "${CI:-}" ] || fail "/usr/bin/python3 is not installed"
  echo "SKIP: /usr/bin/python3 is not installed" >&2
  exit 77
}

FIXTURE="$LOCKSTEP_SOURCE_DIR/tests/fixtures/doctor"
cp -a "$FIXTURE/node" root
mkdir tools empty-bin
cp "$FIXTURE/bin/"* tools/
TOOLS="$WORK/tools"
EMPTY="$WORK/empty-bin"

# doctor PATH [NAME=VALUE...] -- ARGS...: `lockstep doctor ARGS` with only PATH and the given variables
# of the Python environment (the caller's VIRTUAL_ENV and CONDA_PREFIX removed); OUT, ERR, RC as ls_run.
doctor() {
  local path=$1 vars=()
  shift
  while [ "$1" != -- ]; do
    vars+=("$1")
    shift
  done
  shift
  set +e
  OUT=$(env -u VIRTUAL_ENV -u CONDA_PREFIX PATH="$path" "${vars[@]}" "$LOCKSTEP" doctor "$@" 2>"$WORK/.stderr")
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}

# py EXPR: EXPR evaluated with d = the JSON document in $OUT (by /usr/bin/python3's json module).
py() {
  /usr/bin/python3 -c "import json, sys; d = json.load(sys.stdin); print($1)" <<<"$OUT"
}

set_driver() { # VERSION
  printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Sat Aug 19 01:15:15 UTC 2023\n' "$1" \
    >root/proc/driver/nvidia/version
}

# ---- the host ---------------------------------------------------------------------------------------
doctor "$TOOLS" -- --host-root root --json
assert_eq 0 "$RC" "doctor --json of the fake node ($ERR)"
assert_eq "['lockstep-snapshot', 'tool', 'host', 'python']" "$(py 'list(d)')" "top-level keys, in order"
assert_eq "['arch', 'os', 'kernel', 'glibc', 'user_namespaces', 'driver', 'gpus', 'mpi', 'pmix', 'ucx', 'libfabric', 'slurm']" \
  "$(py 'list(d["host"])')" "host keys, in order"
assert_eq "1 $("$LOCKSTEP" --version)" "$(py 'd["lockstep-snapshot"], d["tool"]' | tr -d "(),'")" "schema and tool"
assert_eq "x86_64|Debian GNU/Linux 12 (bookworm)|6.1.0-18-amd64|2.36|True" \
  "$(py '"|".join(str(d["host"][k]) for k in ("arch", "os", "kernel", "glibc", "user_namespaces"))')" \
  "arch, os (via the root's /etc/os-release symlink), kernel, glibc, user namespaces"
assert_eq "{'version': '535.104.05', 'from': '/proc/driver/nvidia/version'}" "$(py 'd["host"]["driver"]')" \
  "the driver, from /proc"
assert_eq "[{'index': 0, 'name': 'NVIDIA H100 80GB HBM3', 'uuid': 'GPU-8d3f5c1e-1111-2222-3333-444455556666', 'compute_capability': '9.0', 'memory_mib': 81559}, {'index': 1, 'name': 'NVIDIA H100 80GB HBM3', 'uuid': 'GPU-0a1b2c3d-7777-8888-9999-aaaabbbbcccc', 'compute_capability': '9.0', 'memory_mib': 81559}]" \
  "$(py 'd["host"]["gpus"]')" "the GPUs, from the nvidia-smi stand-in"
assert_eq "{'impl': 'openmpi', 'version': '4.1.4', 'path': '$TOOLS/mpirun'}" "$(py 'd["host"]["mpi"]')" \
  "mpirun first on PATH"
assert_eq "4.2.2 None 1.17.0 22.05.8 None" \
  "$(py 'd["host"]["pmix"], d["host"]["ucx"], d["host"]["libfabric"], d["host"]["slurm"], d["python"]' | tr -d "(),'")" \
  "PMIx and libfabric from the root's dpkg database (UCX only left config files), Slurm from sinfo, no Python"
first=$OUT
doctor "$TOOLS" -- --host-root root --json
assert_eq "$first" "$OUT" "a second snapshot of the same node"
pass "--json: the fake node's /proc, /etc, libc and dpkg files, and nvidia-smi, mpirun and sinfo on PATH"

doctor "$TOOLS" -- --host-root root
assert_eq 0 "$RC" "doctor of the fake node ($ERR)"
assert_contains "$OUT" "NVIDIA driver    535.104.05 (from /proc/driver/nvidia/version)" "the driver row"
assert_contains "$OUT" "GPUs             2 (from nvidia-smi)" "the GPU row"
assert_contains "$OUT" "  1              NVIDIA H100 80GB HBM3, cc 9.0, 81559 MiB, GPU-0a1b2c3d-7777-8888-9999-aaaabbbbcccc" \
  "one row per GPU"
assert_contains "$OUT" "mpirun           Open MPI 4.1.4 ($TOOLS/mpirun)" "the mpirun row"
assert_contains "$OUT" "Python           no active environment" "no Python environment"
pass "the table names each value's source"

# Without nvidia-smi the GPU list comes from /proc (no compute capability); without the /proc files
# the driver comes from nvidia-smi; with neither there is no driver.
cp "$TOOLS/mpirun" "$TOOLS/sinfo" empty-bin/
doctor "$EMPTY" -- --host-root root --json
assert_eq "0 None None" "$(py 'len(d["host"]["gpus"]) - 2, d["host"]["gpus"][0]["compute_capability"], d["host"]["gpus"][1]["memory_mib"]' | tr -d "(),")" \
  "GPUs from /proc/driver/nvidia/gpus"
mv root/proc/driver root/proc/driver.off
doctor "$TOOLS" -- --host-root root --json
assert_eq "{'version': '535.104.05', 'from': 'nvidia-smi'}" "$(py 'd["host"]["driver"]')" "the driver from nvidia-smi"
doctor "$EMPTY" -- --host-root root --json
assert_eq "None []" "$(py 'd["host"]["driver"], d["host"]["gpus"]' | tr -d "(),")" "no driver, no GPUs"
mv root/proc/driver.off root/proc/driver
echo 0 >root/proc/sys/user/max_user_namespaces
doctor "$EMPTY" -- --host-root root --json
assert_eq False "$(py 'd["host"]["user_namespaces"]')" "max_user_namespaces 0"
echo 63615 >root/proc/sys/user/max_user_namespaces
pass "the driver and GPU sources fall back in order; user namespaces follow the root's sysctls"

# ---- Python environments ----------------------------------------------------------------------------
# A venv written here (pyvenv.cfg and dist-info only), at a path under the root.
site=root/home/u/.venv/lib/python3.12/site-packages
mkdir -p "$site" root/home/u/.venv/bin
printf 'home = /usr/local/bin\ninclude-system-site-packages = true\nversion_info = 3.12.1.final.0\n' \
  >root/home/u/.venv/pyvenv.cfg
dist_info() { # SITE NAME VERSION [INSTALLER]
  local d="$1/$2-$3.dist-info"
  mkdir -p "$d"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n\nDescription body\n' "$2" "$3" >"$d/METADATA"
  [ -z "${4:-}" ] || printf '%s\n' "$4" >"$d/INSTALLER"
}
dist_info "$site" Torch 2.1.0 pip
dist_info "$site" nvidia_nccl_cu12 2.18.1 pip
dist_info "$site" Jinja2 3.1.2 uv
mkdir -p "$site/bad-1.dist-info"
printf 'Metadata-Version: 2.1\nName: bad\nVersion: not a version\n' >"$site/bad-1.dist-info/METADATA"
doctor "$EMPTY" VIRTUAL_ENV=/home/u/.venv -- --host-root root --json
assert_eq 0 "$RC" "doctor with a venv ($ERR)"
assert_eq "venv /home/u/.venv 3.12.1" "$(py 'd["python"]["kind"], d["python"]["prefix"], d["python"]["version"]' | tr -d "(),'")" \
  "kind, prefix, version (version_info)"
assert_eq "Jinja2 3.1.2 dist-info uv|nvidia_nccl_cu12 2.18.1 dist-info pip|Torch 2.1.0 dist-info pip" \
  "$(py '"|".join(" ".join((p["name"], p["version"], p["from"], p["installer"])) for p in d["python"]["packages"])')" \
  "packages sorted by normalised name, with their installer"
assert_eq "[None, None, None]" "$(py '[p["build"] for p in d["python"]["packages"]]')" "no conda fields"
assert_contains "$ERR" "lockstep: warning: $WORK/root/home/u/.venv/lib/python3.12/site-packages/bad-1.dist-info/METADATA: no valid Version header; skipped" \
  "the malformed METADATA is named"
doctor "$EMPTY" VIRTUAL_ENV=/home/u/.venv -- --host-root root
assert_contains "$OUT" "Python           venv /home/u/.venv, Python 3.12.1, 3 packages (system site-packages visible, not listed)" \
  "the Python row"
pass "a venv: pyvenv.cfg's version_info, dist-info names, versions and INSTALLER; a bad record is a warning"

# The fixture's conda environment: conda-meta plus the dist-info conda did not install.
doctor "$EMPTY" CONDA_PREFIX=/opt/conda -- --host-root root --json
assert_eq 0 "$RC" "doctor with a conda environment ($ERR)"
assert_eq "conda 3.11.5" "$(py 'd["python"]["kind"], d["python"]["version"]' | tr -d "(),'")" "kind and the python package's version"
assert_eq "cuda-cudart conda 0|numpy conda py311h64a7726_0|python conda h955ad1f_0|python-dateutil dist-info None|requests dist-info None" \
  "$(py '"|".join(" ".join(str(p[k]) for k in ("name", "from", "build")) for p in d["python"]["packages"])')" \
  "conda packages with their builds, and pip's dist-info (conda's own numpy dist-info listed once)"
assert_eq "https://conda.anaconda.org/conda-forge/linux-64" "$(py 'd["python"]["packages"][1]["channel"]')" "the channel"
assert_contains "$ERR" "truncated-1.0-0.json: not valid JSON" "the truncated conda-meta record is named"
pass "a conda environment: conda-meta records and the pip-installed dist-info, marked as such"

doctor "$EMPTY" VIRTUAL_ENV=/nowhere -- --host-root root --json
assert_eq "0 None" "$RC $(py 'd["python"]')" "a VIRTUAL_ENV that is gone"
assert_contains "$ERR" "VIRTUAL_ENV=/nowhere" "the warning names the variable"
doctor "$EMPTY" -- --host-root root --python /nowhere
assert_eq 2 "$RC" "--python of a missing prefix"
assert_contains "$ERR" "lockstep: error: --python /nowhere: $WORK/root/nowhere is not a directory" "the error"
pass "an environment variable naming nothing is a warning; --python naming nothing is an error (exit 2)"

# ---- the verdict for a lock ---------------------------------------------------------------------------
hex() { printf '%s' "$1" | sha256sum | cut -c1-64; }
cat >lockstep.lock <<EOF
{
  "lockstep-lock": 1,
  "tool": "lockstep 0.1.0",
  "spec-digest": "sha256:$(hex spec)",
  "epoch": 0,
  "platform": "linux/amd64",
  "inputs": {"platform":"linux/amd64","packages":{"apt":["openmpi-bin","cuda-cudart-12-1"]}},
  "repos": [
    {"kind":"apt","url":"http://127.0.0.1:1/repo","suite":"lstest","components":["main"],"release-date":"Sat, 15 Mar 2025 10:00:00 UTC","release-sha256":"$(hex release)"}
  ],
  "artifacts": [
    {"kind":"deb","name":"libopenmpi3","version":"4.1.4-3+b1","arch":"amd64","group":"mpi","size":1,"sha256":"$(hex a)","url":"http://127.0.0.1:1/repo/pool/libopenmpi3.deb","repo":0,"reason":"openmpi-bin (Depends)"},
    {"kind":"deb","name":"libpmix2","version":"4.2.2-1+deb12u1","arch":"amd64","group":"mpi","size":1,"sha256":"$(hex b)","url":"http://127.0.0.1:1/repo/pool/libpmix2.deb","repo":0,"reason":"libopenmpi3 (Depends)"},
    {"kind":"deb","name":"openmpi-bin","version":"4.1.4-3+b1","arch":"amd64","group":"mpi","size":1,"sha256":"$(hex c)","url":"http://127.0.0.1:1/repo/pool/openmpi-bin.deb","repo":0,"reason":"requested"},
    {"kind":"deb","name":"cuda-cudart-12-1","version":"12.1.105-1","arch":"amd64","group":"cuda","size":1,"sha256":"$(hex d)","url":"http://127.0.0.1:1/repo/pool/cuda-cudart-12-1.deb","repo":0,"reason":"requested"}
  ]
}
EOF
set_driver 525.60.13
doctor "$TOOLS" -- --host-root root lockstep.lock
assert_eq 1 "$RC" "a lock whose CUDA needs a newer driver ($ERR)"
assert_contains "$OUT" "target        lockstep.lock (lock): CUDA 12.1 (driver >= 530.30.02), Open MPI 4.1.4, PMIx 4.2.2" \
  "the target row"
assert_contains "$OUT" "can run here  no" "the verdict"
assert_contains "$OUT" "  driver      FAIL  driver 525.60.13 is older than 530.30.02, the floor of the image's CUDA 12.1 (update the driver or use an image built for an older CUDA)" \
  "the reason and what to do"
assert_contains "$OUT" "  mpi         ok    Open MPI 4.1.4 on host and image" "the MPI check"
doctor "$TOOLS" -- --host-root root --json lockstep.lock
assert_eq 1 "$RC" "--json: the same verdict"
assert_eq "lock False driver:fail gpus:ok mpi:ok pmix:ok userns:ok" \
  "$(py 'd["target"]["kind"], d["target"]["can_run"], *[c["name"] + ":" + c["status"] for c in d["target"]["checks"]]' | tr -d "(),'")" \
  "the target in the snapshot"
assert_eq "{'mpi': {'impl': 'openmpi', 'version': '4.1.4'}, 'pmix': '4.2.2', 'ucx': None, 'libfabric': None, 'cuda': '12.1', 'cuda_driver_floor': '530.30.02'}" \
  "$(py 'd["target"]["facts"]')" "the lock's facts, the driver floor from recipes/cuda/drivers.yaml"
pass "a lock whose CUDA floor is above the host's driver can't run here (exit 1, the reason and what to do)"

set_driver 535.104.05
doctor "$TOOLS" -- --host-root root lockstep.lock
assert_eq 0 "$RC" "a lock the host's driver and MPI can run ($ERR)"
assert_contains "$OUT" "can run here  yes" "the verdict"
assert_contains "$OUT" "  driver      ok    driver 535.104.05 (the image's CUDA 12.1 needs 530.30.02)" "the driver check"

# Another MPI first on PATH: the hybrid model can't use it.
mkdir mpich-bin
printf '#!/bin/sh\nprintf "HYDRA build details:\\n    Version:   4.0.2\\n"\n' >mpich-bin/mpirun
chmod 755 mpich-bin/mpirun
doctor "$WORK/mpich-bin:$TOOLS" -- --host-root root lockstep.lock
assert_eq 1 "$RC" "a lock with Open MPI on a host with MPICH"
assert_contains "$OUT" "  mpi         FAIL  host MPICH 4.0.2, image Open MPI 4.1.4: the hybrid model needs the host's MPI in the image" \
  "the MPI reason"
# No driver at all.
mv root/proc/driver root/proc/driver.off
doctor "$EMPTY" -- --host-root root lockstep.lock
assert_eq 1 "$RC" "a CUDA lock on a host without a driver"
assert_contains "$OUT" "  driver      FAIL  no NVIDIA driver (the image's CUDA 12.1 needs 530.30.02 or newer)" "the reason"
mv root/proc/driver.off root/proc/driver
pass "a lock runs with a new enough driver and the same MPI (exit 0); another MPI or no driver: exit 1"

# A lock whose stack needs newer GPUs than the node's (the fake nvidia-smi reports compute capability 9.0).
jq --arg d "sha256:$(hex recipes)" '. + {stack: {recipes: "builtin", "recipes-digest": $d, cuda: "12.1",
  "driver-floor": "530.30.02", "min-cc": "10.0", archs: [], "nvidia-require-cuda": "cuda>=12.1", choices: []}}' \
  lockstep.lock >stack.lock
doctor "$TOOLS" -- --host-root root stack.lock
assert_eq 1 "$RC" "a lock whose stack needs compute capability 10.0 on 9.0 GPUs"
assert_contains "$OUT" "  gpu-arch    FAIL  GPU 0 (" "the gpu-arch check"
assert_contains "$OUT" "are older than 10.0, the lowest compute capability the target's CUDA stack supports" "its reason"
pass "a lock whose stack needs newer GPUs than the node has can't run here (exit 1)"

# ---- the verdict for an image ---------------------------------------------------------------------------
mkdir -p img/rootfs/etc
printf 'doctor\n' >img/rootfs/etc/marker
cat >img/lockstep.yaml <<'YAML'
lockstep: 1
name: doctor
copy:
  - {from: ./rootfs, to: /}
outputs:
  oci: out/layout
YAML
"$LOCKSTEP" build -q img/lockstep.yaml >/dev/null
# relabel SRC DST LABELS_JSON: a copy of layout SRC whose config has LABELS_JSON added (as test_preflight).
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
relabel img/out/layout img/cuda '{"dev.lockstep.cuda.version":"12.4","dev.lockstep.cuda.driver-floor":"550.54.14"}'
doctor "$TOOLS" -- --host-root root --json "oci:$WORK/img/cuda"
assert_eq 1 "$RC" "an image needing driver 550 on a host with 535 ($ERR)"
manifest=$(jq -r '.manifests[0].digest' img/cuda/index.json)
assert_eq "image False image:ok:$manifest driver:fail" \
  "$(py 'd["target"]["kind"], d["target"]["can_run"], *[c["name"] + ":" + c["status"] + (":" + c["detail"] if c["name"] == "image" else "") for c in d["target"]["checks"][:2]]' | tr -d "(),'")" \
  "the image check names the manifest digest; the driver check fails"
set_driver 550.54.15
doctor "$TOOLS" -- --host-root root "oci:$WORK/img/cuda"
assert_eq 0 "$RC" "the same image with driver 550.54.15 ($ERR)"
assert_contains "$OUT" "target        oci:$WORK/img/cuda (image): CUDA 12.4 (driver >= 550.54.14)" "the target row"
pass "an image's dev.lockstep.* labels are checked the same way (exit 1, then 0 with a newer driver)"

# ---- bad usage ------------------------------------------------------------------------------------------
doctor "$EMPTY" -- --host-root root missing.sif
assert_eq 2 "$RC" "a missing target"
assert_contains "$ERR" "lockstep: error: missing.sif: no such image" "the error"
printf '{"lockstep-lock": 1, "tool": 3}\n' >bad.lock
doctor "$EMPTY" -- --host-root root bad.lock
assert_eq 2 "$RC" "a malformed lock ($ERR)"
assert_contains "$ERR" "bad.lock" "the error names the lock"
doctor "$EMPTY" -- --host-root "$WORK/nowhere"
assert_eq 2 "$RC" "a missing --host-root"
assert_eq "lockstep: error: --host-root $WORK/nowhere: not a directory" "$ERR" "the error"
doctor "$EMPTY" -- --help
assert_eq 0 "$RC" "--help"
assert_contains "$OUT" "lockstep doctor lockstep.lock" "--help has examples"
pass "a missing image, a malformed lock or host root: exit 2 with the reason"

# ---- real peers -----------------------------------------------------------------------------------------
# A venv made by Python itself; where ensurepip is missing (no python3-venv), one without pip plus a
# dist-info record written here, so the peer comparison still has something to compare.
if /usr/bin/python3 -m venv "$WORK/realvenv" >/dev/null 2>&1; then
  :
elif /usr/bin/python3 -m venv --without-pip "$WORK/realvenv" >/dev/null 2>&1; then
  echo "# python3 -m venv without ensurepip: writing a dist-info record by hand"
else
  echo "# python3 -m venv is unavailable: building the venv layout by hand"
  version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  mkdir -p "$WORK/realvenv/bin" "$WORK/realvenv/lib/python$version/site-packages"
  printf 'home = /usr/bin\ninclude-system-site-packages = false\nversion = %s\n' \
    "$(/usr/bin/python3 -c 'import platform; print(platform.python_version())')" >"$WORK/realvenv/pyvenv.cfg"
  ln -s /usr/bin/python3 "$WORK/realvenv/bin/python"
fi
purelib=$("$WORK/realvenv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
dist_info "$purelib" Hand_Written.pkg 0.1.dev3 manual
doctor "$EMPTY" VIRTUAL_ENV="$WORK/realvenv" -- --json
assert_eq 0 "$RC" "doctor of a real venv ($ERR)"
expected=$("$WORK/realvenv/bin/python" -c '
import importlib.metadata as m, platform, re, sys, sysconfig
dists = m.distributions(path=[sysconfig.get_paths()["purelib"]])
rows = sorted((re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(), d.metadata["Name"], d.version) for d in dists)
print(platform.python_version(), "|".join(name + " " + version for _, name, version in rows))')
assert_eq "$expected" "$(py 'd["python"]["version"], "|".join(p["name"] + " " + p["version"] for p in d["python"]["packages"])' | tr -d "(),'")" \
  "the venv's version and packages, as its own importlib.metadata lists them"
assert_eq "venv $WORK/realvenv" "$(py 'd["python"]["kind"], d["python"]["prefix"]' | tr -d "(),'")" "kind and prefix"
pass "a real venv: the same packages and versions as importlib.metadata, without running it"

# The system's own Python packages (--python /usr), judged the same way.
doctor "$EMPTY" -- --python /usr --json
assert_eq 0 "$RC" "doctor --python /usr ($ERR)"
expected=$(/usr/bin/python3 -c '
import glob, importlib.metadata as m, re
dirs = sorted(glob.glob("/usr/lib/python*/site-packages") + glob.glob("/usr/lib/python*/dist-packages"))
rows = sorted((re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(), d.version)
              for d in m.distributions(path=dirs) if d.metadata["Name"])
print(len(rows), "|".join(name + " " + version for name, version in rows))')
actual=$(/usr/bin/python3 -c '
import json, re, sys
d = json.load(sys.stdin)
rows = [(re.sub(r"[-_.]+", "-", p["name"]).lower(), p["version"]) for p in d["python"]["packages"]]
print(len(rows), "|".join(name + " " + version for name, version in rows))' <<<"$OUT")
assert_eq "$expected" "$actual" "the system's dist-packages as importlib.metadata lists them"
assert_eq "prefix /usr" "$(py 'd["python"]["kind"], d["python"]["prefix"]' | tr -d "(),'")" "kind and prefix"
pass "--python /usr: the system's dist-info and egg-info records, as importlib.metadata lists them"

done_testing
