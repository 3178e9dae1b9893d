# Shared helpers for the CLI suites (sourced). Each suite runs in a fresh temp dir with its own
# lockstep cache, and removes both on exit.
set -euo pipefail

: "${LOCKSTEP:?LOCKSTEP must point to the lockstep binary (ctest sets it)}"
: "${LOCKSTEP_SOURCE_DIR:?}"
LOCKSTEP=$(realpath "$LOCKSTEP")
LOCKSTEP_BINARY=$LOCKSTEP # the build's binary, even after add_test_user copies it
WORK=$(mktemp -d /tmp/lockstep-cli-XXXXXX)
export LOCKSTEP_CACHE="$WORK/cache"
# Keep the suites' specs out of any enclosing git work tree (the repo's build dir is inside one).
export GIT_CEILING_DIRECTORIES=/tmp
unset SOURCE_DATE_EPOCH
cd "$WORK"
trap 'remove_test_user; cd /; rm -rf "$WORK"' EXIT

TESTS_RUN=0

# ---- an unprivileged user -------------------------------------------------------------------------
# add_test_user PREFIX: for the suites that run their cases as root and as an unprivileged user. As
# root, creates the user PREFIX<pid> (no home, no subordinate ids) and sets TUSER to it; WHO is
# (root TUSER), or (root) when not run as root (in CI that is a failure). LOCKSTEP is copied where
# the user can run it when needed. remove_test_user (called on exit by the default trap; a suite with
# its own EXIT trap calls it there) kills the user's processes and removes it.
TUSER=""
WHO=(root)
add_test_user() { # PREFIX
  WHO=(root)
  if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null && command -v runuser >/dev/null; then
    TUSER="$1$$"
    useradd -M -N -d /nonexistent -s /bin/sh "$TUSER"
    chmod 0755 "$WORK"
    if ! runuser -u "$TUSER" -- test -x "$LOCKSTEP"; then
      install -m 0755 "$LOCKSTEP" "$WORK/lockstep"
      LOCKSTEP="$WORK/lockstep"
    fi
    WHO+=("$TUSER")
  elif [ -n "${CI:-}" ]; then
    fail "CI runs this suite as root, to cover an unprivileged user too"
  fi
}
remove_test_user() {
  if [ -n "$TUSER" ]; then
    pkill -KILL -u "$TUSER" 2>/dev/null || true
    userdel "$TUSER" 2>/dev/null || true
    TUSER=""
  fi
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

pass() {
  TESTS_RUN=$((TESTS_RUN + 1))
  echo "ok $TESTS_RUN - $*"
}

# Skips the suite (exit 77) when a tool is missing, except in CI where missing tools are failures.
need() {
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      if [ -n "${CI:-}" ]; then
        fail "required tool '$tool' is not installed (scripts/install-deps.sh installs it)"
      fi
      echo "SKIP: '$tool' is not installed" >&2
      exit 77
    fi
  done
}

# need_arm64_emulation: the suite runs arm64 programs on this x86_64 machine under qemu-user, through
# a binfmt_misc of a user namespace's own (Linux 6.7+) or a handler the host registered with F;
# skipped (77) otherwise (never in CI, whose kernel has it).
need_arm64_emulation() {
  local kernel
  need qemu-aarch64-static
  [ "$(uname -m)" = x86_64 ] || { echo "SKIP: the suite emulates arm64 on an x86_64 machine" >&2; exit 77; }
  kernel=$(uname -r | cut -d- -f1)
  if [ "$(printf '%s\n6.7\n' "$kernel" | sort -V | head -n1)" != 6.7 ] &&
    ! grep -qs '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
    echo "SKIP: Linux $kernel has no binfmt_misc per user namespace, and the host registered no qemu-aarch64" >&2
    exit 77
  fi
}

# need_debian_mirror: deb.debian.org must answer; skipped (77) without it, a failure in CI.
need_debian_mirror() {
  if ! curl -fsS --max-time 20 -o /dev/null http://deb.debian.org/debian/dists/bookworm/InRelease 2>/dev/null; then
    [ -z "${CI:-}" ] || fail "deb.debian.org is not reachable"
    echo "SKIP: deb.debian.org is not reachable" >&2
    exit 77
  fi
}

# need_python_jsonschema PYTHON: PYTHON must import jsonschema and yaml (the schema suites' judges).
need_python_jsonschema() {
  if ! "$1" -c 'import jsonschema, yaml' 2>/dev/null; then
    if [ -n "${CI:-}" ]; then
      fail "python3-jsonschema and python3-yaml are needed (scripts/install-deps.sh installs them)"
    fi
    echo "SKIP: $1 cannot import jsonschema and yaml (apt-get install python3-jsonschema python3-yaml)" >&2
    exit 77
  fi
}

assert_eq() { # EXPECTED ACTUAL WHAT
  [ "$1" = "$2" ] || fail "$3: expected [$1], got [$2]"
}

assert_contains() { # HAYSTACK NEEDLE WHAT
  case "$1" in
    *"$2"*) ;;
    *) fail "$3: [$2] not found in: $1" ;;
  esac
}

