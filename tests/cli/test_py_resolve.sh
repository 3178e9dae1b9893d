#!/usr/bin/env bash
# The Python resolver (docs/python-resolver.md), judged by pip: on hermetic indexes served on
# 127.0.0.1 (tests/cli/py_index.py; PEP 691 JSON to clients that ask, PEP 503 HTML to others, PEP
# 658 metadata files), `lockstep lock` must choose exactly the versions that
# `pip install --dry-run --report - --only-binary=:all: --python-version 3.11` chooses:
#   - for generated dependency graphs with backtracking, extras, markers, yanked files,
#     pre-releases and Requires-Python (and where pip finds no solution, neither does lockstep);
#   - for a graph shaped like a PyTorch training project (150+ distributions).
# Then: each wheel's lock reason is the chain from a top-level request; unsatisfiable requests
# give the whole derivation, located at the spec entry; `lock --update NAME` moves NAME only.
source "$(dirname "$0")/lib.sh"
need jq python3 gpg gpgconf dpkg-deb sha256sum

# pip is the oracle: Debian's python3-pip (any pip >= 22.2 has --dry-run --report).
PIP_PY=""
for py in /usr/bin/python3 python3; do
  if "$py" -m pip --version >/dev/null 2>&1; then
    PIP_PY=$py
    break
  fi
done
if [ -z "$PIP_PY" ]; then
  [ -z "${CI:-}" ] || fail "pip is needed as the oracle (scripts/install-deps.sh installs python3-pip)"
  echo "SKIP: no python3 with pip (apt-get install python3-pip)" >&2
  exit 77
fi
SEEDS=${LOCKSTEP_RESOLVE_SEEDS:-40}
INDEX_PY="$LOCKSTEP_SOURCE_DIR/tests/cli/py_index.py"

mkdir -p "$WORK/www"
make_python_apt_repo "$WORK/www/apt"
start_http_server "$WORK/www" "$INDEX_PY"

# pip_choice DIR: "name==version" per line (names normalised), sorted; "no solution" when pip finds
# none.
pip_choice() {
  local dir=$1 report
  if ! report=$(cd "$dir" && PIP_CONFIG_FILE=/dev/null \
    "$PIP_PY" -m pip --isolated --disable-pip-version-check install --dry-run --report - --quiet --only-binary=:all: --python-version 3.11 \
    --ignore-installed --no-cache-dir --target "$dir/.pip-target" \
    --index-url "$HTTP_URL/$(basename "$dir")/simple" -r requirements.in 2>pip.err); then
    grep -q "ResolutionImpossible\|conflicting dependencies\|No matching distribution" "$dir/pip.err" ||
      fail "pip failed for another reason in $dir: $(cat "$dir/pip.err")"
    echo "no solution"
    return
  fi
  jq -r '.install[] | "\(.metadata.name | ascii_downcase | gsub("[-_.]+"; "-"))==\(.metadata.version)"' \
    <<<"$report" | LC_ALL=C sort
}

# lockstep_spec DIR [index=NAME] [apt=YAML] [pip=YAML|none] [stack=YAML]: DIR/lockstep.yaml over the
# fake apt repository and the index served from DIR (or www/NAME); packages.apt [python3] and
# packages.pip [{requirements: requirements.in}] unless given.
lockstep_spec() {
  local dir=$1 index apt="[python3]" pip="[{requirements: requirements.in}]" stack="" kv
  index=$(basename "$dir")
  shift
  for kv in "$@"; do
    case $kv in
    index=*) index=${kv#index=} ;;
    apt=*) apt=${kv#apt=} ;;
    pip=*) pip=${kv#pip=} ;;
    stack=*) stack=${kv#stack=} ;;
    *) fail "lockstep_spec: unknown setting $kv" ;;
    esac
  done
  cp "$WORK/www/apt/keyring.gpg" "$dir/apt-keyring.gpg"
  {
    cat <<YAML
lockstep: 1
name: resolve
repos:
  - {apt: $HTTP_URL/apt, flat: true, keyring: apt-keyring.gpg}
  - {pypi: $HTTP_URL/$index/simple}
YAML
    [ -z "$stack" ] || echo "stack: $stack"
    echo "packages:"
    echo "  apt: $apt"
    [ "$pip" = none ] || echo "  pip: $pip"
    echo "outputs: {oci: out}"
  } >"$dir/lockstep.yaml"
}

