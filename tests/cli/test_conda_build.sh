#!/usr/bin/env bash
# conda natively (docs/conda.md), the image: a channel of packages packed by Debian's
# conda-package-handling (tests/cli/conda_channel.py) on 127.0.0.1, locked and built into an image:
#   - umoci unpacks the image, and the prefix equals what this test computes on its own from `cph x`
#     of each locked archive and conda's rules (text and binary prefix replacement, noarch: python
#     relocation, symlinks, modes, the later package winning a clobbered file);
#   - conda-meta/ has each package's record (url, sha256, md5 from the lock; its files), history
#     and frozen; the image's Env puts the prefix's bin first, sets CONDA_PREFIX and the variables
#     of the packages' etc/conda/env_vars.d files and activate.d scripts (evaluated statically);
#   - a `run:` step over the environment runs a package's relocated script from PATH;
#   - `verify` checks the files against conda-meta and the packages against the lock (a changed and
#     a removed file named with their package); the SBOM lists pkg:conda purls, from the lock and
#     (--scan) from conda-meta alone; `diff` compares; `outdated` lists a newer package published;
#   - `export --explicit` / `--conda-lock` name exactly the lock's packages (read by CEP 23's regex and
#     as CEP 37 structures them), each after its dependencies;
#   - packages.pip over the conda python: wheels go into its site-packages, conda's Python packages
#     count as installed (no wheel replaces six; six>=2 is an error naming the conda package);
#   - `init --from PREFIX` of the built environment pins exactly its builds (the same lock's packages);
#   - `lockstep vendor` saves the conda packages; an offline build from them has the same digest;
#   - the same digest from an empty store, under another umask; `conda: {prefix: ...}` moves it;
#   - link scripts are listed, not run; hostile packages (a tampered archive, a path out of the
#     prefix, a symlink out of it, a binary placeholder shorter than the prefix) are exit 2 naming
#     the package, and nothing is written.
source "$(dirname "$0")/lib.sh"
need jq python3 cph zstd umoci sha256sum
need_python_jsonschema /usr/bin/python3

TEXT_PH=/opt/anaconda1anaconda2anaconda3
BIN_PH=/conda-bld/_h_env_placehold_placehold_placehold_placehold
cat >channel.json <<JSON
{"packages": [
 {"name": "python", "version": "3.11.9", "build": "h1_0_cpython", "depends": ["__glibc >=2.17,<3.0.a0"],
  "files": {"bin/python3.11": {"text": "#!/bin/sh\\necho python3.11 \"\$@\"\\n", "mode": 493},
            "bin/python": {"symlink": "python3.11"},
            "lib/python3.11/os.py": "# os\\n"}},
 {"name": "libzlib", "version": "1.3.1", "build": "h4ab18f5_1",
  "files": {"lib/libz.so.1.3.1": {"text": "\\u007fELF..${BIN_PH}/lib\\u0000tail${BIN_PH}/etc:${BIN_PH}/x\\u0000end",
                                  "placeholder": "${BIN_PH}", "file_mode": "binary", "mode": 493},
            "lib/libz.so.1": {"symlink": "libz.so.1.3.1"},
            "share/common.txt": "from libzlib\\n"}},
 {"name": "tool", "version": "1.0", "build": "h0_0", "depends": ["libzlib >=1.3", "python 3.11.*"],
  "files": {"bin/tool": {"text": "#!/bin/sh\\necho \"tool at ${TEXT_PH}/share/tool\"\\n", "placeholder": "${TEXT_PH}", "mode": 493},
            "bin/.tool-post-link.sh": "echo never run\\n",
            "etc/conda/activate.d/tool-activate.sh": {"text": "#!/bin/sh\\nif [ -n \"\${TOOL_DATA:-}\" ]; then\\n  export _CONDA_SET_TOOL_DATA=\$TOOL_DATA\\nfi\\nexport TOOL_DATA=\$CONDA_PREFIX/share/tool\\nexport TOOL_HOME=\"${TEXT_PH}/share\"\\nexport TOOL_FLAGS='-O2 -g'\\nexport TOOL_LATER=\$(uname)\\n", "placeholder": "${TEXT_PH}"},
            "etc/conda/env_vars.d/tool.json": "{\"TOOL_MODE\": \"fast\", \"TOOL_DATA\": \"replaced by the script\"}",
            "share/tool/data": "data\\n",
            "share/common.txt": "from tool\\n"}},
 {"name": "pytorch", "version": "2.3.1", "build": "py311_0", "depends": ["python >=3.11,<3.12.0a0"],
  "files": {"lib/python3.11/site-packages/torch/__init__.py": "x = 1\\n"}},
 {"name": "six", "version": "1.16.0", "build": "pyhd8ed1ab_0", "subdir": "noarch", "noarch": "python",
  "depends": ["python >=3.7"], "entry_points": ["sixer = six:main"],
  "files": {"site-packages/six.py": "def main():\\n    return 0\\n", "python-scripts/six-tool": "#!python\\n"}}
]}
JSON
python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/conda_channel.py" channel channel.json
start_http_server channel
CHANNEL=$HTTP_URL

