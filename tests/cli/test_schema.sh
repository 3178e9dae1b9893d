#!/usr/bin/env bash
# `lockstep schema`: the JSON Schema of lockstep.yaml (docs/spec.md, "Editor support"), judged by a
# real peer: Debian's python3-jsonschema (draft 2020-12), after python3-yaml read each spec the way
# editors do (the YAML 1.2 core schema). The schema must be valid; accept every example spec and every
# spec file of the test data; reject every spec of the bad-spec corpus (tests/cli/bad-specs) except
# the few bad only for what the file system or the recipes say; and agree with `lockstep check` on a
# table of small changes to an example. That the committed docs/lockstep.schema.json is this output
# is its own ctest (tests/cli/schema_file_current.sh).
source "$(dirname "$0")/lib.sh"

# --- the command ---------------------------------------------------------------------------------
ls_run schema --help
assert_eq 0 "$RC" "schema --help exit"
assert_contains "$OUT" "Examples:" "schema --help"
assert_contains "$OUT" "# yaml-language-server: \$schema=" "schema --help"
assert_contains "$OUT" "Exit codes:
  0   success
  2   bad usage, invalid spec, or malformed input (image, archive, lock)
  4   a local file operation failed (permission denied, disk full)" "schema --help"
pass "schema --help shows examples and its exit codes from the shared table"

ls_run schema
assert_eq 0 "$RC" "schema exit"
first=$OUT
ls_run schema
assert_eq "$first" "$OUT" "a second run"
"$LOCKSTEP" schema -o "$WORK/schema.json" -q
assert_eq "$first" "$(cat "$WORK/schema.json")" "schema -o"
pass "schema prints the same bytes every time, and -o writes them"

ls_run schema --bogus
assert_eq 2 "$RC" "an unknown option"
ls_run schema -o "$WORK/no/such/dir/schema.json"
assert_eq 4 "$RC" "an output that can't be written (stderr: $ERR)"
pass "bad usage is exit 2, an output that can't be written exit 4"

# --- the schema judged by python3-jsonschema ------------------------------------------------------
PY=/usr/bin/python3
need_python_jsonschema "$PY"

# check_spec.py SCHEMA FILE...: one line per file, FILE<TAB>VERDICT<TAB>WHY, VERDICT one of valid,
# invalid (one line per problem) and not-yaml.
cat >"$WORK/check_spec.py" <<'EOF'
import json, re, sys
import jsonschema, yaml

class Yaml12Loader(yaml.SafeLoader):
    """The YAML 1.2 core schema, as editors read YAML (and as lockstep names a value's type in its
    messages): 0755 is the integer 755, yes and on are strings, there are no timestamps. A repeated or
    non-string key is refused, as lockstep refuses it."""

Yaml12Loader.yaml_implicit_resolvers = {}
for tag, pattern in [
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    ("float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    ("null", r"^(?:~|null|Null|NULL|)$"),
]:
    Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:" + tag, re.compile(pattern), None)

def construct_int(loader, node):
    v = loader.construct_scalar(node)
    return int(v[2:], 8) if v.startswith("0o") else int(v[2:], 16) if v.startswith("0x") else int(v, 10)

def construct_bool(loader, node):
    return loader.construct_scalar(node).lower() == "true"

def construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str) or key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"non-string or repeated key {key!r}",
                                                    key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)

Yaml12Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
Yaml12Loader.add_constructor("tag:yaml.org,2002:bool", construct_bool)
Yaml12Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)

def main(schema_file, files):
    with open(schema_file, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for file in files:
        try:
            with open(file, encoding="utf-8") as f:
                doc = json.loads(json.dumps(yaml.load(f, Loader=Yaml12Loader)))
        except (yaml.YAMLError, TypeError, ValueError) as e:
            print(f"{file}\tnot-yaml\t{str(e).splitlines()[0]}")
            continue
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
        if not errors:
            print(f"{file}\tvalid\t")
        for e in errors:
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path).lstrip(".")
            print(f"{file}\tinvalid\t{path or '(top)'}: {e.message[:200]}")

main(sys.argv[1], sys.argv[2:])
EOF

verdicts() { # FILE... -> $WORK/verdicts (the checker's lines)
  set +e
  OUT=$("$PY" "$WORK/check_spec.py" "$WORK/schema.json" "$@" 2>&1)
  local rc=$?
  set -e
  [ "$rc" = 0 ] || fail "the checker failed (rc $rc): $OUT"
  printf '%s\n' "$OUT" >"$WORK/verdicts"
}
verdict_of() { # FILE -> valid, invalid or not-yaml (of the last verdicts)
  awk -F'\t' -v f="$1" '$1 == f { print $2; exit }' "$WORK/verdicts"
}

