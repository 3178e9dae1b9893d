#!/usr/bin/env bash
# Registries (docs/registry.md): lockstep push and pull against the real docker-registry, with
# skopeo as the peer both ways; docker:// accepted wherever an image is read; blobs never fetched
# twice; re-pushes send nothing; cross-repository mounts; several tags; zstd layers and a
# multi-platform index pushed by skopeo; a SIF through oras://.
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/registry.sh"
need skopeo jq docker-registry busybox

# ---------------------------------------------------------------------------------------------
# A small image: busybox, built by lockstep.
mkdir -p img/rootfs/bin img/rootfs/etc
cp /bin/busybox img/rootfs/bin/busybox
for a in sh echo cat; do ln -s busybox "img/rootfs/bin/$a"; done
printf 'from the registry\n' >img/rootfs/etc/marker
cat >img/lockstep.yaml <<'YAML'
lockstep: 1
name: bb
copy:
  - {from: ./rootfs, to: /}
env: {PATH: /bin}
cmd: [/bin/cat, /etc/marker]
outputs:
  oci: out/layout
  sif: out/bb.sif
YAML
"$LOCKSTEP" build -q img/lockstep.yaml >/dev/null
LOCAL=$("$LOCKSTEP" inspect --json "oci:$WORK/img/out/layout" | jq -r .manifest_digest)
[[ $LOCAL == sha256:* ]] || fail "no local digest: $LOCAL"

registry_up r1 plain
R1=$REG_R1_HOST
mapfile -t SK < <(registry_skopeo_flags r1)
mapfile -t SKSRC < <(registry_skopeo_flags r1 src)
mapfile -t SKDST < <(registry_skopeo_flags r1 dest)

# ---------------------------------------------------------------------------------------------
# Plain HTTP is never used silently.
set +e
out=$("$LOCKSTEP" push "oci:$WORK/img/out/layout" "docker://$R1/team/bb:v1" 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] || fail "push to a plain-HTTP registry without --tls-verify=false: expected exit 3, got $rc: $out"
grep -q -- "--tls-verify=false" <<<"$out" || fail "the message does not say what to do: $out"
pass "a plain-HTTP registry is refused without --tls-verify=false (exit 3, says what to do)"

# ---------------------------------------------------------------------------------------------
# Push: the registry's digest is the local one, skopeo agrees, and copies it back bit for bit.
pushed=$("$LOCKSTEP" push --tls-verify=false "oci:$WORK/img/out/layout" "docker://$R1/team/bb:v1" --tag v1.0 --tag latest)
[ "$pushed" = "$LOCAL" ] || fail "push printed $pushed, the local digest is $LOCAL"
for t in v1 v1.0 latest; do
  d=$(skopeo inspect "${SK[@]}" "docker://$R1/team/bb:$t" | jq -r .Digest)
  [ "$d" = "$LOCAL" ] || fail "skopeo sees $d under tag $t, expected $LOCAL"
done
skopeo copy -q "${SKSRC[@]}" "docker://$R1/team/bb:v1" "oci:$WORK/back:v1"
back=$(sha256sum <"$WORK/back/blobs/sha256/${LOCAL#sha256:}" | cut -d' ' -f1)
[ "sha256:$back" = "$LOCAL" ] || fail "skopeo's copy of the manifest has another digest"
pass "push: the registry's digest is the local one under three tags; skopeo inspects and copies it back bit for bit"

# Re-push: one HEAD of the manifest, one GET of the referrers tag (the build's provenance is listed
# there already) and nothing else; a new tag on it: that tag's PUT, no blob asked.
before=$(registry_requests r1 '[A-Z]+' '/v2/team/bb/.*')
"$LOCKSTEP" push -q --tls-verify=false "oci:$WORK/img/out/layout" "docker://$R1/team/bb:v1" >/dev/null
after=$(registry_requests r1 '[A-Z]+' '/v2/team/bb/.*')
assert_eq "2 1" "$((after - before)) $(registry_requests r1 HEAD '/v2/team/bb/manifests/v1' 200)" \
  "a re-push asks for the manifest and the referrers tag once each, and sends nothing"
