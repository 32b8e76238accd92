#!/usr/bin/env bash
# The README's main command: how much faster is gradient exchange on
# commodity Ethernet? Installs what it needs, builds gradwire optimized and
# runs tools/cluster_bench.py with its embedded defaults: 4 emulated hosts
# (network namespaces) on 1 Gbit/s links, the ResNet-50 gradient, dense
# Gloo allreduce vs gradwire top-k and approximate top-k 1 % with error
# feedback, plus PyTorch DDP (default allreduce, fp16 hook, PowerSGD rank 1
# and 4) on the same cluster. Prints the table and where the JSON and PNG
# went (bench-results/).
#
#   bash tools/benchmark.sh                                  # defaults, a few minutes
#   bash tools/benchmark.sh --links 1gbit,10gbit \
#       --methods 'none;topk:ratio=0.01;approx_topk:ratio=0.001'
#   bash tools/benchmark.sh --hosts 2 --ranks_per_host 2 \
#       --methods 'none;topk:ratio=0.01' --hierarchical both
#   bash tools/benchmark.sh --help                           # every option
#
# Methods are the library's compression spec strings separated by ';' (specs
# contain commas, so quote the list); --hierarchical off|on|both adds the
# hierarchical exchange. Namespaces need root; otherwise the ranks run on
# loopback and the results are marked UNSHAPED. A run that stops early is
# marked INCOMPLETE and exits 1. Extra arguments go to cluster_bench.py.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# --help needs nothing built or installed.
for arg in "$@"; do
  case "$arg" in
    -h|--help) exec python3 tools/cluster_bench.py --help ;;
  esac
done
bash tools/install_deps.sh
jobs=()
[ -n "${GRADWIRE_BUILD_JOBS:-}" ] && jobs=(--jobs="$GRADWIRE_BUILD_JOBS")
bazel build -c opt "${jobs[@]}" //tools:exchange_bench //bench/transport:transport_bench \
  //lib/python:_gradwire.so  # planner.py's bucket plan
sudo_cmd=()
if [ "$(id -u)" -ne 0 ] && sudo -n true 2>/dev/null; then
  sudo_cmd=(sudo -n)  # namespaces need root; without it cluster_bench falls back to loopback
fi
exec "${sudo_cmd[@]}" /usr/bin/python3 tools/cluster_bench.py \
  --exchange_bench "$root/bazel-bin/tools/exchange_bench" "$@"
