#!/usr/bin/env bash
# Benchmark: resolving the Python requirements of a PyTorch training project (tests/cli/py_index.py
# training: 39 requests, 185 distributions in the solution, 4 to 12 releases each) from a local
# index on 127.0.0.1 (PEP 691 JSON and PEP 658 metadata files, so the network is not what is
# measured), against pip in one run:
#   1. cold: `lockstep lock` with an empty store (no index page or METADATA cached, no previous
#      lock) versus `pip install --dry-run --report --only-binary=:all: --python-version 3.11
#      --no-cache-dir` of the same requirements.in;
#   2. re-lock after changing one requirement (einops gets an upper bound that its locked version
#      no longer meets: its index page is fresh in the HTTP cache, the METADATA of the version it
#      moves to is fetched), as a ratio to lockstep's cold lock;
#   3. re-lock after removing that bound again (einops stays where it is: nothing is fetched).
# Both locks include the apt part of the spec (a flat repository with Python 3.11 on the same
# server). Both tools choose the same versions (tests/cli/test_py_resolve.sh checks that).
#
# Usage: bench/py-resolve.sh [RUNS]     (default 5; medians of RUNS are reported)
# Needs: a built lockstep (build/bench or $LOCKSTEP), python3 with pip (python3-pip), gpg, dpkg-deb.
# Targets (issue 18): cold at most 0.2x pip; the re-lock at most 0.05x of the cold lock.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
source bench/lib.sh
bench_lockstep
bench_need python3 gpg dpkg-deb jq
PIP_PY=/usr/bin/python3
"$PIP_PY" -m pip --version >/dev/null 2>&1 || PIP_PY=python3
"$PIP_PY" -m pip --version >/dev/null 2>&1 || { echo "bench: pip is missing (apt-get install python3-pip)" >&2; exit 3; }
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

# The suites' fixtures: the fake Python apt repository and the index server (this cds into $WORK,
# removed on exit).
export LOCKSTEP LOCKSTEP_SOURCE_DIR=$PWD
source tests/cli/lib.sh
INDEX_PY="$LOCKSTEP_SOURCE_DIR/tests/cli/py_index.py"
mkdir -p www
make_python_apt_repo "$WORK/www/apt"
"$PIP_PY" "$INDEX_PY" training "$WORK/www/training"
start_http_server "$WORK/www" "$INDEX_PY"
mkdir project
cp www/training/requirements.in www/apt/keyring.gpg project/
cat >project/lockstep.yaml <<YAML
lockstep: 1
name: training
repos:
  - {apt: $HTTP_URL/apt, flat: true, keyring: keyring.gpg}
  - {pypi: $HTTP_URL/training/simple}
packages:
  apt: [python3]
  pip: [{requirements: requirements.in}]
outputs: {oci: out}
YAML

seconds() { # COMMAND...: wall seconds of one run (its output discarded; a failure stops the bench)
  local start end # bash's clock: no process is started around the command
  start=${EPOCHREALTIME/./}
  "$@" >/dev/null 2>"$WORK/bench.err" || { echo "bench: $* failed: $(cat "$WORK/bench.err")" >&2; exit 1; }
  end=${EPOCHREALTIME/./}
  printf '%d.%06d\n' $(((end - start) / 1000000)) $(((end - start) % 1000000))
}
median() { sort -g | awk '{ a[NR] = $1 } END { printf "%.3f", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

pip_resolve() {
  (cd project && PIP_CONFIG_FILE=/dev/null "$PIP_PY" -m pip --isolated --disable-pip-version-check install \
    --dry-run --report "$WORK/pip-report.json" --quiet --only-binary=:all: --python-version 3.11 \
    --ignore-installed --no-cache-dir --target "$WORK/pip-target" \
    --index-url "$HTTP_URL/training/simple" -r requirements.in)
}
lockstep_cold() {
  rm -rf "$WORK/store" project/lockstep.lock
  (cd project && LOCKSTEP_CACHE="$WORK/store" "$LOCKSTEP" lock)
}
lockstep_relock() { # after a cold lock, with one requirement changed (outside the timing)
  (cd project && LOCKSTEP_CACHE="$WORK/store" "$LOCKSTEP" lock)
}
change_one() { sed -i 's/^einops$/einops<1.1/' project/requirements.in; }
change_back() { sed -i 's/^einops<1.1$/einops/' project/requirements.in; }

pip_times=()
cold_times=()
relock_times=()
back_times=()
for i in $(seq 1 "$runs"); do
  pip_times+=("$(seconds pip_resolve)")
  cold_times+=("$(seconds lockstep_cold)")
  change_one
  relock_times+=("$(seconds lockstep_relock)")
  change_back
  back_times+=("$(seconds lockstep_relock)")
done
# The same choice as pip's, and the re-lock moved einops only.
lockstep_cold >/dev/null 2>&1
ours=$(jq -r '.artifacts[] | select(.kind == "wheel") | "\(.name)==\(.version)"' project/lockstep.lock | LC_ALL=C sort)
theirs=$(jq -r '.install[] | "\(.metadata.name | ascii_downcase | gsub("[-_.]+"; "-"))==\(.metadata.version)"' \
  "$WORK/pip-report.json" | LC_ALL=C sort)
[ "$ours" = "$theirs" ] || { echo "bench: lockstep and pip chose differently:" >&2; diff <(echo "$theirs") <(echo "$ours") >&2; exit 1; }
cp project/lockstep.lock "$WORK/cold.lock"
change_one
lockstep_relock >/dev/null 2>&1
change_back
changed=$(diff <(jq -r '.artifacts[] | "\(.name) \(.version)"' "$WORK/cold.lock") \
  <(jq -r '.artifacts[] | "\(.name) \(.version)"' project/lockstep.lock) | grep -c '^>' || true)

pip_m=$(printf '%s\n' "${pip_times[@]}" | median)
cold_m=$(printf '%s\n' "${cold_times[@]}" | median)
relock_m=$(printf '%s\n' "${relock_times[@]}" | median)
back_m=$(printf '%s\n' "${back_times[@]}" | median)
count=$(wc -l <<<"$ours")
echo "py-resolve: $count distributions, $runs runs, medians (seconds)"
printf '  pip --dry-run (cold)          %8.3f\n' "$pip_m"
printf '  lockstep lock (cold)          %8.3f   ours/pip  %.3f   (target <= 0.2)\n' "$cold_m" \
  "$(echo "$cold_m / $pip_m" | bc -l)"
printf '  lockstep re-lock (1 changed)  %8.3f   /cold     %.3f   (target <= 0.05; %s wheel changed)\n' \
  "$relock_m" "$(echo "$relock_m / $cold_m" | bc -l)" "$changed"
printf '  lockstep re-lock (relaxed)    %8.3f   /cold     %.3f   (the bound removed again: nothing to fetch)\n' \
  "$back_m" "$(echo "$back_m / $cold_m" | bc -l)"
