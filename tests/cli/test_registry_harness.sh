#!/usr/bin/env bash
# The registry harness of tests/cli/registry.sh, judged by skopeo and curl alone (no lockstep): the
# real docker-registry in every mode takes a small OCI image from skopeo and gives it back with the
# same digest; the token issuer merges scopes, refuses a mangled realm query, refreshes, and logs no
# secret; the hostile registry misbehaves exactly as tests/cli/hostile_registry.py documents; and
# registry_down_all leaves nothing running.
source "$(dirname "$0")/lib.sh"
# shellcheck source=registry.sh
source "$LOCKSTEP_SOURCE_DIR/tests/cli/registry.sh"
need docker-registry skopeo umoci curl openssl htpasswd jq setpriv gzip sha256sum

# A network namespace of our own for netns=/addr= (as root; the cluster suites use cluster.sh's).
NS=""
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns add "lsreg$$" 2>/dev/null; then
  NS=lsreg$$
  # registry.sh chains registry_down_all in front of this at the first registry_up.
  trap 'ip netns del "$NS" 2>/dev/null; remove_test_user; cd /; rm -rf "$WORK"' EXIT
  ip -n "$NS" link set lo up
  ip -n "$NS" addr add 10.231.0.1/32 dev lo
elif [ -n "${CI:-}" ]; then
  fail "CI runs this suite as root with iproute2, to cover netns="
fi

