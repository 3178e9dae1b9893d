#!/usr/bin/env bash
# `lockstep export --dockerfile | --apptainer-def`: golden files for the hand-written locks in
# tests/fixtures/export (debs from Debian and NVIDIA's repository, a wheel, a git source, host
# files, run steps; a scratch base with a local wheel), the limitations block and its warnings, -o,
# the spec/lock arguments and their errors, and a structural check of every instruction and section.
# No Docker daemon, BuildKit or Apptainer runs here: when `docker buildx` or `apptainer` is present,
# the suite says so and still only checks the structure.
source "$(dirname "$0")/lib.sh"

FIX="$LOCKSTEP_SOURCE_DIR/tests/fixtures/export"

# ---- golden files ---------------------------------------------------------------------------------------
for name in full local; do
  for format in dockerfile apptainer-def; do
    golden="$FIX/$name/$([ "$format" = dockerfile ] && echo Dockerfile || echo lockstep.def).golden"
    ls_run export "--$format" "$FIX/$name/lockstep.lock"
    assert_eq 0 "$RC" "export --$format $name: $ERR"
    if [ "${LOCKSTEP_UPDATE_GOLDEN:-}" = 1 ]; then
      printf '%s\n' "$OUT" >"$golden"
    fi
    diff -u "$golden" <(printf '%s\n' "$OUT") >&2 || fail "export --$format $name differs from $golden"
    # One warning per line of the limitations block, in the same order.
    block=$(printf '%s\n' "$OUT" | sed -n 's/^#   - //p')
    warnings=$(printf '%s\n' "$ERR" | sed -n 's/^lockstep: warning: export: //p')
    [ -n "$block" ] || fail "export --$format $name: no limitations block"
    assert_eq "$block" "$warnings" "export --$format $name: the warnings repeat the limitations block"
    assert_eq "$(printf '%s\n' "$ERR" | wc -l)" "$(printf '%s\n' "$block" | wc -l)" "nothing else on stderr"
  done
done
pass "the Dockerfile and the definition file match the golden files; the warnings repeat the limitations"

# ---- what the recipes pin ---------------------------------------------------------------------------------
ls_run export --dockerfile "$FIX/full/lockstep.lock"
docker=$OUT
for row in $(jq -r '.artifacts[] | select(.kind != "git") | "\(.sha256)|\(.url)"' "$FIX/full/lockstep.lock"); do
  grep -q "^ADD --checksum=sha256:${row%%|*} ${row#*|} " <<<"$docker" || fail "no ADD --checksum for $row"
done
commit=$(jq -r '.artifacts[] | select(.kind == "git") | .version' "$FIX/full/lockstep.lock")
grep -q "^ADD https://github.com/example/tools.git#$commit /opt/tools/\$" <<<"$docker" || fail "git not pinned by commit"
# dpkg -i lists the debs in the lock's order.
assert_eq "$(jq -r '.artifacts[] | select(.kind == "deb") | .name' "$FIX/full/lockstep.lock")" \
  "$(sed -n '/dpkg -i/,/^$/p' <<<"$docker" | grep -o '/tmp/lockstep/debs/[^_]*' | sed 's|.*/||')" "dpkg order"
assert_contains "$docker" "the base image is not pinned by digest: debian:bookworm is a moving tag" "base tag"
assert_contains "$docker" "\`run:\` steps are copied as-is; their outputs are not pinned" "run steps"
assert_contains "$docker" "lockstep's deterministic layer tars and epoch normalisation are not reproduced" "layers"
assert_contains "$docker" "copy: from host paths become COPY lines relative to the spec directory" "copy"
assert_contains "$docker" "ARG SOURCE_DATE_EPOCH=$(jq -r .epoch "$FIX/full/lockstep.lock")" "the lock's epoch"
ls_run export --apptainer-def "$FIX/full/lockstep.lock"
def=$OUT
for row in $(jq -r '.artifacts[] | select(.kind != "git") | "\(.sha256)|\(.url)"' "$FIX/full/lockstep.lock"); do
  grep -qF "    fetch ${row#*|} ${row%%|*} " <<<"$def" || fail "no fetch and check for $row"
done
grep -q "checkout --quiet --detach $commit\$" <<<"$def" || fail "git not pinned by commit in the def file"
pass "every deb and wheel is fetched by its lock URL and checked by sha256, the git source by commit"

