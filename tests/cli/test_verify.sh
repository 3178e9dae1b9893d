#!/usr/bin/env bash
# `lockstep verify` on real builds: an image built from a lock (Debian packages from the hermetic
# apt repository, wheels from a wheelhouse) verifies as an OCI layout, an OCI archive, a
# docker-archive and a SIF; dpkg (`dpkg --verify`) and Python (importlib.metadata's RECORD hashes)
# judge the same unpacked image alongside. Then one file is tampered with inside a layer (the layer
# blob rewritten by Python and every digest fixed up, so that skopeo and umoci still read a valid
# image), and a conffile and a wheel file are changed by umoci repack: verify names each file and its
# package (exit 1). A lock that is not the image's is refused with the package that differs; hostile
# and corrupt images (a RECORD row leaving the image, a garbage dpkg status, a corrupt blob) are
# invalid input (exit 2) with located messages.
source "$(dirname "$0")/lib.sh"
need jq python3 gpg gpgconf dpkg-deb dpkg skopeo umoci

# ---- inputs: the apt repository, a flat repository with a (fake) Python, a wheelhouse ------------
fixture_repo make-repo.sh repo >/dev/null 2>&1 || fail "make-repo.sh failed"

# A flat repository with the Debian packages that give the image its Python (docs only: the wheels
# are checked by records here, never run).
make_python_apt_repo "$WORK/pyrepo"

mkdir -p wheelhouse
make_wheel wheelhouse demo 1.0 '' '[console_scripts]\ndemo-cli = demo:main\n' 'demo/__init__.py=def main():\n    print("demo")\n' >/dev/null
make_wheel wheelhouse dep 1.0 '' '' 'dep/__init__.py=VALUE = 42\n' >/dev/null

write_spec() { # FILE APT...
  local file=$1
  shift
  cat >"$file" <<YAML
lockstep: 1
name: verifytest
repos:
  - {apt: repo, suite: lstest, components: [main], keyring: repo/keyring.gpg}
  - {apt: pyrepo, flat: true, keyring: pyrepo/keyring.gpg}
  - {wheels: wheelhouse}
packages:
  apt: [$(IFS=,; echo "$*")]
  pip: ["demo==1.0", "dep==1.0"]
outputs: {oci: out, oci_archive: out.oci.tar, docker_archive: out.docker.tar, sif: out.sif}
YAML
}
write_spec lockstep.yaml ls-app ls-tools python3
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
ls_run build --locked
assert_eq 0 "$RC" "build: $ERR"
digest=$(last_line "$OUT")
ndebs=$(jq '[.artifacts[] | select(.kind == "deb")] | length' lockstep.lock)

# ---- a faithful image verifies in every form ------------------------------------------------------
ls_run verify oci:out
assert_eq 0 "$RC" "verify oci:out: $OUT $ERR"
files=$("$LOCKSTEP" verify --json oci:out | jq .checked.files)
assert_eq "oci:out ($digest): $((ndebs + 2)) packages ($ndebs debs, 2 wheels), $files files checked: ok" "$OUT" "the summary"
for image in out out.oci.tar out.docker.tar docker-archive:out.docker.tar oci-archive:out.oci.tar out.sif; do
  ls_run verify "$image" --lock lockstep.lock --json
  assert_eq 0 "$RC" "verify $image --lock: $OUT $ERR"
  assert_eq "true $ndebs 2 $files []" "$(jq -r '"\(.ok) \(.checked.debs) \(.checked.wheels) \(.checked.files) \(.problems)"' <<<"$OUT")" \
    "verify $image --json"
done
assert_eq "lockstep.lock" "$(jq -r .lock <<<"$OUT")" "the lock in the JSON"
pass "the image built from the lock verifies as an OCI layout, OCI archive, docker-archive and SIF, against its lock"

