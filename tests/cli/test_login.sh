#!/usr/bin/env bash
# `lockstep login` and `lockstep logout` (docs/registry.md, "Credentials"): the password from stdin
# (never a prompt when stdin is not a terminal), containers' auth.json written as podman writes it
# (0600 in a 0700 directory, other entries and keys kept), read back by skopeo, and the password
# never printed. The registry is the real docker-registry with htpasswd Basic auth, started here.
source "$(dirname "$0")/lib.sh"
need docker-registry htpasswd curl python3

export HOME="$WORK/home"
unset REGISTRY_AUTH_FILE DOCKER_CONFIG LOCKSTEP_CERTS_D
export XDG_RUNTIME_DIR="$WORK/run" # does not exist: login writes ~/.config/containers/auth.json
AUTH="$HOME/.config/containers/auth.json"
PASSWORD='pa ss:wörd-S3cret'

# ---- a registry with Basic auth on 127.0.0.1 ------------------------------------------------------
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
REG="127.0.0.1:$PORT"
mkdir -p registry
htpasswd -Bbn ci "$PASSWORD" >registry/htpasswd
cat >registry/config.yml <<EOF
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $WORK/registry/data}}
http: {addr: $REG}
auth: {htpasswd: {realm: lockstep-test, path: $WORK/registry/htpasswd}}
EOF
docker-registry serve registry/config.yml >registry/log 2>&1 &
REGISTRY_PID=$!
trap 'kill "$REGISTRY_PID" 2>/dev/null; wait "$REGISTRY_PID" 2>/dev/null || true; remove_test_user; cd /; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do
  curl -s -o /dev/null "http://$REG/v2/" && break
  sleep 0.1
done
assert_eq 401 "$(curl -s -o /dev/null -w '%{http_code}' "http://$REG/v2/")" "the registry asks for credentials"
# Plain HTTP on 127.0.0.1 is allowed by registries.conf, as a user would configure it.
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REG" "localhost:$PORT" >registries.conf
export CONTAINERS_REGISTRIES_CONF="$WORK/registries.conf"

# ---- --help ---------------------------------------------------------------------------------------
for cmd in login logout; do
  ls_run "$cmd" --help
  assert_eq 0 "$RC" "$cmd --help exit"
  assert_contains "$OUT" "Examples:" "$cmd --help"
done
pass "login and logout --help show examples"

# ---- login ----------------------------------------------------------------------------------------
printf '%s\n' "$PASSWORD" >pw.txt
ls_run login "$REG" -u ci --password-stdin <pw.txt
assert_eq 0 "$RC" "login ($ERR)"
assert_contains "$OUT" "Login Succeeded: $REG as ci" "login output"
case "$OUT$ERR" in *S3cret*) fail "login printed the password" ;; esac
assert_eq 600 "$(stat -c %a "$AUTH")" "auth.json mode"
assert_eq 700 "$(stat -c %a "$(dirname "$AUTH")")" "auth.json directory mode"
assert_eq 700 "$(stat -c %a "$HOME/.config")" "a created parent's mode"
expected=$(printf '%s' "ci:$PASSWORD" | base64 -w0)
assert_eq "$expected" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["auths"][sys.argv[2]]["auth"])' "$AUTH" "$REG")" \
  "auths.HOST.auth"
pass "login --password-stdin writes auths.HOST.auth (base64 of user:password), 0600 in a 0700 directory"

# The stored credential works against the registry (what check_login will do before storing).
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' -u "ci:$PASSWORD" "http://$REG/v2/")" "the credential"
if command -v skopeo >/dev/null; then
  skopeo login --get-login --authfile "$AUTH" "$REG" >skopeo.out 2>&1 || fail "skopeo can't read it: $(cat skopeo.out)"
  assert_eq ci "$(cat skopeo.out)" "skopeo's reading of the file"
  pass "skopeo reads the file login wrote"
fi

# Without --password-stdin and without a terminal, one line of stdin is the password.
printf '%s\nignored\n' "$PASSWORD" >two-lines.txt
ls_run login "$REG/team" -u ci --json <two-lines.txt
assert_eq 0 "$RC" "login from a pipe ($ERR)"
assert_eq "{\"auth_file\":\"$AUTH\",\"registry\":\"$REG/team\",\"username\":\"ci\"}" "$OUT" "login --json"
assert_eq "$expected" \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["auths"][sys.argv[2]]["auth"])' "$AUTH" "$REG/team")" \
  "one line read"
pass "without a terminal, login reads one line of stdin as the password (no prompt); --json"

# Other keys of the file are kept.
python3 - "$AUTH" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["x-custom"] = {"keep": True}
json.dump(doc, open(sys.argv[1], "w"))
EOF
ls_run login "localhost:$PORT" --username ci <pw.txt
assert_eq 0 "$RC" "login localhost ($ERR)"
assert_eq "True ['$REG', '$REG/team', 'localhost:$PORT']" \
  "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["x-custom"]["keep"], sorted(d["auths"]))' "$AUTH")" \
  "entries kept"
pass "login keeps the file's other entries and keys it does not know"

# Refusals: nothing is written.
before=$(cat "$AUTH")
ls_run login docker.io -u ci </dev/null
assert_eq 2 "$RC" "empty stdin"
ls_run login docker.io -u ci --password-stdin <<<""
assert_eq 2 "$RC" "empty password"
assert_contains "$ERR" "lockstep: error: empty password for docker.io" "empty password message"
ls_run login docker.io --password-stdin <pw.txt
assert_eq 2 "$RC" "no user name"
assert_contains "$ERR" "give the user name with --username" "no user name message"
ls_run login 'not a host' -u ci <pw.txt
assert_eq 2 "$RC" "a bad registry"
case "$ERR" in *S3cret*) fail "an error printed the password" ;; esac
assert_eq "$before" "$(cat "$AUTH")" "the file after refusals"
pass "an empty password, a missing user name or a bad registry is exit 2 and writes nothing"

# REGISTRY_AUTH_FILE names the file.
REGISTRY_AUTH_FILE="$WORK/elsewhere/auth.json" "$LOCKSTEP" login "$REG" -u ci -q --password-stdin <pw.txt
[ -f "$WORK/elsewhere/auth.json" ] || fail "REGISTRY_AUTH_FILE not written"
pass "REGISTRY_AUTH_FILE names the file login writes"

# ---- logout ---------------------------------------------------------------------------------------
ls_run logout "localhost:$PORT"
assert_eq 0 "$RC" "logout ($ERR)"
assert_contains "$OUT" "Removed login credentials for localhost:$PORT" "logout output"
ls_run logout "localhost:$PORT"
assert_eq 1 "$RC" "logout again"
assert_contains "$ERR" "lockstep: error: not logged in to localhost:$PORT" "logout again message"
pass "logout removes the entry; a second logout is exit 1"

ls_run logout --all --json
assert_eq 0 "$RC" "logout --all ($ERR)"
assert_eq "{\"auth_file\":\"$AUTH\",\"removed\":[\"$REG\",\"$REG/team\"]}" "$OUT" "logout --all --json"
assert_eq '{"auths": {}, "x-custom": {"keep": true}}' \
  "$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), sort_keys=True))' "$AUTH")" "after --all"
ls_run logout
assert_eq 2 "$RC" "logout without a registry"
pass "logout --all empties auths and keeps the rest; logout needs HOST or --all"

done_testing
