#!/usr/bin/env bash
# `lockstep diff A B` on real locks and builds from the hermetic apt repository: changing one package
# (pinning ls-lib=1.0-1 instead of the newest 2.0-1) or adding one (ls-alt) shows exactly that change,
# whichever pair is compared: lock/lock, image/image (OCI layout and SIF), lock/image and spec/lock.
# An image is the same as the lock it was built from (exit 0). A doctor snapshot compares its Python
# packages with a lock's wheels. Inputs are recognised by content; anything else is exit 2.
source "$(dirname "$0")/lib.sh"
need jq gpg dpkg-deb

fixture_repo make-repo.sh repo >/dev/null 2>&1 || fail "make-repo.sh failed"

write_spec() { # NAME APT...
  local name=$1
  shift
  cat >"$name.yaml" <<YAML
lockstep: 1
name: $name
repos:
  - {apt: repo, suite: lstest, components: [main], keyring: repo/keyring.gpg}
packages:
  apt: [$(IFS=,; echo "$*")]
outputs: {oci: $name-out, sif: $name.sif}
YAML
}
write_spec a ls-app
write_spec b ls-app "ls-lib=1.0-1"
write_spec c ls-app ls-alt
for s in a b c; do
  ls_run lock "$s.yaml"
  assert_eq 0 "$RC" "lock $s: $ERR"
done
for s in a b; do
  ls_run build --locked "$s.yaml"
  assert_eq 0 "$RC" "build $s: $ERR"
done
assert_eq "ls-app 1.0-1
ls-data 1.0-1
ls-lib 2.0-1" "$(jq -r '.artifacts[] | "\(.name) \(.version)"' a.lock)" "a.lock"

# ---- one package changed ---------------------------------------------------------------------------
ls_run diff a.lock b.lock
assert_eq 1 "$RC" "diff of two locks that differ: $ERR"
assert_eq "A: lock a.lock
B: lock b.lock
STATUS   KIND  NAME    A      B
changed  deb   ls-lib  2.0-1  1.0-1
1 changed, 0 added, 0 removed, 2 the same (deb, git, python, stack)" "$OUT" "lock vs lock"
ls_run diff --json a.lock b.lock
assert_eq 1 "$RC" "diff --json"
assert_eq '{"a":{"kind":"lock","what":"a.lock"},"b":{"kind":"lock","what":"b.lock"},"changes":[{"change":"changed","kind":"deb","name":"ls-lib","a":"2.0-1","b":"1.0-1"}],"same":2,"compared":["deb","git","python","stack"],"skipped":[]}' \
  "$OUT" "lock vs lock as JSON"
pass "two locks: exactly the changed package, as a table and as JSON (exit 1)"

ls_run diff oci:a-out b-out
assert_eq 1 "$RC" "diff of two images"
assert_eq "A: image oci:a-out
B: image oci:b-out
STATUS   KIND  NAME    A      B
changed  deb   ls-lib  2.0-1  1.0-1
1 changed, 0 added, 0 removed, 2 the same (deb, python, stack)" "$OUT" "image vs image"
ls_run diff a.sif b.sif
assert_eq 1 "$RC" "diff of two SIFs"
assert_eq "changed  deb   ls-lib  2.0-1  1.0-1" "$(sed -n 4p <<<"$OUT")" "SIF vs SIF"
assert_eq 5 "$(wc -l <<<"$OUT")" "one row"
pass "two images (OCI layouts, SIFs): exactly the changed package, read from their dpkg databases"

ls_run diff a.lock a-out
assert_eq 0 "$RC" "an image against the lock it was built from: $OUT"
assert_eq "0 changed, 0 added, 0 removed, 3 the same (deb, python, stack); not compared: git" "$(tail -n 1 <<<"$OUT")" \
  "the summary"
ls_run diff b.lock a.sif
assert_eq 1 "$RC" "an image against another lock"
assert_eq "changed  deb   ls-lib  1.0-1  2.0-1" "$(sed -n 4p <<<"$OUT")" "lock vs image"
assert_eq 5 "$(wc -l <<<"$OUT")" "one row"
pass "an image is what its lock says (exit 0); against another lock, exactly the changed package"

ls_run diff b.yaml a.lock
assert_eq 1 "$RC" "a spec against a lock with another version"
assert_eq "A: spec b.yaml
B: lock a.lock
STATUS   KIND  NAME    A      B
changed  deb   ls-lib  1.0-1  2.0-1
1 changed, 0 added, 0 removed, 1 the same (deb, git, python); not compared: stack" "$OUT" "spec vs lock"
ls_run diff a.yaml a.lock
assert_eq 0 "$RC" "a spec against its own lock: $OUT"
pass "a spec against a lock compares only what the spec asks for: the pinned version differs"

