#!/usr/bin/env bash
# Hostile registries (docs/registry.md, "Errors"): every misbehaviour of tests/cli/hostile_registry.py
# gets a clear error with the documented exit code (2 bad content, 3 a failing registry) and leaves
# nothing in the content store; the recoverable ones (429 with Retry-After, 5xx, a dropped
# connection, a redirect to another host) succeed, and no credential reaches another host.
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/registry.sh"
need docker-registry jq

registry_up h1 hostile
H=$REG_H1_HOST
export HOME="$WORK/home"
unset XDG_RUNTIME_DIR DOCKER_CONFIG REGISTRY_AUTH_FILE
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$H" >registries.conf
export CONTAINERS_REGISTRIES_CONF="$WORK/registries.conf"

# Blobs in the store (published ones only: tmp/ holds writes in progress).
blobs() { find "$LOCKSTEP_CACHE/blobs" -type f 2>/dev/null | wc -l; }
leftovers() { find "$LOCKSTEP_CACHE/tmp" -type f 2>/dev/null | wc -l; }

# expect CASE CODE MESSAGE_REGEX [REF]: pulls CASE's image into an empty store (with the flags in
# EXPECT_FLAGS, an array, when set).
EXPECT_FLAGS=()
expect() {
  local case=$1 code=$2 msg=$3 ref=${4:-"$H/$1/app:latest"}
  export LOCKSTEP_CACHE="$WORK/cache-$case"
  set +e
  OUT=$("$LOCKSTEP" pull --registry-timeout 2 "${EXPECT_FLAGS[@]}" "docker://$ref" 2>&1)
  RC=$?
  set -e
  [ "$RC" = "$code" ] || fail "$case: expected exit $code, got $RC: $OUT"
  grep -Eq -- "$msg" <<<"$OUT" || fail "$case: the message does not match /$msg/: $OUT"
  if [ "$code" != 0 ]; then
    # At most the manifest (and config) may be stored; never the failed blob, never a temp file.
    [ "$(leftovers)" = 0 ] || fail "$case: a partial download was left in the store"
  fi
}

expect digest-mismatch 2 "not the sha256:[0-9a-f]{64} asked for" "$H/digest-mismatch/app@$REG_H1_DIGEST"
expect blob-mismatch 2 "blob sha256:[0-9a-f]{64} of docker://.*(digest|nothing was stored)"
[ "$(blobs)" -le 2 ] || fail "blob-mismatch stored the bad layer"
expect manifest-too-big 2 "larger than the [0-9]+ bytes allowed"
expect manifest-too-big-nolength 2 "larger than the [0-9]+ bytes allowed"
expect schema1 2 "schema 1 manifest.*skopeo copy"
expect bad-digest 2 "sha256:xyz|not a (valid )?digest|invalid digest"
expect bad-digest-md5 2 "md5|only sha256"
expect bad-digest-traversal 2 "digest"
[ ! -e /tmp/lockstep-hostile-traversal ] || fail "a traversal digest made a file"
expect bad-digest-short 2 "digest"
[ "$(registry_requests h1 GET '/v2/bad-digest[^/]*/app/blobs/.*')" = 0 ] || fail "a blob with a bad digest was requested"
pass "bad content is exit 2 and stores nothing: a body not matching its digest, a corrupt blob, an oversized manifest (with and without Content-Length), schema 1, four kinds of non-digests (no request made for them)"

expect length-short 2 "sent [0-9]+ bytes, the manifest states|digest|nothing was stored"
EXPECT_FLAGS=(--registry-retries 1)
expect length-long 3 "gave up|Transferred a partial file|transfer closed"
EXPECT_FLAGS=()
pass "a Content-Length that lies: short is exit 2, long fails after bounded retries with nothing stored"

expect redirect-loop 3 "more than 5 redirects"
expect auth-loop 3 "needs credentials|refused"
[ "$(registry_requests h1 GET '/token')" -le 4 ] || fail "auth-loop: $(registry_requests h1 GET '/token') token requests"
# A stall is retried like any transfer failure: one retry here (--registry-retries 1) shows the bound
# without the default's four backoffs.
EXPECT_FLAGS=(--registry-retries 1)
expect stall 3 "(Operation too slow|timed out|Timeout).*gave up after 2 attempts"
expect stall-headers 3 "(Operation too slow|timed out|Timeout).*gave up after 2 attempts"
EXPECT_FLAGS=()
pass "a failing registry is exit 3: a redirect loop, a 401 loop (bounded token fetches), a stalled body, an unanswered request"

# Recoverable misbehaviour: the pull succeeds.
start=$(date +%s)
expect rate-limit 0 "pulled"
[ $(($(date +%s) - start)) -ge 2 ] || fail "rate-limit: Retry-After was not honoured"
expect flaky-5xx 0 "pulled"
expect resume 0 "pulled"
grep -Eq '" 206 .*range=bytes=[0-9]+-' "$REG_H1_LOG" || fail "resume: no ranged 206 in the log"
pass "429 with Retry-After waited for, 5xx retried, a dropped blob resumed with Range (206)"

