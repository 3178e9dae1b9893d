#!/usr/bin/env bash
# The stack recipes (recipes/**/*.yaml) against their JSON Schemas (recipes/schema/*.schema.json),
# judged by a real peer: Debian's python3-jsonschema, after python3-yaml turned each file into JSON.
# Also: every `source:` names a key of the file's `sources:`, every key of `sources:` is used, every
# row (a map in a list) carries a `source:` (an apt package pattern may take its enclosing map's),
# and no map repeats a key. The schemas themselves must be valid draft 2020-12 schemas, and must reject broken recipes.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
need_python_jsonschema "$PY"

RECIPES="$LOCKSTEP_SOURCE_DIR/recipes"
SCHEMAS="$RECIPES/schema"

# check_recipe.py SCHEMA_DIR FILE [LABEL]: prints every problem of FILE, exits 1 if there is one.
cat >"$WORK/check_recipe.py" <<'EOF'
import json, os, sys, warnings
import jsonschema, yaml

warnings.simplefilter("ignore", DeprecationWarning)  # RefResolver is deprecated in newer jsonschema

# The schema of each `recipe:` kind.
SCHEMA_OF = {"cuda": "cuda", "cuda-drivers": "drivers", "gpu": "nvidia", "cudnn": "cudnn", "nccl": "nccl",
             "openmpi": "mpi", "mpich": "mpi", "ucx": "library", "pmix": "library", "python": "python",
             "framework": "framework", "conda-names": "conda"}

class StrictLoader(yaml.SafeLoader):
    """Rejects repeated keys and non-string keys (lockstep's own reader rejects both)."""

def construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        where = f"line {key_node.start_mark.line + 1}"
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(None, None, f"non-string key {key!r} at {where}: quote it",
                                                    key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"repeated key '{key}' at {where}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)

StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)

def path_of(parts):
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top)"

def source_ids(value):
    return [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []

def walk(node, parts, problems, known, used, in_list=False, covered=False):
    """Checks source ids, and that every row of a list has one (an apt package pattern may take its
    enclosing map's, as cuda.yaml's apt.flavors do)."""
    if isinstance(node, dict):
        is_apt_pattern = "name" in node and set(node) <= {"name", "version", "source", "confidence", "note"}
        if in_list and "source" not in node and not (is_apt_pattern and covered):
            problems.append(f"{path_of(parts)}: a row without `source:`")
        if "source" in node and parts[:1] != ["sources"]:
            for sid in source_ids(node["source"]):
                if sid not in known:
                    problems.append(f"{path_of(parts + ['source'])}: '{sid}' is not a key of `sources:`")
                used.add(sid)
        for k, v in node.items():
            if parts == [] and k == "sources":
                continue
            walk(v, parts + [k], problems, known, used, covered=covered or "source" in node)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk(v, parts + [i], problems, known, used, in_list=True, covered=covered)

def main(schema_dir, file, label):
    try:
        with open(file, encoding="utf-8") as f:
            doc = yaml.load(f, Loader=StrictLoader)
        doc = json.loads(json.dumps(doc))  # the JSON the schema judges; fails on dates and the like
    except (yaml.YAMLError, TypeError, ValueError) as e:
        print(f"{label}: not a plain YAML document: {e}")
        return 1
    if not isinstance(doc, dict) or doc.get("recipe") not in SCHEMA_OF:
        print(f"{label}: `recipe:` must be one of {sorted(SCHEMA_OF)}")
        return 1
    store = {}
    for name in os.listdir(schema_dir):
        if name.endswith(".schema.json"):
            with open(os.path.join(schema_dir, name), encoding="utf-8") as f:
                store[name] = json.load(f)
    for name, schema in store.items():
        jsonschema.Draft202012Validator.check_schema(schema)
    schema = store[SCHEMA_OF[doc["recipe"]] + ".schema.json"]
    resolver = jsonschema.RefResolver(base_uri="", referrer=schema, store=store)
    validator = jsonschema.Draft202012Validator(schema, resolver=resolver)
    problems = [f"{path_of(list(e.absolute_path))}: {e.message}"
                for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))]
    known = set(doc.get("sources") or {}) if isinstance(doc.get("sources"), dict) else set()
    used = set()
    walk(doc, [], problems, known, used)
    problems += [f"sources.{sid}: never used by a `source:`" for sid in sorted(known - used)]
    for p in problems:
        print(f"{label}: {p}")
    return 1 if problems else 0

sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else sys.argv[2]))
EOF

check() { # FILE [LABEL] -> OUT, RC
  set +e
  OUT=$("$PY" "$WORK/check_recipe.py" "$SCHEMAS" "$@" 2>&1)
  RC=$?
  set -e
}

