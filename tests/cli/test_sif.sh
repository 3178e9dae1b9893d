#!/usr/bin/env bash
# SIF output (`--sif`, `outputs.sif`), judged by peers: siftool reads the objects, unsquashfs
# extracts a partition equal to the OCI rootfs (umoci raw unpack) plus the Apptainer layout,
# squashfuse and the kernel mount it at its offset, the action scripts run in a chroot of the mount,
# and the same inputs give the same bytes whatever the threads, umask, TZ or locale.
source "$(dirname "$0")/lib.sh"
need siftool unsquashfs umoci jq busybox

hello_spec="$LOCKSTEP_SOURCE_DIR/examples/hello/lockstep.yaml"

# "ID|GROUP|LINK|TYPE" per object, whitespace removed.
sif_objects() { siftool list "$1" | tail -n +4 | awk -F'|' '{ gsub(/ /, ""); print $1 "|" $2 "|" $3 "|" $5 }'; }
# The byte offset of the primary partition (object 5).
part_offset() { siftool info 5 "$1" | awk '/Offset:/ { print $2 }'; }
# A listing of a tree with owners: path type mode uid:gid size/target/hash.
owned_listing() { # DIR
  (cd "$1" && find . -mindepth 1 -printf '%p %y %m %U:%G %s %l\n' | LC_ALL=C sort | while read -r p y m o s l; do
    if [ "$y" = f ]; then
      echo "$p $y $m $o $s $(sha256sum <"$p" | cut -c1-16)"
    elif [ "$y" = d ]; then
      echo "$p $y $m $o"
    else
      echo "$p $y $m $o $l"
    fi
  done)
}

# --- the hello example ------------------------------------------------------------------------------
ls_run build "$hello_spec" --sif hello.sif --no-vcs
assert_eq 0 "$RC" "hello --sif ($ERR)"
digest=$(last_line "$OUT")
[ -x hello.sif ] || fail "the SIF is not executable (mode $(stat -c %a hello.sif))"
assert_eq "$(printf '%s\n' '1|1|NONE|Def.FILE' '2|1|NONE|JSON.Labels' '3|1|NONE|JSON.Generic' '4|1|NONE|JSON.Generic' \
  '5|1|NONE|FS(Squashfs/*System/amd64)')" "$(sif_objects hello.sif)" "siftool list"
pass "siftool lists the definition, labels, two JSON objects and the squashfs partition in group 1"

header=$(siftool header hello.sif)
assert_contains "$header" "Launch Script:        #!/usr/bin/env run-singularity" "launch script"
assert_contains "$header" "Primary Architecture: amd64" "header arch"
assert_contains "$header" "Created At:           1970-01-01 00:00:00 +0000 UTC" "created at the epoch"
assert_contains "$header" "Descriptors Free:     43" "free descriptors"
assert_contains "$header" "Data Offset:          32176" "data offset"
grep -Eq '^ID: +[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' <<<"$header" ||
  fail "the SIF ID is not a version-5 UUID: $header"
info=$(siftool info 5 hello.sif)
assert_contains "$info" "Filesystem Type:  Squashfs" "partition fs"
assert_contains "$info" "Partition Type:   *System" "partition type"
assert_contains "$info" "Architecture:     amd64" "partition arch"
[ $(($(part_offset hello.sif) % 4096)) = 0 ] || fail "the partition is not 4096-aligned"
assert_contains "$(siftool info 4 hello.sif)" "Name:         oci-config.json" "oci-config name"
pass "siftool header and info: launch script, arch, epoch times, a v5 UUID, an aligned PrimSys squashfs"

siftool dump 1 hello.sif >deffile
cmp -s deffile "$hello_spec" || fail "Def.FILE is not the spec file"
assert_eq "$digest" "$(siftool dump 3 hello.sif | jq -r .manifest_digest)" "lockstep.json manifest digest"
assert_eq '["/opt/hello/bin/hello"]' "$(siftool dump 4 hello.sif | jq -c .Entrypoint)" "oci-config.json"
assert_eq "platform" "$(siftool dump 2 hello.sif | jq -r '.["org.example.team"]')" "labels object"
pass "the objects hold the spec, the labels, the digests and the OCI config"

