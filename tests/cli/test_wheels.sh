#!/usr/bin/env bash
# Python wheels end to end: `lockstep lock` pins `packages.pip` against a wheelhouse directory and
# a PEP 503/691 index served on 127.0.0.1, and `lockstep build` installs the wheels into one layer
# that the host's python3 then imports and runs:
#   - the lock pins each wheel by URL, size and sha256 (deterministically), for the Python and
#     glibc the image gets from its (fake, signed, flat) apt repository;
#   - unpinned requirements are refused; unpinned or mismatched dependencies are all listed ("not
#     closed"); dependencies whose marker is false for the image are not required; sdist-only
#     projects, indexes without sha256 and images without Python are refused by name;
#   - PEP 658: with the index's METADATA file the wheel itself is not downloaded while locking;
#   - a tampered wheel is refused at build time and nothing is stored; two wheels installing the
#     same file are refused, naming both;
#   - the layer's packages import, the console script runs; changing a copied file reuses the
#     wheel layer; two cold builds give the same digest.
source "$(dirname "$0")/lib.sh"
need jq tar gpg gpgconf dpkg-deb python3 sha256sum

make_python_apt_repo "$WORK/apt"

# ---- wheels, built with python's zipfile ---------------------------------------------------------
mkdir -p wheelhouse
make_wheel wheelhouse demo 1.0 \
  'Requires-Dist: dep==1.0|Requires-Dist: winonly==1; sys_platform == "win32"|Provides-Extra: fast|Requires-Dist: fastlib==1.0; extra == "fast"' \
  '[console_scripts]\ndemo-cli = demo:main\n' \
  'demo/__init__.py=from dep import VALUE\n\ndef main():\n    print("demo says", VALUE)\n' >/dev/null
make_wheel wheelhouse dep 1.0 '' '' 'dep/__init__.py=VALUE = 42\n' >/dev/null
make_wheel wheelhouse dep 2.0 '' '' 'dep/__init__.py=VALUE = 2\n' >/dev/null
make_wheel wheelhouse needy 1.0 'Requires-Dist: dep>=2|Requires-Dist: missing-lib>=1.5' '' 'needy.py=\n' >/dev/null
make_wheel wheelhouse picky 1.0 'Requires-Dist: dep>=2' '' 'picky.py=\n' >/dev/null
make_wheel wheelhouse clash 1.0 '' '' 'dep/__init__.py=VALUE = "clash"\n' >/dev/null
sha() { sha256sum "$1" | cut -d' ' -f1; }

write_spec() { # REPOS PIP [APT] [EXTRA]
  cat >lockstep.yaml <<YAML
lockstep: 1
name: wheeltest
repos:
  - {apt: apt, flat: true, keyring: apt/keyring.gpg}
$1
packages:
  apt: [${3-python3}]
  pip: [$2]
${4:-}
outputs: {oci: out}
YAML
}
WHEELHOUSE='  - {wheels: wheelhouse}'

# ---- lock from a wheelhouse ------------------------------------------------------------------------
write_spec "$WHEELHOUSE" '"demo==1.0", "dep==1.0", "winonly==1; sys_platform == \"win32\""'
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
assert_contains "$ERR" "cp311 manylinux x86_64 (CPython 3.11.2, glibc 2.36)" "the target comes from the image's python3.11 and libc6"
wheels=$(jq -c '[.artifacts[] | select(.kind == "wheel") | {name, version, arch, group, reason}]' lockstep.lock)
assert_eq '[{"name":"demo","version":"1.0","arch":"py3-none-any","group":"python","reason":"requested by packages.pip[0] (demo==1.0)"},{"name":"dep","version":"1.0","arch":"py3-none-any","group":"python","reason":"requested by packages.pip[1] (dep==1.0)"}]' \
  "$wheels" "the lock pins demo and dep; winonly's marker is false for the image"
