#!/usr/bin/env bash
# Benchmark: starting `/bin/true` in a container from a cached image, against bwrap and unshare +
# chroot on the same root directory (the unpacked root lockstep itself uses), as root and as an
# unprivileged user. The image is busybox-static plus the mount points (/proc /dev /sys /tmp /root
# /home /etc/hosts /etc/resolv.conf), so every launcher takes its fast path. The like-for-like row
# is `--no-home` (the peers bind no home directory); the default, which binds a home directory the
# image lacks and so mounts the tmpfs overlay, is reported beside it.
#
# Usage: bench/exec-start.sh [RUNS]    (default 300 hyperfine runs per command, 30 warm-up runs)
# Needs: a built lockstep (build/bench, static, or $LOCKSTEP), hyperfine, bwrap, unshare, busybox-static;
# root (it creates a user for the unprivileged runs and removes it afterwards).
# Target (issue 3): lockstep exec <= 1.5 x unshare + chroot.
# Run it on a quiet machine: it refuses when the 1-minute load average is 1 or more (FORCE=1 skips
# that check).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-300}
source bench/lib.sh
bench_lockstep # the release binary as shipped: libraries linked statically
for t in hyperfine bwrap unshare jq; do
  command -v "$t" >/dev/null || { echo "bench: '$t' is missing (scripts/install-deps.sh bench)" >&2; exit 3; }
done
[ -x /bin/busybox ] || { echo "bench: busybox-static is missing" >&2; exit 3; }
[ "$(id -u)" = 0 ] || { echo "bench: run as root (it also measures an unprivileged user)" >&2; exit 3; }
load=$(cut -d' ' -f1 /proc/loadavg)
if [ -z "${FORCE:-}" ] && awk -v l="$load" 'BEGIN { exit !(l >= 1) }'; then
  echo "bench: the machine is busy (load $load); run again when it is quiet, or set FORCE=1" >&2
  exit 3
fi

work=$(mktemp -d /tmp/lockstep-bench-exec-XXXXXX)
chmod 0755 "$work"
user="lsbench$$"
cleanup() {
  userdel "$user" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
useradd -M -N -d "$work/home-user" -s /bin/sh "$user"
mkdir -p "$work/home-user" "$work/cache-user"
chown "$user" "$work/home-user" "$work/cache-user"
install -m 0755 "$LOCKSTEP" "$work/lockstep"
mkdir -p "$work/home-root"

mkdir -p "$work/img/rootfs/bin" "$work/img/rootfs/etc"
cp /bin/busybox "$work/img/rootfs/bin/"
for a in sh true; do ln -s busybox "$work/img/rootfs/bin/$a"; done
mkdir -p "$work/img/rootfs"/{proc,dev,sys,tmp,root,home}
: >"$work/img/rootfs/etc/hosts"
: >"$work/img/rootfs/etc/resolv.conf"
cat >"$work/img/lockstep.yaml" <<'YAML'
lockstep: 1
name: bench-exec
copy: [{from: ./rootfs, to: /}]
env: {PATH: /bin}
outputs: {oci: out/layout}
YAML
LOCKSTEP_CACHE="$work/cache" "$work/lockstep" build -q "$work/img/lockstep.yaml" >/dev/null
chmod -R a+rX "$work/img/out"
image="oci:$work/img/out/layout"

# The unpacked roots, found by running once (which also fills each cache).
root_dir() { # CACHE: the single rootfs under CACHE/roots
  find "$1/roots" -mindepth 2 -maxdepth 2 -name rootfs | head -n 1
}
LOCKSTEP_CACHE="$work/cache" HOME="$work/home-root" "$work/lockstep" exec "$image" -- /bin/true
runuser -u "$user" -- env LOCKSTEP_CACHE="$work/cache-user" HOME="$work/home-user" "$work/lockstep" exec "$image" -- /bin/true
root_root=$(root_dir "$work/cache")
user_root=$(root_dir "$work/cache-user")

# bench NAME AS CMD...: hyperfine one command; prints the mean in ms.
bench() {
  local name=$1 as=$2
  shift 2
  local cmd
  cmd=$(printf '%q ' "$@")
  if [ "$as" != root ]; then
    cmd="runuser -u $as -- $cmd"
  fi
  hyperfine -N --warmup 30 --runs "$runs" --export-json "$work/$name.json" "$cmd" >/dev/null 2>&1
  jq -r '.results[0].mean * 1000' "$work/$name.json"
}

printf '%-40s %10s %10s\n' "command (root / user)" "root ms" "user ms"
declare -A mean
for as in root "$user"; do
  if [ "$as" = root ]; then
    r=$root_root
    envs=(env LOCKSTEP_CACHE="$work/cache" HOME="$work/home-root")
    unshare_cmd=(unshare -m -p -f -u -i chroot "$r" /bin/true)
  else
    r=$user_root
    envs=(env LOCKSTEP_CACHE="$work/cache-user" HOME="$work/home-user")
    unshare_cmd=(unshare -U -r -m -p -f -u -i chroot "$r" /bin/true)
  fi
  key=$([ "$as" = root ] && echo root || echo user)
  mean[home_$key]=$(bench "home-$key" "$as" "${envs[@]}" "$work/lockstep" exec "$image" -- /bin/true)
  mean[exec_$key]=$(bench "exec-$key" "$as" "${envs[@]}" "$work/lockstep" exec --no-home "$image" -- /bin/true)
  mean[dir_$key]=$(bench "dir-$key" "$as" "${envs[@]}" "$work/lockstep" exec --no-home "dir:$r" -- /bin/true)
  mean[bwrap_$key]=$(bench "bwrap-$key" "$as" bwrap --bind "$r" / --proc /proc --dev /dev --unshare-all /bin/true)
  mean[unshare_$key]=$(bench "unshare-$key" "$as" "${unshare_cmd[@]}")
  mean[runuser_$key]=0
done
# runuser's own cost is part of every "user" figure; measure it so it can be subtracted.
mean[runuser_user]=$(bench runuser-only "$user" /bin/true)

row() { printf '%-40s %10.2f %10.2f\n' "$1" "$2" "$3"; }
row "lockstep exec --no-home oci:... true" "${mean[exec_root]}" "${mean[exec_user]}"
row "lockstep exec --no-home dir:ROOT true" "${mean[dir_root]}" "${mean[dir_user]}"
row "lockstep exec oci:... true (home bound)" "${mean[home_root]}" "${mean[home_user]}"
row "bwrap --unshare-all /bin/true" "${mean[bwrap_root]}" "${mean[bwrap_user]}"
row "unshare [-U -r] -m -p -f -u -i chroot" "${mean[unshare_root]}" "${mean[unshare_user]}"
row "(runuser -u USER -- /bin/true)" 0 "${mean[runuser_user]}"
echo
ratio() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { printf "%.2f", (a - c) / (b - c) }'; }
for key in root user; do
  ru=${mean[runuser_$key]}
  echo "$key: exec/unshare+chroot = $(ratio "${mean[exec_$key]}" "${mean[unshare_$key]}" "$ru") x" \
    "(target <= 1.5), exec/bwrap = $(ratio "${mean[exec_$key]}" "${mean[bwrap_$key]}" "$ru") x," \
    "dir:/unshare+chroot = $(ratio "${mean[dir_$key]}" "${mean[unshare_$key]}" "$ru") x," \
    "with home/unshare+chroot = $(ratio "${mean[home_$key]}" "${mean[unshare_$key]}" "$ru") x"
done
echo "(user ratios subtract the runuser cost from both sides; load average at start: $load)"
