#!/usr/bin/env bash
# `lockstep init`: a starting lockstep.yaml from nothing, a requirements file, a pyproject.toml, a
# conda environment.yml (kept as conda packages, or --translate'd) or an installed venv; `lockstep
# check` passes on every one, the base's Python is the project's, a framework brings a `stack:`, and
# nothing is ever overwritten.
source "$(dirname "$0")/lib.sh"
need python3 jq

spec_ok() { # DIR WHAT: lockstep check passes on DIR/lockstep.yaml
  ls_run check "$1/lockstep.yaml"
  assert_eq 0 "$RC" "$2: lockstep check on what init wrote: $ERR"
}

# ---- the template -----------------------------------------------------------------------------------
mkdir -p "My Project" && cd "My Project"
ls_run init
assert_eq 0 "$RC" "init: $ERR"
assert_contains "$(cat lockstep.yaml)" 'name: "my-project"' "the name comes from the directory"
assert_contains "$(cat lockstep.yaml)" "base: {debian: bookworm}" "the default base"
spec_ok . template
cp lockstep.yaml before.yaml
ls_run init --from requirements.in
assert_eq 2 "$RC" "a second init"
assert_contains "$ERR" "lockstep.yaml exists; lockstep init never overwrites a file" "the refusal says why"
cmp -s before.yaml lockstep.yaml || fail "init changed an existing lockstep.yaml"
cd "$WORK"
pass "init writes a template lockstep check accepts, and never overwrites a file"

# ---- a requirements file with a framework ----------------------------------------------------------
mkdir req && printf '# training\ntorch==2.4.1\ntransformers>=4.40\n' >req/requirements.in
(cd req && ls_run init --from requirements.in && [ "$RC" = 0 ]) || fail "init --from requirements.in"
assert_contains "$(cat req/lockstep.yaml)" "pip: [{requirements: \"requirements.in\"}]" "the spec reads the file"
assert_contains "$(cat req/lockstep.yaml)" "framework: pytorch@2.4.1" "torch's pin becomes the stack's framework"
spec_ok req "requirements.in"
pass "--from requirements.in: the file is read by the spec; torch brings stack.framework"

# ---- pyproject.toml: Python from requires-python ---------------------------------------------------
mkdir pp && cat >pp/pyproject.toml <<'TOML'
[project]
name = "trainer"
version = "0.1"
requires-python = "==3.12.*"
dependencies = ["numpy>=1.26"]

[project.optional-dependencies]
gpu = ["cupy-cuda12x"]
TOML
ls_run init --from pp/pyproject.toml -o pp/lockstep.yaml
assert_eq 0 "$RC" "init --from pyproject.toml: $ERR"
assert_contains "$(cat pp/lockstep.yaml)" 'base: {image: "docker://python:3.12-slim-bookworm", python: /usr/local/bin/python3}' \
  "no Debian suite's python3 is 3.12: the official python image is the base"
assert_contains "$(cat pp/lockstep.yaml)" "# its optional dependencies: gpu" "the extras are named"
spec_ok pp "pyproject.toml"
pass "--from pyproject.toml: Python from requires-python; its extras are named in a comment"

# ---- environment.yml: python pin -> the Debian suite with that python3 -----------------------------
mkdir ce && cat >ce/environment.yml <<'YAML'
name: trainer
dependencies:
  - python=3.13
  - numpy=2.1
  - libgcc-ng
  - pip:
      - einops
YAML
(cd ce && ls_run init --from environment.yml --translate && [ "$RC" = 0 ]) || fail "init --from environment.yml --translate"
assert_contains "$(cat ce/lockstep.yaml)" "base: {debian: trixie}" "python=3.13 is trixie's python3"
assert_contains "$(cat ce/lockstep.yaml)" "pip: [{conda-env: \"environment.yml\"}]" "the spec reads the environment"
spec_ok ce "environment.yml"
pass "--from environment.yml --translate: its python pin picks the Debian suite"

# ---- environment.yml kept as conda packages (the default) ------------------------------------------
mkdir cn && cat >cn/environment.yml <<'YAML'
name: Train
channels: [pytorch, nvidia, conda-forge]
dependencies:
  - python=3.11
  - pytorch=2.3.1
  - pytorch-cuda=12.1
  - conda-forge::numpy>=1.26
  - blas=*=openblas
  - pip:
      - einops==0.8.0
