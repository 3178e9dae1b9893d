#!/usr/bin/env bash
# Peers judge the output: skopeo reads and converts our OCI layout, OCI archive and docker-archive;
# umoci unpacks the layout, and the unpacked tree equals the input (contents, modes, symlinks,
# hard links, empty directories).
source "$(dirname "$0")/lib.sh"
need skopeo umoci jq

mkdir -p proj/files/bin proj/files/empty proj/files/deep/a/b/c proj/files/conf.d
printf 'hello\n' >proj/files/hello.txt
printf '#!/bin/sh\necho hi\n' >proj/files/bin/tool
chmod 0775 proj/files/bin/tool
printf 'secret' >proj/files/conf.d/app.conf
chmod 0600 proj/files/conf.d/app.conf
ln -s ../hello.txt proj/files/bin/link-to-hello
ln -s /etc/passwd proj/files/abs-link
ln proj/files/hello.txt proj/files/hard-hello
printf 'x%.0s' $(seq 1 300) >proj/files/deep/a/b/c/"long name with spaces and ünicode.txt"
head -c 3000000 /dev/urandom >proj/files/big.bin
cat >proj/lockstep.yaml <<'YAML'
lockstep: 1
name: peers
copy:
  - {from: ./files, to: /srv/app}
env: {APP_MODE: test, PATH: /srv/app/bin}
labels: {org.example.suite: peers}
entrypoint: [/srv/app/bin/tool]
cmd: [--verbose]
workdir: /srv/app
user: "1000:1000"
outputs:
  oci: out/layout
  oci_archive: out/image.oci.tar
  docker_archive: out/image.docker.tar
YAML

ls_run build proj/lockstep.yaml --tag v1
assert_eq 0 "$RC" "build exit code ($ERR)"
digest=$(last_line "$OUT")
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || fail "last line is not a digest: $digest"
pass "build prints the manifest digest as its last line"

raw=$(skopeo inspect --raw oci:proj/out/layout:v1)
assert_eq "$digest" "sha256:$(printf '%s' "$raw" | sha256sum | cut -d' ' -f1)" "manifest digest"
assert_eq "application/vnd.oci.image.manifest.v1+json" "$(jq -r .mediaType <<<"$raw")" "manifest media type"
assert_eq "application/vnd.oci.image.layer.v1.tar+gzip" "$(jq -r '.layers[0].mediaType' <<<"$raw")" "layer media type"
pass "skopeo reads the OCI layout and the manifest hashes to the printed digest"

cfg=$(skopeo inspect --config oci:proj/out/layout:v1)
assert_eq '["/srv/app/bin/tool"]' "$(jq -c .config.Entrypoint <<<"$cfg")" "Entrypoint"
assert_eq '["--verbose"]' "$(jq -c .config.Cmd <<<"$cfg")" "Cmd"
assert_eq '["APP_MODE=test","PATH=/srv/app/bin"]' "$(jq -c .config.Env <<<"$cfg")" "Env"
assert_eq "/srv/app" "$(jq -r .config.WorkingDir <<<"$cfg")" "WorkingDir"
assert_eq "1000:1000" "$(jq -r .config.User <<<"$cfg")" "User"
assert_eq "peers" "$(jq -r '.config.Labels["org.example.suite"]' <<<"$cfg")" "label"
assert_eq "1970-01-01T00:00:00Z" "$(jq -r .created <<<"$cfg")" "created"
assert_eq "amd64 linux" "$(jq -r '.architecture + " " + .os' <<<"$cfg")" "platform"
assert_eq 1 "$(jq '.rootfs.diff_ids | length' <<<"$cfg")" "diff_ids"
assert_eq 1 "$(jq '[.history[] | select(.empty_layer != true)] | length' <<<"$cfg")" "history entries"
pass "the config carries entrypoint, cmd, env, workdir, user, labels, diff_ids and history"

ann=$(jq -c .annotations <<<"$raw")
assert_contains "$ann" '"org.opencontainers.image.created":"1970-01-01T00:00:00Z"' "created annotation"
assert_contains "$ann" '"org.opencontainers.image.title":"peers"' "title annotation"
assert_contains "$ann" '"dev.lockstep.spec.digest":"sha256:' "spec digest annotation"
pass "the manifest carries org.opencontainers.image annotations and the spec digest"

assert_eq "$(skopeo inspect oci:proj/out/layout:v1 | jq -c .Layers)" \
  "$(skopeo inspect oci-archive:proj/out/image.oci.tar | jq -c .Layers)" "layers of the OCI archive"
assert_eq "$digest" "$(skopeo inspect oci-archive:proj/out/image.oci.tar | jq -r .Digest)" "OCI archive digest"
# skopeo presents docker-archive layers uncompressed: their digests are the diff_ids.
assert_eq "$(jq -c .rootfs.diff_ids <<<"$cfg")" \
  "$(skopeo inspect docker-archive:proj/out/image.docker.tar | jq -c .Layers)" "layers of the docker-archive"
assert_eq '["peers:v1"]' "$(tar -xOf proj/out/image.docker.tar manifest.json | jq -c '.[0].RepoTags')" "RepoTags"
pass "skopeo reads the OCI archive and the docker-archive with the same layers"

skopeo copy -q oci:proj/out/layout:v1 docker-archive:conv.tar:peers:copied
skopeo copy -q docker-archive:proj/out/image.docker.tar oci:roundtrip:rt
skopeo copy -q oci-archive:proj/out/image.oci.tar oci:roundtrip2:rt
assert_eq "$digest" "$(skopeo inspect oci:roundtrip2:rt | jq -r .Digest)" "digest after oci-archive -> oci"
pass "skopeo copy converts our layout to docker-archive and our archives back to OCI"

umoci unpack --rootless --image proj/out/layout:v1 bundle >/dev/null
# Modes are normalised (0644 / 0755); compare everything else exactly, then the modes by rule.
expected=$(tree_listing proj/files | awk '{ if ($2 == "f") { $3 = ($3 ~ /^[1357]/ ? "755" : "644") } else if ($2 == "d") { $3 = "755" }; print }')
assert_eq "$expected" "$(tree_listing bundle/rootfs/srv/app)" "unpacked tree (normalised modes)"
pass "umoci unpacks the layer into exactly the input tree (contents, symlinks, empty dirs, normalised modes)"

assert_eq "$(stat -c %i bundle/rootfs/srv/app/hello.txt)" "$(stat -c %i bundle/rootfs/srv/app/hard-hello)" "hard link inode"
assert_eq 2 "$(stat -c %h bundle/rootfs/srv/app/hello.txt)" "hard link count"
pass "hard links survive as hard links"

assert_eq "755" "$(stat -c %a bundle/rootfs/srv)" "implied parent dir mode"
pass "implied parent directories are created 0755"

# mode: preserve keeps permission bits (the 0600 file, the 0775 tool) exactly.
cat >proj/preserve.yaml <<'YAML'
lockstep: 1
name: preserve
copy: [{from: ./files, to: /, mode: preserve}]
YAML
ls_run build proj/preserve.yaml --oci out-preserve
assert_eq 0 "$RC" "preserve build ($ERR)"
umoci unpack --rootless --image out-preserve:latest bundle2 >/dev/null
assert_eq "$(tree_listing proj/files)" "$(cd bundle2/rootfs && tree_listing . | grep -v '^\. ')" "preserved tree"
pass "mode: preserve keeps the exact permission bits"

done_testing