# lock_in DIR [ARGS...]: `lockstep lock ARGS` in DIR, its exit status in DIR/rc and stderr in DIR/err.
lock_in() {
  local dir=$1
  shift
  (cd "$dir" && ls_run lock "$@" && printf '%s\n' "$RC" >rc && printf '%s\n' "$ERR" >err)
}

# lockstep_choice DIR: the same form from `lockstep lock` ("no solution" on exit 2 with the
# derivation).
lockstep_choice() {
  local dir=$1
  lockstep_spec "$dir"
  lock_in "$dir"
  local rc
  rc=$(cat "$dir/rc")
  if [ "$rc" = 2 ] && grep -q "no set of Python packages satisfies" "$dir/err"; then
    echo "no solution"
    return
  fi
  [ "$rc" = 0 ] || fail "lockstep lock in $dir: exit $rc: $(cat "$dir/err")"
  jq -r '.artifacts[] | select(.kind == "wheel") | "\(.name)==\(.version)"' "$dir/lockstep.lock" | LC_ALL=C sort
}

# ---- generated graphs ------------------------------------------------------------------------------
solved=0
unsolved=0
for seed in $(seq 1 "$SEEDS"); do
  dir="$WORK/www/r$seed"
  "$PIP_PY" "$INDEX_PY" random "$seed" "$dir"
  want=$(pip_choice "$dir")
  got=$(lockstep_choice "$dir")
  if [ "$want" != "$got" ]; then
    fail "graph $seed ($(tr '\n' ' ' <"$dir/requirements.in")): pip chose [$(tr '\n' ' ' <<<"$want")], lockstep [$(tr '\n' ' ' <<<"$got")]; $(cat "$dir/err")"
  fi
  if [ "$want" = "no solution" ]; then
    unsolved=$((unsolved + 1))
  else
    solved=$((solved + 1))
  fi
done
[ "$solved" -ge $((SEEDS / 2)) ] || fail "only $solved of $SEEDS generated graphs have a solution: the generator needs retuning"
pass "lockstep and pip choose the same versions on $SEEDS generated graphs ($solved solved, $unsolved without a solution)"

# ---- a training project -----------------------------------------------------------------------------
dir="$WORK/www/training"
"$PIP_PY" "$INDEX_PY" training "$dir"
want=$(pip_choice "$dir")
[ "$want" != "no solution" ] || fail "pip finds no solution for the training graph: $(cat "$dir/pip.err")"
got=$(lockstep_choice "$dir")
assert_eq "$want" "$got" "the training project's versions"
count=$(wc -l <<<"$got")
[ "$count" -ge 150 ] || fail "the training project has only $count distributions"
pass "lockstep and pip choose the same $count distributions for a PyTorch training project"

# Every wheel says why it is there: a chain from a top-level request.
reasons=$(jq -r '.artifacts[] | select(.kind == "wheel") | .reason' "$dir/lockstep.lock")
while read -r reason; do
  case "$reason" in
    "requested by requirements.in:"*) ;;
    *) fail "a reason that does not start at a request: $reason" ;;
  esac
done <<<"$reasons"
smmap=$(jq -r '.artifacts[] | select(.name == "smmap") | .reason' "$dir/lockstep.lock")
assert_contains "$smmap" " -> gitdb " "smmap comes in through gitdb"
assert_contains "$smmap" "needs smmap" "the last link names the requirement on smmap"
pass "each wheel's reason is the chain from a top-level request"

# ---- the lock's wheels exported for pip and for PEP 751 readers ---------------------------------
(cd "$dir" && ls_run export --requirements requirements.txt && [ "$RC" = 0 ]) || fail "export --requirements: $ERR"
(cd "$dir" && ls_run export --pylock pylock.toml && [ "$RC" = 0 ]) || fail "export --pylock: $ERR"
assert_contains "$(cat "$dir/requirements.txt")" "--index-url $HTTP_URL/training/simple" "the requirements name the index"
"$PIP_PY" -m venv "$WORK/venv"
(cd "$dir" && PIP_CONFIG_FILE=/dev/null "$WORK/venv/bin/python" -m pip --isolated --disable-pip-version-check \
  install --quiet --require-hashes --no-deps -r requirements.txt) >"$WORK/pip-install.log" 2>&1 ||
  fail "pip install --require-hashes --no-deps of the export: $(cat "$WORK/pip-install.log")"
"$WORK/venv/bin/python" -m pip --isolated check >"$WORK/pip-check.log" 2>&1 ||
  fail "pip check after installing the export: $(cat "$WORK/pip-check.log")"
