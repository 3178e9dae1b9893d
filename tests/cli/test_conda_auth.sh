#!/usr/bin/env bash
# conda natively (docs/conda.md, "Channels"): a private channel that wants credentials, served on
# 127.0.0.1 behind HTTP basic authentication, a bearer token or anaconda.org's path token
# (/t/TOKEN/). Without an entry for its host, `lockstep lock` fails saying where credentials come
# from; with one in the file $NETRC names (curl's, pip's and conda's convention) or in the
# credentials file pixi and rattler keep ($RATTLER_AUTH_FILE), the channel locks and its packages
# build; the secret appears in no output, the lock or the image. A credentials file that isn't valid
# is exit 2 naming it.
source "$(dirname "$0")/lib.sh"
need jq python3 cph

cat >channel.json <<'JSON'
{"packages": [{"name": "tool", "version": "1.0", "build": "h0_0", "files": {"share/tool": "private\n"}}]}
JSON
python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/conda_channel.py" channel channel.json
cat >authed.py <<'PY'
import base64, http.server
WANT = "Basic " + base64.b64encode(b"alice:s3cret-token").decode()
TOKEN = "/t/tk-42-secret"
class IndexHandler(http.server.SimpleHTTPRequestHandler):
    def check(self):
        if self.headers.get("Authorization") in (WANT, "Bearer b3arer-secret"):
            return True
        if self.path.startswith(TOKEN + "/"):  # anaconda.org's path token
            self.path = self.path[len(TOKEN):]
            return True
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="private channel"')
        self.send_header("Content-Length", "0")
        self.end_headers()
        return False
    def do_GET(self):
        if self.check():
            super().do_GET()
    def do_HEAD(self):
        if self.check():
            super().do_HEAD()
PY
start_http_server channel "$PWD/authed.py"
cat >lockstep.yaml <<YAML
lockstep: 1
name: private
repos:
  - {conda: $HTTP_URL}
packages:
  conda: [tool]
outputs: {oci: out}
YAML

export RATTLER_AUTH_FILE=$PWD/no-such-credentials.json
NETRC=$PWD/no-such-netrc ls_run lock
assert_eq 3 "$RC" "a channel that wants credentials, none given: $ERR"
assert_contains "$ERR" "HTTP 401" "the server's answer"
assert_contains "$ERR" "127.0.0.1:${HTTP_URL##*:} wants credentials: lockstep sends those of its entry in ~/.netrc (or the file \$NETRC names)" \
  "where credentials come from"
[ ! -e lockstep.lock ] || fail "no lock written"
pass "without credentials the lock fails, saying where they come from"

printf 'machine 127.0.0.1\n  login alice\n  password s3cret-token\n' >netrc
chmod 600 netrc
NETRC=$PWD/netrc ls_run lock
assert_eq 0 "$RC" "lock with the netrc entry: $ERR"
NETRC=$PWD/netrc ls_run build
assert_eq 0 "$RC" "build with the netrc entry: $ERR"
assert_not_contains "$OUT$ERR$(cat lockstep.lock)" "s3cret" "the secret is in no output and not in the lock"
grep -rq "s3cret" out && fail "the secret is in the image"
assert_contains "$(cat "$HTTP_LOG")" '"GET /linux-64/tool-1.0-h0_0.conda HTTP/1.1" 200' "the package came through the authenticated server"
pass "with a \$NETRC entry the private channel locks and builds, and the secret is nowhere"

rm -rf out lockstep.lock
host=127.0.0.1:${HTTP_URL##*:}
printf '{"%s": {"CondaToken": "tk-42-secret"}}\n' "$host" >credentials.json
: >"$HTTP_LOG"
RATTLER_AUTH_FILE=$PWD/credentials.json ls_run lock
assert_eq 0 "$RC" "lock with a conda token: $ERR"
RATTLER_AUTH_FILE=$PWD/credentials.json ls_run build
assert_eq 0 "$RC" "build with a conda token: $ERR"
assert_contains "$(cat "$HTTP_LOG")" '"GET /t/tk-42-secret/linux-64/repodata.json HTTP/1.1"' \
  "the token went into the request's path"
assert_eq "$HTTP_URL/linux-64/tool-1.0-h0_0.conda" "$(jq -r '.artifacts[0].url' lockstep.lock)" "the lock has the URL without it"
assert_not_contains "$OUT$ERR$(cat lockstep.lock)" "tk-42" "the token is in no output and not in the lock"
grep -rq "tk-42" out && fail "the token is in the image"
pass "a conda token from the credentials file goes into the path (/t/TOKEN/) and nowhere else"

rm -rf out lockstep.lock
printf '{"*.example.org": {"CondaToken": "wrong"}, "%s": {"BearerToken": "b3arer-secret"}}\n' "$host" >credentials.json
RATTLER_AUTH_FILE=$PWD/credentials.json ls_run lock
assert_eq 0 "$RC" "lock with a bearer token: $ERR"
assert_not_contains "$OUT$ERR$(cat lockstep.lock)" "b3arer" "the bearer token is in no output and not in the lock"
printf '{"%s": {"Password": "x"}}\n' "$host" >credentials.json
RATTLER_AUTH_FILE=$PWD/credentials.json ls_run lock --update
assert_eq 2 "$RC" "a credentials file of another shape is exit 2"
assert_contains "$ERR" "credentials.json: the entry for $host is not one of" "naming the file and the entry"
pass "a bearer token from the credentials file; a credentials file that isn't valid is a located exit 2"

done_testing