# ---- every mode up at once ------------------------------------------------------------------------
# Short token lifetime and anonymous pull on the second token registry.
registry_up plain plain
registry_up tls tls
registry_up mtls mtls
registry_up auth auth
registry_up tlsauth tls-auth
registry_up token token
registry_up tlstoken tls-token
registry_up anon token anonymous=pull expires=2
registry_up h hostile
names="plain tls mtls auth tlsauth token tlstoken"
hosts=""
for name in $names anon h; do
  host=$(_registry_get "$name" HOST)
  [[ $host =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "REG_${name^^}_HOST is '$host'"
  hosts+=" $host"
done
assert_eq 9 "$(tr ' ' '\n' <<<"$hosts" | grep . | sort -u | wc -l)" "distinct registry addresses"
pass "registry_up starts nine registries side by side, each on its own port of 127.0.0.1"

# ---- TLS and auth, seen by curl -------------------------------------------------------------------
code() { curl -s -o /dev/null -w '%{http_code}' "$@" || true; }
assert_eq 200 "$(code "$REG_PLAIN_URL/v2/")" "plain /v2/"
assert_eq 000 "$(code "$REG_TLS_URL/v2/")" "tls /v2/ without the CA"
assert_eq 200 "$(code --cacert "$REG_TLS_CA" "$REG_TLS_URL/v2/")" "tls /v2/ with the CA"
assert_eq 200 "$(code --cacert "$REG_TLS_CA" "https://localhost:${REG_TLS_HOST#*:}/v2/")" "tls /v2/ as localhost"
openssl verify -CAfile "$REG_TLS_CA" "$REG_TLS_DIR/server.crt" >/dev/null || fail "server.crt is not signed by the CA"
[ "$(openssl x509 -in "$REG_TLS_DIR/server.crt" -noout -issuer)" != \
  "$(openssl x509 -in "$REG_TLS_DIR/server.crt" -noout -subject | sed 's/^subject/issuer/')" ] ||
  fail "server.crt is self-signed"
assert_eq 000 "$(code --cacert "$REG_MTLS_CA" "$REG_MTLS_URL/v2/")" "mtls /v2/ without a client certificate"
assert_eq 200 "$(code --cacert "$REG_MTLS_CA" --cert "$REG_MTLS_CLIENT_CERT" --key "$REG_MTLS_CLIENT_KEY" \
  "$REG_MTLS_URL/v2/")" "mtls /v2/ with the client certificate"
assert_eq 401 "$(code "$REG_AUTH_URL/v2/")" "auth /v2/ anonymous"
assert_eq 401 "$(code -u "$REG_AUTH_USER:wrong" "$REG_AUTH_URL/v2/")" "auth /v2/ with a wrong password"
assert_eq 200 "$(code -u "$REG_AUTH_USER:$REG_AUTH_PASS" "$REG_AUTH_URL/v2/")" "auth /v2/ with the password"
assert_contains "$REG_AUTH_PASS" ":" "the password has a colon"
[[ $(cat "$REG_AUTH_DIR/htpasswd") == "$REG_AUTH_USER:\$2y\$"* ]] || fail "htpasswd is not bcrypt: $(cat "$REG_AUTH_DIR/htpasswd")"
assert_eq 200 "$(code --cacert "$REG_TLSAUTH_CA" -u "$REG_TLSAUTH_USER:$REG_TLSAUTH_PASS" "$REG_TLSAUTH_URL/v2/")" \
  "tls-auth /v2/"
challenge=$(curl -s -D - -o /dev/null "$REG_TOKEN_URL/v2/" | tr -d '\r' | grep -i '^www-authenticate:')
assert_contains "$challenge" "Bearer realm=\"$REG_TOKEN_TOKEN_REALM\",service=\"$REG_TOKEN_SERVICE\"" "token challenge"
assert_contains "$REG_TOKEN_TOKEN_REALM" "/auth?foo=bar" "the realm carries a query"
assert_contains "$REG_TLSTOKEN_TOKEN_REALM" "https://127.0.0.1:" "the tls-token realm is HTTPS"
pass "TLS needs the harness's CA (a CA-signed certificate for 127.0.0.1 and localhost), mtls a client certificate, auth bcrypt Basic credentials, token a Bearer token from a realm with a query"

# ---- skopeo in and out, same digest, in every mode ------------------------------------------------
mkdir -p root/etc
echo "registry harness" >root/etc/hello
umoci init --layout img
umoci new --image img:v1
umoci insert --image img:v1 root/etc /etc >/dev/null
digest=$(jq -r '.manifests[0].digest' img/index.json)
blobs=$(($(jq '.layers | length' "img/blobs/sha256/${digest#sha256:}") + 1))
for name in $names; do
  host=$(_registry_get "$name" HOST)
  mapfile -t dest < <(registry_skopeo_flags "$name" dest)
  mapfile -t src < <(registry_skopeo_flags "$name" src)
  skopeo copy -q "${dest[@]}" oci:img:v1 "docker://$host/harness/img:v1" 2>"$WORK/err" ||
    fail "skopeo push to $name: $(cat "$WORK/err")"
  skopeo copy -q "${src[@]}" "docker://$host/harness/img:v1" "oci:out-$name:v1" 2>"$WORK/err" ||
    fail "skopeo pull from $name: $(cat "$WORK/err")"
  assert_eq "$digest" "$(jq -r '.manifests[0].digest' "out-$name/index.json")" "the digest pulled back from $name"
  assert_eq 1 "$(registry_requests "$name" PUT '/v2/harness/img/manifests/v1' 201)" "manifest PUTs in $name"
  assert_eq "$blobs" "$(registry_requests "$name" GET '/v2/harness/img/blobs/sha256:[0-9a-f]{64}' 200)" \
    "blob GETs of one pull from $name"
done
pass "skopeo pushes an umoci image to each mode and pulls it back with the same digest; registry_requests counts one manifest PUT and one GET per blob"

remote=$(skopeo inspect --raw --cert-dir "$REG_TLSAUTH_CERTDIR" --creds "$REG_TLSAUTH_USER:$REG_TLSAUTH_PASS" \
  "docker://$REG_TLSAUTH_HOST/harness/img:v1" | sha256sum | cut -d' ' -f1)
assert_eq "${digest#sha256:}" "$remote" "the manifest digest skopeo inspect reads"
registry_auth_json auth auth.json
registry_auth_json tlsauth auth.json
assert_eq 2 "$(jq '.auths | length' auth.json)" "auth.json entries"
skopeo inspect --raw --tls-verify=false --authfile auth.json "docker://$REG_AUTH_HOST/harness/img:v1" >/dev/null 2>"$WORK/err" ||
  fail "skopeo with registry_auth_json's auth.json: $(cat "$WORK/err")"
if skopeo inspect --raw --tls-verify=false "docker://$REG_AUTH_HOST/harness/img:v1" >/dev/null 2>&1; then
  fail "skopeo reads the auth registry without credentials"
fi
certs=$(registry_certs_d mtls certs.d)
assert_eq "certs.d/$REG_MTLS_HOST" "$certs" "registry_certs_d's directory"
skopeo inspect --raw --cert-dir "$certs" "docker://$REG_MTLS_HOST/harness/img:v1" >/dev/null 2>"$WORK/err" ||
  fail "skopeo with registry_certs_d's directory: $(cat "$WORK/err")"
pass "registry_auth_json writes credentials skopeo uses; registry_certs_d a certs.d entry with the CA and the client certificate"

# ---- the token issuer -----------------------------------------------------------------------------
log=$REG_TOKEN_TOKEN_LOG
pushes=$(jq -c 'select(.status == 200 and .user == "lockstep" and (.scopes | index("repository:harness/img:pull,push")))' "$log" | wc -l)
[ "$pushes" -ge 1 ] || fail "no token request for pull,push on harness/img in $(cat "$log")"
grep -qF -- "$REG_TOKEN_PASS" "$log" "$REG_TOKEN_DIR/token-issuer.err" && fail "the issuer logged the password"
grep -q 'eyJ' "$log" && fail "the issuer logged a token"
before=$(registry_token_requests token)
answer=$(curl -s -u "$REG_TOKEN_USER:$REG_TOKEN_PASS" "$REG_TOKEN_TOKEN_REALM&service=$REG_TOKEN_SERVICE&scope=repository:a:pull&scope=repository:b:pull&scope=repository:a:push%20repository:c:delete")
assert_eq 300 "$(jq .expires_in <<<"$answer")" "expires_in"
assert_eq "$(jq -r .token <<<"$answer")" "$(jq -r .access_token <<<"$answer")" "token and access_token"
[[ $(jq -r .issued_at <<<"$answer") =~ ^20[0-9-]+T[0-9:]+Z$ ]] || fail "issued_at: $answer"
jwt_part() { cut -d. -f"$2" <<<"$1" | tr '_-' '/+' | sed 's/$/===/' | base64 -d 2>/dev/null || true; }
token=$(jq -r .token <<<"$answer")
assert_eq '[{"type":"repository","name":"a","actions":["pull","push"]},{"type":"repository","name":"b","actions":["pull"]},{"type":"repository","name":"c","actions":["delete"]}]' \
  "$(jwt_part "$token" 2 | jq -c .access)" "the token's merged access"
assert_eq "ES256 1" "$(jwt_part "$token" 1 | jq -r '"\(.alg) \(.x5c | length)"')" "the token's header"
assert_eq "$REG_TOKEN_SERVICE" "$(jwt_part "$token" 2 | jq -r .aud)" "the token's audience"
assert_eq '["repository:a:pull,push","repository:b:pull","repository:c:delete"]' \
  "$(tail -n 1 "$log" | jq -c .scopes)" "the merged scopes in the issuer's log"
assert_eq $((before + 1)) "$(registry_token_requests token)" "token requests counted"
mangled="${REG_TOKEN_TOKEN_REALM%%\?*}?service=$REG_TOKEN_SERVICE&scope=repository:a:pull"
assert_eq 400 "$(code -u "$REG_TOKEN_USER:$REG_TOKEN_PASS" "$mangled")" "a realm without its query"
assert_eq 400 "$(code -u "$REG_TOKEN_USER:$REG_TOKEN_PASS" "$REG_TOKEN_TOKEN_REALM?service=$REG_TOKEN_SERVICE")" \
  "a realm with its query mangled by a second '?'"
assert_eq 2 "$(registry_token_requests token '.realm_query_ok == false and .status == 400')" "mangled requests logged"
assert_eq 401 "$(code -u "$REG_TOKEN_USER:wrong" "$REG_TOKEN_TOKEN_REALM&service=$REG_TOKEN_SERVICE")" "a wrong password"
# Anonymous (default "empty"): a token that grants nothing, which the registry refuses.
empty=$(curl -s "$REG_TOKEN_TOKEN_REALM&service=$REG_TOKEN_SERVICE&scope=repository:harness/img:pull" | jq -r .token)
assert_eq '[]' "$(jwt_part "$empty" 2 | jq -c .access)" "an anonymous token's access"
assert_eq 401 "$(code -H "Authorization: Bearer $empty" "$REG_TOKEN_URL/v2/harness/img/manifests/v1")" \
  "the registry with an empty token"
# OAuth2 POST: password grant with a refresh token, then the refresh grant.
form=(--data-urlencode grant_type=password --data-urlencode "username=$REG_TOKEN_USER"
  --data-urlencode "password=$REG_TOKEN_PASS" --data-urlencode "service=$REG_TOKEN_SERVICE"
  --data-urlencode "scope=repository:harness/img:pull repository:other:pull" --data-urlencode client_id=harness
  --data-urlencode access_type=offline)
answer=$(curl -s "${form[@]}" "$REG_TOKEN_TOKEN_REALM")
refresh=$(jq -r .refresh_token <<<"$answer")
[[ -n $refresh && $refresh != null ]] || fail "no refresh token: $answer"
answer=$(curl -s --data-urlencode grant_type=refresh_token --data-urlencode "refresh_token=$refresh" \
  --data-urlencode "service=$REG_TOKEN_SERVICE" --data-urlencode "scope=repository:harness/img:pull" "$REG_TOKEN_TOKEN_REALM")
token=$(jq -r .access_token <<<"$answer")
assert_eq 200 "$(code -H "Authorization: Bearer $token" -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  "$REG_TOKEN_URL/v2/harness/img/manifests/v1")" "the registry with a refreshed token"
assert_eq 401 "$(code --data-urlencode grant_type=refresh_token --data-urlencode refresh_token=bogus \
  --data-urlencode "service=$REG_TOKEN_SERVICE" "$REG_TOKEN_TOKEN_REALM")" "a bogus refresh token"
assert_eq 1 "$(registry_token_requests token '.grant_type == "refresh_token" and .status == 200')" "refresh grants logged"
grep -qF -- "$refresh" "$log" && fail "the issuer logged a refresh token"
# anonymous=pull, expires=2: skopeo reads without credentials; a push is refused.
answer=$(curl -s "$REG_ANON_TOKEN_REALM&service=$REG_ANON_SERVICE&scope=repository:harness/img:pull,push")
assert_eq 2 "$(jq .expires_in <<<"$answer")" "expires_in of the anon registry"
assert_eq '["pull"]' "$(jwt_part "$(jq -r .token <<<"$answer")" 2 | jq -c '.access[0].actions')" "anonymous actions"
mapfile -t dest < <(registry_skopeo_flags anon dest)
skopeo copy -q "${dest[@]}" oci:img:v1 "docker://$REG_ANON_HOST/harness/img:v1" 2>"$WORK/err" ||
  fail "skopeo push to anon: $(cat "$WORK/err")"
skopeo inspect --raw --tls-verify=false "docker://$REG_ANON_HOST/harness/img:v1" >/dev/null 2>"$WORK/err" ||
  fail "anonymous skopeo inspect: $(cat "$WORK/err")"
if skopeo copy -q --dest-tls-verify=false oci:img:v1 "docker://$REG_ANON_HOST/harness/anon:v1" 2>/dev/null; then
  fail "an anonymous push went through"
fi
pass "the token issuer: skopeo's pull,push request logged, scopes merged into one token, realm query checked, ES256 with x5c, Basic checked, anonymous empty or pull, OAuth2 password and refresh grants, expires_in, no secret in its log"

# ---- the hostile registry -------------------------------------------------------------------------
H=$REG_H_URL
info=$REG_H_INFO
layer=$(jq -r .layer_digest "$info")
layer_size=$(jq -r .layer_size "$info")
config=$(jq -r .config_digest "$info")
accept='Accept: application/vnd.oci.image.manifest.v1+json'
sha() { sha256sum | sed 's/^/sha256:/; s/ .*//'; }
# The stalls take their time: start them first, in the background.
curl -s --max-time 2 -o stall-blob -w '%{http_code}' "$H/v2/stall/blobs/$layer" >stall-blob.code 2>/dev/null &
stall1=$!
curl -s --max-time 2 -o stall-manifest -w '%{http_code}' -H "$accept" "$H/v2/stall-manifest/manifests/latest" \
  >stall-manifest.code 2>/dev/null &
stall2=$!
curl -s --max-time 2 -o stall-headers -w '%{http_code}' -H "$accept" "$H/v2/stall-headers/manifests/latest" \
  >stall-headers.code 2>/dev/null &
stall3=$!

assert_eq 200 "$(code "$H/v2/")" "hostile /v2/"
curl -s -H "$accept" "$H/v2/ok/manifests/latest" -o ok.json
assert_eq "$REG_H_DIGEST" "$(sha <ok.json)" "ok's manifest digest"
assert_eq "$layer" "$(jq -r '.layers[0].digest' ok.json)" "ok's layer"
assert_eq "$layer" "$(curl -s "$H/v2/ok/blobs/$layer" | sha)" "ok's layer blob"
assert_eq "$config" "$(curl -s "$H/v2/ok/blobs/$config" | sha)" "ok's config blob"
assert_eq "$REG_H_DIGEST" "$(curl -s -H "$accept" "$H/v2/ok/sub/manifests/$REG_H_DIGEST" | sha)" "ok by digest"
skopeo copy -q --src-tls-verify=false "docker://$REG_H_HOST/ok:latest" oci:hostile-ok:latest 2>"$WORK/err" ||
  fail "skopeo pull of the hostile ok image: $(cat "$WORK/err")"
assert_eq "$REG_H_DIGEST" "$(jq -r '.manifests[0].digest' hostile-ok/index.json)" "skopeo's pull of ok"
assert_eq 404 "$(code "$H/v2/nonesuch/manifests/latest")" "an unknown repository"
assert_eq 405 "$(code -X PUT --data x "$H/v2/ok/manifests/latest")" "a push"

headers=$(curl -s -D - -o body -H "$accept" "$H/v2/digest-mismatch/manifests/$REG_H_DIGEST" | tr -d '\r')
assert_contains "$headers" "Docker-Content-Digest: $REG_H_DIGEST" "digest-mismatch's claimed digest"
[ "$(sha <body)" != "$REG_H_DIGEST" ] || fail "digest-mismatch served the right body"
curl -s -o body "$H/v2/blob-mismatch/blobs/$layer"
assert_eq "$layer_size" "$(stat -c %s body)" "blob-mismatch's size"
[ "$(sha <body)" != "$layer" ] || fail "blob-mismatch served the right blob"

headers=$(curl -s -D - -o body -H "$accept" "$H/v2/manifest-too-big/manifests/latest" | tr -d '\r')
[ "$(stat -c %s body)" -gt $((5 << 20)) ] || fail "manifest-too-big is small"
assert_contains "$headers" "Content-Length: $(stat -c %s body)" "manifest-too-big's length"
assert_eq application/vnd.oci.image.manifest.v1+json "$(jq -r .mediaType body)" "manifest-too-big's type"
headers=$(curl -s -D - -o body -H "$accept" "$H/v2/manifest-too-big-nolength/manifests/latest" | tr -d '\r')
[ "$(stat -c %s body)" -gt $((5 << 20)) ] || fail "manifest-too-big-nolength is small"
grep -qi '^content-length' <<<"$headers" && fail "manifest-too-big-nolength sent a length: $headers"

headers=$(curl -s -D - -o body -H "$accept" "$H/v2/schema1/manifests/latest" | tr -d '\r')
assert_contains "$headers" "Content-Type: application/vnd.docker.distribution.manifest.v1+prettyjws" "schema1's type"
assert_eq 1 "$(jq .schemaVersion body)" "schema1's schemaVersion"

set +e
curl -s -L --max-redirs 10 -o /dev/null "$H/v2/redirect-loop/blobs/$layer"
rc=$?
set -e
assert_eq 47 "$rc" "curl on redirect-loop (too many redirects)"
location=$(curl -s -D - -o /dev/null "$H/v2/redirect-loop/blobs/$layer?loop=1" | tr -d '\r' | grep -i '^location:')
assert_eq "Location: /v2/redirect-loop/blobs/$layer" "$location" "the loop's way back"

assert_eq 401 "$(code "$H/v2/redirect-offhost/manifests/latest")" "redirect-offhost without credentials"
location=$(curl -s -D - -o /dev/null -u x:y "$H/v2/redirect-offhost/blobs/$layer" | tr -d '\r' | grep -i '^location:')
assert_eq "Location: http://$REG_H_HOST2/blobs/$layer?X-Amz-Signature=fake" "$location" "redirect-offhost's target"
assert_eq "$layer" "$(curl -s -L -u x:y "$H/v2/redirect-offhost/blobs/$layer" | sha)" "redirect-offhost through curl"
assert_eq 400 "$(code -L --location-trusted -u x:y "$H/v2/redirect-offhost/blobs/$layer")" \
  "redirect-offhost with the credentials sent on"
assert_eq 1 "$(grep -c 'listener=2 case=redirect-offhost auth=absent' "$REG_H_LOG")" "listener 2 without Authorization"
assert_eq 1 "$(grep -c '" 400 .* listener=2 case=redirect-offhost auth=present' "$REG_H_LOG")" "listener 2 with Authorization"

set +e
headers=$(curl -s -D - -o body "$H/v2/length-long/blobs/$layer" | tr -d '\r')
rc=$?
set -e
assert_eq 18 "$rc" "curl on length-long (partial transfer)"
assert_contains "$headers" "Content-Length: $((layer_size + 1000))" "length-long's claim"
assert_eq "$layer_size" "$(stat -c %s body)" "what length-long sent"
headers=$(curl -s -D - -o body "$H/v2/length-short/blobs/$layer" | tr -d '\r')
assert_contains "$headers" "Content-Length: $((layer_size - 100))" "length-short's claim"
[ "$(sha <body)" != "$layer" ] || fail "length-short's body matches"

curl -s -H "$accept" "$H/v2/gzip-bomb/manifests/latest" -o bomb.json
bomb=$(jq -r .bomb_layer_digest "$info")
assert_eq "$bomb" "$(jq -r '.layers[0].digest' bomb.json)" "the bomb's layer"
bomb_config=$(curl -s "$H/v2/gzip-bomb/blobs/$(jq -r .config.digest bomb.json)")
assert_eq "sha256:$(printf '' | sha256sum | cut -d' ' -f1)" "$(jq -r '.rootfs.diff_ids[0]' <<<"$bomb_config")" "the bomb's diff_id"
curl -s "$H/v2/gzip-bomb/blobs/$bomb" -o bomb.gz
assert_eq "$bomb" "$(sha <bomb.gz)" "the bomb's digest"
[ "$(stat -c %s bomb.gz)" -lt $((32 << 20)) ] || fail "the bomb is $(stat -c %s bomb.gz) bytes"
[ "$(jq .bomb_uncompressed_bytes "$info")" -gt $((8 << 30)) ] || fail "the bomb expands to little: $(cat "$info")"
assert_eq $((16 << 20)) "$( (gzip -dc bomb.gz 2>/dev/null || true) | head -c $((16 << 20)) | wc -c)" "the bomb's first 16 MiB"
assert_eq bomb-0 "$( (gzip -dc bomb.gz 2>/dev/null || true) | head -c 100 | tr -d '\0')" "the bomb's first member"

headers=$(curl -s -D - -o /dev/null -H "$accept" "$H/v2/auth-loop/manifests/latest" | tr -d '\r')
assert_contains "$headers" "HTTP/1.1 401" "auth-loop's status"
assert_contains "$headers" "WWW-Authenticate: Bearer realm=\"$H/token?svc=hostile\",service=\"hostile\",scope=\"repository:auth-loop:pull\"" \
  "auth-loop's challenge"
token=$(curl -s "$H/token?svc=hostile&service=hostile&scope=repository:auth-loop:pull" | jq -r .token)
assert_eq 401 "$(code -H "Authorization: Bearer $token" "$H/v2/auth-loop/manifests/latest")" "auth-loop with its token"
assert_eq 1 "$(registry_requests h GET /token 200)" "token fetches counted"

for case in bad-digest:layers:sha256:xyz bad-digest-md5:layers:md5:d41d8cd98f00b204e9800998ecf8427e \
  bad-digest-traversal:layers:sha256:../../../../../../../../tmp/lockstep-hostile-traversal; do
  IFS=: read -r repo field value <<<"$case"
  assert_eq "$value" "$(curl -s -H "$accept" "$H/v2/$repo/manifests/latest" | jq -r ".${field}[0].digest")" "$repo's digest"
done
short=$(curl -s -H "$accept" "$H/v2/bad-digest-short/manifests/latest" | jq -r .config.digest)
[[ $short =~ ^sha256:[0-9a-f]{63}$ ]] || fail "bad-digest-short's config digest: $short"

headers=$(curl -s -D - -o /dev/null -H "$accept" "$H/v2/rate-limit/a/manifests/latest" | tr -d '\r')
assert_contains "$headers" "HTTP/1.1 429" "rate-limit's first answer"
assert_contains "$headers" "Retry-After: 1" "rate-limit's Retry-After"
assert_eq 429 "$(code -H "$accept" "$H/v2/rate-limit/a/manifests/latest")" "rate-limit's second answer"
assert_eq "$REG_H_DIGEST" "$(curl -s -f -H "$accept" "$H/v2/rate-limit/a/manifests/latest" | sha)" "rate-limit's third answer"
assert_eq 2 "$(registry_requests h GET /v2/rate-limit/a/manifests/latest 429)" "429s in the log"
grep -q '/v2/rate-limit/a/manifests/latest HTTP/1.1" 200 .* attempt=3$' "$REG_H_LOG" || fail "attempt=3 not logged"
assert_eq 200 "$(code -X POST "$H/_hostile/reset")" "reset"
assert_eq 429 "$(code -H "$accept" "$H/v2/rate-limit/a/manifests/latest")" "rate-limit after a reset"

assert_eq 500 "$(code -H "$accept" "$H/v2/flaky-5xx/manifests/latest")" "flaky-5xx's first manifest GET"
assert_eq 200 "$(code -H "$accept" "$H/v2/flaky-5xx/manifests/latest")" "flaky-5xx's second manifest GET"
assert_eq 503 "$(code "$H/v2/flaky-5xx/blobs/$layer")" "flaky-5xx's first blob GET"
assert_eq "$layer" "$(curl -s -f "$H/v2/flaky-5xx/blobs/$layer" | sha)" "flaky-5xx's second blob GET"

set +e
curl -s -o part1 "$H/v2/resume/blobs/$layer"
rc=$?
set -e
assert_eq 18 "$rc" "curl on resume's first GET (dropped)"
half=$(stat -c %s part1)
assert_eq $((layer_size / 2)) "$half" "resume's first GET sends half"
headers=$(curl -s -D - -o part2 -r "$half-" "$H/v2/resume/blobs/$layer" | tr -d '\r')
assert_contains "$headers" "HTTP/1.1 206" "resume's ranged GET"
assert_contains "$headers" "Content-Range: bytes $half-$((layer_size - 1))/$layer_size" "resume's Content-Range"
assert_eq "$layer" "$(cat part1 part2 | sha)" "the resumed blob"
grep -q "\" 206 $((layer_size - half)) listener=1 case=resume auth=absent range=bytes=$half- attempt=2\$" "$REG_H_LOG" ||
  fail "resume's Range not logged: $(grep resume "$REG_H_LOG")"

wait "$stall1" "$stall2" "$stall3" || true
assert_eq "200 10" "$(cat stall-blob.code) $(stat -c %s stall-blob)" "stall (status, bytes in 2 s)"
assert_eq "200 10" "$(cat stall-manifest.code) $(stat -c %s stall-manifest)" "stall-manifest (status, bytes in 2 s)"
assert_eq "000 0" "$(cat stall-headers.code) $(stat -c %s stall-headers 2>/dev/null || echo 0)" "stall-headers"
pass "the hostile registry: ok, digest-mismatch, blob-mismatch, manifest-too-big(-nolength), schema1, redirect-loop, redirect-offhost, length-long/short, gzip-bomb, stall(-manifest, -headers), auth-loop, bad-digest(-md5, -traversal, -short), rate-limit, flaky-5xx, resume, as documented"

registry_up hmode hostile hostile_args="--mode auth-loop"
assert_eq 401 "$(code "$REG_HMODE_URL/v2/")" "/v2/ in --mode auth-loop"
assert_eq 401 "$(code "$REG_HMODE_URL/v2/anything/manifests/latest")" "any repository in --mode auth-loop"
pass "--mode makes every repository, and the ping, misbehave"

# ---- in a network namespace of its own ------------------------------------------------------------
if [ -n "$NS" ]; then
  registry_up inns tls-auth netns="$NS" addr=10.231.0.1
  assert_eq "10.231.0.1" "${REG_INNS_HOST%:*}" "REG_INNS_HOST's address"
  assert_eq "$NS" "$REG_INNS_NETNS" "REG_INNS_NETNS"
  mapfile -t dest < <(registry_skopeo_flags inns dest)
  mapfile -t src < <(registry_skopeo_flags inns src)
  ip netns exec "$NS" skopeo copy -q "${dest[@]}" oci:img:v1 "docker://$REG_INNS_HOST/harness/img:v1" 2>"$WORK/err" ||
    fail "skopeo push in $NS: $(cat "$WORK/err")"
  ip netns exec "$NS" skopeo copy -q "${src[@]}" "docker://$REG_INNS_HOST/harness/img:v1" oci:out-inns:v1 2>"$WORK/err" ||
    fail "skopeo pull in $NS: $(cat "$WORK/err")"
  assert_eq "$digest" "$(jq -r '.manifests[0].digest' out-inns/index.json)" "the digest pulled back in $NS"
  pids=$(ip netns pids "$NS" | xargs)
  [ -n "$pids" ] || fail "nothing runs in $NS"
  registry_down inns
  assert_eq "" "$(ip netns pids "$NS" | xargs)" "what runs in $NS after registry_down"
  pass "netns= and addr= run a registry inside a network namespace, on one of its addresses (in the certificate too)"
fi

# ---- down -----------------------------------------------------------------------------------------
pids=""
for name in $names anon h hmode; do
  pids+=" $(_registry_get "$name" PID)"
done
pids+=" $REG_TOKEN_TOKEN_PID $REG_TLSTOKEN_TOKEN_PID $REG_ANON_TOKEN_PID"
registry_down plain
assert_eq 000 "$(code --max-time 2 "$REG_PLAIN_URL/v2/")" "plain after registry_down"
assert_eq 200 "$(code "$REG_AUTH_URL/v2/" -u "$REG_AUTH_USER:$REG_AUTH_PASS")" "auth after registry_down plain"
registry_down_all
for pid in $pids; do
  kill -0 "$pid" 2>/dev/null && fail "pid $pid still runs after registry_down_all"
done
registry_down_all
pass "registry_down stops one registry, registry_down_all the rest (idempotent)"
done_testing