installed=$("$WORK/venv/bin/python" -m pip --isolated list --format json |
  jq -r '.[] | "\(.name | ascii_downcase | gsub("[-_.]+"; "-"))==\(.version)"' | grep -v '^pip==' | LC_ALL=C sort)
assert_eq "$got" "$installed" "the venv holds exactly the locked versions"
# A small PEP 751 reader (Python's tomllib): the required keys, and each wheel's size and sha256
# against the file its URL serves.
"$PIP_PY" - "$dir/pylock.toml" "$dir/lockstep.lock" <<'PY' || fail "the PEP 751 reader refused pylock.toml"
import hashlib, json, sys, tomllib, urllib.request
lock = tomllib.load(open(sys.argv[1], "rb"))
assert lock["lock-version"] == "1.0", lock.get("lock-version")
assert lock["created-by"] == "lockstep"
assert lock["requires-python"] == "==3.11.*", lock["requires-python"]
ours = {a["name"]: a for a in json.load(open(sys.argv[2]))["artifacts"] if a["kind"] == "wheel"}
names = [p["name"] for p in lock["packages"]]
assert names == sorted(names) and set(names) == set(ours), "packages differ from the lock"
for p in lock["packages"]:
    assert p["version"] == ours[p["name"]]["version"], p["name"]
    (w,) = p["wheels"]
    data = urllib.request.urlopen(w["url"]).read()
    assert len(data) == w["size"], (p["name"], len(data), w["size"])
    assert hashlib.sha256(data).hexdigest() == w["hashes"]["sha256"], p["name"]
    assert w["name"] == w["url"].rsplit("/", 1)[1], w
print(f"pylock.toml: {len(names)} packages read and checked")
PY
pass "export --requirements installs with pip --require-hashes --no-deps (pip check clean); a PEP 751 reader reads --pylock"

# ---- the project files people have: pyproject.toml and a conda environment.yml -------------------
dir="$WORK/www/training"
torch_pin=$(head -1 "$dir/requirements.in")   # torch==X.Y, a version the index has
cat >"$dir/pyproject.toml" <<TOML
[project]
name = "trainer"
version = "0.1"
dependencies = ["$torch_pin", "transformers", "einops<2"]

[project.optional-dependencies]
tracking = ["wandb", "tensorboard"]
all = ["trainer[tracking]", "rich"]
TOML
write_project_spec() { # PIP-ITEM: the training spec with packages.pip: [PIP-ITEM]
  lockstep_spec "$dir" index=training "pip=[$1]"
  rm -f "$dir/lockstep.lock"
}
write_project_spec "{pyproject: pyproject.toml, extras: [all]}"
(cd "$dir" && ls_run lock && [ "$RC" = 0 ]) || fail "lock from pyproject.toml: $ERR"
for p in torch transformers einops wandb tensorboard rich; do
  jq -e --arg p "$p" '.artifacts[] | select(.name == $p)' "$dir/lockstep.lock" >/dev/null ||
    fail "$p (from pyproject.toml) is not in the lock"
done
assert_eq "${torch_pin#torch==}" "$(jq -r '.artifacts[] | select(.name == "torch") | .version' "$dir/lockstep.lock")" "torch as pinned"
assert_contains "$(jq -r '.artifacts[] | select(.name == "wandb") | .reason' "$dir/lockstep.lock")" "requested by pyproject.toml:7 (wandb)" \
  "a requirement from an extra names its line"
write_project_spec "{pyproject: pyproject.toml, extras: [gpu]}"
ls_run lock "$dir/lockstep.yaml"
assert_eq 2 "$RC" "an unknown extra"
assert_contains "$ERR" "pyproject.toml: no optional dependencies 'gpu' in [project.optional-dependencies] (it has all, tracking)" \
  "the extras there are named"
pass "{pyproject: FILE, extras: [...]} locks [project].dependencies and the optional dependencies asked for"

