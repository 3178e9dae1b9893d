#!/usr/bin/env bash
# Hardening (issue 13, findings 5 and 6d): hostile input files end lockstep with exit 2 and a message,
# never a hang or a crash.
# - A FIFO as the spec, as an `extends` target and as lockstep.lock: refused at once, naming the path
#   (each command runs under `timeout 20`, so a regression that blocks in open(2) fails instead of
#   hanging the suite).
# - JSON nested 200,000 levels inside a lock's `inputs` (lock --check, build --locked), 100,000 and
#   300,000 levels inside an image config label (inspect, exec, verify, preflight, diff), and a YAML
#   spec nested 100,000 levels: exit 2 naming the file and the limit, never 139 (a stack overflow);
#   preflight reports per node, so there the image check fails (exit 1) with the same message.
# - An image config label that is not a string (the OCI image spec allows strings only).
# - A lock with two artifacts for one package, and a size of 2^63.
# As root and as an unprivileged user.
source "$(dirname "$0")/lib.sh"
need jq python3 timeout

cleanup() {
  local rc=$?
  cd /
  remove_test_user
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
add_test_user lsinp

# Runs `lockstep ARGS` as $AS under `timeout 20` in the current directory; sets OUT, ERR, RC.
lx() {
  set +e
  if [ "$AS" = root ]; then
    OUT=$(timeout 20 env LOCKSTEP_CACHE="$WORK/cache-root" "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  else
    OUT=$(timeout 20 runuser -u "$AS" -- env LOCKSTEP_CACHE="$WORK/cache-user" "$LOCKSTEP" "$@" \
      2>"$WORK/.stderr")
  fi
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}

# Expects exit 2 (not 124: a hang, not 139: a crash) and NEEDLE in the message.
expect_refused() { # NEEDLE WHAT
  [ "$RC" != 124 ] || fail "$2: still running after 20 s (as $AS)"
  [ "$RC" != 139 ] || fail "$2: crashed with a stack overflow (as $AS): $ERR"
  assert_eq 2 "$RC" "$2: exit code (as $AS): $ERR"
  assert_contains "$ERR" "$1" "$2 (as $AS)"
}

mkdir -p "$WORK/cache-root" "$WORK/cache-user"
[ -z "$TUSER" ] || chown "$TUSER" "$WORK/cache-user"

# ---- FIFOs ------------------------------------------------------------------------------------------
mkdir -p fifo/keys
cd fifo
echo key >keys/k.gpg
# A spec that needs a lock (packages from an apt repository nobody contacts: nothing gets that far).
cat >lockstep.yaml <<'YAML'
lockstep: 1
name: fifo
base: scratch
repos:
  - {apt: http://127.0.0.1:9/debian, suite: bookworm, components: [main], keyring: keys/k.gpg}
packages: {apt: [hello]}
outputs: {oci: out}
YAML
cat >child.yaml <<'YAML'
lockstep: 1
name: child
extends: [team.yaml]
outputs: {oci: out}
YAML
mkfifo team.yaml lockstep.lock spec-fifo.yaml
chmod 0644 team.yaml lockstep.lock spec-fifo.yaml
for AS in "${WHO[@]}"; do
  lx check child.yaml
  expect_refused "$WORK/fifo/team.yaml: it is a FIFO, not a regular file" "a FIFO as an extends target"
  lx check spec-fifo.yaml
  expect_refused "can't read spec-fifo.yaml: it is a FIFO, not a regular file" "a FIFO as the spec"
  lx lock --check
  expect_refused "$WORK/fifo/lockstep.lock: it is a FIFO, not a regular file" "a FIFO as lockstep.lock (lock --check)"
  lx build --locked
  expect_refused "$WORK/fifo/lockstep.lock: it is a FIFO, not a regular file" "a FIFO as lockstep.lock (build --locked)"
  pass "FIFOs as the spec, an extends target and lockstep.lock are refused at once, naming them (as $AS)"
done
cd "$WORK"

# ---- locks: nesting, duplicates, sizes ---------------------------------------------------------------
# A hand-written lock for fifo/lockstep.yaml: the parser refuses it before staleness is looked at.
mkdir -p locks/keys
cp fifo/lockstep.yaml locks/
cp fifo/keys/k.gpg locks/keys/
python3 - "$WORK/locks" <<'PY'
import sys
out = sys.argv[1]
h = "a" * 64
def artifact(name, arch="amd64", size="100"):
    return ('{"kind":"deb","name":"%s","version":"1.0-1","arch":"%s","group":"base","size":%s,'
            '"sha256":"%s","url":"http://127.0.0.1:9/debian/pool/%s.deb","repo":0}' % (name, arch, size, h, name))
def lock(inputs, artifacts):
    return ('{\n  "lockstep-lock": 1,\n  "tool": "lockstep 0.1.0",\n  "spec-digest": "sha256:%s",\n'
            '  "epoch": 0,\n  "platform": "linux/amd64",\n  "inputs": %s,\n'
            '  "repos": [{"kind":"apt","url":"http://127.0.0.1:9/debian","suite":"bookworm","components":["main"],'
            '"release-date":"Sat, 15 Mar 2025 10:00:00 UTC","release-sha256":"%s"}],\n'
            '  "artifacts": [\n    %s\n  ]\n}\n' % (h, inputs, h, ",\n    ".join(artifacts)))
n = 200000
open(out + "/deep.lock", "w").write(lock('{"platform":"linux/amd64","x":' + "[" * n + "]" * n + "}", [artifact("hello")]))
open(out + "/dup.lock", "w").write(lock('{"platform":"linux/amd64"}',
                                        [artifact("hello"), artifact("libc6"), artifact("hello")]))
open(out + "/size.lock", "w").write(lock('{"platform":"linux/amd64"}', [artifact("hello", size="9223372036854775808")]))
PY
cd locks
for AS in "${WHO[@]}"; do
  for cmd in "lock --check --lock deep.lock" "build --locked --lock deep.lock"; do
    # shellcheck disable=SC2086 # the command's words
    lx $cmd
    expect_refused "$WORK/locks/deep.lock: JSON nested more than 128 levels deep (line 7, column 169); refusing it" \
      "a lock nested 200,000 levels ($cmd)"
  done
  lx lock --check --lock dup.lock
  expect_refused "$WORK/locks/dup.lock: artifacts[2]: duplicate deb package 'hello' (amd64), first at artifacts[0]" \
    "duplicate artifacts"
  lx lock --check --lock size.lock
  expect_refused "$WORK/locks/size.lock: artifacts[0].size: 9223372036854775808 is too large (the limit is 9223372036854775807)" \
    "a size of 2^63"
  pass "locks nested 200,000 levels, with a duplicate artifact or a size of 2^63 are refused (exit 2) (as $AS)"
done
cd "$WORK"

# ---- a spec nested 100,000 levels (yaml-cpp's parser recurses per level) ----------------------------
mkdir -p deepspec
python3 -c 'import sys; open(sys.argv[1], "w").write("lockstep: 1\nname: deep\nlabels: " + "[" * 100000 + "\n")' \
  deepspec/lockstep.yaml
for AS in "${WHO[@]}"; do
  lx check deepspec/lockstep.yaml
  expect_refused "lockstep.yaml:3:" "a spec nested 100,000 levels"
  assert_contains "$ERR" "nested more than 128 levels deep; refusing to read further" "the YAML limit (as $AS)"
  # The quote is a window of the line around the bracket, not the 100,000 brackets.
  [ "${#ERR}" -lt 2000 ] || fail "the error quotes ${#ERR} bytes of the spec (as $AS)"
  pass "a spec nested 100,000 levels is refused at the bracket that goes too deep, quoting a window of its line (as $AS)"
done

# ---- image configs ------------------------------------------------------------------------------------
mkdir -p img/app
echo hello >img/app/hello.txt
cat >img/lockstep.yaml <<'YAML'
lockstep: 1
name: tiny
base: scratch
copy: [{from: ./app, to: /opt/app/}]
labels: {org.example.team: hpc}
YAML
AS=root lx build --oci "$WORK/tiny" img/lockstep.yaml
assert_eq 0 "$RC" "building the tiny image: $ERR"

# Copies the layout at $WORK/tiny to $WORK/NAME with the config label "deep" set to VALUE (JSON text,
# spliced in as is), the config, manifest and index re-digested.
with_label() { # NAME VALUE-PYTHON-EXPRESSION
  rm -rf "$WORK/$1" && cp -a "$WORK/tiny" "$WORK/$1"
  python3 - "$WORK/$1" "$2" <<'PY'
import hashlib, json, sys
layout, expr = sys.argv[1], sys.argv[2]
value = eval(expr)
def blob(d):
    return layout + "/blobs/sha256/" + d.split(":")[1]
def put(data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    open(blob(d), "wb").write(data)
    return d, len(data)
index = json.load(open(layout + "/index.json"))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
config = json.load(open(blob(manifest["config"]["digest"])))
config["config"]["Labels"]["deep"] = "@VALUE@"
data = json.dumps(config, sort_keys=True, separators=(",", ":")).replace('"@VALUE@"', value).encode()
manifest["config"]["digest"], manifest["config"]["size"] = put(data)
index["manifests"][0]["digest"], index["manifests"][0]["size"] = put(
    json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
open(layout + "/index.json", "w").write(json.dumps(index))
PY
  chmod -R a+rX "$WORK/$1"
}
with_label deep100k '"[" * 100000 + "]" * 100000'
with_label deep300k '"{\"a\":" * 300000 + "1" + "}" * 300000'
with_label number '"42"'
with_label object '"{\"a\":\"b\"}"'

for AS in "${WHO[@]}"; do
  for layout in deep100k deep300k; do
    for cmd in inspect exec verify preflight diff; do
      case $cmd in
        exec) lx exec "oci:$WORK/$layout" -- /bin/true ;;
        diff) lx diff "oci:$WORK/tiny" "oci:$WORK/$layout" ;;
        *) lx "$cmd" "oci:$WORK/$layout" ;;
      esac
      if [ "$cmd" = preflight ]; then
        # preflight reports per node: the image check fails (exit 1) with the reader's message.
        [ "$RC" != 139 ] || fail "preflight crashed with a stack overflow ($layout, as $AS)"
        assert_eq 1 "$RC" "preflight of $layout (as $AS): $ERR"
        assert_contains "$OUT" "image: can't read the image: oci:$WORK/$layout: config sha256:" "preflight ($layout)"
        assert_contains "$OUT" "JSON nested more than 128 levels deep" "preflight ($layout, as $AS)"
        continue
      fi
      expect_refused "JSON nested more than 128 levels deep" "$cmd of an image whose config label nests ($layout)"
      assert_contains "$ERR" "config sha256:" "$cmd names the config ($layout, as $AS)"
    done
  done
  pass "image configs nested 100,000 and 300,000 levels: inspect, exec, verify, diff exit 2; preflight's image check fails (as $AS)"
  for layout in number object; do
    for cmd in inspect exec verify preflight; do
      if [ "$cmd" = exec ]; then lx exec "oci:$WORK/$layout" -- /bin/true; else lx "$cmd" "oci:$WORK/$layout"; fi
      if [ "$cmd" = preflight ]; then
        assert_eq 1 "$RC" "preflight of $layout (as $AS): $ERR"
        assert_contains "$OUT" "the image config's label 'deep' is" "preflight ($layout, as $AS)"
        continue
      fi
      expect_refused "the image config's label 'deep' is" "$cmd of an image whose label is not a string ($layout)"
      assert_contains "$ERR" "not a string (the OCI image spec allows only strings)" "$cmd ($layout, as $AS)"
    done
  done
  pass "a config label that is a number or an object is refused (exit 2; preflight: its image check fails) (as $AS)"
done

# ---- escape sequences in input never reach the terminal (issue 34, finding 6) ----------------------
# ESC]0;TITLE BEL retitles a terminal, ESC[2J clears it: in an image reference on the command line,
# in a spec's base and in a spec key, the error shows them escaped (\x1b, \x07), never raw.
ESCAPES=$'\e]0;pwned\a\e[2J'
mkdir -p escspec
printf 'lockstep: 1\nname: esc\nbase: {image: "docker://reg.invalid/a%s:1"}\n' "$ESCAPES" >escspec/lockstep.yaml
printf 'lockstep: 1\nname: esc\n"bad%skey": 1\n' "$ESCAPES" >escspec/key.yaml
AS=root
for args in "inspect docker://reg.invalid/a${ESCAPES}b:1" "inspect oci:./no${ESCAPES}where" \
  "lock escspec/lockstep.yaml" "check escspec/key.yaml" "exec --bogus${ESCAPES}flag x"; do
  read -ra argv <<<"$args"
  lx "${argv[@]}"
  [ "$RC" != 0 ] || fail "lockstep $args succeeded"
  if [[ "$ERR$OUT" == *$'\e'* || "$ERR$OUT" == *$'\a'* ]]; then
    fail "lockstep ${argv[0]}: a raw escape sequence reached the terminal: $(printf '%q' "$ERR")"
  fi
  assert_contains "$ERR" '\x1b' "the escape is shown escaped (lockstep ${argv[0]})"
done
pass "escape sequences in a reference, a spec value, a spec key and a flag are shown escaped, never raw"

# The untouched image still reads (the checks above fail for the right reason).
AS=root lx inspect "oci:$WORK/tiny"
assert_eq 0 "$RC" "inspect of the untouched image: $ERR"
pass "the untouched image still inspects"

done_testing
