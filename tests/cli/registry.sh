# shellcheck shell=bash
# Registries for the CLI suites (sourced after lib.sh): the real docker-registry (Debian package
# docker-registry, /usr/bin/docker-registry) on 127.0.0.1 at a free port, with a config written here,
# in several modes; a token issuer for its bearer flow (tests/cli/token_issuer.py); and a fake,
# misbehaving registry (tests/cli/hostile_registry.py). Several may run at once. Everything lives
# under $WORK/registry/NAME and listens on 127.0.0.1 only (or inside a network namespace of the
# suite's, with netns=); nothing else on the machine is touched.
#
#   registry_up NAME MODE [OPTION=VALUE...]
#       NAME: a letter, then letters, digits or '_' (it names the variables below, upper-cased, so
#             two names that differ only in case can't both be up).
#       MODE: plain      HTTP, no auth (clients need --tls-verify=false / an insecure registry)
#             tls        HTTPS, server certificate signed by a CA made here (SAN IP:127.0.0.1 and
#                        DNS:localhost); clients need the CA (REG_<NAME>_CA, REG_<NAME>_CERTDIR)
#             mtls       tls, and the registry requires a client certificate signed by that CA
#                        (REG_<NAME>_CLIENT_CERT/_CLIENT_KEY; client.cert/client.key in the cert dir)
#             auth       HTTP with htpasswd Basic auth (bcrypt, `htpasswd -B`)
#             tls-auth   both
#             token      HTTP, `auth: token` against a token issuer started here (HTTP), whose realm
#                        already carries a query: http://127.0.0.1:P/auth?foo=bar
#             tls-token  token over HTTPS; the issuer serves HTTPS with a certificate of the same CA
#             hostile    tests/cli/hostile_registry.py (HTTP): see the cases at the top of that file
#             hostile-tls  the same with its first listener over HTTPS (a certificate of a CA made
#                        here, as tls; REG_N_CA, REG_N_CERTDIR); its second listener stays HTTP
#       Options: user=U pass=P (auth and token modes; defaults: user "lockstep", a fresh password
#                per registry containing ':' and '%41', so that clients must split Basic
#                credentials at the first ':' and must not percent-decode them);
#                anonymous=deny|empty|pull (token modes, default empty: an anonymous client gets a
#                token that grants nothing); expires=SECONDS (token lifetime, default 300; note
#                that docker-registry 2.8.2 still accepts a token 60 s past its expiry, so a
#                short lifetime shows in the client's token fetches, registry_token_requests,
#                not in refusals);
#                realm_query=Q (the realm's query, default foo=bar); hostile_args="..." (extra
#                arguments of hostile_registry.py, e.g. "--mode stall");
#                netns=NS runs the registry and its issuer inside network namespace NS (one that
#                `ip netns add` made, e.g. "$CLUSTER_PREFIX-head" of tests/cli/cluster.sh): then only
#                processes in NS reach it (on_head ..., `ip netns exec NS skopeo ...`);
#                addr=IPv4 (only with netns=) listens on that address of NS instead of 127.0.0.1,
#                e.g. 10.78.0.10 so that the cluster's nodes could reach it too (a test then shows
#                with registry_requests that they did not pull); the TLS certificate names it too.
#       Returns when GET /v2/ answers (200, or 401 when auth is on). Call it in the suite's own
#       shell, not in $(...) or a pipeline: the servers die with the shell that started them, and
#       the variables must reach the suite. Exports, with N the upper-cased NAME:
#         REG_N_HOST     127.0.0.1:PORT (what goes into docker://HOST/REPO:TAG)
#         REG_N_URL      http://127.0.0.1:PORT or https://127.0.0.1:PORT
#         REG_N_MODE     the mode
#         REG_N_DIR      its directory ($WORK/registry/NAME; the registry's storage is data/ in it)
#         REG_N_LOG      the access log: one line per request, `... "METHOD URI HTTP/1.1" STATUS ...`
#                        (registry_requests counts it)
#         REG_N_DAEMON_LOG  the registry's own log (stderr), for failure messages
#         REG_N_PID      the server's pid
#         REG_N_NETNS    the network namespace it runs in (empty: this one)
#       TLS modes:  REG_N_CA (ca.crt), REG_N_CERTDIR (a directory with ca.crt, and client.cert and
#                   client.key in mtls: what skopeo's --cert-dir and a certs.d/HOST:PORT/ hold)
#       mtls:       REG_N_CLIENT_CERT, REG_N_CLIENT_KEY
#       auth modes: REG_N_USER, REG_N_PASS
#       token modes: REG_N_TOKEN_REALM (the realm URL, with its query), REG_N_TOKEN_LOG (the
#                   issuer's log: one JSON object per request, no secrets; see token_issuer.py),
#                   REG_N_SERVICE (the service name), REG_N_TOKEN_PID
#       hostile:    REG_N_HOST2 (the second listener, where `redirect-offhost` sends blobs),
#                   REG_N_DIGEST (the manifest digest of the valid image every case starts from),
#                   REG_N_INFO (a JSON file with every digest, size and port; see the script),
#                   REG_N_USER/REG_N_PASS (any credentials work; the `redirect-offhost` case wants some)
#   registry_down NAME     stops that registry (and its issuer). Idempotent. Its variables stay:
#                          REG_N_HOST then names an unreachable registry.
#   registry_down_all      stops everything registry_up started (only that). Idempotent; added to
#                          the EXIT trap in force at the first registry_up (a suite that sets its own
#                          EXIT trap afterwards calls it there).
#   registry_requests NAME METHOD PATH_REGEX [STATUS_REGEX]
#                          prints how many requests in NAME's access log match: METHOD and
#                          PATH_REGEX are extended regexes matched against the whole method and the
#                          whole path (the query string is not part of it); STATUS_REGEX likewise
#                          against the status (default any). Example, one GET per blob, 200 or 307:
#                            registry_requests r1 GET '/v2/app/blobs/sha256:[0-9a-f]{64}' '200|307'
#   registry_token_requests NAME [JQ_FILTER]
#                          how many token requests the issuer logged (those JQ_FILTER, a jq boolean
#                          over one log entry, selects; e.g. '.status == 200').
#   registry_skopeo_flags NAME [src|dest]
#                          the skopeo flags that reach it, one per line (--tls-verify=false or
#                          --cert-dir=DIR, --creds=USER:PASS), prefixed --src-/--dest- for skopeo
#                          copy; use: mapfile -t flags < <(registry_skopeo_flags r1 dest)
#   registry_auth_json NAME FILE   adds NAME's credentials to containers' auth.json FILE (made if
#                          absent; other entries kept): {"auths": {"HOST": {"auth": base64(U:P)}}}
#   registry_certs_d NAME DIR      makes DIR/HOST (a certs.d entry: ca.crt, and client.cert and
#                          client.key in mtls) and prints its path
#
# Needs docker-registry, curl, jq, openssl, setpriv (util-linux), htpasswd (apache2-utils) for the
# auth modes, /usr/bin/python3 (REGISTRY_PYTHON overrides it) for the hostile registry, with
# python3-cryptography for the token modes (scripts/install-deps.sh installs them all).

