#!/usr/bin/env bash
# Bit-for-bit: the same spec and inputs give the same manifest digest whatever the directory,
# umask, TZ, LANG, input mtimes, input creation order and core count. One digest is pinned.
source "$(dirname "$0")/lib.sh"

# make_project DIR ORDER UMASK MTIME: the same content, created differently.
make_project() {
  local dir=$1 order=$2 mask=$3 mtime=$4
  (
    umask "$mask"
    mkdir -p "$dir"
    local files=(a.txt b/c.txt b/d/e.txt run.sh z/empty-dir)
    if [ "$order" = reverse ]; then
      files=(z/empty-dir run.sh b/d/e.txt b/c.txt a.txt)
    fi
    for f in "${files[@]}"; do
      case "$f" in
        */empty-dir) mkdir -p "$dir/src/$f" ;;
        *) mkdir -p "$dir/src/$(dirname "$f")"; printf 'content of %s\n' "$f" >"$dir/src/$f" ;;
      esac
    done
    chmod u+x "$dir/src/run.sh"
    ln -sf a.txt "$dir/src/link"
    ln -f "$dir/src/a.txt" "$dir/src/hard"
    find "$dir/src" -exec touch -h -d "$mtime" {} +
    cat >"$dir/lockstep.yaml" <<'YAML'
# golden example
lockstep: 1
name: golden
copy:
  - {from: ./src, to: /opt/golden}
env: {B: "2", A: "1"}
labels: {org.example.golden: "yes"}
cmd: [/opt/golden/run.sh]
YAML
  )
}

make_project one normal 022 "2001-02-03 04:05:06"
make_project two-elsewhere reverse 077 "2024-05-06 07:08:09"

ls_run build one/lockstep.yaml --oci out1
assert_eq 0 "$RC" "first build ($ERR)"
d1=$(last_line "$OUT")
set +e
OUT=$(cd two-elsewhere && TZ=Asia/Kolkata LANG=de_DE.UTF-8 LC_ALL=de_DE.UTF-8 LOCKSTEP_THREADS=1 \
  bash -c 'umask 077; "$0" build lockstep.yaml --oci ../out2' "$LOCKSTEP" 2>"$WORK/.stderr")
RC=$?
set -e
assert_eq 0 "$RC" "second build ($(cat "$WORK/.stderr"))"
d2=$(last_line "$OUT")
assert_eq "$d1" "$d2" "digest across directory, umask, TZ, LANG, mtimes, creation order and threads"
pass "same inputs, different environment: same manifest digest ($d1)"

cmp <(cd out1 && find . -type f | LC_ALL=C sort | xargs sha256sum) <(cd out2 && find . -type f | LC_ALL=C sort | xargs sha256sum) ||
  fail "the two OCI layouts differ"
pass "the two OCI layouts are byte-identical"

ls_run build one/lockstep.yaml --oci out3 --compression zstd
z1=$(last_line "$OUT")
rm -rf "$LOCKSTEP_CACHE"
OUT=$(LOCKSTEP_THREADS=3 "$LOCKSTEP" build two-elsewhere/lockstep.yaml --oci out4 --compression zstd)
assert_eq "$z1" "$(last_line "$OUT")" "zstd digest across thread counts"
pass "zstd layers are identical for 2 and 3 threads"

# With SOURCE_DATE_EPOCH=2023-11-14, mtimes are clamped: later ones become the epoch, earlier ones
# (here 2001) are kept. Same inputs in another directory, order and umask: same digest.
make_project three reverse 077 "2001-02-03 04:05:06"
OUT=$(SOURCE_DATE_EPOCH=1700000000 "$LOCKSTEP" build one/lockstep.yaml --oci out5)
e1=$(last_line "$OUT")
[ "$e1" != "$d1" ] || fail "SOURCE_DATE_EPOCH did not change the digest"
OUT=$(SOURCE_DATE_EPOCH=1700000000 LOCKSTEP_THREADS=1 "$LOCKSTEP" build three/lockstep.yaml --oci out6)
assert_eq "$e1" "$(last_line "$OUT")" "digest with SOURCE_DATE_EPOCH"
OUT=$(SOURCE_DATE_EPOCH=1700000000 "$LOCKSTEP" build two-elsewhere/lockstep.yaml --oci out6b)
layer=$(jq -r '.layers[0].digest' "out6b/blobs/sha256/$(last_line "$OUT" | cut -d: -f2)" | cut -d: -f2)
assert_eq "1700000000" "$(gzip -dc "out6b/blobs/sha256/$layer" | tar -t --utc --full-time -v 2>/dev/null |
  awk '{ print $4 " " $5 }' | sort -u | xargs -I{} date -u -d {} +%s | sort -u)" "2024 mtimes clamped to the epoch"
pass "SOURCE_DATE_EPOCH is honoured and still reproducible"

ls_run build one/lockstep.yaml --oci out7 --docker-archive one.tar --oci-archive one.oci.tar
ls_run build two-elsewhere/lockstep.yaml --oci out8 --docker-archive two.tar --oci-archive two.oci.tar
cmp one.tar two.tar || fail "docker-archives differ"
cmp one.oci.tar two.oci.tar || fail "OCI archives differ"
pass "docker-archive and OCI archive files are byte-identical too"

# The pinned digest: changes only when the output format changes on purpose.
golden=sha256:21dee4b6da9b2c96a9f137a224d2ba521fbd9cc388cec36f06dd4657b06194d2
assert_eq "$golden" "$d1" "golden digest of the golden example (update it only for an intended format change)"
pass "golden digest"

done_testing
