#!/bin/bash
# tools/gpu/device_exchange on the host stand-in: its argument checks, and
# three ranks' device-path results equal to the host path's, through the
# Communicator and through a GradientExchanger.
set -euo pipefail
bin="${TEST_SRCDIR}/gradwire/tools/device_exchange"
out="$("$bin" --device=host --ranks=3 --params=40000 --steps=2 --spec=topk:ratio=0.01)"
echo "$out"
echo "$out" | tail -n 1 | grep -q ',0$' || { echo "mismatches"; exit 1; }
"$bin" --device=host --ranks=3 --params=30000 --steps=2 --spec=qsgd:bits=4,bucket=128 | tail -n 1 | grep -q ',0$'
"$bin" --device=host --api=exchanger --ranks=3 --params=40000 --steps=2 --spec=topk:ratio=0.01 | tail -n 1 | grep -q '^host,exchanger,3,.*,0$'
if "$bin" --device=host --api=nccl --params=10 2>/dev/null; then echo "--api=nccl accepted"; exit 1; fi
if "$bin" --device=host --ranks=5 --params=10 2>/dev/null; then echo "--ranks=5 accepted"; exit 1; fi
if "$bin" --device=tpu --params=10 2>/dev/null; then echo "--device=tpu accepted"; exit 1; fi
if "$bin" --device=host --profile_file=/nonexistent 2>/dev/null; then echo "missing profile accepted"; exit 1; fi
echo PASS
