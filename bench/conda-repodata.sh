#!/usr/bin/env bash
# Benchmark (issue 36): parse and index a 50,000-record repodata.json, generated and shaped like
# conda-forge's linux-64 (bench/conda/gen-repodata.py: ~35 MB, a tenth of the .conda stems with a
# .tar.bz2 twin), against python3's json.load of the same file, in one hyperfine run.
#   ours: build/bench-conda/tests/bench_conda_index FILE (reads the file, support/conda's
#         parse_repodata, then PackageIndex::build: versions parsed on every core, records grouped
#         by name) and prints the record and name counts;
#   peer: python3 -c 'import json,sys; json.load(open(sys.argv[1]))' FILE.
# Prints mean ± sd and the ratio ours / peer. Target: at most 0.3.
#
# Usage: bench/conda-repodata.sh [RUNS] [RECORDS]   (default 10 runs, 2 warm-up; 50000 records)
# Needs: hyperfine, jq, python3, and the test dependencies (the subject is a test-tree target).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
runs=${1:-10}
records=${2:-50000}
bench_need hyperfine jq python3 cmake ninja
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

# The subject, built as shipped (Release), once.
if [ -z "${BENCH_CONDA_INDEX:-}" ]; then
  cmake -S . -B build/bench-conda -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C build/bench-conda bench_conda_index >/dev/null
  BENCH_CONDA_INDEX=build/bench-conda/tests/bench_conda_index
fi
BENCH_CONDA_INDEX=$(realpath "$BENCH_CONDA_INDEX")

WORK=$(mktemp -d /tmp/lockstep-bench-conda-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
python3 bench/conda/gen-repodata.py "$records" "$WORK/repodata.json"
echo "repodata.json: $(du -h "$WORK/repodata.json" | cut -f1), $("$BENCH_CONDA_INDEX" "$WORK/repodata.json")"

hyperfine -N --style basic --warmup 2 --runs "$runs" --export-json "$WORK/h.json" \
  -n "python3 json.load (peer)" "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' $WORK/repodata.json" \
  -n "lockstep parse_repodata + PackageIndex::build" "$BENCH_CONDA_INDEX $WORK/repodata.json" >&2

echo
# The peer is row 1; the lockstep row is divided by it.
jq -r '.results[] | [.command, .mean, .stddev] | @tsv' "$WORK/h.json" |
  awk -F'\t' 'BEGIN { print "| case | mean ± sd (ms) | ratio |\n|---|---|---|" }
    { if (NR == 1) peer = $2
      printf "| %s | %.1f ± %.1f | %.3f |\n", $1, $2 * 1000, $3 * 1000, $2 / peer }'
echo "(load average at start: $load; $(nproc) cores)"
