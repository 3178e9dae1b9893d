#!/usr/bin/env bash
# Hardening: what lockstep generates quotes or refuses every value, and run records keep --env names
# only, for their owner (issue 13, findings 4 and 6a). As root and as an unprivileged user:
#   - `run --emit sbatch` with a hostile image path, command, --env value, --bind, --launcher-arg,
#     --runs-dir, --job and lockstep path (newlines, quotes, $(...), backticks, ';'): the script passes
#     `sh -n` and `bash -n`, sbatch's directives are lockstep's own, and run by sh and by bash with a
#     stub in lockstep's place every word arrives exactly while no injected command runs;
#   - `run` on this node under umask 000: the run directory is 0700 and its files 0600; --env values
#     are nowhere in the record, --dry-run or --debug unless --record-env-values; exec's error for a
#     bad --env name doesn't print the value.
# As root: `export` of a spec with hostile env, cmd, labels and lock file name (comments add no line,
# values round-trip through sh) and a run step Apptainer would read as a new section (exit 2).
source "$(dirname "$0")/lib.sh"
need busybox jq bash useradd runuser

PWNED="/tmp/PWNED-$$" # what an injected command would create
user=""
cleanup() {
  rm -f "$PWNED"
  [ -z "$user" ] || userdel "$user" 2>/dev/null || true
  cd /
  rm -rf "$WORK"
}
trap cleanup EXIT
chmod 755 "$WORK"

# A value that runs `touch $PWNED` five ways if anything evaluates it.
H="it's \"q\" \$(touch $PWNED) \`touch $PWNED\`; touch $PWNED"$'\n'"touch $PWNED"$'\n'
SECRET_A="s3cret-$$-"
SECRET_B="$RANDOM-x"
SECRET="$SECRET_A$SECRET_B" # never whole on a command line but --env's

# ---- the images: a busybox root, once at a plain path and once under a hostile one ------------------
make_busybox_root rootfs
cat >img.yaml <<'YAML'
lockstep: 1
name: scripts
copy: [{from: ./rootfs, to: /, mode: preserve}]
outputs: {oci: img}
YAML
ls_run build img.yaml
assert_eq 0 "$RC" "build the busybox image: $ERR"
HIMG="$WORK/i'm \"q\" \$(touch $PWNED) \`touch $PWNED\`; x"$'\n'"touch $PWNED"$'\n'
mkdir -p "$(dirname "$HIMG")"
cp -r img "$HIMG"
BIND="$WORK/b \$(touch x) \`touch y\`;'\""
mkdir -p "$BIND"
STUB="$WORK/stub dir/lock step'\$(touch z)"
mkdir -p "$(dirname "$STUB")"
printf '#!/bin/sh\nfor a in "$@"; do printf "%%s\\0" "$a"; done >"$ARGV_OUT"\n' >"$STUB"
chmod 755 "$STUB" "$(dirname "$STUB")"

if [ "$(id -u)" = 0 ]; then
  user="lsscripts$$"
  useradd -M -d /nonexistent -s /bin/sh "$user"
fi
# Runs "$@" as WHO (root, or the unprivileged user), capturing OUT, ERR and RC.
as() { # WHO CMD...
  local who=$1
  shift
  set +e
  if [ "$who" = root ]; then
    OUT=$(env "${ENVS[@]}" "$@" 2>"$WORK/.stderr")
  else
    OUT=$(runuser -u "$user" -- env "${ENVS[@]}" "$@" 2>"$WORK/.stderr")
  fi
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}

# A file's mode in octal.
mode() { stat -c %a "$1"; }

