#!/usr/bin/env bash
# SBOMs (docs/sbom.md): `lockstep sbom` of a lock with debs (DEP-5 and free-text copyright files)
# and wheels (License-Expression, a License name, a classifier, a license text), judged by
# tests/cli/sbom_check.py (the official CycloneDX 1.6 JSON Schema through python3-jsonschema, SPDX
# 2.3's clauses, python3-license-expression, and the lock: every artifact once, nothing else);
# deterministic across stores, umask, locale and time zone; `build --sbom`; attached on push as OCI
# referrers under the referrers tag of the real docker-registry 2.8 (which has no referrers API),
# read back by skopeo and by `lockstep sbom docker://`; an SBOM of another image is refused; an image
# without its lock, and a registry image with no SBOM attached, described from its own package
# databases (issue 37), judged by dpkg-query --admindir over the unpacked root and the schemas.
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/registry.sh"
need jq python3 gpg gpgconf dpkg-deb dpkg-query sha256sum skopeo docker-registry umoci

PY=/usr/bin/python3
if ! "$PY" -c 'import jsonschema, license_expression' 2>/dev/null || [ ! -r /usr/share/nodejs/spdx-license-ids/index.json ]; then
  [ -z "${CI:-}" ] || fail "python3-jsonschema, python3-license-expression and node-spdx-license-ids are needed (scripts/install-deps.sh)"
  echo "SKIP: python3-jsonschema, python3-license-expression or node-spdx-license-ids missing" >&2
  exit 77
fi
CHECK="$LOCKSTEP_SOURCE_DIR/tests/cli/sbom_check.py"
# in_p ARGS...: ls_run in the spec's directory (where `lockstep sbom` finds ./lockstep.lock).
in_p() {
  pushd p >/dev/null
  ls_run "$@"
  popd >/dev/null
}
INDEX_PY="$LOCKSTEP_SOURCE_DIR/tests/cli/py_index.py"

mkdir -p "$WORK/www" p
make_python_apt_repo "$WORK/www/apt"
python3 "$INDEX_PY" sbom "$WORK/www/idx"
start_http_server "$WORK/www" "$INDEX_PY"
cp "$WORK/www/apt/keyring.gpg" p/apt-keyring.gpg
cat >p/lockstep.yaml <<YAML
lockstep: 1
name: team/sbom-demo
repos:
  - {apt: $HTTP_URL/apt, flat: true, keyring: apt-keyring.gpg}
  - {pypi: $HTTP_URL/idx/simple}
packages:
  apt: [python3, python3-six, python3-yaml]
  pip: [alpha]
YAML
in_p lock
assert_eq 0 "$RC" "lock: $ERR"
lock_digest="sha256:$(sha256sum p/lockstep.lock | cut -d' ' -f1)"

# ---- the SBOM of a lock -------------------------------------------------------------------------
in_p sbom
assert_eq 0 "$RC" "sbom of ./lockstep.lock: $ERR"
printf '%s\n' "$OUT" >lock.spdx.json
"$PY" "$CHECK" lock.spdx.json p/lockstep.lock --subject "$lock_digest" >/dev/null || fail "the SPDX SBOM of the lock"
licenses=$(jq -r '.packages[] | select(.SPDXID != "SPDXRef-image") | "\(.name)=\(.licenseDeclared)"' lock.spdx.json |
  LC_ALL=C sort | tr '\n' ' ')
assert_eq "alpha=MIT OR Apache-2.0 beta=MIT gamma=NOASSERTION libc6=NOASSERTION python3-minimal=NOASSERTION \
python3-six=MIT python3-yaml=(GPL-2.0-or-later OR Artistic-1.0) AND MIT AND Zlib python3.11=NOASSERTION \
python3=NOASSERTION " "$licenses" "licenses from DEP-5 copyright files and METADATA"
assert_eq "team/sbom-demo $lock_digest" \
  "$(jq -r '"\(.name) sha256:\(.packages[0].checksums[0].checksumValue)"' lock.spdx.json)" \
  "the document is named after the spec and describes the lock's digest"
assert_eq "pkg:deb/debian/python3-yaml@6.0-3%2Bb2?arch=amd64 pkg:pypi/alpha@1.0" \
  "$(jq -r '[.packages[].externalRefs[]?.referenceLocator | select(test("yaml|alpha"))] | join(" ")' lock.spdx.json)" \
  "package URLs (a flat repository names no suite: no distro)"
pass "SPDX 2.3 of a lock: every artifact once, with purl, sha256 and the licenses the packages declare"

in_p sbom --json -o ../lock.cdx.json
assert_eq 0 "$RC" "sbom -o lock.cdx.json: $ERR"
assert_eq "cyclonedx-json $lock_digest" "$(jq -r '"\(.format) \(.subject)"' <<<"$OUT")" "--json names the format and subject"
"$PY" "$CHECK" lock.cdx.json p/lockstep.lock --subject "$lock_digest" >/dev/null || fail "the CycloneDX SBOM of the lock"
pass "CycloneDX 1.6 (chosen by the .cdx.json name) is valid against the official schema"

