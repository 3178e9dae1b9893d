#!/usr/bin/env bash
# Benchmark: issue 6's drift checks against the tools people use today, in one run:
#   1. `lockstep doctor --json --python VENV` (reads pyvenv.cfg and every dist-info's METADATA and
#      INSTALLER, no pip subprocess) against `VENV/bin/python -m pip list --format=json` on the same
#      venv: `python3 -m venv` plus 300 synthetic dist-info directories (METADATA, RECORD, INSTALLER,
#      WHEEL, top_level.txt and one module each), made offline. Doctor also probes the host (os-release,
#      glibc, user namespaces, the driver, `mpirun --version`, `sinfo --version`, PMIx and UCX), so it
#      is measured twice: as it is, probes included, and with an empty PATH (no tool probes).
#   2. `lockstep verify oci:IMAGE` (every dpkg md5sums file and conffile, and every dist-info RECORD,
#      checked against the files read from the image's compressed layers) against
#      `dpkg --root=ROOT --verify` on the same image unpacked to ROOT; `lockstep verify dir:ROOT` on that
#      root is reported beside it. IMAGE is examples/mpi-hello (Debian bookworm + openmpi-bin +
#      python3-mpi4py from deb.debian.org). The unpack is done once and not timed: it favours dpkg.
# Prints mean ± sd and ratios (ours / peer).
#
# Usage: bench/drift.sh [RUNS]   (from the repository root; default 10 hyperfine runs each, 2 warm-up)
# Needs: a built lockstep (build/bench or $LOCKSTEP), scripts/install-deps.sh bench (hyperfine, jq,
# umoci, dpkg, python3-venv), and deb.debian.org (the image's packages).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
runs=${1:-10}
bench_need hyperfine jq umoci dpkg
if ! /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
  echo "bench: python3-venv is missing (scripts/install-deps.sh bench)" >&2
  exit 3
fi
bench_lockstep
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

