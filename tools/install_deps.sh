#!/usr/bin/env bash
# Installs the Debian packages gradwire builds and tests with. Idempotent:
# when everything is present it touches nothing (and needs no network).
# Sourced or run by the README's commands; safe to run by hand.
set -euo pipefail

GRADWIRE_PACKAGES=(
  bazel-bootstrap bazel-platforms bazel-rules-java g++ python3
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev libssl-dev
  libgloo-dev libhiredis-dev redis-server
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  clang libclang-rt-14-dev
  iproute2
  zlib1g-dev dataset-fashion-mnist e2fsprogs
  python3-dev pybind11-dev python3-numpy python3-torch python3-matplotlib
  python3-venv python3-pip python3-setuptools python3-wheel
)

missing=()
for pkg in "${GRADWIRE_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gradwire: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDA_PATH:-}" ]; then
  echo "gradwire: no CUDA toolkit at /usr/local/cuda: building without GPU kernels" >&2
fi
