#!/usr/bin/env bash
# Interrupted builds: SIGKILL or SIGINT in the middle of a build leaves no visible blob that does
# not hash to its name, no output, and (for SIGINT) no temporary files; two builds can share one
# store at the same time.
source "$(dirname "$0")/lib.sh"

mkdir -p proj/src
truncate -s 6G proj/src/huge.bin # sparse: slow to read through tar and gzip, cheap on disk
cat >proj/lockstep.yaml <<'YAML'
lockstep: 1
name: huge
copy: [{from: ./src, to: /data}]
YAML

# The build is in the middle of writing its layer once the store holds a temporary file: signals
# are sent then, whatever the machine's speed (a fixed delay could land before or after).
wait_for_layer_write() { # PID
  for _ in $(seq 1 1200); do
    [ -z "$(ls -A "$LOCKSTEP_CACHE/tmp" 2>/dev/null)" ] || return 0
    kill -0 "$1" 2>/dev/null || fail "the build ended before it wrote its layer"
    sleep 0.05
  done
  fail "the build wrote no temporary file into the store within 60 s"
}

store_is_consistent() {
  for f in "$LOCKSTEP_CACHE"/blobs/sha256/*; do
    [ -e "$f" ] || continue
    [ "$(sha256sum <"$f" | cut -d' ' -f1)" = "$(basename "$f")" ] || fail "store blob $f does not match its name"
  done
}

"$LOCKSTEP" build proj/lockstep.yaml --oci out-kill 2>/dev/null &
pid=$!
wait_for_layer_write "$pid"
kill -KILL "$pid"
wait "$pid" || true
[ ! -e out-kill ] || fail "a killed build left an output"
store_is_consistent
pass "SIGKILL mid-build leaves no output and no bad blob"

# A fresh store: the SIGKILLed build above left its temporary file behind (as it must: only a
# later run can sweep it), so this one must be judged on its own.
export LOCKSTEP_CACHE="$WORK/cache-int"
"$LOCKSTEP" build proj/lockstep.yaml --oci out-int 2>"$WORK/int.err" &
pid=$!
wait_for_layer_write "$pid"
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
assert_eq 130 "$rc" "exit code after SIGINT"
assert_contains "$(cat "$WORK/int.err")" "interrupted" "message after SIGINT"
[ ! -e out-int ] || fail "an interrupted build left an output"
[ -z "$(ls -A "$LOCKSTEP_CACHE/tmp")" ] || fail "temporary files left in the store: $(ls "$LOCKSTEP_CACHE/tmp")"
[ -z "$(find . -maxdepth 1 -name '.lockstep-*')" ] || fail "temporary files left beside the output"
store_is_consistent
pass "SIGINT stops the build with exit 130 and removes its temporary files"

rm proj/src/huge.bin
for i in 1 2 3 4; do
  mkdir -p "p$i/src"
  head -c 2000000 /dev/urandom >"p$i/src/data"
  printf 'shared\n' >"p$i/src/common"
  printf 'lockstep: 1\nname: p%s\ncopy: [{from: ./src, to: /d}]\n' "$i" >"p$i/lockstep.yaml"
done
pids=()
for i in 1 2 3 4; do
  "$LOCKSTEP" build "p$i/lockstep.yaml" --oci "o$i" --docker-archive "o$i.tar" >"o$i.out" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent build failed: $(cat o*.out)"; done
store_is_consistent
for i in 1 2 3 4; do
  ls_run inspect "oci:o$i"
  assert_eq 0 "$RC" "inspect o$i ($ERR)"
done
pass "four builds sharing one store at once all succeed"

done_testing
