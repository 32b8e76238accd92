#!/usr/bin/env bash
# CI smoke for the fuzzers (wire_format_fuzzer, input_fuzzer): build them
# and fuzz each for 20 s from the generated seeds. The 10-minute runs are
# done by hand with tools/fuzz.sh.
set -euo pipefail
exec bash "$TEST_SRCDIR/$TEST_WORKSPACE/tools/fuzz.sh" "${1:-20}" "$TEST_TMPDIR/fuzz"
