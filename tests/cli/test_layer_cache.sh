#!/usr/bin/env bash
# The layer cache: an unchanged layer is not re-tarred or re-compressed; any change to contents or
# metadata rebuilds it; a stale cache entry (blob gone from the store) is rebuilt, never trusted.
source "$(dirname "$0")/lib.sh"
need jq

mkdir -p proj/src/sub
printf 'one\n' >proj/src/one.txt
printf 'two\n' >proj/src/sub/two.txt
cat >proj/lockstep.yaml <<'YAML'
lockstep: 1
name: cache
copy: [{from: ./src, to: /data}]
YAML
# Sources changed (ctime) within the last 2 s are "racy" and never recorded; let them age.
find proj/src -exec touch -h -d '2020-01-01' {} +
age() { sleep 2.1; }
age

layer_cached() { jq -r '[.layers[] | select(.source == "built") | .cached][0]' <<<"$1"; }

ls_run build proj/lockstep.yaml --oci out --json
assert_eq 0 "$RC" "cold build ($ERR)"
assert_eq false "$(layer_cached "$OUT")" "cold build cached flag"
first=$(jq -r .manifest_digest <<<"$OUT")
pass "a cold build builds the layer"

tmp_before=$(ls "$LOCKSTEP_CACHE/tmp" | wc -l)
ls_run build proj/lockstep.yaml --oci out --json --debug
assert_eq 0 "$RC" "rebuild ($ERR)"
assert_eq true "$(layer_cached "$OUT")" "no-change rebuild cached flag"
assert_eq "$first" "$(jq -r .manifest_digest <<<"$OUT")" "no-change rebuild digest"
assert_contains "$ERR" "layer cache hit" "debug log of the cache hit"
assert_eq "$tmp_before" "$(ls "$LOCKSTEP_CACHE/tmp" | wc -l)" "no temporary blob was written"
pass "a no-change rebuild takes the layer from the cache and compresses nothing"

printf 'ONE\n' >proj/src/one.txt
touch -d '2020-01-01' proj/src/one.txt
age
ls_run build proj/lockstep.yaml --oci out --json
assert_eq false "$(layer_cached "$OUT")" "after a content change"
changed=$(jq -r .manifest_digest <<<"$OUT")
[ "$changed" != "$first" ] || fail "content change did not change the digest"
pass "a content change rebuilds the layer and changes the digest"

chmod 0755 proj/src/sub/two.txt
age
ls_run build proj/lockstep.yaml --oci out --json
assert_eq false "$(layer_cached "$OUT")" "after a mode change"
[ "$(jq -r .manifest_digest <<<"$OUT")" != "$changed" ] || fail "mode change did not change the digest"
pass "a metadata change (executable bit) rebuilds the layer"

blob=$(jq -r '.layers[0].digest' <<<"$OUT" | cut -d: -f2)
rm -f "$LOCKSTEP_CACHE/blobs/sha256/$blob"
ls_run build proj/lockstep.yaml --oci out --json
assert_eq 0 "$RC" "build after removing the blob ($ERR)"
assert_eq false "$(layer_cached "$OUT")" "after the blob vanished"
[ -f "$LOCKSTEP_CACHE/blobs/sha256/$blob" ] || fail "the layer blob was not rebuilt into the store"
pass "a cache entry whose blob is gone is rebuilt"

printf 'fresh\n' >proj/src/new.txt
ls_run build proj/lockstep.yaml --oci out --json
ls_run build proj/lockstep.yaml --oci out --json
assert_eq false "$(layer_cached "$OUT")" "racy source"
pass "a source modified in the last 2 s is not trusted from the cache"

done_testing