# --- every recipe file validates --------------------------------------------------------------
mapfile -t files < <(cd "$RECIPES" && find . -name '*.yaml' -not -path './schema/*' | sed 's|^\./||' | LC_ALL=C sort)
[ "${#files[@]}" -ge 13 ] || fail "expected at least 13 recipe files under $RECIPES, found ${#files[@]}"
for f in "${files[@]}"; do
  check "$RECIPES/$f" "recipes/$f"
  [ "$RC" = 0 ] || fail "recipes/$f does not validate:
$OUT"
  pass "recipes/$f validates against its schema"
done

# Every file the issue names exists.
for f in cuda/cuda.yaml cuda/drivers.yaml cudnn/cudnn.yaml nccl/nccl.yaml openmpi/openmpi.yaml mpich/mpich.yaml \
  ucx/ucx.yaml pmix/pmix.yaml python/python.yaml pytorch/pytorch.yaml tensorflow/tensorflow.yaml jax/jax.yaml \
  gpu/nvidia.yaml; do
  [ -f "$RECIPES/$f" ] || fail "recipes/$f is missing"
done
pass "every recipe file is present"

# --- the checks reject broken recipes ---------------------------------------------------------
# Each case copies a recipe to $WORK/LABEL.yaml, changed by a Python statement on its text `s`, and
# expects the check to fail with EXPECTED-MESSAGE.
mutate() { # LABEL SOURCE-FILE PYTHON-STATEMENT EXPECTED-MESSAGE
  local label=$1 src=$2 stmt=$3 expected=$4
  "$PY" -c "
import sys
s = original = open(sys.argv[1], encoding='utf-8').read()
$stmt
if s == original:
    sys.exit('the mutation changed nothing: the recipe text it looks for is gone')
open(sys.argv[2], 'w', encoding='utf-8').write(s)" "$RECIPES/$src" "$WORK/$label.yaml" || fail "$label: cannot mutate recipes/$src"
  check "$WORK/$label.yaml" "$label"
  [ "$RC" = 1 ] || fail "$label: a broken recipe was accepted (rc $RC): $OUT"
  assert_contains "$OUT" "$expected" "$label"
  pass "$label is rejected: $expected"
}

mutate unknown-key nccl/nccl.yaml \
  's = s.replace("- {nccl: \"2.8.4\",", "- {nccl: \"2.8.4\", cuda_build: [\"11.2\"],", 1)' \
  "Additional properties are not allowed ('cuda_build' was unexpected)"
mutate missing-source nccl/nccl.yaml \
  's = s.replace(", source: cuda-images, note: \"nvidia/cuda 11.2.2 image\"}", "}", 1)' \
  "'source' is a required property"
mutate unknown-source-id nccl/nccl.yaml \
  's = s.replace("source: cuda-images, note: \"nvidia/cuda 11.2.2 image\"", "source: nvidia-wiki", 1)' \
  "'nvidia-wiki' is not a key of \`sources:\`"
mutate unused-source nccl/nccl.yaml \
  's = s.replace("sources:\n", "sources:\n  spare: an entry nothing cites\n", 1)' \
  "sources.spare: never used by a \`source:\`"
mutate apt-row-without-source nccl/nccl.yaml \
  's = s.replace("\"{version}*-*+cuda{cuda}\", source: cuda-images}", "\"{version}*-*+cuda{cuda}\"}", 1)' \
  "apt[0]: a row without \`source:\`"
mutate unquoted-version nccl/nccl.yaml \
  's = s.replace("{nccl: \"2.8.4\", cuda: [\"11.2\"]", "{nccl: \"2.8.4\", cuda: [11.2]", 1)' \
  "11.2 is not of type 'string'"
mutate bad-confidence nccl/nccl.yaml \
  's = s.replace("confidence: observed", "confidence: likely", 1)' \
  "'likely' is not one of ['primary', 'secondary', 'observed', 'unverified']"
mutate repeated-key cudnn/cudnn.yaml \
  's = s.replace("min_cc: \"7.5\", source: cudnn-sm-latest", "min_cc: \"7.5\", min_cc: \"5.0\", source: cudnn-sm-latest", 1)' \
  "repeated key 'min_cc'"
mutate bad-constraint jax/jax.yaml \
  's = s.replace("cudnn: \">=9.8,<10\"", "cudnn: \"~=9.8\"", 1)' \
  "is not valid under any of the given schemas"
mutate bad-placeholder cudnn/cudnn.yaml \
  's = s.replace("libcudnn9-cuda-{cuda_major}", "libcudnn9-cuda-{cudamajor}", 1)' \
  "does not match"
mutate unknown-system-component pytorch/pytorch.yaml \
  's = s.replace("        system: []", "        system: [cublas]", 1)' \
  "'cublas' is not one of ['cuda', 'cudnn', 'nccl']"
mutate unknown-platform pytorch/pytorch.yaml \
  's = s.replace("platforms: [linux/amd64, linux/arm64]", "platforms: [linux/amd64, linux/riscv64]", 1)' \
  "'linux/riscv64' is not one of ['linux/amd64', 'linux/arm64']"

done_testing
