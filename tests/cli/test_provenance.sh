#!/usr/bin/env bash
# Provenance: a spec in a git work tree records the commit, whether tracked files were modified,
# and the origin URL without credentials; --no-vcs leaves git out; outside git nothing is recorded.
source "$(dirname "$0")/lib.sh"
need git jq

mkdir -p repo/app/src
printf 'v1\n' >repo/app/src/file.txt
printf 'lockstep: 1\nname: prov\ncopy: [{from: ./src, to: /src}]\n' >repo/app/lockstep.yaml
git -C repo init -q
git -C repo -c user.name=t -c user.email=t@example.com add -A
git -C repo -c user.name=t -c user.email=t@example.com commit -qm init
git -C repo remote add origin https://alice:s3cret@git.example.com/team/envs.git
head=$(git -C repo rev-parse HEAD)

annotations() { # LAYOUT
  local m
  m=$(jq -r '.manifests[0].digest' "$1/index.json" | cut -d: -f2)
  jq -c '.annotations' "$1/blobs/sha256/$m"
}

ls_run build repo/app/lockstep.yaml --oci clean
assert_eq 0 "$RC" "build in a clean work tree ($ERR)"
ann=$(annotations clean)
assert_eq "$head" "$(jq -r '.["org.opencontainers.image.revision"]' <<<"$ann")" "revision"
assert_eq false "$(jq -r '.["dev.lockstep.source.dirty"]' <<<"$ann")" "dirty flag"
assert_eq "https://git.example.com/team/envs.git" "$(jq -r '.["org.opencontainers.image.source"]' <<<"$ann")" "source"
pass "a clean work tree records the commit, dirty=false, and the origin URL without credentials"

printf 'untracked\n' >repo/notes.txt
ls_run build repo/app/lockstep.yaml --oci untracked
assert_eq false "$(annotations untracked | jq -r '.["dev.lockstep.source.dirty"]')" "untracked files"
pass "untracked files do not make the tree dirty"

printf 'v2\n' >repo/app/src/file.txt
ls_run build repo/app/lockstep.yaml --oci dirty
assert_eq true "$(annotations dirty | jq -r '.["dev.lockstep.source.dirty"]')" "modified tracked file"
pass "a modified tracked file marks the build dirty"

ls_run build repo/app/lockstep.yaml --oci novcs --no-vcs
assert_eq null "$(annotations novcs | jq -r '.["org.opencontainers.image.revision"]')" "--no-vcs"
pass "--no-vcs records no git information"

mkdir -p plain/src && echo x >plain/src/x
printf 'lockstep: 1\nname: plain\ncopy: [{from: ./src, to: /x}]\n' >plain/lockstep.yaml
ls_run build plain/lockstep.yaml --oci plain-out
assert_eq null "$(annotations plain-out | jq -r '.["org.opencontainers.image.revision"]')" "outside git"
pass "a spec outside any git work tree records no revision"

done_testing