_REGISTRY_PYTHON=${REGISTRY_PYTHON:-/usr/bin/python3}
_REGISTRY_NAMES=""

# Sets and exports REG_<NAME upper-cased>_<SUFFIX>.
_registry_set() { # NAME SUFFIX VALUE
  local var="REG_${1^^}_$2"
  printf -v "$var" '%s' "$3"
  export "${var?}"
}

# The value of REG_<NAME upper-cased>_<SUFFIX>, empty when unset.
_registry_get() { # NAME SUFFIX
  local var="REG_${1^^}_$2"
  printf '%s' "${!var:-}"
}

_registry_need_up() { # FUNCTION NAME
  case " $_REGISTRY_NAMES " in
  *" $2 "*) ;;
  *) fail "$1: no registry named '$2' is up (registry_up first)" ;;
  esac
}

# Adds registry_down_all to the EXIT trap in force now (once), keeping that trap and the exit status.
# shellcheck disable=SC2120 # "set --" below parses the trap, not arguments
_registry_register_cleanup() {
  [ -z "${_REGISTRY_TRAP_SET:-}" ] || return 0
  _REGISTRY_TRAP_SET=1
  local previous=""
  eval "set -- $(trap -p EXIT)"
  previous=${3:-}
  # shellcheck disable=SC2064,SC2154 # expanded now on purpose: the trap in force at this moment
  trap "_ls_registry_rc=\$?; registry_down_all; (exit \$_ls_registry_rc) && :; $previous" EXIT
}

