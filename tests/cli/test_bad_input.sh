#!/usr/bin/env bash
# A corpus of broken specs (tests/cli/bad-specs/CASE/lockstep.yaml): each gives exit 2, the whole
# expected located message (CASE/expected.txt, with @DIR@ for the case directory), and writes
# nothing: no output and no new blob in the store.
# LOCKSTEP_REGENERATE=1 rewrites the expected files from the current output (review the diff!).
source "$(dirname "$0")/lib.sh"

corpus="$LOCKSTEP_SOURCE_DIR/tests/cli/bad-specs"

blob_count() { { find "$LOCKSTEP_CACHE/blobs" -type f 2>/dev/null || true; } | wc -l; }

for case_dir in "$corpus"/*/; do
  name=$(basename "$case_dir")
  dir="$WORK/cases/$name"
  mkdir -p "$WORK/cases"
  cp -r "$case_dir" "$dir"
  rm -f "$dir/expected.txt"
  mkdir -p "$dir/src" && echo data >"$dir/src/data.txt"
  mkdir -p "$WORK/cases/outside"
  if [ "$name" = wrong-base-digest ]; then
    printf 'lockstep: 1\nname: base\ncopy: [{from: ./src, to: /base}]\n' >"$dir/base.yaml"
    base_digest=$("$LOCKSTEP" build "$dir/base.yaml" --oci "$dir/base" -q)
  fi
  before=$(blob_count)
  set +e
  (cd "$dir" && "$LOCKSTEP" build) >"$WORK/out.txt" 2>"$WORK/err.txt"
  rc=$?
  set -e
  actual=$(sed -e "s|$dir|@DIR@|g" -e "s|$WORK|@WORK@|g" -e "s|${base_digest:-none}|@BASE@|g" "$WORK/err.txt")
  if [ "${LOCKSTEP_REGENERATE:-0}" = 1 ]; then
    printf '%s\n' "$actual" >"$case_dir/expected.txt"
  fi
  assert_eq 2 "$rc" "$name: exit code (stderr: $actual)"
  assert_eq "$(cat "$case_dir/expected.txt")" "$actual" "$name: message"
  [ ! -s "$WORK/out.txt" ] || fail "$name: printed on stdout: $(cat "$WORK/out.txt")"
  [ ! -e "$dir/out" ] || fail "$name: an output was written"
  assert_eq "$before" "$(blob_count)" "$name: blobs in the store"
  pass "$name: exit 2, located message, nothing written"
done

# `check` reports the same errors without building.
(cd "$WORK/cases/unknown-keys" && "$LOCKSTEP" check >/dev/null 2>"$WORK/check.txt") && fail "check accepted a bad spec"
assert_eq "$(cat "$corpus/unknown-keys/expected.txt")" "$(sed "s|$WORK/cases/unknown-keys|@DIR@|g" "$WORK/check.txt")" "check message"
pass "check reports the same located errors"

ls_run check "$WORK/cases/none/lockstep.yaml"
assert_eq 2 "$RC" "missing spec exit"
assert_contains "$ERR" "can't open $WORK/cases/none/lockstep.yaml: No such file or directory" "missing spec message"
pass "a missing spec file is exit 2 with a hint"

done_testing