# A pull killed (SIGKILL) mid-blob leaves its partial download in the store's tmp/; the next pull of
# that blob continues it with Range and leaves nothing behind. A partial download that doesn't
# verify is fetched again from the start.
export LOCKSTEP_CACHE="$WORK/cache-killed"
"$LOCKSTEP" pull --registry-timeout 600 "docker://$H/stall/killed:latest" >/dev/null 2>&1 &
pid=$!
partial=""
for _ in $(seq 1 600); do
  # (tmp/ appears only once the pull opens the store: find may fail until then)
  partial=$(find "$LOCKSTEP_CACHE/tmp" -name 'partial-*' -size +0c 2>/dev/null | head -n 1 || true)
  [ -z "$partial" ] || break
  kill -0 "$pid" 2>/dev/null || fail "the stalled pull ended before it wrote a partial blob"
  sleep 0.05
done
[ -n "$partial" ] || fail "no partial download appeared in $LOCKSTEP_CACHE/tmp"
kill -KILL "$pid"
{ wait "$pid" || true; } 2>/dev/null
have=$(stat -c %s "$partial")
[ -e "$partial" ] && [ "$have" -gt 0 ] || fail "the killed pull left no partial blob"
ls_run pull --registry-timeout 5 "docker://$H/ok/after-kill:latest"
assert_eq 0 "$RC" "the pull after the killed one: $ERR"
grep -Eq "\"GET /v2/ok/after-kill/blobs/sha256:[0-9a-f]{64} HTTP/1.1\" 206 .*range=bytes=$have-" "$REG_H1_LOG" ||
  fail "the next pull did not continue the partial blob at byte $have: $(grep after-kill "$REG_H1_LOG")"
[ "$(leftovers)" = 0 ] || fail "partial downloads are left after the blob was stored: $(ls "$LOCKSTEP_CACHE/tmp")"
# A partial download whose bytes are wrong: refused by the digest, then fetched whole.
export LOCKSTEP_CACHE="$WORK/cache-bad-partial"
mkdir -p "$LOCKSTEP_CACHE/tmp"
layer=$(jq -r .layer_digest "$REG_H1_INFO")
printf 'not the layer' >"$LOCKSTEP_CACHE/tmp/partial-sha256-${layer#sha256:}"
ls_run pull --registry-timeout 5 "docker://$H/ok/bad-partial:latest"
assert_eq 0 "$RC" "the pull over a bad partial blob: $ERR"
[ "$(leftovers)" = 0 ] || fail "the bad partial download was left: $(ls "$LOCKSTEP_CACHE/tmp")"
pass "a killed pull's partial blob is continued by the next pull (Range) and removed; a bad one is fetched again"

# A redirect to another host never carries the registry's Authorization.
mkdir -p "$HOME/.config/containers"
printf '{"auths":{"%s":{"auth":"%s"}}}' "$H" "$(printf 'u:p' | base64)" >"$HOME/.config/containers/auth.json"
expect redirect-offhost 0 "pulled"
grep -q 'listener=2' "$REG_H1_LOG" || fail "redirect-offhost: the second host was never asked"
if grep 'listener=2' "$REG_H1_LOG" | grep -q 'auth=present'; then fail "Authorization was sent to another host"; fi
pass "a blob redirected to another host is fetched without the registry's Authorization"

# A token realm on another host over plain HTTP: with credentials for the registry and
# --tls-verify=false for it, they are not sent there (exit 3), and that host is never asked.
EXPECT_FLAGS=(--tls-verify=false)
expect realm-offhost 3 "asks for credentials over plain HTTP.*refusing to send them"
EXPECT_FLAGS=()
if grep 'listener=2' "$REG_H1_LOG" | grep -q 'case=realm-offhost'; then
  fail "realm-offhost: the realm on another host was asked: $(grep realm-offhost "$REG_H1_LOG")"
fi
pass "credentials are never sent over plain HTTP to a token realm on another host"

# A push whose upload sessions the registry opens on another host (a Location on the second
# listener): the blobs go there, without the registry's Authorization.
mkdir -p tiny/src
printf 'tiny\n' >tiny/src/file
printf 'lockstep: 1\nname: tiny\ncopy: [{from: ./src, to: /data}]\n' >tiny/lockstep.yaml
export LOCKSTEP_CACHE="$WORK/cache-push"
ls_run build --no-vcs tiny/lockstep.yaml --oci tiny/out
assert_eq 0 "$RC" "build of the image to push: $ERR"
ls_run push --tls-verify=false oci:tiny/out "docker://$H/upload-offhost/app:v1"
assert_eq 0 "$RC" "push with upload sessions on another host: $ERR"
[ "$(grep 'listener=2' "$REG_H1_LOG" | grep -c 'case=upload-offhost')" -ge 2 ] ||
  fail "upload-offhost: the upload host was not used: $(grep upload-offhost "$REG_H1_LOG")"
