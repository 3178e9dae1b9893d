#!/usr/bin/env bash
# The main job: install dependencies, build lockstep, build examples/hello into an OCI layout and a
# docker-archive, let skopeo check both, and print the image digest.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh test
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_TESTS=OFF >/dev/null
ninja -C build/release lockstep
lockstep=build/release/lockstep

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
echo "image digest: $digest"