siftool dump 5 hello.sif >hello.sqfs
unsquashfs -no-progress -d hello-root hello.sqfs >/dev/null
assert_eq "hello from lockstep" "$(grep -o 'hello from lockstep' hello-root/.singularity.d/env/10-docker2singularity.sh)" "env script"
assert_eq ".singularity.d/runscript" "$(readlink hello-root/singularity)" "singularity link"
for d in dev proc sys tmp home root var/tmp etc .singularity.d/libs; do
  [ -d "hello-root/$d" ] || fail "missing /$d"
done
[ -f hello-root/etc/hosts ] && [ ! -s hello-root/etc/hosts ] || fail "missing empty /etc/hosts"
cmp -s hello-root/.singularity.d/labels.json <(siftool dump 2 hello.sif) || fail "labels.json differs from the SIF object"
assert_eq "$(find "$LOCKSTEP_SOURCE_DIR/examples/hello/app" -type f | wc -l)" "$(find hello-root/opt/hello -type f | wc -l)" "app files"
pass "unsquashfs extracts the app, the Apptainer layout and the mount points"

# --- a base image of two layers with a whiteout -----------------------------------------------------
umoci init --layout base >/dev/null
umoci new --image base:v1 >/dev/null
umoci unpack --image base:v1 bundle >/dev/null
r=bundle/rootfs
mkdir -p "$r/bin" "$r/etc" "$r/usr/lib" "$r/opt/old" "$r/var/tmp" "$r/tmp"
cp "$(command -v busybox)" "$r/bin/busybox"
ln -s busybox "$r/bin/sh"
ln -s busybox "$r/bin/cat"
ln -s busybox "$r/bin/printf"
ln -s usr/lib "$r/lib"
printf 'ID=base\n' >"$r/etc/os-release"
printf 'stale\n' >"$r/etc/gone"
printf 'old\n' >"$r/opt/old/file"
printf 'shared\n' >"$r/usr/lib/data"
ln "$r/usr/lib/data" "$r/usr/lib/data-link"
printf 'suid\n' >"$r/bin/tool" && chmod 4755 "$r/bin/tool"
chmod 1777 "$r/tmp"
chown 1000:1000 "$r/opt/old/file"
umoci repack --image base:v1 bundle >/dev/null
rm "$r/etc/gone"
rm -r "$r/opt/old"
printf 'new\n' >"$r/opt/new"
printf 'ID=base2\n' >"$r/etc/os-release"
chown 1000:1000 "$r/opt/new"
mknod "$r/etc/null" c 1 3 2>/dev/null || true # root only: a device node in a layer
umoci repack --image base:v1 bundle >/dev/null
umoci config --image base:v1 --config.env FOO=bar --config.cmd /bin/cat --config.cmd /etc/os-release >/dev/null

mkdir -p app/src
printf 'from the app\n' >app/src/msg
cat >app/lockstep.yaml <<'YAML'
lockstep: 1
name: app
base: {oci: ../base, tag: v1}
copy: [{from: ./src, to: /opt/app}]
env: {GREETING: "hi there", QUOTED: "a \"b\" $c"}
outputs: {sif: ../from-spec.sif}
YAML
ls_run build app/lockstep.yaml --no-vcs
assert_eq 0 "$RC" "outputs.sif build ($ERR)"
[ -f from-spec.sif ] || fail "outputs.sif was not written"
pass "outputs.sif in the spec writes the SIF"

ls_run build app/lockstep.yaml --no-vcs --oci app-oci --sif app.sif
assert_eq 0 "$RC" "app --oci --sif ($ERR)"
cmp -s app.sif from-spec.sif || fail "--sif and outputs.sif give different files"