assert_not_contains() { # HAYSTACK NEEDLE WHAT
  case "$1" in
    *"$2"*) fail "$3: [$2] found in: $1" ;;
  esac
}

# Runs lockstep, capturing stdout/stderr/exit code into OUT, ERR, RC (never exits on failure).
ls_run() {
  set +e
  OUT=$("$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}

# The manifest digest lockstep printed last.
last_line() { printf '%s\n' "$1" | tail -n 1; }

# A listing of a tree: type, mode, size, link target and content hash per path, sorted.
tree_listing() { # DIR
  (cd "$1" && find . -mindepth 1 -printf '%p %y %m %s %l\n' | LC_ALL=C sort | while read -r p y m s l; do
    if [ "$y" = f ]; then
      echo "$p $y $m $s $(sha256sum <"$p" | cut -c1-16)"
    elif [ "$y" = d ]; then
      echo "$p $y $m"
    else
      echo "$p $y $l"
    fi
  done)
}

done_testing() {
  echo "# $TESTS_RUN checks passed"
}

# A minimal root filesystem: busybox-static with the applets the suites use, /etc/passwd and
# /etc/group. Needs /bin/busybox (package busybox-static).
make_busybox_root() { # DIR
  need busybox
  local dir=$1 applet
  mkdir -p "$dir/bin" "$dir/etc" "$dir/tmp" "$dir/root"
  cp "$(command -v busybox)" "$dir/bin/busybox"
  for applet in sh echo cat ls rm mkdir touch true false id env pwd sleep kill hostname mount \
    ln chmod stat test wc sed grep head tail find printf; do
    ln -sf busybox "$dir/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$dir/etc/group"
}

# The uncompressed tar listing (type, mode, owner, path) of one layer blob of an OCI layout.
layer_listing() { # LAYOUT N (0-based layer index of the first manifest)
  local manifest digest
  manifest=$(jq -r '.manifests[0].digest' "$1/index.json" | cut -d: -f2)
  digest=$(jq -r ".layers[$2].digest" "$1/blobs/sha256/$manifest" | cut -d: -f2)
  zcat -f "$1/blobs/sha256/$digest" | tar -tv --numeric-owner | awk '{print substr($1,1,1), $2, $6}'
}

# ---- fixtures built once per test run (docs/testing.md) --------------------------------------------
# mpi_hello_fixture_key: what the mpi_hello fixture is keyed by: the lockstep binary and the files of
# examples/mpi-hello (16 hex digits).
mpi_hello_fixture_key() {
  {
    sha256sum <"$LOCKSTEP_BINARY"
    (cd "$LOCKSTEP_SOURCE_DIR/examples/mpi-hello" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16
}

# mpi_hello_fixture DEST: a copy at DEST of examples/mpi-hello as the mpi_hello fixture built it
# (tests/cli/fixture_mpi_hello.sh): its spec with outputs out and out.sif, the lock, and those
# outputs. Sets MPI_HELLO_DIGEST to the image's manifest digest.
# ctest builds the fixture before the suites that need it; a suite run by hand builds it here.
mpi_hello_fixture() { # DEST
  local dir
  : "${LOCKSTEP_BUILD_DIR:?LOCKSTEP_BUILD_DIR must name the build tree (ctest sets it)}"
  dir="$LOCKSTEP_BUILD_DIR/test-fixtures/mpi-hello/$(mpi_hello_fixture_key)"
  if [ ! -f "$dir/digest" ]; then
    LOCKSTEP="$LOCKSTEP_BINARY" bash "$LOCKSTEP_SOURCE_DIR/tests/cli/fixture_mpi_hello.sh" >&2 ||
      fail "the mpi_hello fixture (tests/cli/fixture_mpi_hello.sh) failed"
  fi
  mkdir -p "$(dirname "$1")"
  cp -a "$dir/ex" "$1"
  MPI_HELLO_DIGEST=$(cat "$dir/digest")
}

# fixture_cached NAME KEY DEST CMD...: DEST holds what `CMD... DIR` makes in an empty DIR, copied from a
# cache under $LOCKSTEP_BUILD_DIR/test-fixtures/NAME/KEY (KEY: the sha256 of what CMD's output depends
# on), so that each kind of fixture is made once per test run, whichever suites ask first; flock
# keeps two suites from making the same one at once. Made in place, uncached, without
# LOCKSTEP_BUILD_DIR or when DEST already holds something (a suite's own packages to index with it).
fixture_cached() {
  local name=$1 key=$2 dest=$3 cache
  shift 3
  if [ -z "${LOCKSTEP_BUILD_DIR:-}" ] || [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
    "$@" "$dest"
    return
  fi
  cache="$LOCKSTEP_BUILD_DIR/test-fixtures/$name/$key"
  mkdir -p "$(dirname "$cache")"
  (
    flock 9
    if [ ! -d "$cache" ]; then
      rm -rf "$cache.tmp"
      "$@" "$cache.tmp" && mv "$cache.tmp" "$cache"
    fi
  ) 9>"$cache.lock" || return 1
  mkdir -p "$dest"
  cp -a "$cache/." "$dest/"
}

# fixture_repo SCRIPT DEST [ARGS...]: what tests/fixtures/apt/SCRIPT DEST ARGS... makes (a signed apt
# repository; the scripts are deterministic but for the signatures), made once per test run.
fixture_repo() {
  local script=$1 dest=$2 key
  shift 2
  key=$({
    cat "$LOCKSTEP_SOURCE_DIR"/tests/fixtures/apt/*.sh
    printf '%s\n' "$script" "$@"
  } | sha256sum | cut -c1-16)
  fixture_cached apt "$key" "$dest" _fixture_repo_make "$script" "$@"
}
_fixture_repo_make() { # SCRIPT ARGS... DIR
  local script=$1 dir=${*: -1}
  bash "$LOCKSTEP_SOURCE_DIR/tests/fixtures/apt/$script" "$dir" "${@:2:$#-2}"
}

# ---- HTTP server for repository fixtures ----------------------------------------------------------
# start_http_server DIR serves DIR read-only on 127.0.0.1 at a free port (the server binds port 0
# and reports the port, so there is no race), waits until it answers, and sets
#   HTTP_URL  http://127.0.0.1:PORT (no trailing slash)
#   HTTP_PID  the server's process id
#   HTTP_LOG  its request log, one line per request: "GET /path HTTP/1.1" STATUS SIZE
# With HANDLER.py, that module's IndexHandler class answers (tests/cli/py_index.py: a Python package
# index with PEP 691 content negotiation). One server at a time. stop_http_server stops it (idempotent). start_http_server also adds
# stop_http_server to the EXIT trap set at that moment (keeping that trap and the exit status); a
# suite that sets its own EXIT trap afterwards must call stop_http_server in it. The server exits
# by itself when the suite's shell is gone, or after an hour at most.
start_http_server() { # DIR [HANDLER.py]
  need python3
  local dir=$1 handler=${2:-} port="" i python shell_pid=$BASHPID
  # The interpreter itself, not a wrapper such as a pyenv shim, so that HTTP_PID is the server.
  python=$(python3 -c 'import sys; print(sys.executable)')
  [ -d "$dir" ] || fail "start_http_server: $dir is not a directory"
  [ -z "${HTTP_PID:-}" ] || fail "start_http_server: a server is already running (pid $HTTP_PID)"
  HTTP_LOG="$WORK/http.log"
  : >"$WORK/.http-port"
  "$python" -c '
import functools, http.server, os, sys, threading, time
root, parent = sys.argv[1], int(sys.argv[2])
Base = http.server.SimpleHTTPRequestHandler
if len(sys.argv) > 3:  # a module whose IndexHandler serves a Python package index
    sys.path.insert(0, os.path.dirname(sys.argv[3]))
    Base = __import__(os.path.basename(sys.argv[3])[:-3]).IndexHandler
class Handler(Base):
    def log_message(self, format, *args):
        sys.stderr.write(format % args + "\n")
        sys.stderr.flush()
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128  # parallel clients: the default backlog of 5 drops their SYNs (1 s retries)
server = Server(("127.0.0.1", 0), functools.partial(Handler, directory=root))
server.daemon_threads = True
print(server.server_address[1], flush=True)
def watchdog():
    end = time.monotonic() + 3600
    while time.monotonic() < end:
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=watchdog, daemon=True).start()
server.serve_forever()
'  "$dir" "$shell_pid" ${handler:+"$handler"} >"$WORK/.http-port" 2>>"$HTTP_LOG" &
  HTTP_PID=$!
  for i in $(seq 1 100); do
    port=$(cat "$WORK/.http-port")
    [ -n "$port" ] && break
    kill -0 "$HTTP_PID" 2>/dev/null || fail "start_http_server: the server exited: $(cat "$HTTP_LOG")"
    sleep 0.1
  done
  [ -n "$port" ] || fail "start_http_server: the server did not report its port within 10 s"
  for i in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      break
    fi
    [ "$i" -lt 100 ] || fail "start_http_server: nothing answers on port $port"
    sleep 0.1
  done
  # shellcheck disable=SC2034 # for the suites
  HTTP_URL="http://127.0.0.1:$port"
  # Chain onto the EXIT trap in force now, keeping the exit status it sees ("(exit N) && :" sets $?
  # without tripping set -e).
  local previous=""
  eval "set -- $(trap -p EXIT)"
  previous=${3:-}
  # shellcheck disable=SC2064,SC2154 # expanded now on purpose: the trap in force at this moment
  trap "_ls_http_rc=\$?; stop_http_server; (exit \$_ls_http_rc) && :; $previous" EXIT
}

stop_http_server() {
  if [ -n "${HTTP_PID:-}" ]; then
    kill "$HTTP_PID" 2>/dev/null || true
    wait "$HTTP_PID" 2>/dev/null || true
    HTTP_PID=""
  fi
}

# ---- wheels ----------------------------------------------------------------------------------------
# make_wheel DIR NAME VERSION 'Requires-Dist lines|...' 'entry_points.txt' FILE=CONTENT...: a
# py3-none-any wheel with a right RECORD (py_index.write_wheel), its METADATA also extracted under
# DIR/.meta; prints the wheel's path. "\n" in the texts is a newline.
make_wheel() {
  python3 - "$LOCKSTEP_SOURCE_DIR/tests/cli" "$@" <<'PY'
import sys, zipfile
sys.path.insert(0, sys.argv[1])
import py_index
out, name, version, requires, entry_points, *files = sys.argv[2:]
members = {}
for f in files:
    path, content = f.split("=", 1)
    members[path] = content.replace("\\n", "\n").encode()
meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
for line in filter(None, requires.split("|")):
    meta += line + "\n"
dist = f"{name}-{version}.dist-info"
path = f"{out}/{name}-{version}-py3-none-any.whl"
py_index.write_wheel(path, dist, meta, members, entry_points=entry_points.replace("\\n", "\n"))
with zipfile.ZipFile(path) as z:
    z.extract(f"{dist}/METADATA", out + "/.meta")
print(path)
PY
}

# make_tagged_git_repo DIR TAG: a git repository at DIR with one commit (app.txt holding "v1"),
# tagged TAG, for specs with a `copy: [{git: ..., rev: TAG}]` source.
make_tagged_git_repo() {
  local dir=$1 tag=$2
  mkdir -p "$dir"
  git -C "$dir" init -q
  printf 'v1\n' >"$dir/app.txt"
  git -C "$dir" -c user.name=t -c user.email=t@example.com add -A
  git -C "$dir" -c user.name=t -c user.email=t@example.com commit -qm v1
  git -C "$dir" tag "$tag"
}

# ---- a flat apt repository with a (fake) Debian python3.11 and libc6 ------------------------------
# make_python_apt_repo DIR: a signed flat repository (DIR/keyring.gpg) for specs that lock Python
# packages. The packages hold only doc files: a lock needs them for its target Python (3.11.2,
# glibc 2.36); python3-yaml and python3-six also hold their Python distribution's metadata (PyYAML
# 6.0 as a .dist-info, six 1.16.0 as an .egg-info file). Needs gpg, gpgconf, dpkg-deb, sha256sum.
make_python_apt_repo() { # DIR
  fixture_cached python-apt "$(declare -f _make_python_apt_repo sign_flat_repo | sha256sum | cut -c1-16)" \
    "$1" _make_python_apt_repo
}
_make_python_apt_repo() { # DIR
  local dir=$1 stage name version depends site
  stage=$(mktemp -d "$WORK/stage.XXXXXX")
  mkdir -p "$dir"
  while read -r name version depends; do
    mkdir -p "$stage/$name/DEBIAN" "$stage/$name/usr/share/doc/$name"
    echo "fake $name for lockstep's Python tests" >"$stage/$name/usr/share/doc/$name/README"
    # Copyright files as Debian has them: machine-readable (DEP-5) for python3-six and
    # python3-yaml, free text for libc6 (tests/cli/test_sbom.sh reads their licenses).
    case $name in
    python3-six) printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nCopyright: 2010 B. Peterson\nLicense: Expat\n\nLicense: Expat\n Permission is hereby granted...\n' ;;
    python3-yaml) printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nCopyright: 2006 K. Simonov\nLicense: Expat\n\nFiles: debian/*\nCopyright: 2007 Debian\nLicense: GPL-2+ or Artistic, and Zlib\n' ;;
    libc6) printf 'This is the Debian prepackaged version of the GNU C Library.\nIt is LGPL.\n' ;;
    *) true ;;
    esac >"$stage/$name/usr/share/doc/$name/copyright"
    # Two Python libraries as Debian ships them: a .dist-info directory and an .egg-info file.
    site="$stage/$name/usr/lib/python3/dist-packages"
    case $name in
    python3-yaml)
      mkdir -p "$site/PyYAML-6.0.dist-info"
      printf 'Metadata-Version: 2.1\nName: PyYAML\nVersion: 6.0\n\nYAML parser\n' \
        >"$site/PyYAML-6.0.dist-info/METADATA"
      ;;
    python3-six)
      mkdir -p "$site"
      printf 'Metadata-Version: 1.2\nName: six\nVersion: 1.16.0\n' >"$site/six-1.16.0.egg-info"
      ;;
    esac
    {
      echo "Package: $name"
      echo "Version: $version"
      echo "Architecture: amd64"
      echo "Maintainer: lockstep tests <tests@example.invalid>"
      [ "$depends" = - ] || echo "Depends: $depends"
      echo "Priority: optional"
      echo "Description: fake $name"
    } >"$stage/$name/DEBIAN/control"
    find "$stage/$name" -exec touch -h -d @1704067200 {} +
    dpkg-deb --root-owner-group -Zxz --build "$stage/$name" "$dir/${name}_${version}_amd64.deb" >/dev/null
  done <<'EOF'
libc6 2.36-9+deb12u4 -
python3.11 3.11.2-6+deb12u1 libc6
python3-minimal 3.11.2-1+b1 python3.11
python3 3.11.2-1+b1 python3.11,python3-minimal
python3-yaml 6.0-3+b2 python3
python3-six 1.16.0-4 python3
EOF
  rm -rf "$stage"
  sign_flat_repo "$dir" lockstep-wheel-test
}

# sign_flat_repo DIR ORIGIN: the index of DIR's .deb files (Packages), its Release, and an
# InRelease signed by a fresh key exported to DIR/keyring.gpg. Needs gpg, gpgconf, dpkg-deb.
sign_flat_repo() {
  local dir=$1 origin=$2 gnupg
  (cd "$dir" && for deb in *.deb; do
    dpkg-deb -f "$deb"
    echo "Filename: $deb"
    echo "Size: $(stat -c %s "$deb")"
    echo "SHA256: $(sha256sum "$deb" | cut -d' ' -f1)"
    echo
  done >Packages)
  {
    echo "Origin: $origin"
    echo "Date: Mon, 01 Jan 2024 00:00:00 UTC"
    echo "SHA256:"
    printf ' %s %s Packages\n' "$(sha256sum "$dir/Packages" | cut -d' ' -f1)" "$(stat -c %s "$dir/Packages")"
  } >"$dir/Release"
  gnupg=$(mktemp -d /tmp/ls-repo-gpg.XXXXXX)
  gpg_() { gpg --homedir "$gnupg" --batch --quiet --yes --pinentry-mode loopback --passphrase '' "$@"; }
  gpg_ --quick-gen-key "lockstep tests <$origin@example.invalid>" ed25519 sign never 2>/dev/null
  gpg_ --export >"$dir/keyring.gpg"
  gpg_ --digest-algo SHA512 --clearsign --output "$dir/InRelease" "$dir/Release"
  gpgconf --homedir "$gnupg" --kill gpg-agent >/dev/null 2>&1 || true
  rm -rf "$gnupg"
}