for who in root ${user:+user}; do
  D="$WORK/$who"
  mkdir -p "$D"
  [ "$who" = root ] || chown -R "$user" "$D"
  ENVS=(LOCKSTEP_CACHE="$D/cache" HOME="$D")

  # ---- run --emit sbatch --------------------------------------------------------------------------
  JOB="j'\$(touch x)\`touch y\`;z \"q\""
  RUNS="$D/runs;$H"
  as "$who" "$LOCKSTEP" run --lockstep "$STUB" --emit sbatch "$D/job.sh" -N 2 --ranks-per-node 2 \
    --env "TOKEN=$H" --bind "$BIND:/mnt" "--launcher-arg=$H" --runs-dir "$RUNS" --job "$JOB" \
    "oci:$HIMG" -- sh -c "$H" "$H"
  assert_eq 0 "$RC" "$who: run --emit sbatch with hostile values: $ERR"
  assert_eq 700 "$(mode "$D/job.sh")" "$who: a script with --env values is its owner's"
  sh -n "$D/job.sh" || fail "$who: sh -n job.sh"
  bash -n "$D/job.sh" || fail "$who: bash -n job.sh"
  # sbatch reads #SBATCH lines until the first command: only lockstep's own are there.
  directives=$(awk 'NR > 1 && !/^#/ && !/^[[:space:]]*$/ {exit} /^#SBATCH/' "$D/job.sh")
  assert_eq "#SBATCH --job-name=lockstep-PWNED-$$-
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2" "$directives" "$who: the script's directives"
  printf '%s\0' run --launcher slurm -N 2 --ranks-per-node 2 "--launcher-arg=$H" --bind "$BIND:/mnt" \
    --env "TOKEN=$H" --runs-dir "$RUNS" --job "$JOB" "oci:$HIMG" -- sh -c "$H" "$H" >"$D/expected"
  for shell in sh bash; do
    mkdir "$D/cwd-$shell"
    [ "$who" = root ] || chown "$user" "$D/cwd-$shell"
    as "$who" sh -c 'cd "$1" && ARGV_OUT="$2" '"$shell"' "$3"' - "$D/cwd-$shell" "$D/argv-$shell" "$D/job.sh"
    assert_eq 0 "$RC" "$who: $shell job.sh: $ERR"
    cmp "$D/expected" "$D/argv-$shell" || fail "$who: $shell job.sh: lockstep got other words: $(tr '\0' '|' <"$D/argv-$shell")"
    [ ! -e "$PWNED" ] || fail "$who: $shell job.sh ran an injected command"
    assert_eq "" "$(ls -A "$D/cwd-$shell")" "$who: $shell job.sh created nothing"
  done
  assert_contains "$(cat "$D/job.sh")" '$(touch '"$PWNED"') `touch '"$PWNED"'`; x\x0atouch '"$PWNED"'\x0a (sha256:' \
    "$who: the image comment escapes the newlines"
  pass "$who: run --emit sbatch quotes every hostile value: sh and bash pass each word through exactly, nothing injected runs"

  as "$who" "$LOCKSTEP" run --emit sbatch "$D/job2.sh" --job $'a\nb' "oci:$WORK/img" -- true
  assert_eq 2 "$RC" "$who: a --job with a newline"
  assert_contains "$ERR" "--job 'a\\x0ab' must be a plain directory name (no '/', no control characters)" "$who: --job"
  as "$who" "$LOCKSTEP" run --emit sbatch "$D/job3.sh" "oci:$WORK/img" -- true
  assert_eq 0 "$RC" "$who: a script without --env: $ERR"
  assert_eq 755 "$(mode "$D/job3.sh")" "$who: a script without --env values"
  pass "$who: a --job with a control character is refused (exit 2); the script is 0700 only when it holds --env values"

  # ---- run records ---------------------------------------------------------------------------------
  as "$who" sh -c 'umask 000 && exec "$@"' - "$LOCKSTEP" run --debug --launcher local --skip-preflight \
    --env "TOKEN=$SECRET" --env OTHER=x --runs-dir "$D/runs/a" --job j "oci:$WORK/img" -- \
    sh -c 'test "$TOKEN" = "$0$1"' "$SECRET_A" "$SECRET_B"
  assert_eq 0 "$RC" "$who: a local run with --env: $ERR"
  case "$ERR" in *"$SECRET"*) fail "$who: --debug printed the --env value: $ERR" ;; esac
  R="$D/runs/a/j"
  for d in "$D/runs" "$D/runs/a" "$R" "$R/ranks"; do
    assert_eq 700 "$(mode "$d")" "$who: mode of ${d#"$D"/} (umask 000)"
  done
  assert_eq 600 "$(mode "$R/record.json")" "$who: mode of record.json (umask 000)"
  assert_eq 600 "$(mode "$R/ranks/rank-0.json")" "$who: mode of a rank report (umask 000)"
  ! grep -rq "$SECRET" "$D/runs" || fail "$who: the --env value is in the run directory: $(cat "$R/record.json")"
  # The launch takes them from its environment (LOCKSTEP_ENV_NAME): names only there too.
  jq -e '(.run | index("TOKEN")) and (.env | index("LOCKSTEP_ENV_TOKEN")) and (.run | index("OTHER"))' "$R/record.json" \
    >/dev/null || fail "$who: the record lacks the --env names: $(cat "$R/record.json")"
  pass "$who: the run directory is 0700, its files 0600 under umask 000; the record and --debug name --env variables without their values"

  as "$who" "$LOCKSTEP" run --dry-run --launcher local --env "TOKEN=$SECRET" "oci:$WORK/img" -- true
  assert_eq 0 "$RC" "$who: --dry-run: $ERR"
  case "$OUT$ERR" in *"$SECRET"*) fail "$who: --dry-run printed the --env value: $OUT" ;; esac
  assert_contains "$OUT" "--env TOKEN " "$who: --dry-run names the variable"
  as "$who" "$LOCKSTEP" run --dry-run --json --launcher local --env "TOKEN=$SECRET" "oci:$WORK/img" -- true
  case "$OUT$ERR" in *"$SECRET"*) fail "$who: --dry-run --json printed the --env value: $OUT" ;; esac
  as "$who" "$LOCKSTEP" run --dry-run --record-env-values --launcher local --env "TOKEN=$SECRET" "oci:$WORK/img" -- true
  assert_contains "$OUT" "LOCKSTEP_ENV_TOKEN=$SECRET " "$who: --dry-run --record-env-values shows the value"
  as "$who" "$LOCKSTEP" run --launcher local --skip-preflight --record-env-values --env "TOKEN=$SECRET" \
    --runs-dir "$D/runs" --job k "oci:$WORK/img" -- true
  assert_eq 0 "$RC" "$who: --record-env-values: $ERR"
  jq -e --arg v "TOKEN=$SECRET" '(.run | index($v)) and (.env | index("LOCKSTEP_ENV_" + $v)) and (.run | index("--record-env-values"))' \
    "$D/runs/k/record.json" >/dev/null || fail "$who: --record-env-values: $(cat "$D/runs/k/record.json")"
  # A command word that is not UTF-8 (a Latin-1 file name): the record and --json replace it.
  as "$who" "$LOCKSTEP" run --launcher local --skip-preflight --runs-dir "$D/runs" --job l "oci:$WORK/img" \
    -- true $'caf\xe9'
  assert_eq 0 "$RC" "$who: a command word that is not UTF-8: $ERR"
  assert_eq '["true","caf\ufffd"]' "$(jq -c --ascii-output .command "$D/runs/l/record.json")" "$who: the record's command"
  as "$who" "$LOCKSTEP" run --dry-run --json --launcher local "oci:$WORK/img" -- true $'caf\xe9'
  assert_eq 0 "$RC" "$who: --dry-run --json with a word that is not UTF-8: $ERR"
  as "$who" "$LOCKSTEP" exec --env "BAD-NAME=$SECRET" "oci:$WORK/img" -- true
  assert_eq 2 "$RC" "$who: exec --env with a bad name"
  assert_contains "$ERR" "invalid --env 'BAD-NAME=...'" "$who: exec names the bad variable"
  case "$ERR" in *"$SECRET"*) fail "$who: exec printed the --env value: $ERR" ;; esac
  pass "$who: --dry-run shows --env names only unless --record-env-values, which also keeps them in the record; a word that is not UTF-8 is recorded; exec's error hides the value"