YAML
ls_run init --from cn/environment.yml -o cn/lockstep.yaml
assert_eq 0 "$RC" "init --from environment.yml: $ERR"
spec=$(cat cn/lockstep.yaml)
assert_contains "$spec" 'name: "train"' "the environment's name names the image"
assert_contains "$spec" '  - conda: "pytorch"
  - conda: "nvidia"
  - conda: "conda-forge"' "the channels, in the file's order"
assert_contains "$spec" 'conda: ["python=3.11", "pytorch=2.3.1", "pytorch-cuda=12.1", "conda-forge::numpy>=1.26", "blas=*=openblas"]' \
  "every MatchSpec kept as written"
assert_contains "$spec" 'conda: {virtual_packages: {cuda: "12.1"}}' "pytorch-cuda=12.1 sets the lock's __cuda"
assert_contains "$spec" '  pip: ["einops==0.8.0"]' "the pip: section, for the conda python"
assert_contains "$spec" '  - pypi: https://pypi.org/simple' "from PyPI"
spec_ok cn "environment.yml (conda)"
printf 'dependencies:\n  - python=3.11\n  - "numpy>=1.26,<2|"\n' >cn/bad.yml
ls_run init --from cn/bad.yml -o cn/bad.yaml
assert_eq 2 "$RC" "a bad MatchSpec: $ERR"
assert_contains "$ERR" "bad.yml:3: 'numpy>=1.26,<2|' is not a conda MatchSpec" "the error names the line"
assert_contains "$ERR" "                 ^" "with a caret under the byte"
[ ! -e cn/bad.yaml ] || fail "nothing written for a bad environment.yml"
pass "--from environment.yml: channels and conda packages kept, CUDA for __cuda, a bad MatchSpec located"

# ---- an installed venv -------------------------------------------------------------------------------
PY=/usr/bin/python3
if "$PY" -m venv "$WORK/venv" 2>/dev/null; then
  "$PY" "$LOCKSTEP_SOURCE_DIR/tests/cli/py_index.py" conflict "$WORK/idx" # a few real wheels
  "$WORK/venv/bin/python" -m pip --isolated install --quiet --no-index --no-deps \
    "$WORK/idx/files/huggingface_hub-0.24.6-py3-none-any.whl" "$WORK/idx/files/tokenizers-0.19.1-py3-none-any.whl"
  mkdir ve
  (cd ve && VIRTUAL_ENV="$WORK/venv" CONDA_PREFIX= ls_run init --from env && [ "$RC" = 0 ]) || fail "init --from env"
  assert_contains "$(cat ve/lockstep.yaml)" '- "huggingface-hub==0.24.6"' "the venv's packages are pinned as installed"
  assert_contains "$(cat ve/lockstep.yaml)" '- "tokenizers==0.19.1"' "every one of them"
  if grep -q '"pip==' ve/lockstep.yaml; then fail "pip itself was carried over"; fi
  assert_contains "$(cat ve/lockstep.yaml)" "from the venv $WORK/venv environment" "the header names the environment"
  spec_ok ve "the venv"
  (cd ve && env -u VIRTUAL_ENV -u CONDA_PREFIX "$LOCKSTEP" init --from env -o other.yaml 2>"$WORK/err") && fail "init --from env without one"
  assert_contains "$(cat "$WORK/err")" "no active Python environment" "the error says to activate one or give a prefix"
  pass "--from env: the active venv's packages, pinned as installed (pip itself left out)"
elif [ -n "${CI:-}" ]; then
  fail "python3 -m venv does not work (scripts/install-deps.sh installs python3-venv)"
else
  echo "SKIP: python3 -m venv does not work here" >&2
fi

# ---- files outside the spec's directory ------------------------------------------------------------
mkdir out
ls_run init --from req/requirements.in -o out/lockstep.yaml
assert_eq 2 "$RC" "a file outside the spec's directory"
assert_contains "$ERR" "is outside" "the error says so"
[ ! -e out/lockstep.yaml ] || fail "a refused init wrote a file"
pass "a project file outside the spec's directory is refused before anything is written"
done_testing