before_blobs=$(registry_requests r1 '[A-Z]+' '/v2/team/bb/blobs/.*')
"$LOCKSTEP" push -q --tls-verify=false --tag v9 "oci:$WORK/img/out/layout" "docker://$R1/team/bb:v1" >/dev/null
assert_eq "$before_blobs 1" \
  "$(registry_requests r1 '[A-Z]+' '/v2/team/bb/blobs/.*') $(registry_requests r1 PUT '/v2/team/bb/manifests/v9' 201)" \
  "a new tag on a pushed manifest: its PUT, no blob request"
assert_eq "$LOCAL" "$(skopeo inspect --tls-verify=false --raw "docker://$R1/team/bb:v9" | sha256sum | sed 's/^/sha256:/; s/ .*//')" \
  "the new tag names the manifest"
pass "re-push of an unchanged image: one manifest HEAD, nothing sent; a new tag: one PUT, no blob asked"

# build --push: the digest build prints is the one in the registry, under both tags.
built=$("$LOCKSTEP" build -q --tls-verify=false --push "docker://$R1/built/bb:v1" --push "docker://$R1/built/bb:v2" \
  img/lockstep.yaml | tail -n1)
[ "$built" = "$LOCAL" ] || fail "build printed $built, expected $LOCAL"
for t in v1 v2; do
  d=$(skopeo inspect "${SK[@]}" "docker://$R1/built/bb:$t" | jq -r .Digest)
  [ "$d" = "$LOCAL" ] || fail "after build --push, skopeo sees $d under $t"
done
pass "build --push: the registry holds the printed digest under both tags"

# Another repository of the same registry: mounted, not uploaded.
json=$("$LOCKSTEP" push --json --tls-verify=false "oci:$WORK/img/out/layout" "docker://$R1/other/bb:v1")
[ "$(jq -r '.[0].mounted' <<<"$json")" -ge 2 ] || fail "push to another repository did not mount the blobs: $json"
[ "$(jq -r '.[0].uploaded' <<<"$json")" = 0 ] || fail "push to another repository uploaded blobs: $json"
[ "$(registry_requests r1 POST '/v2/other/bb/blobs/uploads/' 201)" -ge 2 ] || fail "no 201 mount in the registry's log"
pass "push to another repository of the same registry mounts the blobs (201), uploads none"

# ---------------------------------------------------------------------------------------------
# Pull into an empty store, then every reading command on docker://.
export LOCKSTEP_CACHE="$WORK/cache2"
pulled=$("$LOCKSTEP" pull --tls-verify=false "docker://$R1/team/bb:v1")
[ "$pulled" = "$LOCAL" ] || fail "pull printed $pulled, expected $LOCAL"
gets=$(registry_requests r1 GET '/v2/team/bb/blobs/sha256:[0-9a-f]{64}')
"$LOCKSTEP" pull -q --tls-verify=false "docker://$R1/team/bb:v1" >/dev/null
out=$("$LOCKSTEP" exec --tls-verify=false "docker://$R1/team/bb:v1")
[ "$out" = "from the registry" ] || fail "exec docker:// printed: $out"
"$LOCKSTEP" inspect --tls-verify=false "docker://$R1/team/bb:v1" >/dev/null
"$LOCKSTEP" verify --quiet --tls-verify=false "docker://$R1/team/bb:v1"
[ "$(registry_requests r1 GET '/v2/team/bb/blobs/sha256:[0-9a-f]{64}')" = "$gets" ] ||
  fail "a blob already in the store was fetched again"
pass "pull into an empty store; exec, inspect and verify on docker://; no blob fetched twice"