if grep 'listener=2' "$REG_H1_LOG" | grep 'case=upload-offhost' | grep -q 'auth=present'; then
  fail "the registry's Authorization went to the upload host: $(grep upload-offhost "$REG_H1_LOG")"
fi
pass "a push's upload sessions on another host get the blobs without the registry's Authorization"

# The same registry over verified HTTPS: an upload Location on plain http is refused (exit 3) and
# nothing goes there.
registry_up h2 hostile-tls
H2=$REG_H2_HOST
registry_certs_d h2 "$WORK/certs.d" >/dev/null
export LOCKSTEP_CERTS_D="$WORK/certs.d"
printf '{"auths":{"%s":{"auth":"%s"},"%s":{"auth":"%s"}}}' "$H" "$(printf 'u:p' | base64)" \
  "$H2" "$(printf 'u:p' | base64)" >"$HOME/.config/containers/auth.json"
export LOCKSTEP_CACHE="$WORK/cache-push-tls"
ls_run push oci:tiny/out "docker://$H2/upload-offhost/app:v1"
assert_eq 3 "$RC" "push to an https registry with an http upload Location: $ERR"
assert_contains "$ERR" "sent the request to plain http" "the refusal says why"
if grep -q 'listener=2' "$REG_H2_LOG"; then fail "a request went to the http upload host: $(cat "$REG_H2_LOG")"; fi
pass "an https registry's upload Location on plain http is refused; nothing is sent there"

# A manifest listing one layer 20,000 times: refused when read (exit 2), before any blob. The same
# layer 500 times, within the bound: exec unpacks it once.
expect many-layers 2 "lists 20000 layers, more than the 1000 an image may have"
if grep -q 'GET /v2/many-layers/app/blobs' "$REG_H1_LOG"; then fail "many-layers: a blob was fetched"; fi
export LOCKSTEP_CACHE="$WORK/cache-repeated"
set +e
out=$("$LOCKSTEP" exec --debug "docker://$H/repeated-layer/app:latest" -- /bin/true 2>&1)
set -e
assert_eq 1 "$(grep -c 'unpacking layer ' <<<"$out")" "layers unpacked of 500 copies of one: $(grep -m3 layer <<<"$out")"
assert_eq 499 "$(grep -c 'repeats the layer before it' <<<"$out")" "copies skipped"
pass "a manifest with 20,000 layers is refused before any blob (exit 2); 500 copies of one layer unpack once"

# A gzip bomb in a layer: the pull stores the 16 MiB blob; unpacking it stops at the bound.
export LOCKSTEP_CACHE="$WORK/cache-bomb"
set +e
out=$("$LOCKSTEP" exec "docker://$H/gzip-bomb/app:latest" -- /bin/true 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "limit" <<<"$out" || fail "gzip bomb: rc $rc: $out"
set +e
out=$("$LOCKSTEP" verify "docker://$H/gzip-bomb/app:latest" 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "larger than the limit" <<<"$out" || fail "gzip bomb, verify: rc $rc: $out"
pass "a gzip bomb in a layer is refused at the expansion bound by exec and by verify (exit 2)"

# A registry used as a vendor mirror (docs/vendor.md) that serves a base layer with one byte flipped:
# the mirror is asked first, its blob refused (exit 2), nothing stored.
printf 'lockstep: 1\nname: mirrored\nbase: {image: "docker://%s/ok/app:latest"}\n' "$H" >mirrored.yaml
export LOCKSTEP_CACHE="$WORK/cache-mirrored"
ls_run lock mirrored.yaml
assert_eq 0 "$RC" "lock over the registry's image: $ERR"
export LOCKSTEP_CACHE="$WORK/cache-mirror-bad"
ls_run build --locked --mirror "docker://$H/blob-mismatch/vendor" mirrored.yaml --oci mirrored-out
assert_eq 2 "$RC" "a mirror blob with other bytes"
assert_contains "$ERR" "mirror docker://$H/blob-mismatch/vendor" "names the mirror"
# (the layer is the only blob over 100 KiB: 256 KiB of pseudo-random bytes)
[ "$(find "$WORK/cache-mirror-bad/blobs" -type f -size +100k 2>/dev/null | wc -l)" = 0 ] ||
  fail "the mismatching layer was stored"
[ ! -e mirrored-out ] || fail "an image was written from a mismatching mirror blob"
pass "a registry mirror's blob with other bytes is refused (exit 2), nothing stored"

echo "all $TESTS_RUN hostile-registry checks passed"
