#!/usr/bin/env bash
# `lockstep exec --gpus` against a fake NVIDIA driver tree (LOCKSTEP_GPU_HOST_ROOT): the driver's
# libraries appear in /.singularity.d/libs and on LD_LIBRARY_PATH, nvidia-smi runs from /usr/bin,
# only the selected GPU's device node is there, NVIDIA_VISIBLE_DEVICES is set, and a host without
# the driver fails with exit 3 and a message saying what to do. docs/gpu.md describes the rules.
source "$(dirname "$0")/lib.sh"
need gcc busybox

ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
[ -x "$ldconfig" ] || fail "ldconfig is not installed (libc-bin)"
version=535.104.05
uuid0=GPU-6a0a0d8e-2bf6-8a43-4b7f-54d1f0c8a7f2
uuid1=GPU-1c3e5f7a-9b0d-4e2f-8a6c-3d5e7f9a1b2c

# The fake driver: procfs files in their real formats, stand-in device nodes, real shared objects
# with the driver's sonames, an ld.so.cache written by ldconfig, and nvidia-smi as a script.
FAKE=$WORK/fake-host
lib=$FAKE/usr/lib/x86_64-linux-gnu
mkdir -p "$FAKE/proc/driver/nvidia" "$FAKE/dev" "$FAKE/etc" "$FAKE/usr/bin" "$lib"
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Sat Aug 19 01:15:15 UTC 2023\n' "$version" \
  >"$FAKE/proc/driver/nvidia/version"
minor=0
for gpu in "0000:3b:00.0 $uuid0" "0000:af:00.0 $uuid1"; do
  read -r bus uuid <<<"$gpu"
  mkdir -p "$FAKE/proc/driver/nvidia/gpus/$bus"
  printf 'Model: \t\t NVIDIA A100-SXM4-40GB\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t %s\n' \
    "$uuid" "$bus" "$minor" >"$FAKE/proc/driver/nvidia/gpus/$bus/information"
  : >"$FAKE/dev/nvidia$minor"
  minor=$((minor + 1))
done
: >"$FAKE/dev/nvidiactl"
: >"$FAKE/dev/nvidia-uvm"
echo 'int nv_stub(int x) { return x + 1; }' >"$WORK/stub.c"
for so in libcuda.so.1 libnvidia-ml.so.1; do
  name=${so%.1}
  gcc -shared -fPIC -Wl,-soname,$so -o "$lib/$name.$version" "$WORK/stub.c"
  ln -s "$name.$version" "$lib/$so"
done
ln -s libcuda.so.1 "$lib/libcuda.so"
echo /usr/lib/x86_64-linux-gnu >"$FAKE/etc/ld.so.conf"
"$ldconfig" -r "$FAKE"
printf '#!/bin/sh\necho "fake nvidia-smi $*"\n' >"$FAKE/usr/bin/nvidia-smi"
chmod 0755 "$FAKE/usr/bin/nvidia-smi"
EMPTY=$WORK/no-driver
mkdir -p "$EMPTY"

# A small image: busybox and its applets, nothing of NVIDIA's.
mkdir -p proj/rootfs/bin proj/rootfs/usr/bin
cp "$(command -v busybox)" proj/rootfs/bin/busybox
for applet in sh ls cat env test sha256sum which; do
  ln -s busybox "proj/rootfs/bin/$applet"
done
cat >proj/lockstep.yaml <<'YAML'
lockstep: 1
name: gpu-test
copy:
  - {from: ./rootfs, to: /}
env: {PATH: /usr/bin:/bin}
outputs:
  oci: out/layout
YAML
ls_run build proj/lockstep.yaml --tag v1
assert_eq 0 "$RC" "build exit code ($ERR)"
IMAGE=oci:proj/out/layout:v1

in_container() { # GPUS-ARGS... -- SCRIPT
  LOCKSTEP_GPU_HOST_ROOT=$FAKE ls_run exec "$@"
}

in_container --gpus=all "$IMAGE" -- sh -c 'ls /.singularity.d/libs'
assert_eq 0 "$RC" "exec --gpus all exit code ($ERR)"
assert_eq "libcuda.so libcuda.so.1 libnvidia-ml.so.1" "${OUT//$'\n'/ }" "/.singularity.d/libs"
pass "--gpus binds the driver libraries from the host's ld.so.cache into /.singularity.d/libs"

in_container --gpus=all "$IMAGE" -- sh -c 'sha256sum /.singularity.d/libs/libcuda.so.1 | cut -c1-64'
assert_eq "$(sha256sum "$lib/libcuda.so.$version" | cut -c1-64)" "$OUT" "the bound libcuda.so.1 is the driver's file"
pass "the bound library is the host driver's file, symlinks resolved"

in_container --gpus=all "$IMAGE" -- sh -c 'which nvidia-smi; nvidia-smi -L'
assert_eq 0 "$RC" "nvidia-smi exit code ($ERR)"
assert_eq "/usr/bin/nvidia-smi
fake nvidia-smi -L" "$OUT" "nvidia-smi in the container"
pass "the host's nvidia-smi runs from /usr/bin"

