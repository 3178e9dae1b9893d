#!/usr/bin/env bash
# Installs what lockstep needs to build, test and benchmark on Debian 12 or Ubuntu 22.04+.
# Usage: scripts/install-deps.sh [build|test|bench]   (each level includes the ones before)
set -euo pipefail

level=${1:-test}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 3; }
  SUDO="sudo"
fi

build_pkgs=(build-essential cmake ninja-build pkg-config git ca-certificates ccache
  libyaml-cpp-dev libcli11-dev libarchive-dev libssl-dev libgit2-dev nlohmann-json3-dev
  libzstd-dev libdeflate-dev libfmt-dev libsquashfs-dev catch2 libcurl4-openssl-dev libseccomp-dev zlib1g-dev libtomlplusplus-dev
  libsodium-dev rapidjson-dev
  # a Release build links its libraries statically (CMakeLists.txt LOCKSTEP_STATIC_DEPS): the .a
  # files of libarchive's dependencies come from their -dev packages
  libxml2-dev libicu-dev nettle-dev liblz4-dev libbz2-dev liblzma-dev)
test_pkgs=(skopeo umoci jq gzip zstd tar git clang-format clang-tidy siftool squashfs-tools squashfuse fuse3
  busybox-static util-linux passwd uidmap attr clang libfuzzer-14-dev squashfs-tools-ng gpgv gnupg python3 xz-utils
  dpkg-dev debian-archive-keyring curl python3-jsonschema python3-yaml python3-pip python3-venv
  # the real Debian base of tests/cli/test_debian_base.sh
  mmdebstrap
  # the simulated cluster of the `lockstep run` suites (tests/cli/cluster.sh): network namespaces,
  # host Open MPI and a Slurm of its own
  iproute2 procps openmpi-bin libopenmpi-dev munge slurm-wlm slurmctld slurmd slurm-client
  # the registries of the registry suites (tests/cli/registry.sh): the real registry, htpasswd's
  # bcrypt, the test CA, and the token issuer's signing
  docker-registry apache2-utils openssl python3-cryptography
  # the judges of the SBOM suites (tests/cli/sbom_check.py): SPDX license expressions and the
  # SPDX license list
  python3-license-expression node-spdx-license-ids
  # the independent cosign implementation of the signing suite (tests/cli/cosign_keys.py)
  python3-nacl
  # the judge of the conda suites: Debian's conda-package-handling (cph) packs and reads packages
  conda-package-handling
  # other architectures' images under emulation (runner/runtime/emulation.hpp): qemu-user and the
  # binfmt_misc handlers Debian ships for it
  qemu-user-static)
bench_pkgs=(hyperfine python3-mpi4py python3-venv pigz bubblewrap)

pkgs=("${build_pkgs[@]}")
case "$level" in
  build) ;;
  test) pkgs+=("${test_pkgs[@]}") ;;
  bench) pkgs+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "install-deps: unknown level '$level' (build, test or bench)" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