# ---- one package added ------------------------------------------------------------------------------
ls_run diff a.lock c.lock
assert_eq 1 "$RC" "a lock with one package more"
assert_eq "STATUS  KIND  NAME    A  B
added   deb   ls-alt  -  1.0-1" "$(sed -n 3,4p <<<"$OUT")" "the added package"
assert_eq 5 "$(wc -l <<<"$OUT")" "one row"
ls_run diff --json c.lock a-out
assert_eq '[{"change":"removed","kind":"deb","name":"ls-alt","a":"1.0-1","b":null}]' "$(jq -c .changes <<<"$OUT")" \
  "lock vs image, one package fewer in the image"
pass "a package added to the lock shows as exactly one added (or removed) row"

# ---- a doctor snapshot against a lock ----------------------------------------------------------------
cat >snap.json <<'JSON'
{"lockstep-snapshot": 1, "tool": "lockstep 0.1.0",
 "host": {"arch": "x86_64", "os": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-18-amd64", "glibc": "2.36",
          "user_namespaces": true, "driver": null, "gpus": [], "mpi": null,
          "pmix": null, "ucx": null, "libfabric": null, "slurm": null},
 "python": {"kind": "venv", "prefix": "/home/u/venv", "version": "3.11.2",
            "packages": [{"name": "NumPy", "version": "1.26.4", "from": "dist-info", "installer": "pip",
                          "build": null, "channel": null}]}}
JSON
ls_run diff snap.json a.lock
assert_eq 1 "$RC" "a snapshot against a lock without wheels: $ERR"
assert_eq "removed  python-package  numpy  1.26.4  -" "$(sed -n 4p <<<"$OUT")" "the snapshot's package, by its normalised name"
assert_eq "0 changed, 0 added, 1 removed, 0 the same (python); not compared: deb, git, host, stack" "$(tail -n 1 <<<"$OUT")" \
  "only Python packages are comparable"
ls_run diff snap.json snap.json
assert_eq 0 "$RC" "a snapshot against itself: $OUT"
assert_eq "0 changed, 0 added, 0 removed, 7 the same (host, python)" "$(tail -n 1 <<<"$OUT")" "host facts and packages"
# The same from a snapshot `lockstep doctor` captures of a virtual environment.
mkdir -p venv/lib/python3.11/site-packages/NumPy-1.26.4.dist-info
printf 'home = /usr/bin\nversion = 3.11.2\n' >venv/pyvenv.cfg
printf 'Metadata-Version: 2.1\nName: NumPy\nVersion: 1.26.4\n' >venv/lib/python3.11/site-packages/NumPy-1.26.4.dist-info/METADATA
"$LOCKSTEP" doctor --json --python "$WORK/venv" >doctor.json 2>/dev/null || fail "lockstep doctor --json failed"
ls_run diff doctor.json a.lock
assert_eq 1 "$RC" "a doctor snapshot against a lock: $ERR"
assert_eq "removed  python-package  numpy  1.26.4  -" "$(sed -n 4p <<<"$OUT")" "the venv's package"
assert_eq 5 "$(wc -l <<<"$OUT")" "one row: host facts are not compared with a lock"
pass "a doctor snapshot's Python packages compare with a lock's wheels by name"

# ---- inputs diff refuses ---------------------------------------------------------------------------
printf 'just some notes\n' >notes.txt
ls_run diff a.lock notes.txt
assert_eq 2 "$RC" "an unknown file"
assert_eq "lockstep: error: 'notes.txt' is not a spec, a lock, an image or a doctor snapshot; diff takes a spec (lockstep.yaml), a lock (lockstep.lock), an image (oci:DIR, an OCI layout directory, an OCI or docker archive, a SIF file, dir:ROOT) or a \`lockstep doctor --json\` snapshot" \
  "$ERR" "the error lists the accepted kinds"
jq '.artifacts[0].sha256 = "nope"' a.lock >bad.lock
ls_run diff bad.lock a.lock
assert_eq 2 "$RC" "a malformed lock"
assert_contains "$ERR" "bad.lock: artifacts[0].sha256" "the error names the key"
ls_run diff a.lock missing.lock
assert_eq 2 "$RC" "a missing file"
assert_contains "$ERR" "can't read 'missing.lock'" "the error names the file"
pass "unknown, malformed and missing inputs are exit 2, saying what diff takes"

done_testing