verdicts
pass "the schema is a valid draft 2020-12 JSON Schema"

# Every example spec, and every spec file of the test data.
cd "$LOCKSTEP_SOURCE_DIR"
mapfile -t good < <({ ls examples/*/lockstep.yaml; find tests/fixtures -name lockstep.yaml; } | LC_ALL=C sort)
[ "${#good[@]}" -ge 5 ] || fail "expected at least 5 spec files, found ${#good[@]}"
# The fuzz seeds that are well-formed specs (the others are broken on purpose; they must be rejected).
fuzz_good=(tests/fuzz/corpus/spec/01-hello.yaml tests/fuzz/corpus/spec/04-extends.yaml)
verdicts "${good[@]}" "${fuzz_good[@]}"
for f in "${good[@]}" "${fuzz_good[@]}"; do
  [ "$(verdict_of "$f")" = valid ] || fail "$f does not validate:
$(grep -F "$f" "$WORK/verdicts")"
  pass "$f validates"
done
mapfile -t fuzz_bad < <(ls tests/fuzz/corpus/spec/*.yaml | grep -v -e 01-hello -e 04-extends)
verdicts "${fuzz_bad[@]}"
for f in "${fuzz_bad[@]}"; do
  v=$(verdict_of "$f")
  [ "$v" = invalid ] || [ "$v" = not-yaml ] || fail "the broken fuzz seed $f validates"
done
pass "the ${#fuzz_bad[@]} broken fuzz seeds are rejected"

# The bad-spec corpus. A spec bad only for what the shape can't see may pass; each says why.
declare -A semantic_only=(
  [base-not-an-image]="base.oci names a path that exists but holds no OCI layout: only the file system tells"
  [extends-cycle]="the cycle runs through the files it extends"
  [impossible-stack]="the recipes, not the shape, say pytorch 2.1 has no build for CUDA 12.4"
  [missing-file]="copy[].from names a file that does not exist"
  [wrong-base-digest]="the pin is a well-formed digest the base image does not have"
)
mapfile -t bad < <(ls -d tests/cli/bad-specs/*/ | LC_ALL=C sort)
verdicts "${bad[@]/%/lockstep.yaml}"
for d in "${bad[@]}"; do
  name=$(basename "$d")
  v=$(verdict_of "${d}lockstep.yaml")
  if [ -n "${semantic_only[$name]:-}" ]; then
    # Still valid, or the list is stale: a case the schema rejects belongs with the others.
    [ "$v" = valid ] || fail "$name is listed as semantic-only but the schema rejects it ($v): drop it from the list"
    pass "$name: passes the schema, as expected (${semantic_only[$name]})"
  else
    [ "$v" = invalid ] || [ "$v" = not-yaml ] || fail "the bad spec $name validates"
    pass "$name: rejected ($v: $(awk -F'\t' -v f="${d}lockstep.yaml" '$1 == f { print $3; exit }' "$WORK/verdicts"))"
  fi
done
[ "${#bad[@]}" -ge 10 ] || fail "expected the bad-spec corpus to have at least 10 cases, found ${#bad[@]}"

# --- the schema agrees with lockstep check ----------------------------------------------------------
# Each case (cases.tsv: WANT, LABEL, a Python statement on the text `s`) changes a copy of
# examples/hello/lockstep.yaml; `lockstep check` and the schema must both accept it (ok) or both
# reject it (bad).
cat >"$WORK/cases.tsv" <<'EOF'
ok	as-is	s += "\n"
ok	octal-mode-unquoted	s = s.replace("    to: /opt/hello/", "    to: /opt/hello/\n    mode: 0755\n    owner: 1000")
ok	numbers-as-text	s = s.replace("workdir: /opt/hello", "workdir: /opt/hello\nuser: 1000\ncmd: [--count, 4, true]\nrun: [{sh: make, network: true}, 'echo hi']")
ok	env-scalars	s = s.replace("env:\n", "env:\n  N: 1\n  F: 1.5\n  B: false\n  Y: yes\n")
ok	outputs-codecs	s = s.replace("outputs:\n", "outputs:\n  compression: zstd\n  sif_compression: lz4\n")
ok	extends-a-list	s = s.replace("base: scratch", "base: scratch\nextends: []")
ok	apt-suites	s += "repos:\n  - {apt: http://archive.ubuntu.com/ubuntu, suites: [jammy, jammy-updates], components: [main, universe], keyring: /usr/share/keyrings/debian-archive-keyring.gpg}\n"
bad	unknown-key	s = s.replace("labels:", "labls:")
bad	unknown-nested-key	s = s.replace("    to: /opt/hello/", "    too: /opt/hello/")
bad	later-key	s += "launch: {nodes: 2}\n"
bad	missing-name	s = s.replace("name: hello\n", "")
bad	schema-version	s = s.replace("lockstep: 1", "lockstep: 2")
bad	name-uppercase	s = s.replace("name: hello", "name: Hello")
bad	platform	s = s.replace("platform: linux/amd64", "platform: linux")
bad	cmd-a-string	s += "cmd: /opt/hello/bin/hello --verbose\n"
bad	to-relative	s = s.replace("to: /opt/hello/", "to: opt/hello/")
bad	to-dotdot	s = s.replace("to: /opt/hello/", "to: /opt/../etc")
bad	mode-word	s = s.replace("    to: /opt/hello/", "    to: /opt/hello/\n    mode: rwx")
bad	env-name	s = s.replace("env:\n", "env:\n  1ST: x\n")
bad	env-empty	s = s.replace("env:\n", "env:\n  EMPTY:\n")
bad	network-quoted	s += "run: [{sh: make, network: 'true'}]\n"
bad	compression	s = s.replace("outputs:\n", "outputs:\n  compression: brotli\n")
bad	base-both	s = s.replace("base: scratch", "base: {debian: bookworm, tag: v1}")
bad	copy-from-and-git	s = s.replace("    to: /opt/hello/", "    to: /opt/hello/\n    git: https://example.org/r.git\n    rev: v1")
bad	user-space	s += "user: 'a b'\n"
bad	workdir-relative	s = s.replace("workdir: /opt/hello", "workdir: opt")
bad	apt-suite-and-suites	s += "repos:\n  - {apt: http://archive.ubuntu.com/ubuntu, suite: jammy, suites: [jammy-updates], components: [main], keyring: /usr/share/keyrings/debian-archive-keyring.gpg}\n"
bad	apt-suites-empty	s += "repos:\n  - {apt: http://archive.ubuntu.com/ubuntu, suites: [], components: [main], keyring: /usr/share/keyrings/debian-archive-keyring.gpg}\n"
bad	apt-suites-flat	s += "repos:\n  - {apt: http://archive.ubuntu.com/ubuntu, flat: true, suites: [jammy], keyring: /usr/share/keyrings/debian-archive-keyring.gpg}\n"
EOF
# One Python run makes every case directory (a copy of examples/hello, its spec changed).
"$PY" - "$LOCKSTEP_SOURCE_DIR/examples/hello" "$WORK" <<'EOF'
import shutil, sys
example, work = sys.argv[1], sys.argv[2]
for line in open(f"{work}/cases.tsv", encoding="utf-8"):
    want, label, change = line.rstrip("\n").split("\t")
    spec = f"{work}/case-{label}/lockstep.yaml"
    shutil.copytree(example, f"{work}/case-{label}")
    s = original = open(spec, encoding="utf-8").read()
    exec(change)
    if s == original:
        sys.exit(f"{label}: the change changed nothing: the text it looks for is gone")
    open(spec, "w", encoding="utf-8").write(s)
EOF
mapfile -t cases <"$WORK/cases.tsv"
[ "${#cases[@]}" -ge 25 ] || fail "expected at least 25 cases, found ${#cases[@]}"
verdicts "$WORK"/case-*/lockstep.yaml
for c in "${cases[@]}"; do
  IFS=$'\t' read -r want label _ <<<"$c"
  spec="$WORK/case-$label/lockstep.yaml"
  v=$(verdict_of "$spec")
  ls_run check "$spec"
  if [ "$want" = ok ]; then
    [ "$RC" = 0 ] || fail "$label: lockstep check rejects it (rc $RC): $ERR"
    [ "$v" = valid ] || fail "$label: the schema rejects what lockstep accepts ($v): $(grep -F "$spec" "$WORK/verdicts")"
  else
    [ "$RC" = 2 ] || fail "$label: lockstep check accepts it (rc $RC): $OUT"
    [ "$v" = invalid ] || fail "$label: the schema accepts what lockstep rejects ($v)"
  fi
  pass "$label: lockstep check and the schema both say $want"
done

done_testing
