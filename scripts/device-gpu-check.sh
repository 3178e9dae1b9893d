#!/usr/bin/env bash
# The one scripted check of `lockstep exec --gpus` on a machine with a real NVIDIA GPU (docs/gpu.md,
# "The device check"). It builds lockstep (Release), builds a tiny image with lockstep from a spec,
# and runs the host's nvidia-smi inside it:
#   lockstep exec --gpus all IMAGE -- nvidia-smi -L
#   lockstep exec --gpus all IMAGE -- nvidia-smi --query-gpu=name,driver_version --format=csv
# then checks the GPU list equals the host's, that `--gpus 0` shows exactly GPU 0, and that without
# --gpus nvidia-smi is not there. Prints every result; exits 0 when all pass, 1 when a check fails,
# 3 when a needed tool or the driver is missing. Needs no network. Under 5 minutes on 16 cores.
#
# Usage: scripts/device-gpu-check.sh            (from the repository root)
#   LOCKSTEP=/path/to/lockstep  use this binary instead of building one
#   BUILD_DIR=build/device-gpu  where to build (default)
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
step() { echo "== $* ($(($(date +%s) - started)) s)"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
failures=0
check() { # WHAT CONDITION-COMMAND...
  local what=$1
  shift
  if "$@"; then
    echo "ok - $what"
  else
    echo "not ok - $what" >&2
    failures=$((failures + 1))
  fi
}

step "tools and driver"
missing=()
for tool in nvidia-smi ldd; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ -z "${LOCKSTEP:-}" ]; then
  for tool in cmake ninja g++ pkg-config; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  if command -v pkg-config >/dev/null 2>&1; then
    for pc in libarchive libzstd libsquashfs1 libgit2 yaml-cpp fmt; do
      pkg-config --exists "$pc" || missing+=("pkg-config:$pc (dev package)")
    done
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "device-gpu-check: missing: ${missing[*]}" >&2
  echo "  Install them (scripts/install-deps.sh build; the NVIDIA driver for nvidia-smi), or pass a" >&2
  echo "  prebuilt binary with LOCKSTEP=/path/to/lockstep. This machine has no network for apt." >&2
  exit 3
fi
if [ ! -e /proc/driver/nvidia/version ] || [ ! -e /dev/nvidiactl ]; then
  echo "device-gpu-check: the NVIDIA driver is not loaded (no /proc/driver/nvidia/version or /dev/nvidiactl)" >&2
  exit 3
fi
echo "driver: $(head -n 1 /proc/driver/nvidia/version)"
host_list=$(nvidia-smi -L) || fail "host nvidia-smi -L failed"
echo "host nvidia-smi -L:"
echo "$host_list" | sed 's/^/  /'

if [ -z "${LOCKSTEP:-}" ]; then
  BUILD_DIR=${BUILD_DIR:-build/device-gpu}
  step "build lockstep (Release) in $BUILD_DIR"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_TESTS=OFF >/dev/null
  ninja -C "$BUILD_DIR" -j "$(nproc)" lockstep >/dev/null
  LOCKSTEP=$BUILD_DIR/lockstep
fi
LOCKSTEP=$(realpath "$LOCKSTEP")
"$LOCKSTEP" --version

WORK=$(mktemp -d /tmp/lockstep-gpu-check-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export LOCKSTEP_CACHE=$WORK/cache

# The image: the C library nvidia-smi links against (from this host: nothing is downloaded), an
# empty /usr/bin for the bound programs, and busybox when the host has a static one. The NVIDIA
# libraries and nvidia-smi itself come from the host through --gpus.
step "image tree"
tree=$WORK/proj/rootfs
mkdir -p "$tree/usr/bin" "$tree/bin" "$tree/tmp"
smi=$(command -v nvidia-smi)
ldd "$smi" | awk '/=> \// { print $3 } /^\t\/[^ ]+ \(/ { print $1 }' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libnvidia-* | libcuda*) continue ;;
  esac
  mkdir -p "$tree$(dirname "$lib")"
  cp -L "$lib" "$tree$lib"
  echo "  $lib"
done
if busybox_path=$(command -v busybox) && ldd "$busybox_path" 2>&1 | grep -q 'not a dynamic executable'; then
  cp -L "$busybox_path" "$tree/bin/busybox"
  ln -s busybox "$tree/bin/sh"
fi
cat >"$WORK/proj/lockstep.yaml" <<'YAML'
lockstep: 1
name: gpu-check
copy:
  - {from: ./rootfs, to: /}
env: {PATH: /usr/bin:/bin}
outputs:
  oci: out/layout
YAML

step "lockstep build"
"$LOCKSTEP" build "$WORK/proj/lockstep.yaml" --tag v1
IMAGE=oci:$WORK/proj/out/layout:v1

run_in() { # ARGS... : lockstep exec, printing the command, its output and exit code
  echo "\$ lockstep exec $*"
  set +e
  GOT=$("$LOCKSTEP" exec "$@" 2>"$WORK/stderr")
  RC=$?
  set -e
  ERR=$(cat "$WORK/stderr")
  [ -n "$GOT" ] && echo "$GOT" | sed 's/^/  /'
  [ -n "$ERR" ] && echo "$ERR" | sed 's/^/  stderr: /'
  echo "  exit $RC"
}

step "nvidia-smi inside the image"
run_in --gpus=all "$IMAGE" -- nvidia-smi -L
check "nvidia-smi -L exits 0 with --gpus all" test "$RC" = 0
check "the container sees the host's GPUs" test "$GOT" = "$host_list"

run_in --gpus=all "$IMAGE" -- nvidia-smi --query-gpu=name,driver_version --format=csv
check "nvidia-smi --query-gpu exits 0" test "$RC" = 0
host_query=$(nvidia-smi --query-gpu=name,driver_version --format=csv)
check "name and driver version equal the host's" test "$GOT" = "$host_query"
driver=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9.]+$/) { print $i; exit } }' /proc/driver/nvidia/version)
check "the driver version is $driver" grep -q ", $driver\$" <<<"$GOT"

run_in --gpus=0 "$IMAGE" -- nvidia-smi -L
check "--gpus 0 exits 0" test "$RC" = 0
check "--gpus 0 shows exactly GPU 0" test "$GOT" = "$(head -n 1 <<<"$host_list")"

run_in "$IMAGE" -- nvidia-smi -L
check "without --gpus there is no nvidia-smi (exit 127)" test "$RC" = 127

step "done"
if [ "$failures" -gt 0 ]; then
  echo "device-gpu-check: $failures check(s) failed" >&2
  exit 1
fi
echo "device-gpu-check: all checks passed"
