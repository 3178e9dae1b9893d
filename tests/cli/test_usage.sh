#!/usr/bin/env bash
# The command line itself: --version, --help with examples on every command, usage errors (exit 2),
# a malformed SOURCE_DATE_EPOCH (exit 2), and nothing written when a build fails.
source "$(dirname "$0")/lib.sh"

ls_run --version
assert_eq 0 "$RC" "--version exit"
[[ "$OUT" =~ ^lockstep\ [0-9]+\.[0-9]+\.[0-9]+ ]] || fail "--version output: $OUT"
pass "--version"

for cmd in check build inspect; do
  ls_run "$cmd" --help
  assert_eq 0 "$RC" "$cmd --help exit"
  assert_contains "$OUT" "Examples:" "$cmd --help"
done
ls_run --help
assert_contains "$OUT" "Exit codes:" "top-level --help"
# The footer is the whole exit-code table (support/base/result.hpp), 70 included.
for line in "0   success" "1   the checked thing" "2   bad usage" "3   a needed external" "4   a local file" \
  "70  a bug in lockstep" "130 interrupted" "own exit status"; do
  assert_contains "$OUT" "$line" "top-level --help exit codes"
done
pass "every command has --help with examples; the top-level help lists every exit code"

ls_run frobnicate
assert_eq 2 "$RC" "unknown command exit"
assert_contains "$ERR" "lockstep: error:" "unknown command message"
ls_run build --compression brotli
assert_eq 2 "$RC" "bad option value exit"
pass "usage errors exit 2"

mkdir -p proj/src
echo hi >proj/src/hi.txt
printf 'lockstep: 1\nname: epoch\ncopy: [{from: ./src, to: /x}]\n' >proj/lockstep.yaml
OUT=$(SOURCE_DATE_EPOCH=yesterday "$LOCKSTEP" build proj/lockstep.yaml --oci out 2>"$WORK/err") && fail "bad epoch accepted"
assert_eq "lockstep: error: SOURCE_DATE_EPOCH='yesterday' is not a valid epoch: expected whole seconds since 1970 (e.g. SOURCE_DATE_EPOCH=\$(git log -1 --format=%ct)), at most 253402300799" "$(cat "$WORK/err")" "bad epoch message"
[ ! -e out ] || fail "output written despite the error"
pass "a malformed SOURCE_DATE_EPOCH is exit 2 and writes nothing"

ls_run build proj/lockstep.yaml --tag 'Bad Tag!'
assert_eq 2 "$RC" "bad tag exit"
assert_contains "$ERR" "is not a valid" "bad tag message"
pass "an invalid --tag is exit 2"

mkdir -p notalayout && echo keep >notalayout/precious.txt
ls_run build proj/lockstep.yaml --oci notalayout
assert_eq 4 "$RC" "refusing to replace a non-layout dir"
assert_contains "$ERR" "refusing to replace" "message"
assert_eq keep "$(cat notalayout/precious.txt)" "the directory is untouched"
pass "an existing directory that is not an OCI layout is never replaced"

ls_run build proj/lockstep.yaml --oci good --docker-archive good.tar
assert_eq 0 "$RC" "build ($ERR)"
ls_run build proj/lockstep.yaml --oci good --docker-archive good.tar
assert_eq 0 "$RC" "rebuild over existing outputs ($ERR)"
[ -z "$(find . -maxdepth 1 -name '.lockstep-*')" ] || fail "temporary files left behind"
pass "outputs are replaced atomically and no temporary files remain"

done_testing