# The peers agree on the same image: dpkg --verify finds nothing, nor does a RECORD check by
# importlib.metadata (pip's own reading of the records).
umoci unpack --rootless --image out:latest bundle >/dev/null
root=bundle/rootfs
assert_eq "" "$(dpkg --root="$root" --verify 2>&1)" "dpkg --verify on the unpacked image"
record_check() { # ROOT: prints "path" for each RECORD file whose sha256 or size differs
  python3 - "$1" <<'PY'
import base64, hashlib, importlib.metadata, pathlib, sys
site = pathlib.Path(sys.argv[1]) / "usr/local/lib/python3.11/dist-packages"
for dist in importlib.metadata.distributions(path=[str(site)]):
    for f in dist.files or []:
        if f.hash is None:
            continue
        p = pathlib.Path(f.locate())
        data = p.read_bytes() if p.is_file() else None
        if data is None or len(data) != f.size or \
           base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode() != f.hash.value:
            print(p.resolve().relative_to(pathlib.Path(sys.argv[1]).resolve()))
PY
}
assert_eq "" "$(record_check "$root")" "importlib.metadata's RECORD hashes on the unpacked image"
pass "dpkg --verify and importlib.metadata agree: nothing differs"

# ---- one file changed inside a layer blob, every digest fixed up ----------------------------------
# Python rewrites the layer that holds libls.so.1 (same members, one file's bytes changed), then the
# config's diff_id, the manifest's layer and config descriptors and index.json: a valid image.
cp -a out tampered
python3 - tampered usr/lib/x86_64-linux-gnu/libls.so.1 <<'PY'
import gzip, hashlib, io, json, pathlib, sys, tarfile
layout, target = pathlib.Path(sys.argv[1]), sys.argv[2]
def blob(d): return layout / "blobs" / "sha256" / d.split(":")[1]
def put(data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    blob(d).write_bytes(data)
    return d, len(data)
index = json.loads((layout / "index.json").read_text())
manifest = json.loads(blob(index["manifests"][0]["digest"]).read_bytes())
config = json.loads(blob(manifest["config"]["digest"]).read_bytes())
for i, layer in enumerate(manifest["layers"]):
    raw = gzip.decompress(blob(layer["digest"]).read_bytes())
    names = tarfile.open(fileobj=io.BytesIO(raw)).getnames()
    if target not in names and "./" + target not in names:
        continue
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name.lstrip("./") == target:
                data = b"libls 2.0-1 with a backdoor\n"
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    tar = out.getvalue()
    config["rootfs"]["diff_ids"][i] = "sha256:" + hashlib.sha256(tar).hexdigest()
    layer["digest"], layer["size"] = put(gzip.compress(tar, mtime=0))
    break
else:
    sys.exit(f"no layer has {target}")
manifest["config"]["digest"], manifest["config"]["size"] = put(json.dumps(config).encode())
index["manifests"][0]["digest"], index["manifests"][0]["size"] = put(json.dumps(manifest).encode())
(layout / "index.json").write_text(json.dumps(index))
PY
skopeo inspect oci:tampered:latest >/dev/null || fail "skopeo can't read the tampered image"
umoci unpack --rootless --image tampered:latest tampered-bundle >/dev/null || fail "umoci can't unpack the tampered image"
assert_contains "$(dpkg --root=tampered-bundle/rootfs --verify 2>&1)" "??5?????? " "dpkg --verify sees the changed file"
assert_contains "$(dpkg --root=tampered-bundle/rootfs --verify 2>&1)" "/usr/lib/x86_64-linux-gnu/libls.so.1" "dpkg names it"
ls_run verify tampered --lock lockstep.lock
assert_eq 1 "$RC" "verify of the tampered image: $OUT $ERR"
assert_eq "/usr/lib/x86_64-linux-gnu/libls.so.1: md5 differs from ls-lib's record" "$(head -n -1 <<<"$OUT")" \
  "exactly the tampered file, with its package"
assert_contains "$(tail -n 1 <<<"$OUT")" "files checked against lockstep.lock: 1 problem" "the summary"
ls_run verify tampered --json
assert_eq '[{"kind":"md5","package":"ls-lib","path":"/usr/lib/x86_64-linux-gnu/libls.so.1","message":"/usr/lib/x86_64-linux-gnu/libls.so.1: md5 differs from ls-lib'"'"'s record"}]' \
  "$(jq -c .problems <<<"$OUT")" "the problem as JSON"
pass "a file changed inside a layer (digests fixed up, skopeo and umoci accept it) is named with its package (exit 1)"

# ---- a conffile and a wheel's file changed by umoci repack (a new layer on top) -----------------------
cp -a out repacked
umoci unpack --rootless --image repacked:latest repacked-bundle >/dev/null
printf 'colour = red\n' >repacked-bundle/rootfs/etc/ls-app.conf
printf 'VALUE = 43\n' >repacked-bundle/rootfs/usr/local/lib/python3.11/dist-packages/dep/__init__.py
umoci repack --image repacked:latest repacked-bundle >/dev/null || fail "umoci repack failed"
assert_eq "usr/local/lib/python3.11/dist-packages/dep/__init__.py" "$(record_check repacked-bundle/rootfs)" \
  "importlib.metadata's RECORD hashes see the changed wheel file"
assert_contains "$(dpkg --root=repacked-bundle/rootfs --verify 2>&1)" "??5?????? c /etc/ls-app.conf" "dpkg --verify sees the conffile"
ls_run verify oci:repacked
assert_eq 1 "$RC" "verify of the repacked image: $OUT $ERR"
assert_eq "/etc/ls-app.conf: conffile md5 differs from ls-app's record
/usr/local/lib/python3.11/dist-packages/dep/__init__.py: sha256 differs from dep 1.0's RECORD" "$(head -n -1 <<<"$OUT")" \
  "the conffile and the wheel file, each with its package"
pass "a changed conffile and a changed wheel file (umoci repack) are named with their packages (exit 1)"

# ---- a lock that is not the image's ---------------------------------------------------------------
write_spec other.yaml ls-app ls-tools python3 "ls-lib=1.0-1"
ls_run lock other.yaml
assert_eq 0 "$RC" "lock other.yaml: $ERR"
ls_run verify out --lock other.lock
assert_eq 1 "$RC" "verify against another lock: $OUT"
image_lock=$(jq -r '.annotations["dev.lockstep.lock.digest"]' "out/blobs/sha256/$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)")
assert_eq "sha256:$(sha256sum lockstep.lock | cut -d' ' -f1)" "$image_lock" "the image records its lock's digest"
assert_eq "image was built from a different lock (the image records $image_lock, other.lock is sha256:$(sha256sum other.lock | cut -d' ' -f1))" \
  "$(head -n 1 <<<"$OUT")" "the lock digests"
assert_eq "deb ls-lib: lock says 1.0-1, image has 2.0-1" "$(sed -n 2p <<<"$OUT")" "the package the locks differ in"
assert_eq 3 "$(wc -l <<<"$OUT")" "two problems and the summary"
pass "a different lock is refused: its digest, then the package at another version (exit 1)"

# ---- hostile and corrupt images: invalid input with located messages -------------------------------
cp -a out hostile
umoci unpack --rootless --image hostile:latest hostile-bundle >/dev/null
record=usr/local/lib/python3.11/dist-packages/dep-1.0.dist-info/RECORD
printf '../../../../../../../etc/passwd,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\r\n' \
  >>"hostile-bundle/rootfs/$record"
umoci repack --image hostile:latest hostile-bundle >/dev/null
ls_run verify hostile
assert_eq 2 "$RC" "a RECORD row leaving the image: $OUT"
n=$(grep -c . "hostile-bundle/rootfs/$record")
assert_eq "lockstep: error: oci:hostile:/$record: entry $n ('../../../../../../../etc/passwd') points outside the image" \
  "$ERR" "the error names the image, the RECORD and the entry"

mkdir -p garbage/var/lib/dpkg
printf 'Package: ls-app\nStatus: install ok installed\nVersion: 1.0-1\n\n\x01\x02 not a control file\n' >garbage/var/lib/dpkg/status
ls_run verify dir:garbage
assert_eq 2 "$RC" "a garbage dpkg status"
assert_contains "$ERR" "lockstep: error: dir:garbage:/var/lib/dpkg/status:5: " "the error names the file and line"

cp -a out corrupt
manifest=$(jq -r '.manifests[0].digest' corrupt/index.json | cut -d: -f2)
layer=$(jq -r '.layers[0].digest' "corrupt/blobs/sha256/$manifest" | cut -d: -f2)
chmod u+w "corrupt/blobs/sha256/$layer"
printf 'x' | dd of="corrupt/blobs/sha256/$layer" bs=1 seek=100 conv=notrunc 2>/dev/null
ls_run verify oci:corrupt
assert_eq 2 "$RC" "a corrupt blob"
assert_contains "$ERR" "sha256:$layer" "the error names the blob"

printf 'not an image\n' >notes.txt
ls_run verify notes.txt
assert_eq 2 "$RC" "a file that is not an image"
pass "hostile and corrupt images are invalid input (exit 2) with the file and line or entry"

done_testing
