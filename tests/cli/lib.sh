# Shared helpers for the CLI suites (sourced). Each suite runs in a fresh temp dir with its own
# lockstep cache, and removes both on exit.
set -euo pipefail

: "${LOCKSTEP:?LOCKSTEP must point to the lockstep binary (ctest sets it)}"
: "${LOCKSTEP_SOURCE_DIR:?}"
LOCKSTEP=$(realpath "$LOCKSTEP")
WORK=$(mktemp -d /tmp/lockstep-cli-XXXXXX)
export LOCKSTEP_CACHE="$WORK/cache"
# Keep the suites' specs out of any enclosing git work tree (the repo's build dir is inside one).
export GIT_CEILING_DIRECTORIES=/tmp
unset SOURCE_DATE_EPOCH
cd "$WORK"
trap 'cd /; rm -rf "$WORK"' EXIT

TESTS_RUN=0
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

assert_eq() { # EXPECTED ACTUAL WHAT
  [ "$1" = "$2" ] || fail "$3: expected [$1], got [$2]"
}

assert_contains() { # HAYSTACK NEEDLE WHAT
  case "$1" in
    *"$2"*) ;;
    *) fail "$3: [$2] not found in: $1" ;;
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