# The same bytes from an empty store (every package fetched again), another umask, locale and zone.
old_umask=$(umask)
umask 077
LOCKSTEP_CACHE="$WORK/cache-b" LC_ALL=C TZ=Asia/Tokyo in_p sbom -o ../again.spdx.json
umask "$old_umask"
assert_eq 0 "$RC" "sbom from an empty store: $ERR"
cmp -s lock.spdx.json again.spdx.json || fail "the SBOM differs with another store, umask, locale or time zone"
pass "the SBOM of a lock is the same bytes from an empty store, under another umask, locale and time zone"

# ---- bad input ----------------------------------------------------------------------------------
in_p sbom --format xml
assert_eq 2 "$RC" "an unknown format"
assert_contains "$ERR" "expected spdx-json or cyclonedx-json" "the formats are named"
printf '{"lockstep-lock": 1, "artifacts": 3}\n' >bad.lock
ls_run sbom bad.lock -o bad.spdx.json
assert_eq 2 "$RC" "a malformed lock"
[ ! -e bad.spdx.json ] || fail "an SBOM was written for a malformed lock"
ls_run sbom dir:"$WORK" --lock p/lockstep.lock
assert_eq 2 "$RC" "a root directory has no digest to describe"
pass "bad formats, locks and images are refused (exit 2) and nothing is written"

# ---- the SBOM of an image without its lock, from what the image records itself --------------------
# The image of p/ (debs, Python packages from a deb and from pip), described where its lock is not:
# judged against dpkg-query over the unpacked root, the dist-info directories no deb owns, and the
# schemas; the same bytes under another umask, locale and zone.
in_p build --oci ../pimg
assert_eq 0 "$RC" "build p/: $ERR"
pdigest=$(last_line "$OUT")
ls_run sbom oci:pimg -o scan.spdx.json
assert_eq 0 "$RC" "sbom of an image whose lock is not here: $ERR"
assert_contains "$ERR" "its lock is not here" "it says why it reads the image"
assert_contains "$ERR" "from the image's own records" "and what it found"
ls_run sbom oci:pimg --format cyclonedx-json -o scan.cdx.json
assert_eq 0 "$RC" "sbom --format cyclonedx-json of the image: $ERR"
umoci unpack --rootless --image "pimg:$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]' pimg/index.json)" \
  pbundle >/dev/null || fail "umoci can't unpack the image"
root=pbundle/rootfs
dpkg-query --admindir="$root/var/lib/dpkg" -W -f '${db:Status-Status} ${Package} ${Version} ${Architecture}\n' |
  awk '$1 == "installed" { print "deb", $2, $3, $4 }' >scan.packages
[ -s scan.packages ] || fail "dpkg-query lists no package"
while IFS= read -r dist; do
  dpkg-query --admindir="$root/var/lib/dpkg" -S "/${dist#"$root"/}" >/dev/null 2>&1 && continue # a deb's
  "$PY" - "$dist/METADATA" >>scan.packages <<'PYEOF'
import re, sys
meta = open(sys.argv[1], encoding="utf-8").read().split("\n\n")[0]
field = lambda k: re.search(rf"^{k}:\s*(.*)$", meta, re.M).group(1).strip()
print("pypi", re.sub(r"[-_.]+", "-", field("Name")).lower(), field("Version"))
PYEOF
done < <(find "$root" -type d -name '*.dist-info')
assert_contains "$(cat scan.packages)" "pypi alpha 1.0" "(the pip-installed wheel is among them)"
for f in scan.spdx.json scan.cdx.json; do
  "$PY" "$CHECK" "$f" --packages scan.packages --subject "$pdigest" --root "$root" >/dev/null ||
    fail "$f against dpkg-query and the dist-info directories: $("$PY" "$CHECK" "$f" --packages scan.packages --subject "$pdigest" --root "$root" 2>&1 | tail -5)"
done
assert_eq "python3-six=MIT python3-yaml=(GPL-2.0-or-later OR Artistic-1.0) AND MIT AND Zlib alpha=MIT OR Apache-2.0" \
  "$(jq -r '[.packages[] | select(.name == "python3-six" or .name == "python3-yaml" or .name == "alpha") | "\(.name)=\(.licenseDeclared)"] | join(" ")' scan.spdx.json)" \
  "licenses from the image's DEP-5 copyright files and METADATA"
old_umask=$(umask)
umask 077
LC_ALL=C TZ=Asia/Tokyo ls_run sbom oci:pimg -o scan-again.spdx.json
umask "$old_umask"
cmp -s scan.spdx.json scan-again.spdx.json || fail "the scanned SBOM differs with another umask, locale or zone"
in_p sbom oci:../pimg --scan --name oci:pimg -o ../scan-here.spdx.json
assert_eq 0 "$RC" "sbom --scan beside the lock: $ERR"
cmp -s scan.spdx.json scan-here.spdx.json || fail "--scan beside the lock describes the same"
ls_run sbom "dir:$PWD/$root" --scan -o dir.spdx.json
assert_eq 2 "$RC" "a root directory has no digest to describe: $ERR"
assert_contains "$ERR" "a root directory has no digest for an SBOM to describe" "the error says so"
[ ! -e dir.spdx.json ] || fail "nothing is written for a root directory"
pass "an image without its lock: every deb dpkg-query lists and every pip-installed package once, valid SPDX and CycloneDX"