# ---- structure (no Docker or Apptainer here to judge) -----------------------------------------------------
check_dockerfile() { # TEXT WHAT
  local line instr continued=0 n=0
  [ "$(head -n 1 <<<"$1")" = "# syntax=docker/dockerfile:1.6" ] || fail "$2: the first line is not the syntax directive"
  while IFS= read -r line; do
    n=$((n + 1))
    if [ "$continued" = 1 ]; then
      case "$line" in *\\) ;; *) continued=0 ;; esac
      continue
    fi
    case "$line" in "" | "#"*) continue ;; esac
    instr=${line%% *}
    case "$instr" in
      FROM | ARG | ADD | COPY | RUN | ENV | WORKDIR | USER | LABEL | ENTRYPOINT | CMD) ;;
      *) fail "$2:$n: unknown instruction '$instr'" ;;
    esac
    case "$line" in
      "ADD --checksum=sha256:"[0-9a-f]*" http"*) ;;
      "ADD https://"*"#"[0-9a-f]*" /"*) ;; # a git source at a commit
      ADD*) fail "$2:$n: an ADD without --checksum: $line" ;;
      ENTRYPOINT* | CMD*) jq -e . <<<"${line#* }" >/dev/null || fail "$2:$n: not a JSON array: $line" ;;
      'RUN ['* | 'RUN --network=none ['*) jq -e . <<<"${line#*RUN }" >/dev/null || fail "$2:$n: bad exec form" ;;
    esac
    case "$line" in *\\) continued=1 ;; esac
  done <<<"$1"
  grep -q '^FROM ' <<<"$1" || fail "$2: no FROM"
}
check_def() { # TEXT WHAT
  local first
  first=$(grep -v '^#' <<<"$1" | grep -v '^$' | head -n 1)
  case "$first" in "Bootstrap: "*) ;; *) fail "$2: the header does not start with Bootstrap: ($first)" ;; esac
  grep -q '^From: \|^Bootstrap: scratch$' <<<"$1" || fail "$2: no From:"
  while IFS= read -r section; do
    case "$section" in
      %setup | %files | %environment | %post | %labels | %runscript) ;;
      *) fail "$2: unknown section $section" ;;
    esac
  done < <(grep '^%' <<<"$1")
  assert_eq "$(grep '^%' <<<"$1" | sort | uniq -d)" "" "$2: a section twice"
  # The shell sections parse.
  for section in setup post runscript environment; do
    awk -v s="%$section" '$0 == s {p=1; next} /^%/ {p=0} p' <<<"$1" | sh -n || fail "$2: %$section is not valid sh"
  done
}
for name in full local; do
  check_dockerfile "$(cat "$FIX/$name/Dockerfile.golden")" "$name/Dockerfile"
  check_def "$(cat "$FIX/$name/lockstep.def.golden")" "$name/lockstep.def"
done
peers=""
command -v apptainer >/dev/null 2>&1 && peers="$peers apptainer"
docker buildx version >/dev/null 2>&1 && peers="$peers docker-buildx"
echo "# not built with a real peer (structure only)${peers:+; found but unused:$peers}" >&2
pass "every Dockerfile instruction is known and every ADD is pinned; the def file's sections are known and parse"

# ---- arguments ---------------------------------------------------------------------------------------------
cp -r "$FIX/full" full
ls_run export --dockerfile full/lockstep.yaml
assert_eq 0 "$RC" "a spec names its lock: $ERR"
assert_eq "$docker" "$OUT" "the same recipe from the spec's path"
(cd full && "$LOCKSTEP" export --dockerfile >../from-cwd 2>/dev/null) || fail "export in the spec's directory"
assert_eq "$docker" "$(cat from-cwd)" "the default lock is ./lockstep.lock"
ls_run export --apptainer-def -o out/app.def full/lockstep.lock
assert_eq 4 "$RC" "-o into a missing directory is a local I/O error"
mkdir out
ls_run export --apptainer-def -o out/app.def full/lockstep.lock
assert_eq 0 "$RC" "-o: $ERR"
assert_eq "" "$OUT" "-o writes nothing to stdout"
assert_eq "$def" "$(cat out/app.def)" "-o writes the recipe"
assert_eq "app.def" "$(ls -A out)" "-o leaves no temporary file"
pass "LOCK or SPEC, the default lock, and -o"

ls_run export full/lockstep.lock
assert_eq 2 "$RC" "neither format"
assert_contains "$ERR" "give exactly one of --dockerfile, --apptainer-def, --requirements FILE, --pylock FILE, --conda-lock FILE and --explicit FILE" "the error says what to give"
ls_run export --dockerfile --apptainer-def full/lockstep.lock
assert_eq 2 "$RC" "both formats"
ls_run export --dockerfile nothing/lockstep.lock
assert_eq 2 "$RC" "no spec"
assert_contains "$ERR" "no spec at $WORK/nothing/lockstep.yaml (the file beside the lock); give it with --spec" "no spec"
mv full/lockstep.lock full/moved.lock
ls_run export --dockerfile full/lockstep.yaml
assert_eq 2 "$RC" "no lock"
assert_contains "$ERR" "lockstep lock" "a missing lock says to run lockstep lock"
ls_run export --dockerfile --spec full/lockstep.yaml full/moved.lock
assert_eq 0 "$RC" "--spec names the spec of a lock elsewhere: $ERR"
mv full/moved.lock full/lockstep.lock
sed -i 's/python3-pip, /python3-pip, htop, /' full/lockstep.yaml
ls_run export --dockerfile full/lockstep.lock
assert_eq 2 "$RC" "a stale lock"
assert_contains "$ERR" "is stale: the spec changed since it was locked:
  packages.apt: added htop
run \`lockstep lock\` first" "the stale lock's change is named"
printf '{"lockstep-lock": 1,' >full/lockstep.lock
ls_run export --dockerfile full/lockstep.lock
assert_eq 2 "$RC" "a malformed lock"
ls_run export --help
assert_eq 0 "$RC" "--help"
assert_contains "$OUT" "lockstep export --dockerfile > Dockerfile" "--help has examples"
pass "bad usage, a missing, stale or malformed lock exit 2 and say what to do"

done_testing
