#!/usr/bin/env bash
# Benchmark: examples/mpi-hello (Debian bookworm + openmpi-bin + python3-mpi4py from
# deb.debian.org), against mmdebstrap, in one run:
#   1. lockstep lock + cold build (empty store: every .deb downloaded, layers built and compressed,
#      maintainer scripts run, OCI layout written) versus
#      `mmdebstrap --variant=apt --include=openmpi-bin,python3-mpi4py bookworm OUT.tar SOURCES`
#      over the example's three sources (bookworm, bookworm-updates, bookworm-security): it
#      downloads the same packages, installs them with apt and dpkg, writes a tarball;
#   2. a rebuild after changing one application file (hello.py), as a ratio to lockstep's cold build;
#   3. a rebuild after changing one wheel (a local wheelhouse holding one small pure-Python wheel in
#      two versions), as a ratio to lockstep's cold build.
# Both tools fetch from the same mirror; both start with no package cache.
#
# Usage: bench/lock-build.sh [RUNS]          (default 3; the median of RUNS is reported)
# Needs: a built lockstep (build/bench or $LOCKSTEP), mmdebstrap, python3, network access to
# deb.debian.org, root (mmdebstrap's root mode). Run it on a quiet machine (load average below 1).
# Targets (issue 4): rebuilds after an application-file or wheel change at most 5% of a cold build.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
BENCH_DIR=${BENCH_DIR:-/tmp/lockstep-bench}
mirror=http://deb.debian.org/debian
security=http://deb.debian.org/debian-security
source bench/lib.sh
bench_lockstep
bench_need mmdebstrap python3 tar
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

work="$BENCH_DIR/lock-build"
rm -rf "$work" && mkdir -p "$work"
cp -r examples/mpi-hello "$work/ex"
rm -f "$work/ex/lockstep.lock"
sed -i 's|oci: ../../build/examples/mpi-hello|oci: out|; /sif: /d' "$work/ex/lockstep.yaml"

# A wheelhouse with one pure-Python wheel in two versions (1.0 and 1.1).
make_wheel() { # VERSION DIR
  python3 - "$1" "$2" <<'PY'
import base64, hashlib, sys, zipfile
version, out = sys.argv[1], sys.argv[2]
files = {
    "benchdemo/__init__.py": f"VERSION = {version!r}\n",
    f"benchdemo-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: benchdemo\nVersion: {version}\n",
    f"benchdemo-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, text in files.items():
    data = text.encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
record.append(f"benchdemo-{version}.dist-info/RECORD,,")
files[f"benchdemo-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(f"{out}/benchdemo-{version}-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
        z.writestr(info, text)
PY
}
mkdir -p "$work/ex/wheels"
make_wheel 1.0 "$work/ex/wheels"
make_wheel 1.1 "$work/ex/wheels"
python3 - "$work/ex/lockstep.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace("    keyring: /usr/share/keyrings/debian-archive-keyring.gpg\n",
              "    keyring: /usr/share/keyrings/debian-archive-keyring.gpg\n  - {wheels: ./wheels}\n")
s = s.replace("  apt: [openmpi-bin, python3-mpi4py]\n",
              "  apt: [openmpi-bin, python3-mpi4py]\n  pip: [\"benchdemo==1.0\"]\n")
open(p, "w").write(s)
PY


ours_cold=() peer=() app=() wheel=()
for i in $(seq 1 "$runs"); do
  echo "bench: run $i/$runs" >&2
  # lockstep: lock + cold build, nothing in the store.
  export LOCKSTEP_CACHE="$work/cache"
  rm -rf "$LOCKSTEP_CACHE" "$work/ex/out" "$work/ex/lockstep.lock"
  sed -i 's/benchdemo==1.1/benchdemo==1.0/' "$work/ex/lockstep.yaml"
  printf 'print("hello")\n' >"$work/ex/hello.py"
  t0=$(now)
  "$LOCKSTEP" lock -q "$work/ex/lockstep.yaml"
  "$LOCKSTEP" build -q --locked "$work/ex/lockstep.yaml" >/dev/null 2>&1
  t1=$(now)
  ours_cold+=("$(secs "$t0" "$t1")")

  # One application file changed.
  printf 'print("hello, again")\n' >"$work/ex/hello.py"
  sleep 2.1 # past the 2 s "racy" window, as an edit some time later would be
  t0=$(now)
  "$LOCKSTEP" build -q --locked "$work/ex/lockstep.yaml" >/dev/null 2>&1
  t1=$(now)
  app+=("$(secs "$t0" "$t1")")

  # One wheel changed: benchdemo 1.0 -> 1.1 (re-lock, then build).
  sed -i 's/benchdemo==1.0/benchdemo==1.1/' "$work/ex/lockstep.yaml"
  t0=$(now)
  "$LOCKSTEP" lock -q "$work/ex/lockstep.yaml"
  "$LOCKSTEP" build -q --locked "$work/ex/lockstep.yaml" >/dev/null 2>&1
  t1=$(now)
  wheel+=("$(secs "$t0" "$t1")")

  # mmdebstrap: the same packages from the same mirror, into a tarball, no cache.
  rm -f "$work/peer.tar"
  t0=$(now)
  mmdebstrap --quiet --variant=apt --include=openmpi-bin,python3-mpi4py bookworm "$work/peer.tar" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main" >/dev/null 2>&1
  t1=$(now)
  peer+=("$(secs "$t0" "$t1")")
done

cold=$(printf '%s\n' "${ours_cold[@]}" | median)
peer_m=$(printf '%s\n' "${peer[@]}" | median)
app_m=$(printf '%s\n' "${app[@]}" | median)
wheel_m=$(printf '%s\n' "${wheel[@]}" | median)
printf '\n%-58s %8s %8s\n' "case (median of $runs)" "s" "ratio"
printf '%-58s %8s %8s\n' "mmdebstrap --variant=apt --include=... (peer)" "$peer_m" "1.000"
printf '%-58s %8s %8.3f\n' "lockstep lock + cold build (ours / peer)" "$cold" "$(awk -v a="$cold" -v b="$peer_m" 'BEGIN{print a/b}')"
printf '%-58s %8s %8.3f\n' "rebuild, one application file changed (/ our cold build)" "$app_m" \
  "$(awk -v a="$app_m" -v b="$cold" 'BEGIN{print a/b}')"
printf '%-58s %8s %8.3f\n' "re-lock + rebuild, one wheel changed (/ our cold build)" "$wheel_m" \
  "$(awk -v a="$wheel_m" -v b="$cold" 'BEGIN{print a/b}')"
echo "runs: ours ${ours_cold[*]} | peer ${peer[*]} | app ${app[*]} | wheel ${wheel[*]}" >&2
