#!/usr/bin/env bash
# The convergence experiment of issue 7 in one command: builds the Python
# extension, then trains the Fashion-MNIST CNN on 4 ranks for every method
# (dense, gradwire top-k 1 % / 0.1 % + EF with and without momentum
# correction, approx top-k 1 %, QSGD 4-bit,
# sign + EF, top-k 1 % without EF, PyTorch PowerSGD rank 2, gradwire auto)
# and writes table.md + accuracy curves (PNG) to the output directory.
#
#   sudo bash tools/convergence.sh [OUT_DIR] [extra convergence.py flags]
#     full run (default): 3 seeds x 3 epochs, cosine learning rate (about 80 min for
#     all 11 methods; 40 min for 6), each rank in its own emulated
#     host on 1 Gbit/s links (needs root for network namespaces; without
#     root it falls back to loopback and says so).
#   bash tools/convergence.sh /tmp/conv --seeds 0 --iters 150 --eval_every 50 \
#       --test_samples 2000                      # the short version
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${1:-/tmp/gradwire-convergence}"
shift || true
bazel build --jobs="${BAZEL_JOBS:-2}" //lib/python:_gradwire.so //lib/python:_gradwire_data.so
net=(--emulate --link 1gbit)
if [ "$(id -u)" -ne 0 ]; then
  echo "convergence.sh: not root, so no emulated cluster: ranks share loopback" >&2
  net=()
fi
export GRADWIRE_JOB_SECRET="${GRADWIRE_JOB_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
exec /usr/bin/python3 tools/convergence.py all --out "$out" --nproc 4 --seeds 0,1,2 \
  --epochs 3 "${net[@]}" "$@"