umoci raw unpack --image app-oci:latest oci-root >/dev/null 2>&1
siftool dump 5 app.sif >app.sqfs
unsquashfs -no-progress -d sq-root app.sqfs >/dev/null
[ ! -e sq-root/etc/gone ] && [ ! -e sq-root/opt/old ] || fail "whited-out paths are in the squashfs"
# Everything the OCI rootfs has, the squashfs has, with the same type, mode, owner and content.
# Device nodes are not image content (docs/sif.md, docs/unpack.md: the one layer model skips them,
# as lockstep exec's unpacker does); umoci creates them as root, so they leave its listing.
owned_listing oci-root | grep -Ev '^[^ ]+ [cb] ' >oci.list || true
owned_listing sq-root >sq.list
if grep -Eq '^[^ ]+ [cb] ' sq.list; then fail "the squashfs holds a device node: $(grep -E '^[^ ]+ [cb] ' sq.list)"; fi
added='^\./(\.singularity\.d|singularity|\.run|\.exec|\.test|\.shell|environment|dev|proc|sys|home|root|etc/hosts|etc/resolv\.conf)( |/)'
grep -Ev "$added" sq.list >sq-minus-layout.list || true
diff oci.list sq-minus-layout.list >listing.diff || fail "squashfs differs from the OCI rootfs: $(cat listing.diff)"
assert_contains "$(cat sq.list)" "./bin/tool f 4755 0:0" "setuid kept"
assert_contains "$(cat sq.list)" "./opt/new f 644 1000:1000" "ownership kept"
pass "unsquashfs -d of the partition equals umoci raw unpack of the OCI image, plus the Apptainer layout"

unsquashfs -lln app.sqfs | grep -Eo ' [0-9]{4}-[0-9]{2}-[0-9]{2} ' | sort -u | tr -d ' ' >dates
assert_eq "1970-01-01" "$(cat dates)" "mtimes clamped to the epoch"
links=$(stat -c %h sq-root/usr/lib/data)
assert_eq 2 "$links" "hard link count"
pass "mtimes are clamped to the epoch and hard links survive"

off=$(part_offset app.sif)
if [ -e /dev/fuse ] && command -v squashfuse >/dev/null; then
  mkdir -p mnt-fuse
  squashfuse -o "offset=$off" app.sif mnt-fuse
  trap '{ mountpoint -q "$WORK/mnt-fuse" && fusermount3 -u "$WORK/mnt-fuse"; } 2>/dev/null || true; cd /; rm -rf "$WORK"' EXIT
  owned_listing mnt-fuse >fuse.list
  diff sq.list fuse.list >fuse.diff || fail "squashfuse view differs: $(cat fuse.diff)"
  pass "squashfuse mounts the partition at offset $off and shows the same tree"
  if [ "$(id -u)" = 0 ]; then
    chroot=$(command -v chroot)
    out=$(env -i "$chroot" mnt-fuse /bin/sh /.singularity.d/actions/exec /bin/sh -c 'printf "%s|%s|%s" "$FOO" "$GREETING" "$QUOTED"')
    assert_eq 'bar|hi there|a "b" $c' "$out" "exec action environment"
    assert_eq "ID=base2" "$(env -i "$chroot" mnt-fuse /bin/sh /.singularity.d/actions/run)" "run action (CMD)"
    assert_eq "from the app" "$(env -i "$chroot" mnt-fuse /bin/sh /.singularity.d/actions/run /bin/cat /opt/app/msg)" "run with args"
    pass "the action scripts run the image's CMD and environment in a chroot of the mount"
  fi
  fusermount3 -u mnt-fuse
fi
if [ "$(id -u)" = 0 ]; then
  mkdir -p mnt-loop
  mount -t squashfs -o "loop,ro,offset=$off" app.sif mnt-loop
  owned_listing mnt-loop >loop.list
  umount mnt-loop
  diff sq.list loop.list >loop.diff || fail "kernel mount view differs: $(cat loop.diff)"
  pass "the kernel mounts the partition (loop, offset $off) and shows the same tree"
elif [ -n "${CI:-}" ]; then
  fail "the kernel mount check needs root"
fi

