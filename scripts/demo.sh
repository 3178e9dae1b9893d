#!/usr/bin/env bash
# The main job: install dependencies, build lockstep, build examples/mpi-hello (Debian bookworm +
# openmpi-bin + python3-mpi4py from deb.debian.org) from its committed lock into an OCI layout and a
# SIF, and run a 4-rank MPI job inside the image with `lockstep exec`. Then the small examples:
# examples/hello into an OCI layout and a docker-archive (skopeo checks both), and examples/shell
# (a busybox root, an app and a run: step) into an OCI layout and a SIF, run with `lockstep exec`.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh test
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_TESTS=OFF >/dev/null
ninja -C build/release lockstep
lockstep=build/release/lockstep

echo "== lockstep lock --check examples/mpi-hello/lockstep.yaml   (the committed lock matches the spec)"
$lockstep lock --check examples/mpi-hello/lockstep.yaml
echo "== lockstep build --locked examples/mpi-hello/lockstep.yaml  (OCI + SIF, every .deb checked against the lock)"
mpi_digest=$($lockstep build --locked examples/mpi-hello/lockstep.yaml)
siftool list build/examples/mpi-hello.sif
echo "== lockstep exec oci:build/examples/mpi-hello -- mpirun --oversubscribe -n 4 python3 /opt/hello/hello.py"
$lockstep exec oci:build/examples/mpi-hello -- mpirun --oversubscribe -n 4 python3 /opt/hello/hello.py
echo "== lockstep exec build/examples/mpi-hello.sif   (the image's default command: the same job, from the SIF)"
$lockstep exec build/examples/mpi-hello.sif
echo

echo "== lockstep check examples/hello/lockstep.yaml"
$lockstep check examples/hello/lockstep.yaml
echo "== lockstep build examples/hello/lockstep.yaml"
digest=$($lockstep build examples/hello/lockstep.yaml)
echo "== skopeo inspect oci:build/examples/hello:latest"
skopeo inspect --raw oci:build/examples/hello:latest | jq -c '{mediaType, layers: [.layers[].digest]}'
skopeo inspect docker-archive:build/examples/hello.tar | jq -c '{Digest, Layers}'
echo "== lockstep inspect oci:build/examples/hello"
$lockstep inspect oci:build/examples/hello
echo
echo "== examples/shell: make its busybox root filesystem, build OCI + SIF"
examples/shell/make-rootfs.sh
shell_digest=$($lockstep build examples/shell/lockstep.yaml)
siftool list build/examples/shell.sif
echo "== lockstep exec oci:build/examples/shell -- /opt/app/bin/hello from-oci"
$lockstep exec oci:build/examples/shell -- /opt/app/bin/hello from-oci
echo "== lockstep exec build/examples/shell.sif   (runs the entrypoint)"
$lockstep exec build/examples/shell.sif
echo
echo "image digest (mpi-hello): $mpi_digest"
echo "image digest (hello): $digest"
echo "image digest (shell): $shell_digest"
