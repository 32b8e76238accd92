#!/usr/bin/env bash
# The main job until the cluster benchmark exists: installs what gradwire
# needs, builds the codec demo optimized and runs it on a ResNet-50-shaped
# gradient. Extra arguments go to the demo, e.g.
#   bash tools/demo.sh --spec="topk:ratio=0.001;qsgd:bits=2"
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash tools/install_deps.sh
bazel build -c opt //tools:codec_demo
exec bazel-bin/tools/codec_demo "$@"