demo=$(jq -c '.artifacts[] | select(.name == "demo")' lockstep.lock)
assert_eq "$(sha wheelhouse/demo-1.0-py3-none-any.whl)" "$(jq -r .sha256 <<<"$demo")" "the lock pins the wheel's sha256"
assert_eq "$(stat -c %s wheelhouse/demo-1.0-py3-none-any.whl)" "$(jq -r .size <<<"$demo")" "the lock pins the wheel's size"
assert_eq "wheelhouse/demo-1.0-py3-none-any.whl" "$(jq -r .url <<<"$demo")" "the lock names the wheel by its path relative to the spec (the same lock on every machine)"
assert_eq 1 "$(jq -r .repo <<<"$demo")" "the wheel's repository"
assert_eq 1 "$(grep -c '"name":"demo"' lockstep.lock)" "one line per wheel"
cp lockstep.lock lock.1
rm lockstep.lock
ls_run lock
assert_eq 0 "$RC" "lock again: $ERR"
cmp -s lock.1 lockstep.lock || fail "locking twice gives different locks: $(diff lock.1 lockstep.lock)"
pass "lock pins wheels by URL, size and sha256 for the image's Python; false markers are skipped"

# ---- ranges, closures and conflicts -----------------------------------------------------------------
# (tests/cli/test_py_resolve.sh compares the resolver with pip on generated graphs.)
write_spec "$WHEELHOUSE" '"demo>=1.0"'
ls_run lock
assert_eq 0 "$RC" "a range: $ERR"
assert_eq '["demo==1.0","dep==1.0"]' "$(jq -c '[.artifacts[] | select(.kind == "wheel") | "\(.name)==\(.version)"]' lockstep.lock)" \
  "demo's dependency dep==1.0 is resolved, not asked for"
assert_eq "requested by packages.pip[0] (demo>=1.0) -> demo 1.0 needs dep==1.0" \
  "$(jq -r '.artifacts[] | select(.name == "dep") | .reason' lockstep.lock)" "dep's reason is the chain from the request"
write_spec "$WHEELHOUSE" '"dep"'
ls_run lock
assert_eq 0 "$RC" "an unconstrained requirement: $ERR"
assert_eq '["dep==1.0"]' "$(jq -c '[.artifacts[] | select(.kind == "wheel") | "\(.name)==\(.version)"]' lockstep.lock)" \
  "re-locking keeps the locked version while it fits"
ls_run lock --update dep
assert_eq 0 "$RC" "lock --update dep: $ERR"
assert_eq '["dep==2.0"]' "$(jq -c '[.artifacts[] | select(.kind == "wheel") | "\(.name)==\(.version)"]' lockstep.lock)" \
  "lock --update moves it to the newest version"
pass "ranges resolve to the newest versions that fit, dependencies included; re-locking moves only what --update names"

write_spec "$WHEELHOUSE" '"demo[fast]==1.0"'
ls_run lock
assert_eq 2 "$RC" "a dependency no repository has"
assert_contains "$ERR" "no set of Python packages satisfies the request for cp311 manylinux x86_64 (CPython 3.11.2, glibc 2.36):" "the resolver's error"
assert_contains "$ERR" "demo[fast] 1.0 needs fastlib==1.0 (no repository has fastlib; looked in repos[1] (wheelhouse))" "the extra's missing dependency is named"
assert_contains "$ERR" "lockstep.yaml:" "the error points into the spec"
write_spec "$WHEELHOUSE" '"picky==1.0", "dep==1.0"'
ls_run lock
assert_eq 2 "$RC" "a conflict"
assert_contains "$ERR" "picky 1.0 needs dep>=2" "the conflicting dependency is named"
assert_contains "$ERR" "packages.pip[1] asks for dep==1.0" "the conflicting request is named"
if grep -q winonly <<<"$ERR"; then fail "a dependency whose marker is false was required: $ERR"; fi
pass "unsatisfiable requests are explained as a derivation, located in the spec"

write_spec "$WHEELHOUSE" '"dep==3.0"'
ls_run lock
assert_eq 2 "$RC" "a version that does not exist"
assert_contains "$ERR" "packages.pip[0] asks for dep==3.0 (repos[1] (wheelhouse) has 1.0, 2.0)" "the versions there are listed"
write_spec "$WHEELHOUSE" '"dep==1.0"' ""
ls_run lock
assert_eq 2 "$RC" "pip packages without a Python in the image"
assert_contains "$ERR" "add python3 to packages.apt" "the error says how to get a Python"
pass "a missing version and an image without Python are refused with what to do"

