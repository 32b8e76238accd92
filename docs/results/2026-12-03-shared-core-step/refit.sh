#!/bin/bash
# The table of 2026-12-03-shared-core-step.md: q chosen on the AMD runs,
# checked on the Intel VM's. Run from docs/results/ after
# `bazel build //lib/python:_gradwire.so`.
set -euo pipefail
D=2026-12-03-shared-core-step
/usr/bin/python3 $D/refit.py --fit 2026-12-02-cpu-floor/grid/grid.json \
  2026-12-01-amp-overflow/grid-z4.json 2026-11-30-sanitizers/grid-z3.json \
  2026-12-01-burst-free-links/grid/grid-fix.json 2026-12-01-grid-head/grid-head.json \
  2026-12-01-grid-head/grid-head-2.json 2026-12-01-step-timeline/grid/grid-tail.json \
  2026-12-01-restarts-bit-for-bit/grid-s32.json 2026-12-01-planner-links/grid-200-500.json \
  2026-12-01-ack-priority/grid/grid-htb.json 2026-12-02-cpu-floor/readme/readme-{1,2,3}.json \
  --check 2026-12-02-intel-readme/grid/grid.json 2026-12-02-intel-readme/readme/readme-{1,2,3}.json \
  $D/grid/grid.json "$@" --json_out $D/refit.json