# --- determinism and the cache ----------------------------------------------------------------------
sum() { sha256sum "$1" | cut -d' ' -f1; }
ref=$(sum app.sif)
(
  export LOCKSTEP_CACHE="$WORK/cache2" LOCKSTEP_THREADS=1 TZ=Asia/Tokyo LC_ALL=C.UTF-8
  umask 077
  "$LOCKSTEP" build app/lockstep.yaml --no-vcs --sif threads1.sif >/dev/null 2>&1
)
assert_eq "$ref" "$(sum threads1.sif)" "SIF with 1 thread, umask 077, TZ, LC_ALL"
(
  export LOCKSTEP_CACHE="$WORK/cache3" LOCKSTEP_THREADS=3 TZ=America/New_York LC_ALL=C
  umask 022
  "$LOCKSTEP" build app/lockstep.yaml --no-vcs --sif threads3.sif >/dev/null 2>&1
)
assert_eq "$ref" "$(sum threads3.sif)" "SIF with 3 threads"
pass "the SIF is bit-for-bit the same across caches, thread counts, umask, TZ and locale"

ls_run build app/lockstep.yaml --no-vcs --sif again.sif --debug
assert_eq 0 "$RC" "rebuild ($ERR)"
assert_contains "$ERR" "SIF cache hit" "cache hit"
assert_eq "$ref" "$(sum again.sif)" "cached SIF bytes"
pass "a rebuild with no change re-exports the cached SIF"

SOURCE_DATE_EPOCH=1700000000 "$LOCKSTEP" build app/lockstep.yaml --no-vcs --sif epoch.sif >/dev/null 2>&1
assert_contains "$(siftool header epoch.sif)" "Created At:           2023-11-14 22:13:20 +0000 UTC" "SOURCE_DATE_EPOCH"
[ "$(sum epoch.sif)" != "$ref" ] || fail "another epoch gave the same SIF"
pass "SOURCE_DATE_EPOCH sets the SIF times"

ls_run build app/lockstep.yaml --no-vcs --sif zstd.sif --sif-compression zstd
assert_eq 0 "$RC" "zstd SIF ($ERR)"
siftool dump 5 zstd.sif >zstd.sqfs
assert_contains "$(unsquashfs -s zstd.sqfs)" "Compression zstd" "zstd superblock"
unsquashfs -no-progress -d zstd-root zstd.sqfs >/dev/null
owned_listing zstd-root >zstd.list
diff sq.list zstd.list >/dev/null || fail "zstd partition content differs"
pass "--sif-compression zstd gives a zstd squashfs with the same tree"

# An interrupted SIF build publishes nothing and leaves no temporary file behind.
mkdir -p big/src
head -c 48000000 /dev/urandom >big/src/noise
printf 'lockstep: 1\nname: big\ncopy: [{from: ./src, to: /data}]\n' >big/lockstep.yaml
"$LOCKSTEP" build big/lockstep.yaml --no-vcs --oci big-oci >/dev/null 2>&1 # the layer, cached
set +e
LOCKSTEP_THREADS=1 "$LOCKSTEP" build big/lockstep.yaml --no-vcs --sif big.sif --sif-compression xz 2>big.err &
pid=$!
# Interrupt once the SIF's temporary file exists, so the signal lands mid-write on any machine speed.
for _ in $(seq 1 600); do
  [ -z "$(find . -maxdepth 1 -name '.lockstep-tmp-big.sif-*' | head -1)" ] || break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
kill -INT "$pid"
wait "$pid"
rc=$?
set -e
assert_eq 130 "$rc" "interrupted SIF build ($(cat big.err))"
[ ! -e big.sif ] || fail "an interrupted build left big.sif"
leftovers=$(find . "$LOCKSTEP_CACHE/tmp" -name '.lockstep-tmp-*' | head -3)
assert_eq "" "$leftovers" "temporary files after an interrupt"
pass "an interrupted SIF build exits 130 and leaves neither the SIF nor temporary files"

ls_run build app/lockstep.yaml --sif bad.sif --sif-compression lzo
assert_eq 2 "$RC" "bad --sif-compression exit code"
assert_contains "$ERR" "--sif-compression" "bad compression message"
[ ! -e bad.sif ] || fail "a SIF was written despite a bad option"
pass "an unknown --sif-compression is a usage error (exit 2)"

done_testing