# ---- build from the wheelhouse lock ----------------------------------------------------------------
echo "v1" >app.txt
write_spec "$WHEELHOUSE" '"demo==1.0", "dep==1.0"' python3 "copy: [{from: app.txt, to: /app/}]"
ls_run lock
assert_eq 0 "$RC" "lock for the build: $ERR"
ls_run build --locked --json
assert_eq 0 "$RC" "build: $ERR"
build1=$OUT
nlayers=$(jq '.layers | length' <<<"$build1")
assert_eq 4 "$nlayers" "layers: debs, dpkg database, python packages, copy"
mkdir root
manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
for digest in $(jq -r '.layers[].digest' "out/blobs/sha256/$manifest" | cut -d: -f2); do
  tar -xzf "out/blobs/sha256/$digest" -C root
done
site=root/usr/local/lib/python3.11/dist-packages
[ -f "$site/demo/__init__.py" ] || fail "demo is not in $site: $(find root -path '*dist-packages*' | head)"
[ -f "$site/dep-1.0.dist-info/RECORD" ] || fail "dep's RECORD was not installed"
assert_eq "lockstep" "$(cat "$site/demo-1.0.dist-info/INSTALLER")" "INSTALLER"
assert_eq "42" "$(PYTHONPATH=$site python3 -c 'import dep; print(dep.VALUE)')" "the host's python imports dep from the layer"
assert_eq "#!/usr/bin/python3" "$(head -n 1 root/usr/local/bin/demo-cli)" "the console script's interpreter"
assert_eq "demo says 42" "$(PYTHONPATH=$site python3 root/usr/local/bin/demo-cli)" "the console script runs"
assert_eq "1.0" "$(PYTHONPATH=$site python3 -c 'import importlib.metadata as m; print(m.version("demo"))')" \
  "importlib.metadata reads the installed distribution"
pass "the wheel layer's packages import and its console script runs"

echo "v2" >app.txt
ls_run build --locked --json
assert_eq 0 "$RC" "rebuild: $ERR"
assert_eq "true true true false" "$(jq -r '[.layers[].cached] | map(tostring) | join(" ")' <<<"$OUT")" \
  "after changing a copied file only the copy layer is rebuilt"
assert_eq "$(jq -r '.layers[2].digest' <<<"$build1")" "$(jq -r '.layers[2].digest' <<<"$OUT")" "the wheel layer is the same"
echo "v1" >app.txt
LOCKSTEP_CACHE=$WORK/cache-cold ls_run build --locked --json
assert_eq 0 "$RC" "cold build: $ERR"
assert_eq "$(jq -r .manifest_digest <<<"$build1")" "$(jq -r .manifest_digest <<<"$OUT")" "two cold builds give one digest"
pass "a copy change reuses the wheel layer; cold builds are reproducible"

# A wheel changed after locking is refused at build time, and not stored.
cp wheelhouse/dep-1.0-py3-none-any.whl dep.orig
printf 'x' >>wheelhouse/dep-1.0-py3-none-any.whl
bad=$(sha wheelhouse/dep-1.0-py3-none-any.whl)
LOCKSTEP_CACHE=$WORK/cache-tamper ls_run build --locked
assert_eq 2 "$RC" "a tampered wheel"
assert_contains "$ERR" "the lock says" "the error says the file does not match the lock"
[ ! -e "$WORK/cache-tamper/blobs/sha256/$bad" ] || fail "the tampered wheel was stored"
cp dep.orig wheelhouse/dep-1.0-py3-none-any.whl
pass "a wheel that changed after locking is refused and not stored"

# Two wheels installing one file.
write_spec "$WHEELHOUSE" '"clash==1.0", "dep==1.0"'
ls_run lock
assert_eq 0 "$RC" "lock clash: $ERR"
ls_run build --locked
assert_eq 2 "$RC" "two wheels with one file"
assert_contains "$ERR" "clash-1.0-py3-none-any.whl" "the conflict names the first wheel"
assert_contains "$ERR" "dep-1.0-py3-none-any.whl" "the conflict names the second wheel"
assert_contains "$ERR" "dep/__init__.py" "the conflict names the file"
pass "two wheels installing the same file are refused, naming both"