cat >"$dir/environment.yml" <<YAML
name: trainer
channels: [pytorch, nvidia, conda-forge]
dependencies:
  - python=3.11
  - pytorch::pytorch=${torch_pin#torch==}
  - conda-forge::numpy>=1.0
  - matplotlib-base
  - libgcc-ng
  - pip
  - pip:
      - einops
      - transformers[torch]
YAML
write_project_spec "{conda-env: environment.yml}"
(cd "$dir" && ls_run lock && [ "$RC" = 0 ]) || fail "lock from environment.yml: $ERR"
for p in torch numpy matplotlib einops transformers accelerate; do
  jq -e --arg p "$p" '.artifacts[] | select(.name == $p)' "$dir/lockstep.lock" >/dev/null ||
    fail "$p (from environment.yml) is not in the lock"
done
assert_eq "${torch_pin#torch==}" "$(jq -r '.artifacts[] | select(.name == "torch") | .version' "$dir/lockstep.lock")" \
  "conda's pytorch=X is torch X.*"
assert_eq '"3.11"' "$(jq -c '.stack.choices[]? | select(.component == "python") | .version' "$dir/lockstep.lock")" \
  "the python pin is stack.python"
cat >>"$dir/environment.yml" <<YAML
  - some-conda-only-lib=1.2
  - pytorch-cuda=12.1|12.4
YAML
ls_run lock "$dir/lockstep.yaml"
assert_eq 2 "$RC" "unknown conda packages"
assert_contains "$ERR" "environment.yml:13: some-conda-only-lib" "the unknown package and its line"
assert_contains "$ERR" "move them to the environment's pip: section" "the suggestion"
assert_contains "$ERR" "environment.yml:14: 'pytorch-cuda=12.1|12.4': conda's '|'" "a form lockstep can't translate"
pass "{conda-env: FILE} maps conda packages through recipes/conda/conda-names.yaml, takes pip: as is and python as stack.python; the rest are listed together"

# ---- the stack: the framework wheel's metadata, not the recipe, is the source of the full set -------
dir="$WORK/www/torch"
"$PIP_PY" "$INDEX_PY" torch "$dir"
stack_spec() { # STACK-YAML
  lockstep_spec "$dir" "stack=$1" pip=none
  rm -f "$dir/lockstep.lock"
}
torch_wheels() { jq -r '[.artifacts[] | select(.kind == "wheel") | .name] | join(" ")' "$dir/lockstep.lock"; }
# cu118 (experimental): the recipe pins triton alone; torch's Requires-Dist brings the nvidia-* wheels.
stack_spec '{framework: pytorch@2.0.0, cuda: "11.8"}'
ls_run lock "$dir/lockstep.yaml"
assert_eq 0 "$RC" "lock the cu118 stack: $ERR"
assert_contains "$(torch_wheels)" "nvidia-cudnn-cu11 nvidia-cufft-cu11" "torch's nvidia-* wheels are locked"
assert_eq "requested by stack.framework (torch==2.0.0) -> torch 2.0.0 needs nvidia-cuda-runtime-cu11==11.7.99" \
  "$(jq -r '.artifacts[] | select(.name == "nvidia-cuda-runtime-cu11") | .reason' "$dir/lockstep.lock")" \
  "the chain says torch's metadata asked for it"
# cu117 (stable): the recipe pins nvidia-nvtx-cu11 too, which this torch's metadata doesn't list.
stack_spec '{framework: pytorch@2.0.0}'
ls_run lock "$dir/lockstep.yaml"
assert_eq 0 "$RC" "lock the cu117 stack: $ERR"
assert_contains "$ERR" "stack.framework pins nvidia-nvtx-cu11==11.7.91, but no chosen wheel's metadata requires it" \
  "a recipe pin the wheel doesn't ask for is reported"
pass "stack: the framework wheel's metadata completes the recipe's pins, and a pin it doesn't list is reported"

# ---- an unsatisfiable request: the whole derivation, located at the spec entry ------------------
dir="$WORK/www/conflict"
"$PIP_PY" "$INDEX_PY" conflict "$dir"
assert_eq "no solution" "$(pip_choice "$dir")" "pip finds no solution either"
lockstep_spec "$dir" 'pip=["transformers>=4.43", "huggingface-hub>=1.0"]'
lock_in "$dir"
assert_eq 2 "$(cat "$dir/rc")" "an unsatisfiable request is invalid input"
derivation=$(sed -n '/error: packages.pip\[0\]:/,/^change /p' "$dir/err" | sed 's/^.*error: //')
assert_eq "packages.pip[0]: no set of Python packages satisfies the request for cp311 manylinux x86_64 (CPython 3.11.2, glibc 2.36):
  Because transformers 4.43.0 needs tokenizers<0.20,>=0.19 and transformers 4.44.0 needs tokenizers<0.20,>=0.19, transformers needs tokenizers 0.19.1.
  And because tokenizers 0.19.1 needs huggingface-hub<1.0,>=0.16.4, transformers needs huggingface-hub 0.24.6.
  And because packages.pip[0] asks for transformers>=4.43 and packages.pip[1] asks for huggingface-hub>=1.0, version solving failed.
change packages.pip[0] or packages.pip[1]" "$derivation" "the derivation"
assert_contains "$(cat "$dir/err")" "lockstep.yaml:8:9: error: packages.pip[0]" "located at the first request it rests on"
[ ! -e "$dir/lockstep.lock" ] || fail "a failed lock wrote lockstep.lock"
pass "an unsatisfiable request gives the whole derivation, located at the spec entry; nothing is written"

# ---- a hostile index: the pigeonhole family (issue 34) -------------------------------------------
# pgI==h requires pgJ!=h for every other J: a few kilobytes of metadata whose search grows about
# tenfold with each project. The solver gives up at its bounds with an error naming them, its
# explanation stays bounded, and it answers SIGINT at once.
dir="$WORK/www/pigeon9"
"$PIP_PY" "$INDEX_PY" pigeonhole 9 "$dir"
lockstep_spec "$dir"
lock_in "$dir"
assert_eq 2 "$(cat "$dir/rc")" "the pigeonhole index of 9 has no solution"
assert_contains "$(cat "$dir/err")" "version solving failed" "its derivation ends with the conclusion"
assert_contains "$(cat "$dir/err")" "left out" "a long derivation says what it leaves out"
[ "$(wc -c <"$dir/err")" -lt 100000 ] || fail "the explanation is $(wc -c <"$dir/err") bytes"
lock_in "$dir" --resolver-steps 200
assert_eq 2 "$(cat "$dir/rc")" "a solve past --resolver-steps"
assert_contains "$(cat "$dir/err")" "gave up after 200 steps" "the error names the bound"
assert_contains "$(cat "$dir/err")" "--resolver-steps N" "the error says how to raise it"
[ ! -e "$dir/lockstep.lock" ] || fail "a failed lock wrote lockstep.lock"
pass "a pigeonhole index: the explanation is bounded, and --resolver-steps stops the search with exit 2 naming it"

dir="$WORK/www/pigeon14"
"$PIP_PY" "$INDEX_PY" pigeonhole 14 "$dir"
lockstep_spec "$dir"
: >"$WORK/pigeon14.err"
(cd "$dir" && exec "$LOCKSTEP" lock 2>"$WORK/pigeon14.err") &
pid=$!
# Once the solver has asked for a project's metadata it is searching: the signal goes then.
for _ in $(seq 1 1200); do
  grep -q 'pigeon14/.*pg14-.*metadata' "$HTTP_LOG" && break
  kill -0 "$pid" 2>/dev/null || fail "lock of the pigeonhole index ended early: $(cat "$WORK/pigeon14.err")"
  sleep 0.05
done
kill -INT "$pid"
# A watchdog, not a timing check: a solver that ignores the signal runs for minutes.
(sleep 60 && kill -KILL "$pid" 2>/dev/null) &
watchdog=$!
rc=0
wait "$pid" || rc=$?
kill "$watchdog" 2>/dev/null || true
assert_eq 130 "$rc" "lock interrupted in the middle of a hard solve: $(cat "$WORK/pigeon14.err")"
[ ! -e "$dir/lockstep.lock" ] || fail "an interrupted lock wrote lockstep.lock"
pass "SIGINT stops a hard solve with exit 130 and no lock"

# ---- re-locking: nothing moves unasked; --update NAME moves NAME ---------------------------------
dir="$WORK/www/moving"
release() { # VERSION-OF-APP VERSION-OF-LIB: adds a release of each to the index
  "$PIP_PY" - "$dir" "$1" "$2" <<PY
import json, os, sys
sys.path.insert(0, "$LOCKSTEP_SOURCE_DIR/tests/cli")
import py_index
root, app, lib = sys.argv[1:]
index = py_index.Index(root)
state = os.path.join(root, "releases.json")
releases = json.load(open(state)) if os.path.exists(state) else []
releases.append([app, lib])
for a, l in releases:
    index.wheel("app", a, ["lib>=1.0"])
    index.wheel("lib", l, [])
index.write(["app"])
json.dump(releases, open(state, "w"))
PY
}
release 1.0 1.0
lockstep_spec "$dir"
moving() { jq -r '[.artifacts[] | select(.kind == "wheel") | "\(.name)==\(.version)"] | join(" ")' "$dir/lockstep.lock"; }
(cd "$dir" && ls_run lock && [ "$RC" = 0 ]) || fail "lock the first releases"
assert_eq "app==1.0 lib==1.0" "$(moving)" "the first lock"
release 1.1 1.1
(cd "$dir" && ls_run lock && [ "$RC" = 0 ]) || fail "lock again"
assert_eq "app==1.0 lib==1.0" "$(moving)" "new releases move nothing unasked"
(cd "$dir" && ls_run lock --update app && [ "$RC" = 0 ]) || fail "lock --update app"
assert_eq "app==1.1 lib==1.0" "$(moving)" "--update app moves app only (lib 1.0 still fits)"
(cd "$dir" && ls_run lock --update && [ "$RC" = 0 ]) || fail "lock --update"
assert_eq "app==1.1 lib==1.1" "$(moving)" "--update without names moves everything"
# The index's pages say max-age=600: a plain lock reuses them, but when they hold no solution it
# reads them again before giving up (a release newer than the cache).
release 1.2 1.1
echo "app>=1.2" >"$dir/requirements.in"
(cd "$dir" && ls_run lock && printf '%s\n' "$ERR" >err && [ "$RC" = 0 ]) || fail "lock app>=1.2 after its release"
assert_contains "$(cat "$dir/err")" "reading them again" "the cached pages were read again"
assert_eq "app==1.2 lib==1.1" "$(moving)" "a release newer than the cached page is found"
# --refresh reads the pages first, so nothing has to be read again.
release 1.3 1.1
echo "app>=1.3" >"$dir/requirements.in"
(cd "$dir" && ls_run lock --refresh && printf '%s\n' "$ERR" >err && [ "$RC" = 0 ]) || fail "lock --refresh app>=1.3"
assert_not_contains "$(cat "$dir/err")" "reading them again" "--refresh does not start from the cached pages"
assert_eq "app==1.3 lib==1.1" "$(moving)" "lock --refresh finds the new release"
pass "re-locking keeps every wheel that still fits; lock --update NAME moves NAME, --update all; cached index pages are read again when they hold no solution, and --refresh reads them first"

# ---- apt's Python packages: fixed, as the debs install them --------------------------------------
# python3-yaml ships PyYAML 6.0 as a .dist-info, python3-six six 1.16.0 as an .egg-info file
# (make_python_apt_repo). The index has newer wheels of both; cfg 2.0 needs pyyaml>=6.1.
dir="$WORK/www/aptfixed"
"$PIP_PY" - "$dir" <<PY
import sys
sys.path.insert(0, "$LOCKSTEP_SOURCE_DIR/tests/cli")
import py_index
index = py_index.Index(sys.argv[1])
index.wheel("cfg", "1.0", ["pyyaml>=5", "six"])
index.wheel("cfg", "2.0", ["pyyaml>=6.1", "six"])
for v in ("6.0", "6.1"):
    index.wheel("pyyaml", v, [])
index.wheel("six", "1.17.0", [])
index.write(["cfg"])
PY
apt_spec() { lockstep_spec "$dir" "apt=[python3, python3-yaml, python3-six]" "pip=$1"; }
apt_spec '[cfg]'
(cd "$dir" && ls_run lock && [ "$RC" = 0 ]) || fail "lock over apt's PyYAML and six: $ERR"
assert_eq "cfg==1.0" "$(jq -r '[.artifacts[] | select(.kind == "wheel") | "\(.name)==\(.version)"] | join(" ")' \
  "$dir/lockstep.lock")" "apt's PyYAML 6.0 and six 1.16.0 are used as installed (no wheel replaces them); cfg 2.0 needs pyyaml>=6.1"
rm -f "$dir/lockstep.lock"
apt_spec '["cfg>=2"]'
lock_in "$dir"
assert_eq 2 "$(cat "$dir/rc")" "a request apt's versions can't meet is invalid input"
derivation=$(sed -n '/error: packages.pip\[0\]:/,/^change /p' "$dir/err" | sed 's/^.*error: //')
assert_eq "packages.pip[0]: no set of Python packages satisfies the request for cp311 manylinux x86_64 (CPython 3.11.2, glibc 2.36):
  Because cfg 2.0 needs pyyaml>=6.1 (pyyaml 6.0 is installed by python3-yaml 6.0-3+b2) and packages.pip[0] asks for cfg>=2, version solving failed.
change packages.pip[0] or packages.apt[1]" "$derivation" "the derivation names apt's package"
pass "apt's Python packages (a .dist-info and an .egg-info file in the debs) are fixed: used as installed, and a conflict names packages.apt"
done_testing