# By digest, and a digest the registry does not have.
out=$("$LOCKSTEP" exec --tls-verify=false "docker://$R1/team/bb@$LOCAL")
[ "$out" = "from the registry" ] || fail "exec by digest printed: $out"
set +e
out=$("$LOCKSTEP" inspect --tls-verify=false "docker://$R1/team/bb:nope" 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "no such image" <<<"$out" || fail "a missing tag: rc $rc: $out"
pass "pull by digest; a missing tag is a clear error"

# ---------------------------------------------------------------------------------------------
# A registry image as a build base (`base: {image: docker://...}`), stored by skopeo as Docker v2
# (the same layer bytes): its layers come first, with the registry's digests and OCI media types;
# a rebuild fetches no blob and gives the same digest; a pin the registry lacks is exit 2 and an
# unreachable registry exit 3, both located at base.image.
skopeo copy -q --format v2s2 "${SKDST[@]}" "oci:$WORK/img/out/layout" "docker://$R1/v2/bb:v1"
raw=$(skopeo inspect --raw "${SK[@]}" "docker://$R1/v2/bb:v1")
[ "$(jq -r .mediaType <<<"$raw")" = application/vnd.docker.distribution.manifest.v2+json ] || fail "not v2s2: $raw"
mkdir -p onbase
printf 'on the base\n' >onbase/note
cat >onbase/lockstep.yaml <<YAML
lockstep: 1
name: onbase
base: {image: "docker://$R1/v2/bb:v1"}
copy: [{from: ./note, to: /etc/note}]
outputs: {oci: out}
YAML
export LOCKSTEP_CACHE="$WORK/cache-base"
d1=$("$LOCKSTEP" build -q --tls-verify=false onbase/lockstep.yaml)
gets=$(registry_requests r1 GET '/v2/v2/bb/blobs/sha256:[0-9a-f]{64}')
[ "$gets" -ge 2 ] || fail "the base's config and layer were not fetched ($gets blob GETs)"
d2=$("$LOCKSTEP" build -q --tls-verify=false onbase/lockstep.yaml)
[ "$d1" = "$d2" ] || fail "a rebuild on the registry base gave $d2, the first build $d1"
[ "$(registry_requests r1 GET '/v2/v2/bb/blobs/sha256:[0-9a-f]{64}')" = "$gets" ] || fail "a rebuild fetched base blobs"
built=$(jq -r '.manifests[0].digest' onbase/out/index.json)
man=$(cat "onbase/out/blobs/sha256/${built#sha256:}")
n=$(jq '.layers | length' <<<"$raw")
[ "$(jq -c '[.layers[].digest]' <<<"$raw")" = "$(jq -c --argjson n "$n" '[.layers[:$n][].digest]' <<<"$man")" ] &&
  [ "$(jq '.layers | length' <<<"$man")" = $((n + 1)) ] || fail "the base layers are not first: $man"
jq -e --argjson n "$n" 'all(.layers[:$n][]; .mediaType == "application/vnd.oci.image.layer.v1.tar+gzip")' \
  <<<"$man" >/dev/null || fail "the base layers keep Docker media types: $man"
[ "$(jq -r '.annotations["org.opencontainers.image.base.digest"]' <<<"$man")" = \
  "$(skopeo inspect "${SK[@]}" "docker://$R1/v2/bb:v1" | jq -r .Digest)" ] || fail "base.digest annotation: $man"
out=$("$LOCKSTEP" exec oci:onbase/out /bin/cat /etc/marker /etc/note)
[ "$out" = $'from the registry\non the base' ] || fail "the image built on the registry base holds: $out"
sed -i "s|bb:v1\"|bb:v1@sha256:$(printf wrong | sha256sum | cut -d' ' -f1)\"|" onbase/lockstep.yaml
set +e
out=$("$LOCKSTEP" build -q --tls-verify=false onbase/lockstep.yaml 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "lockstep.yaml:3:15: error: base.image: .*no such image" <<<"$out" ||
  fail "a pin the registry lacks: rc $rc: $out"
set +e
out=$("$LOCKSTEP" build -q onbase/lockstep.yaml 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] && grep -q "lockstep.yaml:3:15: error: base.image: .*--tls-verify=false" <<<"$out" ||
  fail "a plain-HTTP base registry without --tls-verify=false: rc $rc: $out"
export LOCKSTEP_CACHE="$WORK/cache2"
pass "build on a docker:// base (Docker v2): its layers first with the registry's digests as OCI, no blob fetched twice, same digest; a missing pin is exit 2, an unreachable registry exit 3, both at base.image"

# The base in the lock: locked by manifest digest, config digest and platform. A tag that moves
# after locking still builds the locked manifest (from an empty store too); `lock --check` names
# the move (exit 1); `lock --update base` moves the lock.
skopeo copy -q --format v2s2 "${SKDST[@]}" "oci:$WORK/img/out/layout" "docker://$R1/mv/bb:v1"
old=$(skopeo inspect "${SK[@]}" "docker://$R1/mv/bb:v1" | jq -r .Digest)
old_cfg=$(skopeo inspect --raw "${SK[@]}" "docker://$R1/mv/bb:v1" | jq -r .config.digest)
mkdir -p moving
cp onbase/note moving/note
sed "s|docker://$R1/v2/bb:v1[^\"]*|docker://$R1/mv/bb:v1|; s|name: onbase|name: moving|" onbase/lockstep.yaml >moving/lockstep.yaml
"$LOCKSTEP" lock -q --tls-verify=false moving/lockstep.yaml
jq -e --arg m "$old" --arg c "$old_cfg" --arg i "docker://$R1/mv/bb:v1" \
  '.base == {image: $i, manifest: $m, config: $c, platform: "linux/amd64"}' moving/lockstep.lock >/dev/null ||
  fail "the lock's base: $(jq -c .base moving/lockstep.lock)"
d1=$("$LOCKSTEP" build -q --locked --tls-verify=false moving/lockstep.yaml)
skopeo copy -q --format oci "${SKDST[@]}" "oci:$WORK/img/out/layout" "docker://$R1/mv/bb:v1" # the tag moves
new=$(skopeo inspect "${SK[@]}" "docker://$R1/mv/bb:v1" | jq -r .Digest)
[ "$new" != "$old" ] || fail "the tag did not move"
export LOCKSTEP_CACHE="$WORK/cache-moved"
d2=$("$LOCKSTEP" build -q --locked --tls-verify=false moving/lockstep.yaml)
[ "$d1" = "$d2" ] || fail "after the tag moved, a locked build gave $d2, not $d1"
[ "$(jq -r '.annotations["org.opencontainers.image.base.digest"]' \
  "moving/out/blobs/sha256/$(jq -r '.manifests[0].digest' moving/out/index.json | cut -d: -f2)")" = "$old" ] ||
  fail "the locked build is not on the locked manifest"
set +e
out=$("$LOCKSTEP" lock --check --tls-verify=false moving/lockstep.yaml 2>&1)
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "base: docker://$R1/mv/bb:v1 now names manifest $new, the lock has $old" <<<"$out" &&
  grep -q "lockstep lock --update base" <<<"$out" || fail "lock --check after the tag moved: rc $rc: $out"
"$LOCKSTEP" lock -q --tls-verify=false moving/lockstep.yaml
[ "$(jq -r .base.manifest moving/lockstep.lock)" = "$old" ] || fail "a plain lock moved the base"
"$LOCKSTEP" lock -q --update base --tls-verify=false moving/lockstep.yaml
[ "$(jq -r .base.manifest moving/lockstep.lock)" = "$new" ] || fail "lock --update base did not move it"
"$LOCKSTEP" lock --check -q --tls-verify=false moving/lockstep.yaml
export LOCKSTEP_CACHE="$WORK/cache2"
pass "the base in the lock: manifest, config and platform; a moved tag still builds the locked manifest; lock --check names the move; lock --update base moves it"

# ---------------------------------------------------------------------------------------------
# What skopeo pushes: zstd layers.
# (recompressed locally first: pushed straight, skopeo would reuse the gzip blobs the registry has)
skopeo copy -q --dest-compress --dest-compress-format zstd "oci:$WORK/img/out/layout" "oci:$WORK/zstd:v1"
skopeo copy -q "${SKDST[@]}" "oci:$WORK/zstd:v1" "docker://$R1/zstd/bb:v1"
skopeo inspect --raw "${SK[@]}" "docker://$R1/zstd/bb:v1" | grep -q 'tar+zstd' || fail "skopeo did not push zstd layers"
out=$("$LOCKSTEP" exec --tls-verify=false "docker://$R1/zstd/bb:v1")
[ "$out" = "from the registry" ] || fail "exec of skopeo's zstd image printed: $out"
pass "an image skopeo pushed with zstd layers runs with lockstep exec"

# A multi-platform index (skopeo copy --all of a layout whose index holds two platforms).
mkdir -p multi
cp -r img/out/layout/. multi/
sed -e 's/^name: bb$/name: bbarm/' -e 's|oci: out/layout|oci: out/arm|' -e '/sif:/d' img/lockstep.yaml >img/arm.yaml
printf 'platform: linux/arm64\n' >>img/arm.yaml
printf 'arm image\n' >img/rootfs/etc/marker
"$LOCKSTEP" build -q img/arm.yaml >/dev/null
printf 'from the registry\n' >img/rootfs/etc/marker
cp -rn img/out/arm/blobs/sha256/. multi/blobs/sha256/
amd=$(jq -c '.manifests[0] | del(.annotations) + {platform: {os: "linux", architecture: "amd64"}}' img/out/layout/index.json)
arm=$(jq -c '.manifests[0] | del(.annotations) + {platform: {os: "linux", architecture: "arm64"}}' img/out/arm/index.json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s,%s]}' "$arm" "$amd" >nested.json
nd=$(sha256sum nested.json | cut -d' ' -f1)
cp nested.json "multi/blobs/sha256/$nd"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:%s","size":%d,"annotations":{"org.opencontainers.image.ref.name":"multi"}}]}' \
  "$nd" "$(stat -c %s nested.json)" >multi/index.json
skopeo copy -q --all "${SKDST[@]}" "oci:$WORK/multi:multi" "docker://$R1/multi/bb:v1"
skopeo inspect --raw "${SK[@]}" "docker://$R1/multi/bb:v1" | jq -e '.manifests | length == 2' >/dev/null
out=$("$LOCKSTEP" exec --tls-verify=false "docker://$R1/multi/bb:v1")
[ "$out" = "from the registry" ] || fail "exec of the multi-platform image picked the wrong one: $out"
d=$("$LOCKSTEP" inspect --json --tls-verify=false --platform linux/arm64 "docker://$R1/multi/bb:v1" | jq -r .platform)
[ "$d" = "linux/arm64" ] || fail "--platform linux/arm64 gave $d"
pass "a multi-platform index skopeo pushed: the host's platform runs, --platform picks the other"

# ---------------------------------------------------------------------------------------------
# SIF through oras://: pushed as Apptainer's artifact, pulled back bit for bit, run with exec.
sifd=$("$LOCKSTEP" push --tls-verify=false img/out/bb.sif "oras://$R1/sif/bb:v1")
raw=$(skopeo inspect --raw "${SK[@]}" "docker://$R1/sif/bb:v1")
[ "$(jq -r '.layers[0].mediaType' <<<"$raw")" = "application/vnd.sylabs.sif.layer.v1.sif" ] ||
  fail "the SIF layer has media type $(jq -r '.layers[0].mediaType' <<<"$raw")"
[ "$(jq -r '.config.mediaType' <<<"$raw")" = "application/vnd.sylabs.sif.config.v1+json" ] || fail "SIF config type"
[ "$(jq -r '.layers[0].digest' <<<"$raw")" = "sha256:$(sha256sum <img/out/bb.sif | cut -d' ' -f1)" ] ||
  fail "the SIF layer is not the SIF file byte for byte"
[[ $sifd == sha256:* ]] || fail "push of a SIF printed $sifd"
path=$("$LOCKSTEP" pull --tls-verify=false "oras://$R1/sif/bb:v1")
cmp "$path" img/out/bb.sif || fail "the pulled SIF differs"
out=$("$LOCKSTEP" exec --tls-verify=false "oras://$R1/sif/bb:v1")
[ "$out" = "from the registry" ] || fail "exec oras:// printed: $out"
pass "a SIF pushed to oras:// as Apptainer's artifact (media types, bytes), pulled back and run with exec"

# ---------------------------------------------------------------------------------------------
# TLS with a CA from certs.d; an untrusted CA is a clear exit 3; registries.conf `insecure`.
# (not REGISTRY_AUTH_FILE: docker-registry would read it as its own configuration, REGISTRY_AUTH_*)
export HOME="$WORK/home"
AUTH_FILE="$HOME/.config/containers/auth.json"
unset XDG_RUNTIME_DIR DOCKER_CONFIG REGISTRY_AUTH_FILE
export LOCKSTEP_CACHE="$WORK/cache3"
registry_up t1 tls
mkdir -p certs.d
set +e
out=$(LOCKSTEP_CERTS_D="$WORK/certs.d" "$LOCKSTEP" push "oci:$WORK/img/out/layout" "docker://$REG_T1_HOST/team/bb:v1" 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] && grep -q "certs.d" <<<"$out" || fail "an untrusted TLS registry: rc $rc: $out"
registry_certs_d t1 "$WORK/certs.d" >/dev/null
export LOCKSTEP_CERTS_D="$WORK/certs.d"
d=$("$LOCKSTEP" push -q "oci:$WORK/img/out/layout" "docker://$REG_T1_HOST/team/bb:v1")
[ "$d" = "$LOCAL" ] || fail "push over TLS printed $d"
mapfile -t SKT < <(registry_skopeo_flags t1)
[ "$(skopeo inspect "${SKT[@]}" "docker://$REG_T1_HOST/team/bb:v1" | jq -r .Digest)" = "$LOCAL" ] || fail "skopeo over TLS"
out=$("$LOCKSTEP" exec "docker://$REG_T1_HOST/team/bb:v1")
[ "$out" = "from the registry" ] || fail "exec over TLS printed: $out"
pass "TLS: an unknown CA is exit 3 naming certs.d; with the CA in certs.d/HOST:PORT push, skopeo and exec agree"

printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$R1" >registries.conf
out=$(CONTAINERS_REGISTRIES_CONF="$WORK/registries.conf" "$LOCKSTEP" exec "docker://$R1/team/bb:v1")
[ "$out" = "from the registry" ] || fail "exec with registries.conf insecure printed: $out"
pass "registries.conf insecure = true allows a plain-HTTP registry without --tls-verify"

# ---------------------------------------------------------------------------------------------
# Basic auth: credentials from auth.json, login checks them, and they never show.
registry_up a1 tls-auth
registry_certs_d a1 "$WORK/certs.d" >/dev/null
set +e
out=$("$LOCKSTEP" push "oci:$WORK/img/out/layout" "docker://$REG_A1_HOST/team/bb:v1" 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] && grep -q "lockstep login $REG_A1_HOST" <<<"$out" || fail "no credentials: rc $rc: $out"
set +e
out=$(printf 'wrong\n' | "$LOCKSTEP" login "$REG_A1_HOST" -u "$REG_A1_USER" --password-stdin 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] && [ ! -e "$AUTH_FILE" ] || fail "login with a wrong password: rc $rc, $out"
printf '%s' "$REG_A1_PASS" | "$LOCKSTEP" login -q "$REG_A1_HOST" -u "$REG_A1_USER" --password-stdin
d=$("$LOCKSTEP" push --debug "oci:$WORK/img/out/layout" "docker://$REG_A1_HOST/team/bb:v1" 2>debug.log | tail -n1)
[ "$d" = "$LOCAL" ] || fail "push with Basic auth printed $d"
if grep -qF -- "$REG_A1_PASS" debug.log || grep -q "Authorization" debug.log; then fail "--debug shows credentials"; fi
out=$("$LOCKSTEP" exec "docker://$REG_A1_HOST/team/bb:v1")
[ "$out" = "from the registry" ] || fail "exec with Basic auth printed: $out"
pass "Basic auth over TLS: refused without credentials (says lockstep login), login checks the password, push/exec work, --debug shows no secret"

# ---------------------------------------------------------------------------------------------
# The bearer-token flow: realm with a query, scopes merged for a mount, tokens renewed. The token
# service listens on another port, so it is another host: --tls-verify=false for the registry does
# not cover it, the registry's CA (certs.d) does.
registry_up k1 tls-token expires=2
"$LOCKSTEP" logout -q --all >/dev/null 2>&1 || true
mkdir -p "$WORK/no-certs.d"
set +e
out=$(printf '%s' "$REG_K1_PASS" | LOCKSTEP_CERTS_D="$WORK/no-certs.d" "$LOCKSTEP" login --tls-verify=false \
  "$REG_K1_HOST" -u "$REG_K1_USER" --password-stdin 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] && grep -q "can't get a token for registry $REG_K1_HOST" <<<"$out" ||
  fail "--tls-verify=false reached the token service on another port: rc $rc: $out"
[ "$(registry_token_requests k1)" = 0 ] || fail "a token request reached the unverified realm: $(cat "$REG_K1_TOKEN_LOG")"
pass "--tls-verify=false for a registry does not cover its token service on another port (verified, exit 3)"
registry_certs_d k1 "$WORK/certs.d" >/dev/null
printf '%s' "$REG_K1_PASS" | "$LOCKSTEP" login -q "$REG_K1_HOST" -u "$REG_K1_USER" --password-stdin
d=$("$LOCKSTEP" push -q "oci:$WORK/img/out/layout" "docker://$REG_K1_HOST/team/bb:v1")
[ "$d" = "$LOCAL" ] || fail "push with tokens printed $d"
json=$("$LOCKSTEP" push --json "oci:$WORK/img/out/layout" "docker://$REG_K1_HOST/other/bb:v1")
[ "$(jq -r '.[0].mounted' <<<"$json")" -ge 2 ] || fail "no mount under token auth: $json"
[ "$(registry_token_requests k1 '(.scopes | any(test("other/bb:"))) and (.scopes | any(test("team/bb:pull")))')" -ge 1 ] ||
  fail "no token request merged the scopes of both repositories: $(tail -5 "$REG_K1_TOKEN_LOG")"
sleep 3
out=$("$LOCKSTEP" exec "docker://$REG_K1_HOST/team/bb:v1")
[ "$out" = "from the registry" ] || fail "exec with tokens printed: $out"
pass "bearer tokens from a realm with a query: push, a mount with merged scopes, exec after expiry"

# An identity token (Docker's config.json `identitytoken`, what `docker login` keeps for OAuth
# registries): exchanged at the realm with the OAuth2 refresh grant, never sent as a password.
refresh=$(curl -fsS -X POST --data-urlencode grant_type=password --data-urlencode "username=$REG_K1_USER" \
  --data-urlencode "password=$REG_K1_PASS" --data-urlencode access_type=offline \
  --data-urlencode "service=$REG_K1_SERVICE" --data-urlencode client_id=test --cacert "$REG_K1_CA" "$REG_K1_TOKEN_REALM" | jq -r .refresh_token)
[ -n "$refresh" ] && [ "$refresh" != null ] || fail "the issuer gave no refresh token"
"$LOCKSTEP" logout -q --all >/dev/null 2>&1 || true
mkdir -p "$WORK/docker-idt"
jq -n --arg h "$REG_K1_HOST" --arg t "$refresh" '{auths: {($h): {identitytoken: $t}}}' >"$WORK/docker-idt/config.json"
out=$(DOCKER_CONFIG="$WORK/docker-idt" LOCKSTEP_CACHE="$WORK/cache-idt" "$LOCKSTEP" exec \
  "docker://$REG_K1_HOST/team/bb:v1")
[ "$out" = "from the registry" ] || fail "exec with an identity token printed: $out"
[ "$(registry_token_requests k1 '.auth == "refresh_token" and .status == 200 and (.scopes | any(test("team/bb:pull")))')" -ge 1 ] ||
  fail "no refresh-grant token request: $(tail -3 "$REG_K1_TOKEN_LOG")"
jq -n --arg h "$REG_K1_HOST" '{auths: {($h): {identitytoken: "not-a-refresh-token"}}}' >"$WORK/docker-idt/config.json"
set +e
out=$(DOCKER_CONFIG="$WORK/docker-idt" LOCKSTEP_CACHE="$WORK/cache-idt2" "$LOCKSTEP" exec \
  "docker://$REG_K1_HOST/team/bb:v1" 2>&1)
rc=$?
set -e
[ "$rc" = 3 ] || fail "a refused identity token: exit $rc: $out"
! grep -q "not-a-refresh-token" <<<"$out" || fail "the identity token appears in the message: $out"
pass "an identity token in Docker's config.json is exchanged with the refresh grant; a refused one is exit 3 and never shown"

echo "all $TESTS_RUN registry checks passed"