# ---- build --sbom, push --sbom, sbom docker:// ---------------------------------------------------
mkdir img
printf 'hello\n' >img/hello.txt
printf 'lockstep: 1\nname: team/img\ncopy: [{from: ./hello.txt, to: /hello.txt}]\n' >img/lockstep.yaml
ls_run build img/lockstep.yaml --oci img/out --sbom img/out.spdx.json --sbom img/out.cdx.json
assert_eq 0 "$RC" "build --sbom: $ERR"
digest=$(last_line "$OUT")
for f in img/out.spdx.json img/out.cdx.json; do
  "$PY" "$CHECK" "$f" <(echo '{"artifacts": []}') --subject "$digest" >/dev/null || fail "$f"
done
ls_run sbom oci:img/out --lock p/lockstep.lock
assert_eq 2 "$RC" "an image built without a lock"
assert_contains "$ERR" "records no lock" "says the image was not built from a lock"
pass "build --sbom writes SPDX and CycloneDX SBOMs naming the image's digest"

registry_up hub plain
ref="docker://$REG_HUB_HOST/team/img:1"
ls_run push --tls-verify=false oci:img/out "$ref" --sbom img/out.spdx.json --sbom img/out.cdx.json
assert_eq 0 "$RC" "push --sbom: $ERR"
referrers="docker://$REG_HUB_HOST/team/img:sha256-${digest#sha256:}"
index=$(skopeo inspect --tls-verify=false --raw "$referrers") || fail "skopeo can't read the referrers tag"
assert_eq "application/spdx+json application/vnd.cyclonedx+json application/vnd.in-toto+json" \
  "$(jq -r '[.manifests[].artifactType] | sort | join(" ")' <<<"$index")" \
  "the referrers index lists both SBOMs (and the build's provenance)"
artifact=$(jq -r '.manifests[] | select(.artifactType == "application/spdx+json") | .digest' <<<"$index")
manifest=$(skopeo inspect --tls-verify=false --raw "docker://$REG_HUB_HOST/team/img@$artifact")
assert_eq "$digest application/vnd.oci.empty.v1+json application/spdx+json" \
  "$(jq -r '"\(.subject.digest) \(.config.mediaType) \(.layers[0].mediaType)"' <<<"$manifest")" \
  "an OCI 1.1 artifact: subject, empty config, the SBOM as its layer"
pass "push --sbom attaches OCI 1.1 referrers, listed under the referrers tag (docker-registry 2.8 has no API)"

ls_run sbom --tls-verify=false "$ref"
assert_eq 0 "$RC" "sbom docker://: $ERR"
printf '%s\n' "$OUT" | cmp -s - img/out.spdx.json || fail "sbom docker:// gives another SPDX document"
ls_run sbom --tls-verify=false "$ref" --format cyclonedx-json -o pulled.cdx.json
assert_eq 0 "$RC" "sbom docker:// --format cyclonedx-json: $ERR"
cmp -s pulled.cdx.json img/out.cdx.json || fail "sbom docker:// gives another CycloneDX document"
pass "lockstep sbom docker://REF finds the attached SBOMs, byte for byte"

ls_run push --tls-verify=false oci:img/out "$ref" --sbom img/out.spdx.json
assert_eq 0 "$RC" "a second push --sbom: $ERR"
ls_run push --tls-verify=false oci:img/out "$ref" --sbom lock.spdx.json
assert_eq 1 "$RC" "an SBOM of another digest is refused"
assert_contains "$ERR" "describes $lock_digest, not the image pushed ($digest)" "both digests are named"
printf 'not json' >junk.spdx.json
ls_run push --tls-verify=false oci:img/out "$ref" --sbom junk.spdx.json
assert_eq 2 "$RC" "a malformed SBOM"
assert_eq 2 "$(skopeo inspect --tls-verify=false --raw "$referrers" |
  jq '[.manifests[] | select(.artifactType | test("spdx|cyclonedx"))] | length')" \
  "the referrers index still lists the two SBOMs, once each"
pass "attaching again changes nothing; an SBOM of another image (exit 1) or a malformed one (exit 2) is not attached"

ls_run push --tls-verify=false oci:pimg "docker://$REG_HUB_HOST/team/bare:1"
assert_eq 0 "$RC" "push without --sbom: $ERR"
ls_run sbom --tls-verify=false "docker://$REG_HUB_HOST/team/bare:1" --name oci:pimg -o pulled-scan.spdx.json
assert_eq 0 "$RC" "sbom of a registry image with no SBOM attached: $ERR"
assert_contains "$ERR" "no spdx-json SBOM is attached" "says none is attached"
cmp -s scan.spdx.json pulled-scan.spdx.json || fail "the registry image is described as the local one: $(diff <(jq . scan.spdx.json) <(jq . pulled-scan.spdx.json) | head)"
pass "a registry image with no SBOM attached is described from what it records itself"

done_testing