make_busybox_root rootfs
ln -s busybox rootfs/bin/dirname
write_spec() { # PREFIX-YAML
  cat >lockstep.yaml <<YAML
lockstep: 1
name: condabuild
repos:
  - {conda: $CHANNEL}
packages:
  conda: [tool, six]
conda: {virtual_packages: {glibc: "2.36"}${1:-}}
copy: [{from: ./rootfs, to: /, mode: preserve}]
run:
  - tool > /tool.out && test "\$CONDA_PREFIX" = "\$(dirname "\$(dirname "\$(command -v tool)")")" && test "\$TOOL_DATA" = "\$CONDA_PREFIX/share/tool"
outputs: {oci: out}
YAML
}

# ---- lock and build ----------------------------------------------------------------------------
write_spec
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
assert_eq "libzlib python six tool" \
  "$(jq -r '[.artifacts[] | select(.kind == "conda") | .name] | sort | join(" ")' lockstep.lock)" "the locked set"
ls_run build
assert_eq 0 "$RC" "build: $ERR"
digest=$(last_line "$OUT")
assert_contains "$ERR" "conda link scripts are installed but not run" "link scripts are listed"
assert_contains "$ERR" "tool-1.0-h0_0 (bin/.tool-post-link.sh)" "the package with a link script is named"
ls_run build
assert_eq 0 "$RC" "build again: $ERR"
assert_contains "$ERR" "conda environment: 4 packages into /opt/conda (cached)" "the layer is cached"
assert_contains "$ERR" "tool-1.0-h0_0 (bin/.tool-post-link.sh)" "a cached layer still names the link scripts"
assert_eq "$digest" "$(last_line "$OUT")" "and the image is the same"
pass "a lock of conda packages builds into an image; a cached layer says the same"

umoci unpack --rootless --image out:latest bundle >/dev/null
R=bundle/rootfs
assert_eq "tool at /opt/conda/share/tool" "$(cat $R/tool.out)" \
  "the run step ran the relocated tool from PATH with CONDA_PREFIX set"
pass "a run step over the environment finds its programs on PATH"