done

# ---- export ---------------------------------------------------------------------------------------------
FIX="$LOCKSTEP_SOURCE_DIR/tests/fixtures/export/full"
cp -r "$FIX" ex
json() { jq -Rn --arg v "$1" '$v'; }
# The fixture's packages, repos and copy (the lock's inputs), then hostile values.
{
  sed -n '/^lockstep:/,/^run:/p' "$FIX/lockstep.yaml" | sed '$d'
  echo "run: [\"printf '%s\\\\n' one\"]"
  echo "env: {V: $(json "$H")}"
  echo "labels: {\"%post\": x, $(json $'a\nRUN touch '"$PWNED"): y, ok: fine}"
  echo "entrypoint: [printf, '[%s]']"
  echo "cmd: [$(json "$H"), \"\"]"
} >ex/lockstep.yaml
LOCK=$'x\nRUN touch PWNED-lock\n.lock'
mv ex/lockstep.lock "ex/$LOCK"
ls_run export --dockerfile --spec ex/lockstep.yaml "ex/$LOCK"
assert_eq 0 "$RC" "export --dockerfile of hostile values: $ERR"
docker=$OUT
continued=0
while IFS= read -r line; do
  if [ "$continued" = 1 ]; then
    case "$line" in *\\) ;; *) continued=0 ;; esac
    continue
  fi
  case "$line" in "" | "#"*) continue ;; esac
  case "${line%% *}" in
    FROM | ARG | ADD | COPY | RUN | ENV | WORKDIR | USER | LABEL | ENTRYPOINT | CMD) ;;
    *) fail "export --dockerfile: a line that is no instruction: $line" ;;
  esac
  case "$line" in "RUN touch"* | *PWNED-lock*) fail "export --dockerfile: an injected line: $line" ;; esac
  case "$line" in *\\) continued=1 ;; esac