# A TCP port on 127.0.0.1 that nothing listens on now, below the ephemeral range (32768-60999 on
# Linux) so that outgoing connections don't take it; the caller retries if someone takes it first.
_registry_free_port() {
  local port
  while true; do
    port=$((20000 + SRANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
}

# Sleeps S seconds without a process per call (the wait loops poll often, on a busy machine): read
# with a timeout on a pipe that never delivers. The pipe is made once.
_registry_sleep() { # S
  if [ -z "${_REGISTRY_SLEEP_FD:-}" ]; then
    exec {_REGISTRY_SLEEP_FD}<> <(:)
  fi
  read -r -t "$1" -u "$_REGISTRY_SLEEP_FD" _ || true
}

# Runs CMD in the background, to die with this shell (SIGTERM when the shell is gone), with stdout
# to OUT and stderr to ERR; sets _REGISTRY_LAST_PID.
_registry_spawn() { # OUT ERR CMD...
  local out=$1 err=$2
  shift 2
  setpriv --pdeathsig TERM -- "$@" >"$out" 2>"$err" </dev/null &
  _REGISTRY_LAST_PID=$!
}

# Waits until FILE (written by a server that bound port 0) holds a line; prints it.
_registry_wait_file() { # WHAT FILE PID ERRLOG
  local i
  for ((i = 0; i < 200; i++)); do
    if [ -s "$2" ]; then
      head -n 1 "$2"
      return 0
    fi
    kill -0 "$3" 2>/dev/null || fail "registry_up: $1 exited: $(tail -n 20 "$4")"
    _registry_sleep 0.05
  done
  fail "registry_up: $1 did not report its port within 10 s: $(tail -n 20 "$4")"
}

# Stops PIDS (children of this shell): SIGTERM, up to 5 s, then SIGKILL; reaps them.
_registry_stop_pids() { # PIDS...
  local pid i left
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    left=()
    for pid in "$@"; do
      kill -0 "$pid" 2>/dev/null && left+=("$pid")
    done
    [ ${#left[@]} -gt 0 ] || break
    _registry_sleep 0.1
  done
  [ ${#left[@]} -eq 0 ] || kill -KILL "${left[@]}" 2>/dev/null || true
  for pid in "$@"; do
    wait "$pid" 2>/dev/null || true
  done
}

# A CA (ca.crt, ca.key) in DIR.
_registry_make_ca() { # DIR NAME
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
    -keyout "$1/ca.key" -out "$1/ca.crt" -subj "/CN=lockstep test CA $2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>"$1/openssl.log" || fail "registry_up: openssl can't make the CA: $(cat "$1/openssl.log")"
}

# A certificate BASE.crt/BASE.key in DIR signed by DIR's CA (not self-signed), with EXTENSIONS
# (-addext arguments) on top of openssl's defaults for a certificate that is not a CA.
_registry_make_cert() { # DIR BASE SUBJECT EXTENSIONS...
  local dir=$1 base=$2 subject=$3 ext args=()
  shift 3
  for ext in "$@"; do
    args+=(-addext "$ext")
  done
  openssl req -x509 -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -nodes -days 7 -keyout "$dir/$base.key" -out "$dir/$base.crt" -subj "$subject" \
    -set_serial "$((0x4000000000000000 + SRANDOM * 65536 + SRANDOM % 65536))" \
    -addext "basicConstraints=critical,CA:FALSE" "${args[@]}" 2>>"$dir/openssl.log" ||
    fail "registry_up: openssl can't make $base.crt: $(cat "$dir/openssl.log")"
}

registry_up() { # NAME MODE [OPTION=VALUE...]
  local name=${1:-} mode=${2:-} opt dir user=lockstep pass="" anonymous=empty expires=300
  local realm_query=foo=bar hostile_args="" tls="" auth="" scheme=http port try pid i code
  local curl_tls=() realm="" service="" token_pid="" info netns="" addr=127.0.0.1 in_ns=() san
  [[ $name =~ ^[A-Za-z][A-Za-z0-9_]*$ ]] || fail "registry_up: bad registry name '$name'"
  for opt in $_REGISTRY_NAMES; do
    [ "${opt^^}" != "${name^^}" ] || fail "registry_up: registry '$opt' is already up"
  done
  case $mode in
  plain) ;;
  tls | mtls) tls=1 ;;
  auth) auth=htpasswd ;;
  tls-auth) tls=1 auth=htpasswd ;;
  token) auth=token ;;
  tls-token) tls=1 auth=token ;;
  hostile) ;;
  hostile-tls) tls=1 ;;
  *) fail "registry_up: unknown mode '$mode' (plain, tls, mtls, auth, tls-auth, token, tls-token, hostile, hostile-tls)" ;;
  esac
  shift 2
  for opt in "$@"; do
    case $opt in
    user=?*) user=${opt#user=} ;;
    pass=?*) pass=${opt#pass=} ;;
    anonymous=deny | anonymous=empty | anonymous=pull) anonymous=${opt#anonymous=} ;;
    expires=[1-9]*) expires=${opt#expires=} ;;
    realm_query=?*=*) realm_query=${opt#realm_query=} ;;
    hostile_args=*) hostile_args=${opt#hostile_args=} ;;
    netns=?*) netns=${opt#netns=} ;;
    addr=?*) addr=${opt#addr=} ;;
    *) fail "registry_up: unknown or malformed option '$opt'" ;;
    esac
  done
  need curl setpriv jq
  if [ -n "$netns" ]; then
    need ip
    [ -e "/run/netns/$netns" ] || fail "registry_up: no network namespace '$netns' (ip netns add)"
    in_ns=(ip netns exec "$netns")
  fi
  [[ $addr =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "registry_up: addr must be an IPv4 address, not '$addr'"
  [ "$addr" = 127.0.0.1 ] || [ -n "$netns" ] ||
    fail "registry_up: addr=$addr needs netns= (outside a namespace of its own, registries stay on 127.0.0.1)"
  [ "${mode%-tls}" = hostile ] || need docker-registry openssl
  [ -z "$tls" ] || need openssl
  [ "$auth" != htpasswd ] || need htpasswd
  [ "${mode%-tls}" != hostile ] || need "$_REGISTRY_PYTHON"
  if [ "$auth" = token ]; then
    if ! "$_REGISTRY_PYTHON" -c 'import cryptography' 2>/dev/null; then
      [ -z "${CI:-}" ] || fail "registry_up: $_REGISTRY_PYTHON can't import cryptography (python3-cryptography)"
      echo "SKIP: $_REGISTRY_PYTHON can't import cryptography (apt-get install python3-cryptography)" >&2
      exit 77
    fi
  fi
  dir=$WORK/registry/$name
  rm -rf "$dir"
  mkdir -p "$dir"
  _registry_register_cleanup
  _REGISTRY_NAMES+=" $name"
  eval "_REGISTRY_PIDS_$name=''"
  _registry_set "$name" MODE "$mode"
  _registry_set "$name" DIR "$dir"
  _registry_set "$name" LOG "$dir/access.log"
  _registry_set "$name" DAEMON_LOG "$dir/daemon.log"
  _registry_set "$name" NETNS "$netns"

  if [ -n "$tls" ]; then
    scheme=https
    _registry_make_ca "$dir" "$name"
    san="IP:127.0.0.1,DNS:localhost"
    [ "$addr" = 127.0.0.1 ] || san+=",IP:$addr"
    _registry_make_cert "$dir" server "/CN=localhost" "subjectAltName=$san" \
      "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth"
    mkdir -p "$dir/certs"
    cp "$dir/ca.crt" "$dir/certs/ca.crt"
    _registry_set "$name" CA "$dir/ca.crt"
    _registry_set "$name" CERTDIR "$dir/certs"
    curl_tls=(--cacert "$dir/ca.crt")
  fi

  if [ "${mode%-tls}" = hostile ]; then
    [ -z "$tls" ] || hostile_args+=" --tls-cert $dir/server.crt --tls-key $dir/server.key"
    # shellcheck disable=SC2086 # hostile_args is a list of words on purpose
    _registry_spawn "$dir/access.log" "$dir/daemon.log" "${in_ns[@]}" "$_REGISTRY_PYTHON" \
      "$LOCKSTEP_SOURCE_DIR/tests/cli/hostile_registry.py" --info "$dir/info.json" --addr "$addr" $hostile_args
    pid=$_REGISTRY_LAST_PID
    eval "_REGISTRY_PIDS_$name=$pid"
    _registry_wait_file "the hostile registry" "$dir/info.json" "$pid" "$dir/daemon.log" >/dev/null
    info=$dir/info.json
    port=$(jq -r .port "$info")
    _registry_set "$name" PID "$pid"
    _registry_set "$name" HOST "$addr:$port"
    _registry_set "$name" URL "$scheme://$addr:$port"
    _registry_set "$name" HOST2 "$addr:$(jq -r .port2 "$info")"
    _registry_set "$name" DIGEST "$(jq -r .manifest_digest "$info")"
    _registry_set "$name" INFO "$info"
    _registry_set "$name" USER hostile
    _registry_set "$name" PASS "hostile:pw"
    return 0
  fi

  if [ "$mode" = mtls ]; then
    _registry_make_cert "$dir" client "/CN=lockstep test client" "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=clientAuth"
    cp "$dir/client.crt" "$dir/certs/client.cert"
    cp "$dir/client.key" "$dir/certs/client.key"
    _registry_set "$name" CLIENT_CERT "$dir/client.crt"
    _registry_set "$name" CLIENT_KEY "$dir/client.key"
    curl_tls+=(--cert "$dir/client.crt" --key "$dir/client.key")
  fi
  if [ -n "$auth" ]; then
    # ':' and '%41' on purpose (see above); no spaces or glob characters, so that the flags
    # registry_skopeo_flags prints survive word splitting.
    [ -n "$pass" ] || printf -v pass 'pw:%%41-%08x' "$SRANDOM"
    _registry_set "$name" USER "$user"
    _registry_set "$name" PASS "$pass"
  fi
  if [ "$auth" = htpasswd ]; then
    printf '%s' "$pass" | htpasswd -B -i -c "$dir/htpasswd" "$user" 2>"$dir/htpasswd.log" ||
      fail "registry_up: htpasswd failed: $(cat "$dir/htpasswd.log")"
  elif [ "$auth" = token ]; then
    service="lockstep-test-registry-$name"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
      -keyout "$dir/token-signer.key" -out "$dir/token-signer.crt" -subj "/CN=lockstep test token signer" \
      2>>"$dir/openssl.log" || fail "registry_up: openssl can't make the token signer: $(cat "$dir/openssl.log")"
    local issuer_tls=()
    if [ -n "$tls" ]; then
      issuer_tls=(--tls-cert "$dir/server.crt" --tls-key "$dir/server.key")
    fi
    _registry_spawn "$dir/token-issuer.out" "$dir/token-issuer.err" "${in_ns[@]}" "$_REGISTRY_PYTHON" \
      "$LOCKSTEP_SOURCE_DIR/tests/cli/token_issuer.py" --addr "$addr" --port-file "$dir/token-issuer.port" \
      --key "$dir/token-signer.key" --cert "$dir/token-signer.crt" --issuer lockstep-test-issuer \
      --service "$service" --realm-path /auth --realm-query "$realm_query" --user "$user" \
      --password "$pass" --anonymous "$anonymous" --expires-in "$expires" --log "$dir/token.log" \
      "${issuer_tls[@]}"
    token_pid=$_REGISTRY_LAST_PID
    eval "_REGISTRY_PIDS_$name=$token_pid"
    : >"$dir/token.log"
    port=$(_registry_wait_file "the token issuer" "$dir/token-issuer.port" "$token_pid" "$dir/token-issuer.err")
    realm="$scheme://$addr:$port/auth?$realm_query"
    _registry_set "$name" TOKEN_REALM "$realm"
    _registry_set "$name" TOKEN_LOG "$dir/token.log"
    _registry_set "$name" TOKEN_PID "$token_pid"
    _registry_set "$name" SERVICE "$service"
  fi

  # docker-registry can't bind port 0 and say which it got: take a free port, and try another if
  # someone took it in between.
  for try in 1 2 3 4 5; do
    if [ -n "$netns" ]; then
      port=$((20000 + SRANDOM % 12000)) # a fresh namespace: a collision is retried below
    else
      port=$(_registry_free_port)
    fi
    _registry_write_config "$dir" "$addr:$port" "$tls" "$mode" "$auth" "$realm" "$service"
    _registry_spawn "$dir/access.log" "$dir/daemon.log" "${in_ns[@]}" docker-registry serve "$dir/config.yml"
    pid=$_REGISTRY_LAST_PID
    code=""
    # "listening on" comes once the port is ours (another process answering there is not proof).
    for ((i = 0; i < 400; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      if _registry_log_has "$dir/daemon.log" "listening on $addr:$port"; then
        code=$("${in_ns[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${curl_tls[@]}" \
          "$scheme://$addr:$port/v2/" 2>/dev/null) || true
        break
      fi
      _registry_sleep 0.025
    done
    if kill -0 "$pid" 2>/dev/null && [[ $code == 200 || $code == 401 ]]; then
      break
    fi
    _registry_stop_pids "$pid"
    if ! grep -q 'address already in use' "$dir/daemon.log" || [ "$try" = 5 ]; then
      fail "registry_up: docker-registry ($mode) did not answer on $scheme://$addr:$port/v2/ (last: ${code:-nothing}): $(tail -n 20 "$dir/daemon.log")"
    fi
  done
  eval "_REGISTRY_PIDS_$name=\"\$_REGISTRY_PIDS_$name $pid\""
  _registry_set "$name" PID "$pid"
  _registry_set "$name" HOST "$addr:$port"
  _registry_set "$name" URL "$scheme://$addr:$port"
}

# Whether FILE has a line containing TEXT (without a process per call).
_registry_log_has() { # FILE TEXT
  local line
  [ -s "$1" ] || return 1
  while IFS= read -r line; do
    [[ $line == *"$2"* ]] && return 0
  done <"$1"
  return 1
}

_registry_write_config() { # DIR ADDR:PORT TLS MODE AUTH REALM SERVICE
  local dir=$1 listen=$2 tls=$3 mode=$4 auth=$5 realm=$6 service=$7
  {
    cat <<EOF
# Written by tests/cli/registry.sh ($mode).
version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: $listen
  secret: lockstep-test-$SRANDOM$SRANDOM
  headers:
    X-Content-Type-Options: [nosniff]
EOF
    if [ -n "$tls" ]; then
      cat <<EOF
  tls:
    certificate: $dir/server.crt
    key: $dir/server.key
EOF
      if [ "$mode" = mtls ]; then
        cat <<EOF
    clientcas:
      - $dir/ca.crt
EOF
      fi
    fi
    if [ "$auth" = htpasswd ]; then
      cat <<EOF
auth:
  htpasswd:
    realm: lockstep-test
    path: $dir/htpasswd
EOF
    elif [ "$auth" = token ]; then
      cat <<EOF
auth:
  token:
    realm: "$realm"
    service: "$service"
    issuer: lockstep-test-issuer
    rootcertbundle: $dir/token-signer.crt
EOF
    fi
  } >"$dir/config.yml"
}

registry_down() { # NAME
  local name=${1:-} pids
  case " $_REGISTRY_NAMES " in
  *" $name "*) ;;
  *) return 0 ;;
  esac
  eval "pids=\${_REGISTRY_PIDS_$name:-}"
  # shellcheck disable=SC2086 # a list of pids
  _registry_stop_pids $pids
  eval "_REGISTRY_PIDS_$name=''"
  local rest="" other
  for other in $_REGISTRY_NAMES; do
    [ "$other" = "$name" ] || rest+=" $other"
  done
  _REGISTRY_NAMES=$rest
}

registry_down_all() {
  local name
  for name in $_REGISTRY_NAMES; do
    registry_down "$name"
  done
  _REGISTRY_NAMES=""
}

registry_requests() { # NAME METHOD PATH_REGEX [STATUS_REGEX]
  [ $# -ge 3 ] || fail "registry_requests: NAME METHOD PATH_REGEX [STATUS_REGEX]"
  local log status='[0-9]{3}'
  [ -z "${4:-}" ] || status=$4
  log=$(_registry_get "$1" LOG)
  [ -n "$log" ] || fail "registry_requests: no registry named '$1' was up"
  [ -f "$log" ] || {
    echo 0
    return 0
  }
  sed -nE 's/^[^"]*"([A-Z]+) ([^ ?]*)[^ ]* HTTP\/[0-9.]+" ([0-9]{3}) .*/\1 \2 \3/p' "$log" |
    grep -cE "^($2) ($3) ($status)\$" || true
}

registry_token_requests() { # NAME [JQ_FILTER]
  local log
  log=$(_registry_get "$1" TOKEN_LOG)
  [ -n "$log" ] || fail "registry_token_requests: registry '$1' has no token issuer"
  jq -c "select(${2:-true})" "$log" | wc -l
}

registry_skopeo_flags() { # NAME [src|dest]
  local name=$1 prefix="" mode
  _registry_need_up registry_skopeo_flags "$name"
  case ${2:-} in
  "") ;;
  src | dest) prefix="$2-" ;;
  *) fail "registry_skopeo_flags: the second argument is src or dest, not '$2'" ;;
  esac
  mode=$(_registry_get "$name" MODE)
  case $mode in
  tls | mtls | tls-auth | tls-token) echo "--${prefix}cert-dir=$(_registry_get "$name" CERTDIR)" ;;
  *) echo "--${prefix}tls-verify=false" ;;
  esac
  case $mode in
  auth | tls-auth | token | tls-token | hostile | hostile-tls)
    echo "--${prefix}creds=$(_registry_get "$name" USER):$(_registry_get "$name" PASS)"
    ;;
  esac
}

registry_auth_json() { # NAME FILE
  local name=$1 file=$2 auth user
  _registry_need_up registry_auth_json "$name"
  user=$(_registry_get "$name" USER)
  [ -n "$user" ] || fail "registry_auth_json: registry '$name' has no credentials (mode $(_registry_get "$name" MODE))"
  auth=$(printf '%s:%s' "$user" "$(_registry_get "$name" PASS)" | base64 -w0)
  [ -s "$file" ] || echo '{}' >"$file"
  jq --arg host "$(_registry_get "$name" HOST)" --arg auth "$auth" '.auths[$host] = {auth: $auth}' \
    "$file" >"$file.tmp" && mv "$file.tmp" "$file"
}

registry_certs_d() { # NAME DIR
  local name=$1 certdir target
  _registry_need_up registry_certs_d "$name"
  certdir=$(_registry_get "$name" CERTDIR)
  [ -n "$certdir" ] || fail "registry_certs_d: registry '$name' does not use TLS"
  target=$2/$(_registry_get "$name" HOST)
  mkdir -p "$target"
  cp "$certdir"/* "$target"/
  echo "$target"
}