WORK=$(mktemp -d /tmp/lockstep-bench-drift-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export LOCKSTEP_CACHE="$WORK/cache"
unset VIRTUAL_ENV CONDA_PREFIX
fail() { echo "bench: $*" >&2; exit 1; }

# 1. The venv: pip and setuptools from ensurepip (no network), then 300 synthetic distributions.
venv="$WORK/venv"
/usr/bin/python3 -m venv "$venv"
site=$(echo "$venv"/lib/python3*/site-packages)
/usr/bin/python3 - "$site" 300 <<'PY'
import base64, hashlib, os, sys
site, count = sys.argv[1], int(sys.argv[2])
def h(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
for i in range(count):
    # Mixed spellings, as real environments have (PyYAML, typing_extensions, zope.interface).
    name = ["bench-pkg-%03d", "Bench_Pkg%03d", "bench.pkg%03d"][i % 3] % i
    module = "bench_pkg%03d" % i
    version = "%d.%d.%d" % (1 + i % 7, i % 13, i % 5)
    dist = "%s-%s.dist-info" % (name.replace("-", "_").replace(".", "_"), version)
    requires = "".join("Requires-Dist: bench-pkg-%03d>=1.0\n" % ((i + k) % count) for k in range(1, 1 + i % 4))
    files = {
        module + "/__init__.py": "VERSION = %r\n" % version + "# padding\n" * (i % 50),
        dist + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: synthetic package %d\n"
        "License: MIT\nRequires-Python: >=3.8\n%s\n%s" % (name, version, i, requires, "Long description.\n" * 40),
        dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        dist + "/top_level.txt": module + "\n",
        dist + "/INSTALLER": "pip\n",
    }
    record = ["%s,%s,%d" % (p, h(t.encode()), len(t.encode())) for p, t in files.items()]
    record.append(dist + "/RECORD,,")
    files[dist + "/RECORD"] = "\n".join(record) + "\n"
    for p, t in files.items():
        os.makedirs(os.path.join(site, os.path.dirname(p)), exist_ok=True)
        with open(os.path.join(site, p), "w") as f:
            f.write(t)
PY
ours_doctor=$("$LOCKSTEP" doctor --json --python "$venv" | jq '.python.packages | length')
peer_doctor=$("$venv/bin/python" -m pip list --format=json --disable-pip-version-check | jq length)
[ "$ours_doctor" = "$peer_doctor" ] || fail "doctor lists $ours_doctor packages, pip list $peer_doctor"
echo "bench: venv with $peer_doctor distributions (doctor and pip list agree)" >&2

# 2. The image, and the same image unpacked (once, untimed) for dpkg.
cp -r examples/mpi-hello "$WORK/ex"
sed -i 's|oci: ../../build/examples/mpi-hello|oci: out|; /sif: /d' "$WORK/ex/lockstep.yaml"
echo "bench: building examples/mpi-hello..." >&2
"$LOCKSTEP" build --quiet --locked "$WORK/ex/lockstep.yaml" >/dev/null 2>"$WORK/build.log" ||
  fail "building examples/mpi-hello failed: $(tail -n 20 "$WORK/build.log")"
umoci raw unpack --rootless --image "$WORK/ex/out:latest" "$WORK/root" 2>"$WORK/unpack.log" ||
  fail "umoci raw unpack failed: $(tail -n 20 "$WORK/unpack.log")"
image="oci:$WORK/ex/out"
debs=$(dpkg-query --admindir="$WORK/root/var/lib/dpkg" -W -f='${db:Status-Abbrev}\n' | grep -c '^ii')
md5s=$(cat "$WORK/root"/var/lib/dpkg/info/*.md5sums | wc -l)
manifest=$(jq -r '.manifests[0].digest' "$WORK/ex/out/index.json" | cut -d: -f2)
layers=$(jq '.layers | length' "$WORK/ex/out/blobs/sha256/$manifest")
out=$("$LOCKSTEP" verify --quiet "$image" 2>&1) || fail "lockstep verify $image failed: $out"
out=$("$LOCKSTEP" verify --quiet "dir:$WORK/root" 2>&1) || fail "lockstep verify dir:ROOT failed: $out"
out=$(dpkg --root="$WORK/root" --verify 2>&1) || fail "dpkg --verify failed: $out"
[ -z "$out" ] || fail "dpkg --verify reports: $out"
echo "bench: image with $debs packages, $md5s md5sums rows, $layers layers; all three checks pass" >&2

pip_list="$venv/bin/python -m pip list --format=json --disable-pip-version-check"
doctor="$LOCKSTEP doctor --json --python $venv"
hyperfine -N --style basic --warmup 2 --runs "$runs" --export-json "$WORK/h.json" \
  -n "pip list --format=json (peer)" "$pip_list" \
  -n "lockstep doctor --json --python VENV (host probes included)" "$doctor" \
  -n "lockstep doctor, empty PATH (no mpirun/sinfo probes)" "env PATH=/nonexistent $doctor" \
  -n "dpkg --root=ROOT --verify (peer)" "dpkg --root=$WORK/root --verify" \
  -n "lockstep verify oci:IMAGE (reads the layers)" "$LOCKSTEP verify --quiet $image" \
  -n "lockstep verify dir:ROOT (the same root as dpkg)" "$LOCKSTEP verify --quiet dir:$WORK/root" >&2

echo
echo "venv: $peer_doctor distributions; image: examples/mpi-hello, $debs packages, $md5s md5sums rows," \
  "$layers layers"
echo "(doctor also probes the host; pip list runs with --disable-pip-version-check; dpkg reads a root"
echo " unpacked beforehand, untimed, while lockstep verify oci: decompresses the layers itself)"
# Peers are rows 1 and 4; each lockstep row is divided by the peer above it.
jq -r '.results[] | [.command, .mean, .stddev] | @tsv' "$WORK/h.json" |
  awk -F'\t' 'BEGIN { print "| case | mean ± sd (ms) | ratio |\n|---|---|---|" }
    { if (NR == 1 || NR == 4) peer = $2
      printf "| %s | %.1f ± %.1f | %.3f |\n", $1, $2 * 1000, $3 * 1000, $2 / peer }'
echo "(load average at start: $load)"