# ---- the prefix, computed independently --------------------------------------------------------
# Each locked archive extracted by cph, then conda's rules applied by this script (not lockstep).
mkdir expected
jq -r '.artifacts[] | select(.kind == "conda") | "\(.name) \(.url)"' lockstep.lock >locked.txt
python3 - "$CHANNEL" expected <<'PY'
import hashlib, json, os, shutil, subprocess, sys, urllib.request
channel, out = sys.argv[1], sys.argv[2]
prefix = b"/opt/conda"
order = ["python", "libzlib", "tool", "six"]  # dependencies first; tool's share/common.txt wins
urls = dict(line.split() for line in open("locked.txt"))
for name in order:
    fn = urls[name].rsplit("/", 1)[1]
    with urllib.request.urlopen(urls[name]) as r, open(fn, "wb") as f:
        f.write(r.read())
    x = "x-" + name
    subprocess.run(["cph", "x", fn, "--dest", x], check=True, stdout=subprocess.DEVNULL)
    paths = json.load(open(os.path.join(x, "info", "paths.json")))["paths"]
    index = json.load(open(os.path.join(x, "info", "index.json")))
    for e in paths:
        src = os.path.join(x, e["_path"])
        rel = e["_path"]
        if index.get("noarch") == "python":
            if rel.startswith("site-packages/"):
                rel = "lib/python3.11/" + rel
            elif rel.startswith("python-scripts/"):
                rel = "bin/" + rel[len("python-scripts/"):]
        dst = os.path.join(out, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.lexists(dst):
            os.remove(dst)
        if e["path_type"] == "softlink":
            os.symlink(os.readlink(src), dst)
            continue
        data = open(src, "rb").read()
        ph = e.get("prefix_placeholder", "").encode()
        if ph and e.get("file_mode") == "binary":
            parts = data.split(b"\0")  # each C string holding the placeholder keeps its length
            data = b"\0".join(p.replace(ph, prefix) + b"\0" * (len(p) - len(p.replace(ph, prefix))) if ph in p else p
                              for p in parts)
        elif ph:
            data = data.replace(ph, prefix)
        open(dst, "wb").write(data)
        os.chmod(dst, 0o755 if os.stat(src).st_mode & 0o100 else 0o644)
PY
# What lockstep adds beyond the archives' files: the entry point and conda-meta.
got=$(tree_listing $R/opt/conda | grep -v '^./conda-meta' | grep -v '^./bin/sixer ')
assert_eq "$(tree_listing expected)" "$got" "the prefix's files, symlinks and modes"
pass "the prefix equals the archives after conda's prefix replacement, computed independently"

assert_eq "0" "$(cmp -s $R/opt/conda/share/common.txt x-tool/share/common.txt; echo $?)" \
  "the later package (tool, which depends on libzlib) wins share/common.txt"
assert_eq "#!/opt/conda/bin/python3.11" "$(head -n1 $R/opt/conda/bin/sixer)" "entry point shebang"
assert_contains "$(cat $R/opt/conda/bin/sixer)" "from six import main" "entry point imports its function"
assert_eq "755" "$(stat -c %a $R/opt/conda/bin/sixer)" "entry point mode"
pass "noarch: python entry points are written for the prefix's python"

# ---- conda-meta -----------------------------------------------------------------------------------
for name in python libzlib tool six; do
  read -r version build url sha md5 size < <(jq -r --arg n "$name" '.artifacts[] | select(.name == $n) |
    "\(.version) \(.build) \(.url) \(.sha256) \(.md5) \(.size)"' lockstep.lock)
  meta=$R/opt/conda/conda-meta/$name-$version-$build.json
  [ -f "$meta" ] || fail "conda-meta record of $name"
  assert_eq "$url ${sha#sha256:} $md5 $size" "$(jq -r '"\(.url) \(.sha256) \(.md5) \(.size)"' "$meta")" \
    "$name's conda-meta url, sha256, md5 and size are the lock's"
done
assert_contains "$(jq -c .files $R/opt/conda/conda-meta/six-1.16.0-pyhd8ed1ab_0.json)" \
  '"lib/python3.11/site-packages/six.py"' "six's record lists its relocated file"
assert_eq '["tool"]' "$(jq -c .requested_specs $R/opt/conda/conda-meta/tool-1.0-h0_0.json)" "requested spec"
assert_contains "$(cat $R/opt/conda/conda-meta/history)" "+$CHANNEL/linux-64::tool-1.0-h0_0" "history"
[ -f $R/opt/conda/conda-meta/frozen ] || fail "conda-meta/frozen"
pass "conda-meta has each package's record, history and frozen"

manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
config=$(jq -r .config.digest out/blobs/sha256/"$manifest" | cut -d: -f2)
env=$(jq -c .config.Env out/blobs/sha256/"$config")
assert_contains "$env" '"PATH=/opt/conda/bin:/usr/local/sbin:' "PATH starts with the prefix's bin"
assert_contains "$env" '"CONDA_PREFIX=/opt/conda"' "CONDA_PREFIX"
assert_eq '["TOOL_DATA=/opt/conda/share/tool","TOOL_MODE=fast","TOOL_HOME=/opt/conda/share","TOOL_FLAGS=-O2 -g"]' \
  "$(jq -c '[.[] | select(startswith("TOOL_") or startswith("_CONDA"))]' <<<"$env")" \
  "env_vars.d, then the activate.d script's top-level exports; not its conditional or command substitution"
assert_contains "$ERR" "etc/conda/activate.d/tool-activate.sh" "the script that was only partly evaluated is named"
pass "the image's Env activates the environment, the packages' activation variables included"

# `lockstep outdated` over a conda channel (its own copy under /od, so the rest is untouched): a
# newer libzlib published after the lock is listed, and nothing is written.
python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/conda_channel.py" channel/od channel.json
mkdir od
sed "s|{conda: $CHANNEL}|{conda: $CHANNEL/od}|" lockstep.yaml >od/lockstep.yaml
cp -r rootfs od/
ls_run lock od/lockstep.yaml
assert_eq 0 "$RC" "lock over /od: $ERR"
ls_run outdated od/lockstep.yaml
assert_eq 0 "$RC" "outdated right after locking: $OUT $ERR"
jq '.packages += [.packages[] | select(.name == "libzlib") | .version = "1.3.2"]' channel.json >channel-next.json
python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/conda_channel.py" channel/od channel-next.json
find channel/od -name 'repodata.json*' -exec touch -d "@$(($(date +%s) + 5))" {} +
cp od/lockstep.lock od/lock.before
ls_run outdated od/lockstep.lock --json
assert_eq 1 "$RC" "outdated after libzlib 1.3.2 was published: $OUT $ERR"
assert_eq "conda libzlib 1.3.1 1.3.2 false" \
  "$(jq -r '.packages[] | "\(.kind) \(.name) \(.locked) \(.available) \(.security)"' <<<"$OUT")" \
  "outdated lists the newer conda package"
cmp -s od/lockstep.lock od/lock.before || fail "outdated writes nothing"
pass "outdated lists a newer conda package in the channel (exit 1) and writes nothing"

# ---- verify, sbom, diff ----------------------------------------------------------------------------
ls_run verify oci:out --lock lockstep.lock --json
assert_eq 0 "$RC" "verify: $OUT $ERR"
assert_eq "true 4 []" "$(jq -c -r '"\(.ok) \(.checked.conda) \(.problems)"' <<<"$OUT")" \
  "verify checks the four conda packages' files against conda-meta and the lock"
# A run step that changes a conda file and removes another: verify names both, with their package.
mkdir tampered && cp lockstep.lock tampered/ && cp -r rootfs tampered/
sed -e 's|^  - tool > /tool.out.*|  - echo evil >> /opt/conda/share/tool/data \&\& rm /opt/conda/lib/libz.so.1|' \
  lockstep.yaml >tampered/lockstep.yaml
(cd tampered && "$LOCKSTEP" build -q >/dev/null 2>build.err) || fail "tampered build: $(cat tampered/build.err)"
ls_run verify tampered/out --lock lockstep.lock
assert_eq 1 "$RC" "verify of the tampered image: $OUT $ERR"
assert_eq "/opt/conda/lib/libz.so.1: missing (in libzlib 1.3.1=h4ab18f5_1's conda-meta record)
/opt/conda/share/tool/data: sha256 differs from tool 1.0=h0_0's conda-meta record" "$(head -n -1 <<<"$OUT")" \
  "exactly the changed and the removed file, with their packages"
pass "verify checks conda files against conda-meta and packages against the lock"

ls_run sbom lockstep.lock
assert_eq 0 "$RC" "sbom: $ERR"
assert_contains "$(jq -r '.packages[].externalRefs[]?.referenceLocator' <<<"$OUT")" \
  "pkg:conda/tool@1.0?build=h0_0&channel=$CHANNEL&subdir=linux-64&type=conda" "tool's purl"
printf '%s\n' "$OUT" >conda.spdx.json
"$LOCKSTEP" sbom --format cyclonedx-json lockstep.lock >conda.cdx.json
for doc in conda.spdx.json conda.cdx.json; do
  /usr/bin/python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/sbom_check.py" $doc lockstep.lock >/dev/null || fail "sbom_check: $doc"
done
pass "the SBOM lists conda packages as pkg:conda (SPDX and CycloneDX, judged by sbom_check.py)"

# The image without its lock: its conda-meta records, read by jq, are what the SBOM lists.
for f in $R/opt/conda/conda-meta/*.json; do jq -r '"conda \(.name) \(.version) \(.build)"' "$f"; done >conda.packages
ls_run sbom oci:out --scan -o scan.cdx.json
assert_eq 0 "$RC" "sbom --scan: $ERR"
/usr/bin/python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/sbom_check.py" scan.cdx.json --packages conda.packages \
  --subject "$digest" >/dev/null || fail "sbom_check of the scanned image"
assert_eq "$(jq -r '.artifacts[] | select(.kind == "conda" and .name == "tool") | .sha256' lockstep.lock)" \
  "$(jq -r '.components[] | select(.name == "tool") | .hashes[0].content' scan.cdx.json)" \
  "a conda package's sha256 comes from its conda-meta record"
pass "the image's conda-meta records, without the lock, give the same conda packages"

ls_run diff lockstep.lock oci:out
assert_eq 0 "$RC" "diff lock vs image: $OUT $ERR"
assert_contains "$OUT" "(conda, " "conda packages are compared"
ls_run diff lockstep.lock tampered/out
assert_eq 0 "$RC" "a changed file is verify's business, not diff's: $OUT"
pass "diff compares conda packages between the lock and the image"

# ---- export: an explicit file and a conda-lock.yml ------------------------------------------------
ls_run export --explicit env.txt
assert_eq 0 "$RC" "export --explicit: $ERR"
ls_run export --conda-lock conda-lock.yml
assert_eq 0 "$RC" "export --conda-lock: $ERR"
# Read as CEP 23 and CEP 37 say, against the lock: the regex conda's explicit reader uses, every
# package once with its URL and hashes, each after the packages it depends on.
/usr/bin/python3 - <<'PY' || fail "the exported files"
import json, re, yaml
lock = json.load(open("lockstep.lock"))
condas = {a["url"]: a for a in lock["artifacts"] if a["kind"] == "conda"}
pat = re.compile(r"(?:(?P<url_p>.+)(?:[/\\]))?(?P<fn>[^/\\#]+(?:\.tar\.bz2|\.conda))"
                 r"(?:#((?P<md5>[0-9a-f]{32})|((sha256:)?(?P<sha256>[0-9a-f]{64}))))?$")
lines = [l.strip() for l in open("env.txt") if l.strip() and not l.startswith("#")]
assert lines[0] == "@EXPLICIT", lines[0]
seen = []
for line in lines[1:]:
    m = pat.match(line)
    assert m, line
    url = line.split("#")[0]
    assert m.group("sha256") == condas[url]["sha256"], line
    seen.append(condas[url]["name"])
assert sorted(seen) == sorted(a["name"] for a in condas.values()), seen
for url, a in condas.items():
    for dep in a["depends"]:
        name = dep.split()[0]
        if name in seen:
            assert seen.index(name) < seen.index(a["name"]), (a["name"], name)
doc = yaml.safe_load(open("conda-lock.yml"))
assert doc["version"] == 1 and doc["metadata"]["platforms"] == ["linux-64"], doc["metadata"]
pkgs = {p["url"]: p for p in doc["package"]}
assert set(pkgs) == set(condas), set(pkgs) ^ set(condas)
for url, p in pkgs.items():
    a = condas[url]
    assert p["manager"] == "conda" and p["name"] == a["name"] and str(p["version"]) == a["version"], p
    assert p["hash"] == {"md5": a["md5"], "sha256": a["sha256"]}, p
    assert sorted(p["dependencies"]) == sorted(d.split()[0] for d in a["depends"]), p
PY
pass "export writes an explicit file and a conda-lock.yml that name exactly the lock's packages, in order"

# ---- wheels over the conda python ------------------------------------------------------------------
# pip's part goes into the environment's site-packages; a conda Python package counts as installed
# (six here): no wheel replaces it, and a request it can't meet names it.
mkdir -p pip/wheelhouse && cp -r rootfs pip/
make_wheel pip/wheelhouse einops 0.8.0 'Requires-Dist: six>=1.10' '' 'einops/__init__.py=X = 1\n' >/dev/null
make_wheel pip/wheelhouse torchvision 0.18.1 'Requires-Dist: torch==2.3.1' '' 'torchvision/__init__.py=X = 1\n' >/dev/null
write_pip_spec() { # PIP-REQUESTS
  cat >pip/lockstep.yaml <<YAML
lockstep: 1
name: condapip
repos:
  - {conda: $CHANNEL}
  - {wheels: wheelhouse}
packages:
  conda: [python=3.11, six]
  pip: [$1]
conda: {virtual_packages: {glibc: "2.36"}}
copy: [{from: ./rootfs, to: /, mode: preserve}]
outputs: {oci: out}
YAML
}
write_pip_spec '"einops==0.8.0"'
(cd pip && ls_run lock && [ "$RC" = 0 ]) || fail "lock with wheels over conda: $(cd pip && "$LOCKSTEP" lock 2>&1)"
assert_eq "einops" "$(jq -r '[.artifacts[] | select(.kind == "wheel") | .name] | join(" ")' pip/lockstep.lock)" \
  "einops is a wheel; six, which it needs, stays the conda package"
(cd pip && "$LOCKSTEP" build -q >/dev/null 2>build.err) || fail "build with wheels over conda: $(cat pip/build.err)"
rm -rf bundle && umoci unpack --rootless --image pip/out:latest bundle >/dev/null
[ -f $R/opt/conda/lib/python3.11/site-packages/einops/__init__.py ] || fail "einops in the environment's site-packages"
[ -f $R/opt/conda/lib/python3.11/site-packages/six.py ] || fail "six stays conda's"
ls_run verify pip/out --lock pip/lockstep.lock --json
assert_eq "true 1 2" "$(jq -r '"\(.ok) \(.checked.wheels) \(.checked.conda)"' <<<"$OUT")" "verify: the wheel and the conda packages"
write_pip_spec '"einops==0.8.0", "six>=2"'
(cd pip && "$LOCKSTEP" lock >/dev/null 2>lock.err) && fail "six>=2 over conda's six 1.16.0 locked"
assert_contains "$(cat pip/lock.err)" "conda package six 1.16.0 pyhd8ed1ab_0" "the conflict names the conda package"
write_pip_spec '"torchvision==0.18.1"'
sed -i 's/conda: \[python=3.11, six\]/conda: [python=3.11, six, pytorch]/' pip/lockstep.yaml
(cd pip && "$LOCKSTEP" lock >/dev/null 2>lock.err) || fail "torchvision over conda's pytorch: $(cat pip/lock.err)"
assert_eq "torchvision" "$(jq -r '[.artifacts[] | select(.kind == "wheel") | .name] | join(" ")' pip/lockstep.lock)" \
  "torchvision's torch==2.3.1 is conda's pytorch 2.3.1 (PyPI's torch), not a wheel"
write_pip_spec '"einops==0.8.0"' # the image's lock again, for init --from below
(cd pip && "$LOCKSTEP" lock >/dev/null 2>lock.err) || fail "relock: $(cat pip/lock.err)"
pass "wheels install into the conda environment; conda's Python packages count as installed, under their PyPI names"

# ---- init --from an installed environment: its exact builds ------------------------------------------
# The image's own /opt/conda (conda-meta, six from conda, einops from pip) read back as a spec.
mkdir roundtrip && cp -r $R/opt/conda roundtrip/env
ls_run init --from roundtrip/env -o roundtrip/lockstep.yaml
assert_eq 0 "$RC" "init --from an environment's prefix: $ERR"
spec=$(cat roundtrip/lockstep.yaml)
assert_contains "$spec" "  - conda: \"$CHANNEL\"" "the channel the packages came from"
six_sha=$(jq -r '.artifacts[] | select(.name == "six") | .sha256' pip/lockstep.lock)
assert_contains "$spec" "\"$CHANNEL::six==1.16.0=pyhd8ed1ab_0[sha256=$six_sha]\"" "six pinned to its build and sha256"
assert_contains "$spec" 'pip: ["einops==0.8.0"]' "what pip installed, pinned"
assert_contains "$spec" "conda: {channel_priority: flexible}" "each package from its own channel"
# Locked over the same channel (the Debian base swapped for the virtual glibc, to stay offline):
# the very packages of the environment.
sed -i -e '/^base:/d' -e '/^  - apt:/,/^    keyring:/d' -e '/^  apt:/d' -e '/pypi.org/d' -e '/^  pip:/d' \
  -e 's|^conda: {channel_priority: flexible}|conda: {channel_priority: flexible, virtual_packages: {glibc: "2.36"}}|' \
  roundtrip/lockstep.yaml
(cd roundtrip && "$LOCKSTEP" lock >/dev/null 2>lock.err) || fail "lock of the round trip: $(cat roundtrip/lock.err)"
assert_eq "$(jq -c '[.artifacts[] | select(.kind == "conda") | [.name, .sha256]] | sort' pip/lockstep.lock)" \
  "$(jq -c '[.artifacts[] | select(.kind == "conda") | [.name, .sha256]] | sort' roundtrip/lockstep.lock)" \
  "the same conda packages, byte for byte"
pass "init --from a conda prefix pins exactly the builds its conda-meta records"

# ---- vendor: the conda packages saved, the build offline from them ---------------------------------
ls_run vendor --to vend --json
assert_eq 0 "$RC" "vendor: $ERR"
assert_eq 4 "$(jq '[.files[] | select(.kind == "conda")] | length' vend/lockstep-vendor.json)" \
  "the four conda packages are indexed in the vendor directory"
rm -rf out
LOCKSTEP_CACHE=$PWD/store-offline ls_run build --locked --offline --mirror vend
assert_eq 0 "$RC" "offline build from the vendor directory: $ERR"
assert_eq "$digest" "$(last_line "$OUT")" "the same digest as the online build"
pass "lockstep vendor saves the conda packages, and an offline build from them gives the same image"

# ---- determinism ---------------------------------------------------------------------------------
rm -rf out
(umask 077 && LOCKSTEP_CACHE=$PWD/store2 "$LOCKSTEP" build >build2.out 2>build2.err) || fail "rebuild: $(cat build2.err)"
assert_eq "$digest" "$(last_line "$(cat build2.out)")" "same digest from an empty store under umask 077"
pass "the same lock gives the same image from an empty store"

write_spec ', prefix: /opt/env'
ls_run build
assert_eq 0 "$RC" "build with conda.prefix: $ERR"
rm -rf bundle && umoci unpack --rootless --image out:latest bundle >/dev/null
assert_eq "tool at /opt/env/share/tool" "$(cat $R/tool.out)" "the tool is relocated into /opt/env"
[ -d $R/opt/env/conda-meta ] && [ ! -e $R/opt/conda ] || fail "the prefix is /opt/env alone"
pass "conda.prefix moves the environment"

# ---- hostile packages ----------------------------------------------------------------------------
# Each: its own channel and lock; the build exits 2 naming the package and writes nothing.
hostile() { # WHAT PACKAGE-JSON EXPECTED-MESSAGE
  rm -rf hc out lockstep.lock && mkdir hc
  printf '{"packages": [%s]}' "$2" >hc.json
  python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/conda_channel.py" hc/channel hc.json
  cp -r hc/channel/. channel/
  # The server's Last-Modified has whole seconds: each new repodata gets a later one than the
  # last, or a conditional request within the same second would be told "not modified".
  hostile_n=$((${hostile_n:-0} + 1))
  find channel -name 'repodata.json*' -exec touch -d "@$(($(date +%s) + 10 * hostile_n))" {} +
  cat >lockstep.yaml <<YAML
lockstep: 1
name: condabad
repos:
  - {conda: $CHANNEL}
packages:
  conda: [bad]
outputs: {oci: out}
YAML
  ls_run lock --refresh
  assert_eq 0 "$RC" "$1: lock: $ERR"
  [ -n "${4:-}" ] && eval "$4"
  ls_run build
  assert_eq 2 "$RC" "$1: exit 2 ($ERR)"
  assert_contains "$ERR" "$3" "$1: the error"
  [ ! -e out ] || fail "$1: nothing is written"
}
hostile "a path out of the prefix" \
  '{"name": "bad", "version": "1", "build": "0", "files": {"a": "a"},
    "extra_paths": [{"_path": "../../etc/evil", "path_type": "hardlink", "sha256": "'"$(printf a | sha256sum | cut -c1-64)"'", "size_in_bytes": 1}]}' \
  "bad-1-0.conda"
hostile "a symlink out of the prefix" \
  '{"name": "bad", "version": "2", "build": "0", "files": {"lib/escape": {"symlink": "../../../etc/shadow"}}}' \
  "bad-2-0.conda"
hostile "a binary placeholder shorter than the prefix" \
  '{"name": "bad", "version": "3", "build": "0",
    "files": {"lib/short.so": {"text": "\u007fELF/ph/lib\u0000", "placeholder": "/ph", "file_mode": "binary"}}}' \
  "lib/short.so"
hostile "an archive that doesn't match the lock" \
  '{"name": "bad", "version": "4", "build": "0", "files": {"a": "a"}}' \
  "changed on the server or in transit" 'printf "x" >>channel/linux-64/bad-4-0.conda'
pass "hostile packages are exit 2, named, and nothing is written"

done_testing