done <<<"$docker"
assert_contains "$docker" 'from x\x0aRUN touch PWNED-lock\x0a.lock (sha256:' "the header escapes the lock's name"
assert_contains "$docker" '#   - label a\x0aRUN touch '"$PWNED"' has a newline or control character: left out' \
  "a label with a newline is left out, its limitation escaped"
assert_contains "$docker" 'LABEL "%post"="x"' "a Dockerfile label may start with %"
assert_contains "$docker" "#   - env V has a newline or control character, which a Dockerfile ENV can't hold: left out" \
  "a Dockerfile can't hold the env value"
pass "export --dockerfile: comments escape control characters, every line is an instruction, nothing is injected"

ls_run export --apptainer-def --spec ex/lockstep.yaml "ex/$LOCK"
assert_eq 0 "$RC" "export --apptainer-def of hostile values: $ERR"
def=$OUT
section() { awk -v s="%$1" '$0 == s {p=1; next} /^%/ {p=0} p' <<<"$def"; }
assert_eq "%setup %files %environment %post %labels %runscript" "$(grep '^%' <<<"$def" | tr '\n' ' ' | sed 's/ $//')" \
  "the definition file's sections"
case "$(grep -v '^#' <<<"$def")" in *PWNED-lock*) fail "the lock's name left a comment: $def" ;; esac
section environment >env.sh
sh -n env.sh || fail "%environment is not valid sh"
assert_eq "$H." "$(sh -c '. ./env.sh && printf "%s." "$V"')" "the env value round-trips through %environment"
section runscript >run.sh
assert_eq "[$H][]" "$(sh run.sh)" "cmd round-trips through %runscript"
assert_eq "    ok fine" "$(section labels | grep -v '^$')" "labels Apptainer would misread are left out"
[ ! -e "$PWNED" ] || fail "an injected command ran"
pass "export --apptainer-def: values round-trip through sh, a '%' label key is left out, nothing is injected"

sed -i "s|^run: .*|run: [{sh: \"echo one\\\\n %post\\\\ntouch $PWNED\", network: true}]|" ex/lockstep.yaml
ls_run export --apptainer-def --spec ex/lockstep.yaml "ex/$LOCK"
assert_eq 2 "$RC" "a run step with a line Apptainer reads as a section"
assert_contains "$ERR" "run[0] ($WORK/ex/lockstep.yaml:" "the error names the step"
assert_contains "$ERR" ": the line '%post' would start a new section of the Apptainer definition file; reword it (or export --dockerfile)" \
  "the error says why and what to do"
ls_run export --dockerfile --spec ex/lockstep.yaml "ex/$LOCK"
assert_eq 0 "$RC" "the Dockerfile holds the same step: $ERR"
assert_contains "$OUT" 'RUN ["/bin/sh","-c","echo one\n %post\ntouch '"$PWNED"'"]' "in exec form"
pass "a run step Apptainer would split into a new section is refused with exit 2; the Dockerfile keeps it in exec form"

done_testing