in_container --gpus=all "$IMAGE" -- sh -c 'echo "$NVIDIA_VISIBLE_DEVICES|$LD_LIBRARY_PATH"; ls /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl'
assert_eq 0 "$RC" "exec --gpus all exit code ($ERR)"
assert_eq "all|/.singularity.d/libs
/dev/nvidia0
/dev/nvidia1
/dev/nvidiactl" "$OUT" "environment and device nodes with --gpus all"
pass "--gpus all sets NVIDIA_VISIBLE_DEVICES=all and LD_LIBRARY_PATH, and exposes every GPU"

in_container --gpus=0 "$IMAGE" -- sh -c 'echo "$NVIDIA_VISIBLE_DEVICES"; test -e /dev/nvidia0 && echo has0; test -e /dev/nvidia1 || echo no1; test -e /dev/nvidiactl && echo hasctl'
assert_eq 0 "$RC" "exec --gpus 0 exit code ($ERR)"
assert_eq "$uuid0
has0
no1
hasctl" "$OUT" "--gpus 0"
in_container --gpus="$uuid1" "$IMAGE" -- sh -c 'echo "$NVIDIA_VISIBLE_DEVICES"; test -e /dev/nvidia0 || echo no0; test -e /dev/nvidia1 && echo has1'
assert_eq "$uuid1
no0
has1" "$OUT" "--gpus $uuid1"
pass "--gpus 0 or a UUID exposes only that GPU's /dev/nvidiaN and names it in NVIDIA_VISIBLE_DEVICES"

NVIDIA_VISIBLE_DEVICES=1 in_container --gpus "$IMAGE" -- sh -c 'echo "$NVIDIA_VISIBLE_DEVICES"; test -e /dev/nvidia0 || echo no0; test -e /dev/nvidia1 && echo has1'
assert_eq 0 "$RC" "exec --gpus with NVIDIA_VISIBLE_DEVICES=1 ($ERR)"
assert_eq "$uuid1
no0
has1" "$OUT" "--gpus with NVIDIA_VISIBLE_DEVICES=1"
NVIDIA_VISIBLE_DEVICES=1 in_container --gpus=0 "$IMAGE" -- sh -c 'echo "$NVIDIA_VISIBLE_DEVICES"'
assert_eq "$uuid0" "$OUT" "--gpus=0 with NVIDIA_VISIBLE_DEVICES=1"
NVIDIA_VISIBLE_DEVICES= in_container --gpus "$IMAGE" -- sh -c 'echo "$NVIDIA_VISIBLE_DEVICES"; ls /dev/nvidia0 /dev/nvidia1'
assert_eq "all
/dev/nvidia0
/dev/nvidia1" "$OUT" "--gpus with an empty NVIDIA_VISIBLE_DEVICES"
pass "--gpus without a value follows the host's NVIDIA_VISIBLE_DEVICES (else all); an explicit value wins"

in_container --gpus=none "$IMAGE" -- sh -c 'echo "$NVIDIA_VISIBLE_DEVICES"; ls /.singularity.d/libs; test -e /dev/nvidiactl && echo hasctl; test -e /dev/nvidia0 || echo no0'
assert_eq 0 "$RC" "exec --gpus=none ($ERR)"
assert_eq "none
libcuda.so
libcuda.so.1
libnvidia-ml.so.1
hasctl
no0" "$OUT" "--gpus=none"
LOCKSTEP_GPU_HOST_ROOT=$EMPTY ls_run exec --gpus=void "$IMAGE" -- sh -c 'echo "${NVIDIA_VISIBLE_DEVICES:-unset}"; test -d /.singularity.d || echo nolibs'
assert_eq 0 "$RC" "exec --gpus=void without a driver ($ERR)"
assert_eq "unset
nolibs" "$OUT" "--gpus=void"
pass "--gpus=none binds the driver without GPUs; --gpus=void turns passthrough off, even without a driver"

in_container --gpus=2 "$IMAGE" -- true
assert_eq 2 "$RC" "exit code for a GPU that does not exist"
assert_eq "lockstep: error: --gpus 2: there is no GPU with index 2; this host has 2 GPUs: 0 ($uuid0 at 0000:3b:00.0), 1 ($uuid1 at 0000:af:00.0)" \
  "$ERR" "message for a GPU that does not exist"
pass "--gpus with a GPU that does not exist exits 2 naming the GPUs there are"

LOCKSTEP_GPU_HOST_ROOT=$EMPTY ls_run exec --gpus=all "$IMAGE" -- true
assert_eq 3 "$RC" "exit code without a driver"
assert_eq "lockstep: error: --gpus: no NVIDIA driver on this host: $EMPTY/proc/driver/nvidia/version does not exist (lockstep looks for $EMPTY/proc/driver/nvidia/version and $EMPTY/dev/nvidiactl); drop --gpus, or run on a node with the NVIDIA driver loaded" \
  "$ERR" "message without a driver"
assert_eq "" "$OUT" "stdout without a driver"
pass "--gpus on a host without the NVIDIA driver exits 3 and says what to do"

LOCKSTEP_GPU_HOST_ROOT=$EMPTY ls_run exec "$IMAGE" -- sh -c 'echo "${NVIDIA_VISIBLE_DEVICES:-unset}"; test -d /.singularity.d && echo libs || echo nolibs'
assert_eq 0 "$RC" "exec without --gpus ($ERR)"
assert_eq "unset
nolibs" "$OUT" "without --gpus"
pass "without --gpus nothing of the driver is added"

done_testing
