#!/usr/bin/env bash
# Base images from an OCI layout or OCI archive: layers reused byte for byte, config carried
# forward, the base digest recorded, and a pinned digest enforced.
source "$(dirname "$0")/lib.sh"
need skopeo umoci jq

mkdir -p base/rootfs/etc app/src
printf 'base-os\n' >base/rootfs/etc/os-release
cat >base/lockstep.yaml <<'YAML'
lockstep: 1
name: base
copy: [{from: ./rootfs, to: /}]
env: {PATH: /usr/bin:/bin, LANG: C.UTF-8}
labels: {org.example.layer: base}
entrypoint: [/bin/sh]
cmd: [-l]
outputs: {oci: ../base-layout, oci_archive: ../base.oci.tar}
YAML
ls_run build base/lockstep.yaml --tag v1
assert_eq 0 "$RC" "base build ($ERR)"
base_digest=$(last_line "$OUT")
base_layer=$(skopeo inspect --raw oci:base-layout:v1 | jq -r '.layers[0].digest')

printf 'app\n' >app/src/app.txt
cat >app/lockstep.yaml <<YAML
lockstep: 1
name: app
base: {oci: ../base-layout}
copy: [{from: ./src, to: /opt/app}]
env: {LANG: en_US.UTF-8, APP: "1"}
labels: {org.example.layer: app}
cmd: [/opt/app/app.txt]
YAML
ls_run build app/lockstep.yaml --oci app-layout
assert_eq 0 "$RC" "app build ($ERR)"
raw=$(skopeo inspect --raw oci:app-layout:latest)
assert_eq 2 "$(jq '.layers | length' <<<"$raw")" "layer count"
assert_eq "$base_layer" "$(jq -r '.layers[0].digest' <<<"$raw")" "base layer reused"
cmp "base-layout/blobs/sha256/${base_layer#sha256:}" "app-layout/blobs/sha256/${base_layer#sha256:}" || fail "base layer bytes differ"
pass "the base's layer is reused byte for byte"

assert_eq "$base_digest" "$(jq -r '.annotations["org.opencontainers.image.base.digest"]' <<<"$raw")" "base.digest annotation"
assert_eq "oci:../base-layout" "$(jq -r '.annotations["org.opencontainers.image.base.name"]' <<<"$raw")" "base.name annotation"
pass "the manifest records the base digest and name"

cfg=$(skopeo inspect --config oci:app-layout:latest)
assert_eq '["LANG=en_US.UTF-8","PATH=/usr/bin:/bin","APP=1"]' "$(jq -c .config.Env <<<"$cfg")" "merged Env"
assert_eq '["/bin/sh"]' "$(jq -c .config.Entrypoint <<<"$cfg")" "inherited Entrypoint"
assert_eq '["/opt/app/app.txt"]' "$(jq -c .config.Cmd <<<"$cfg")" "overridden Cmd"
assert_eq app "$(jq -r '.config.Labels["org.example.layer"]' <<<"$cfg")" "overridden label"
assert_eq 2 "$(jq '.rootfs.diff_ids | length' <<<"$cfg")" "diff_ids"
assert_eq 2 "$(jq '.history | length' <<<"$cfg")" "history carried forward"
pass "the base config is carried forward and the spec overrides it"

umoci unpack --rootless --image app-layout:latest bundle >/dev/null
assert_eq "base-os" "$(cat bundle/rootfs/etc/os-release)" "base file"
assert_eq "app" "$(cat bundle/rootfs/opt/app/app.txt)" "app file"
pass "umoci unpacks base and application layers"

sed -i 's|{oci: ../base-layout}|{oci: ../base.oci.tar}|' app/lockstep.yaml
ls_run build app/lockstep.yaml --oci app-from-archive
assert_eq 0 "$RC" "build from an OCI archive base ($ERR)"
assert_eq "$(skopeo inspect --raw oci:app-layout:latest | jq -c .layers)" \
  "$(skopeo inspect --raw oci:app-from-archive:latest | jq -c .layers)" "layers from an archive base"
pass "a base in an OCI archive gives the same layers"

sed -i "s|{oci: ../base.oci.tar}|{oci: ../base-layout@$base_digest}|" app/lockstep.yaml
ls_run build app/lockstep.yaml --oci app-pinned
assert_eq 0 "$RC" "pinned build ($ERR)"
pass "a correct pin builds"

wrong=sha256:0000000000000000000000000000000000000000000000000000000000000000
sed -i "s|@$base_digest|@$wrong|" app/lockstep.yaml
ls_run build app/lockstep.yaml --oci app-wrong
assert_eq 2 "$RC" "wrong pin exit code"
assert_contains "$ERR" "app/lockstep.yaml:3:" "wrong pin location"
assert_contains "$ERR" "error: base.oci:" "wrong pin key path"
assert_contains "$ERR" "$wrong" "wrong pin names the pinned digest"
[ ! -e app-wrong ] || fail "output written despite a wrong pin"
pass "a wrong pin is a located error (exit 2) and writes nothing"

# A local base in the lock: `lockstep lock` records its manifest, config and platform; the tag
# rebuilt with other content is named by `lock --check` (exit 1), and `lock --update base` moves it.
sed -i "s|{oci: ../base-layout@$wrong}|{image: \"oci:../base-layout:v1\"}|" app/lockstep.yaml
ls_run lock app/lockstep.yaml
assert_eq 0 "$RC" "lock on a local base ($ERR)"
assert_eq "$base_digest" "$(jq -r .base.manifest app/lockstep.lock)" \
  "the lock's base manifest"
assert_eq "oci:../base-layout:v1" "$(jq -r .base.image app/lockstep.lock)" "the lock's base reference"
assert_eq "$(skopeo inspect --raw oci:base-layout:v1 | jq -r .config.digest)" "$(jq -r .base.config app/lockstep.lock)" \
  "the lock's base config"
ls_run lock --check app/lockstep.yaml
assert_eq 0 "$RC" "lock --check before the base moved ($ERR)"
printf 'base-os 2\n' >base/rootfs/etc/os-release
ls_run build base/lockstep.yaml --tag v1
assert_eq 0 "$RC" "base rebuild ($ERR)"
moved=$(last_line "$OUT")
[ "$moved" != "$base_digest" ] || fail "the rebuilt base has the same digest"
ls_run lock --check app/lockstep.yaml
assert_eq 1 "$RC" "lock --check after the base moved"
assert_contains "$ERR" "base: oci:../base-layout:v1 now names manifest $moved, the lock has $base_digest" \
  "lock --check names the move"
ls_run lock --update base app/lockstep.yaml # SPEC after the names
assert_eq 0 "$RC" "lock --update base ($ERR)"
assert_eq "$moved" "$(jq -r .base.manifest app/lockstep.lock)" "lock --update base moved it"
pass "a local base is locked by manifest, config and platform; lock --check names a rebuilt tag; lock --update base moves it"

done_testing