# ---- a PEP 503 (HTML) and PEP 691 (JSON) index over HTTP -------------------------------------------
mkdir -p index/files index/simple/demo index/simple/dep index/simple/nohash index/simple/sdistonly
cp wheelhouse/demo-1.0-py3-none-any.whl wheelhouse/dep-1.0-py3-none-any.whl index/files/
make_wheel index/files dep 0.9 '' '' 'dep/__init__.py=VALUE = 9\n' >/dev/null
make_wheel index/files nohash 1.0 '' '' 'nohash.py=\n' >/dev/null
cp wheelhouse/.meta/dep-1.0.dist-info/METADATA index/files/dep-1.0-py3-none-any.whl.metadata
printf 'not a real sdist' >index/files/sdistonly-1.0.tar.gz
cat >index/simple/demo/index.html <<HTML
<!DOCTYPE html><html><body>
<a href="../../files/demo-1.0-py3-none-any.whl#sha256=$(sha index/files/demo-1.0-py3-none-any.whl)">demo-1.0-py3-none-any.whl</a>
</body></html>
HTML
# dep's page is PEP 691 JSON (served as index.html: lockstep tells JSON from HTML by the body),
# with sizes and PEP 658 metadata, and 0.9 yanked.
cat >index/simple/dep/index.html <<JSON
{"meta": {"api-version": "1.1"}, "name": "dep", "files": [
 {"filename": "dep-0.9-py3-none-any.whl", "url": "../../files/dep-0.9-py3-none-any.whl",
  "hashes": {"sha256": "$(sha index/files/dep-0.9-py3-none-any.whl)"}, "yanked": "broken",
  "size": $(stat -c %s index/files/dep-0.9-py3-none-any.whl)},
 {"filename": "dep-1.0-py3-none-any.whl", "url": "../../files/dep-1.0-py3-none-any.whl",
  "hashes": {"sha256": "$(sha index/files/dep-1.0-py3-none-any.whl)"},
  "core-metadata": {"sha256": "$(sha index/files/dep-1.0-py3-none-any.whl.metadata)"},
  "size": $(stat -c %s index/files/dep-1.0-py3-none-any.whl)}
], "versions": ["0.9", "1.0"]}
JSON
cat >index/simple/nohash/index.html <<HTML
<a href="../../files/nohash-1.0-py3-none-any.whl">nohash-1.0-py3-none-any.whl</a>
HTML
cat >index/simple/sdistonly/index.html <<HTML
<a href="../../files/sdistonly-1.0.tar.gz#sha256=$(sha index/files/sdistonly-1.0.tar.gz)">sdistonly-1.0.tar.gz</a>
HTML
start_http_server "$WORK/index"
INDEX="  - {pypi: $HTTP_URL/simple}"

write_spec "$INDEX" '"demo==1.0", "dep==1.0"'
: >"$HTTP_LOG"
export LOCKSTEP_CACHE=$WORK/cache-index # a store without the wheels the builds above fetched
ls_run lock
assert_eq 0 "$RC" "lock from the index: $ERR"
assert_eq "$HTTP_URL/files/demo-1.0-py3-none-any.whl" \
  "$(jq -r '.artifacts[] | select(.name == "demo") | .url' lockstep.lock)" "the wheel's URL on the index"
assert_eq "$(sha index/files/dep-1.0-py3-none-any.whl)" \
  "$(jq -r '.artifacts[] | select(.name == "dep") | .sha256' lockstep.lock)" "dep's sha256 from the JSON page"
assert_contains "$(cat "$HTTP_LOG")" "GET /files/dep-1.0-py3-none-any.whl.metadata" "dep's METADATA comes from its PEP 658 file"
if grep -q 'GET /files/dep-1.0-py3-none-any.whl ' "$HTTP_LOG"; then
  fail "dep's wheel was downloaded while locking although the index serves its METADATA"
