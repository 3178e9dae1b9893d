#!/bin/sh
# Makes ./rootfs: a minimal root filesystem from the host's busybox-static (apt install
# busybox-static), for examples/shell/lockstep.yaml. Safe to run again.
set -eu
cd "$(dirname "$0")"
busybox=$(command -v busybox) || { echo "make-rootfs: busybox not found (apt install busybox-static)" >&2; exit 3; }
rm -rf rootfs
mkdir -p rootfs/bin rootfs/etc rootfs/root rootfs/tmp
cp "$busybox" rootfs/bin/busybox
chmod 0755 rootfs/bin/busybox
for applet in sh ls cat echo env id mkdir rm touch uname date sleep hostname; do
  ln -s busybox "rootfs/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >rootfs/etc/passwd
printf 'root:x:0:\n' >rootfs/etc/group
chmod 0644 rootfs/etc/passwd rootfs/etc/group
chmod 0700 rootfs/root
chmod 1777 rootfs/tmp