fi
assert_contains "$(cat "$HTTP_LOG")" "GET /files/demo-1.0-py3-none-any.whl " "demo's wheel (no METADATA file) is read"
ls_run build --locked
assert_eq 0 "$RC" "build from the index lock: $ERR"
pass "lock reads PEP 503 HTML and PEP 691 JSON pages (PEP 658 METADATA without the wheel); the build installs from the index"

# Re-locking after an unrelated change keeps the locked wheels without asking the index;
# `lock --update NAME` asks again for NAME only.
cp lockstep.lock lock.index
write_spec "$INDEX" '"demo==1.0", "dep==1.0"' "python3, libc6"
: >"$HTTP_LOG"
ls_run lock
assert_eq 0 "$RC" "re-lock: $ERR"
if grep -q 'GET /simple/' "$HTTP_LOG"; then fail "re-locking read the index again: $(cat "$HTTP_LOG")"; fi
assert_eq "$(jq -c '[.artifacts[] | select(.kind == "wheel")]' lock.index)" \
  "$(jq -c '[.artifacts[] | select(.kind == "wheel")]' lockstep.lock)" "the wheels are kept"
ls_run lock --update demo
assert_eq 0 "$RC" "lock --update demo: $ERR"
assert_eq '"GET /simple/demo/ HTTP/1.1" 304 -' "$(grep -o '"GET /simple/[^"]*"[^"]*' "$HTTP_LOG")" \
  "--update demo asks for demo's page only (the kept copy revalidated: HTTP 304)"
pass "re-locking keeps locked wheels without the index; --update NAME asks for NAME only"

# The same index read from disk (a plain path is a file: URL; directories are read as index.html).
write_spec "  - {pypi: index/simple}" '"demo==1.0", "dep==1.0"'
ls_run lock
assert_eq 0 "$RC" "lock from a file: index: $ERR"
assert_eq "index/files/dep-1.0-py3-none-any.whl" \
  "$(jq -r '.artifacts[] | select(.name == "dep") | .url' lockstep.lock)" "a local index's wheel is recorded relative to the spec"
pass "an index on disk works as one over HTTP"

write_spec "$INDEX" '"dep==0.9"'
ls_run lock
assert_eq 0 "$RC" "a pin to a yanked version: $ERR"
assert_contains "$ERR" "dep 0.9 is yanked: broken; using it because it is pinned exactly" "the yanked file is used with a warning"
write_spec "$INDEX" '"nohash==1.0"'
ls_run lock
assert_eq 2 "$RC" "an index without sha256"
assert_contains "$ERR" "the index gives no sha256 for nohash-1.0-py3-none-any.whl" "the file without a hash is named"
write_spec "$INDEX" '"sdistonly==1.0"'
ls_run lock
assert_eq 2 "$RC" "sdist only"
assert_contains "$ERR" "has no wheel for cp311 manylinux x86_64 (CPython 3.11.2, glibc 2.36); not installable here: sdistonly-1.0.tar.gz (an sdist)" "the missing wheel is named"
assert_contains "$ERR" "lockstep installs wheels only" "sdists are not built"
write_spec "$INDEX" '"nosuch==1.0"'
ls_run lock
assert_eq 2 "$RC" "an unknown project"
assert_contains "$ERR" "no repository has nosuch" "the unknown project is named"
pass "yanked-only pins warn; missing hashes, sdist-only and unknown projects are refused by name"

# Repository order is priority: the wheelhouse listed first supplies demo.
write_spec "$WHEELHOUSE
$INDEX" '"demo==1.0", "dep==1.0"'
ls_run lock
assert_eq 0 "$RC" "lock with two Python repositories: $ERR"
assert_eq "wheelhouse/demo-1.0-py3-none-any.whl" \
  "$(jq -r '.artifacts[] | select(.name == "demo") | .url' lockstep.lock)" "the first repository wins"
pass "the first repository that has a project supplies it"

# A requirements file in pip's hash-checking mode (pip-compile --generate-hashes output).
printf -- '--require-hashes\ndemo==1.0 \\\n    --hash=sha256:%s\ndep==1.0 --hash=sha256:%s  # a comment\n' \
  "$(sha wheelhouse/demo-1.0-py3-none-any.whl)" "$(sha wheelhouse/dep-1.0-py3-none-any.whl)" >requirements.txt
write_spec "$WHEELHOUSE" '{requirements: requirements.txt}'
rm -f lockstep.lock
ls_run lock
assert_eq 0 "$RC" "lock from a requirements file with hashes: $ERR"
assert_eq "$(sha wheelhouse/demo-1.0-py3-none-any.whl)" \
  "$(jq -r '.artifacts[] | select(.name == "demo") | .sha256' lockstep.lock)" "the requirements file's hash is the locked one"
printf 'demo==1.0 --hash=sha256:%s\ndep==1.0 --hash=sha256:%s\n' "$(printf '0%.0s' $(seq 64))" \
  "$(sha wheelhouse/dep-1.0-py3-none-any.whl)" >requirements.txt
ls_run lock
assert_eq 2 "$RC" "a requirements file whose hash matches no file"
assert_contains "$ERR" "requirements.txt:1 asks for demo==1.0" "the mismatching requirement is named"
assert_contains "$ERR" "demo-1.0-py3-none-any.whl (its sha256 is not one of the requirement's --hash values)" "the file whose hash is not listed is named"
printf 'demo==1.0 --hash=sha256:%s\ndep==1.0\n' "$(sha wheelhouse/demo-1.0-py3-none-any.whl)" >requirements.txt
ls_run lock
assert_eq 2 "$RC" "a requirement without a hash in hash-checking mode"
assert_contains "$ERR" "requirements.txt:2: dep==1.0 has no --hash" "the requirement without a hash is named"
pass "requirements.txt with --hash/--require-hashes is imported; every hash is enforced"

# ---- over a base image: its Python and its site-packages count -----------------------------------
cat >lockstep.yaml <<YAML
lockstep: 1
name: wheelbase
repos:
  - {apt: apt, flat: true, keyring: apt/keyring.gpg}
  - {wheels: wheelhouse}
packages:
  apt: [python3]
  pip: ["dep==1.0"]
outputs: {oci: pybase}
YAML
rm -f lockstep.lock
ls_run build
assert_eq 0 "$RC" "the base image with python3.11 and dep 1.0: $ERR"
over_base() { # PIP
  cat >lockstep.yaml <<YAML
lockstep: 1
name: overbase
base: {oci: pybase}
repos:
  - {wheels: wheelhouse}
packages:
  pip: [$1]
outputs: {oci: over}
YAML
  rm -f lockstep.lock
}
over_base '"demo==1.0"'
ls_run lock
assert_eq 0 "$RC" "lock over the base: $ERR"
assert_contains "$ERR" "cp311 manylinux x86_64 (CPython 3.11.2, glibc 2.36) from python3.11 3.11.2-6+deb12u1 (base image)" \
  "the target Python is the base's python3.11"
assert_eq "demo" "$(jq -r '[.artifacts[].name] | join(" ")' lockstep.lock)" \
  "dep==1.0, which demo needs, is installed in the base and not locked again"
over_base '"dep==2.0"'
ls_run lock
assert_eq 0 "$RC" "lock dep 2.0 over the base: $ERR"
assert_eq "requested by packages.pip[0] (dep==2.0); shadows the base image's dep 1.0 (/usr/local/lib/python3.11/dist-packages/dep-1.0.dist-info)" \
  "$(jq -r '.artifacts[0].reason' lockstep.lock)" "a wheel that shadows the base's distribution says so"
over_base '"picky==1.0"'
ls_run lock
assert_eq 0 "$RC" "a dependency the base has at a version that doesn't fit: $ERR"
assert_eq "dep==2.0 picky==1.0" "$(jq -r '[.artifacts[] | "\(.name)==\(.version)"] | join(" ")' lockstep.lock)" \
  "dep 2.0 comes from the repositories"
assert_eq "requested by packages.pip[0] (picky==1.0) -> picky 1.0 needs dep>=2; shadows the base image's dep 1.0 (/usr/local/lib/python3.11/dist-packages/dep-1.0.dist-info)" \
  "$(jq -r '.artifacts[] | select(.name == "dep") | .reason' lockstep.lock)" "and says it shadows the base's"
pass "over a base image, wheels target its Python; its site-packages are used where they fit"

# ---- over a base whose Python is not a Debian package (base.python) --------------------------------
# Shaped like the official python images: CPython under a prefix (here /opt/py), python3 a link
# to python3.12, its version in include/python3.12/patchlevel.h, dep 1.0 in its site-packages;
# Debian's libc6 only.
rm -rf py && mkdir -p py/bin py/include/python3.12 py/lib/python3.12/site-packages/dep-1.0.dist-info
printf '#!/bin/sh\nexit 0\n' >py/bin/python3.12 && chmod 755 py/bin/python3.12
ln -s python3.12 py/bin/python3
printf '#define PY_MAJOR_VERSION 3\n#define PY_VERSION "3.12.4"\n' >py/include/python3.12/patchlevel.h
printf 'Metadata-Version: 2.1\nName: dep\nVersion: 1.0\n' >py/lib/python3.12/site-packages/dep-1.0.dist-info/METADATA
mkdir py/lib/python3.12/site-packages/dep && echo 'VALUE = 42' >py/lib/python3.12/site-packages/dep/__init__.py
cat >lockstep.yaml <<YAML
lockstep: 1
name: ownpython
repos:
  - {apt: apt, flat: true, keyring: apt/keyring.gpg}
packages:
  apt: [libc6]
copy: [{from: py/, to: /opt/py/}]
outputs: {oci: ownpy}
YAML
rm -f lockstep.lock
ls_run build
assert_eq 0 "$RC" "the base image with its own CPython 3.12: $ERR"
own_python() { # PYTHON PIP
  cat >lockstep.yaml <<YAML
lockstep: 1
name: overown
base: {oci: ownpy, python: $1}
repos:
  - {wheels: wheelhouse}
packages:
  pip: [$2]
outputs: {oci: overown}
YAML
  rm -f lockstep.lock
}
own_python /opt/py/bin/python3 '"demo==1.0"'
ls_run lock
assert_eq 0 "$RC" "lock over the base's own Python: $ERR"
assert_contains "$ERR" "cp312 manylinux x86_64 (CPython 3.12.4, glibc 2.36) from /opt/py/bin/python3 (base image, /opt/py/include/python3.12/patchlevel.h)" \
  "the target is the base's CPython, its version from patchlevel.h"
assert_eq "demo" "$(jq -r '[.artifacts[].name] | join(" ")' lockstep.lock)" \
  "dep==1.0 in the base Python's own site-packages counts as installed"
ls_run build --locked --json
assert_eq 0 "$RC" "build over the base's own Python: $ERR"
rm -rf ownroot && mkdir ownroot
manifest=$(jq -r '.manifests[0].digest' overown/index.json | cut -d: -f2)
for digest in $(jq -r '.layers[].digest' "overown/blobs/sha256/$manifest" | cut -d: -f2); do
  tar -xzf "overown/blobs/sha256/$digest" -C ownroot 2>/dev/null || true
done
site=ownroot/opt/py/lib/python3.12/site-packages
[ -f "$site/demo/__init__.py" ] || fail "demo is not in /opt/py/lib/python3.12/site-packages: $(find ownroot -name '__init__.py')"
[ ! -e ownroot/usr/local/lib/python3.12 ] || fail "something went to /usr/local for a Python in /opt/py"
assert_eq "#!/opt/py/bin/python3" "$(head -n 1 ownroot/opt/py/bin/demo-cli)" "the console script runs the base's Python"
assert_eq "demo says 42" "$(PYTHONPATH=$site:py/lib/python3.12/site-packages python3 ownroot/opt/py/bin/demo-cli)" \
  "the console script runs with the base's dep"
own_python /opt/py/bin/python3.13 '"demo==1.0"'
ls_run lock
assert_eq 2 "$RC" "an interpreter the base doesn't have"
assert_contains "$ERR" "base.python /opt/py/bin/python3.13 is not a python3 or python3.N file in the base image; the base has /opt/py/bin/python3.12" \
  "the error names what the base has"
assert_contains "$ERR" "lockstep.yaml:3" "the error points at base.python"
pass "over a base with its own CPython (base.python), wheels go into its site-packages and its distributions count"

done_testing
