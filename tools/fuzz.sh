#!/usr/bin/env bash
# Builds the fuzzers with clang (libFuzzer + ASan + UBSan) and runs each
# for SECONDS: wire_format_fuzzer (frame parser, index decoders, frame
# MAC), input_fuzzer (the other parsers of outside bytes: region
# frames, compression specs, the data cache's entry, shard and manifest
# files, tokens) and codec_fuzzer (every codec's decoders on frames whose
# checksum holds). Exits non-zero on any finding; the crashing input is
# left in WORKDIR/artifacts/ (reproduce: WORKDIR/<fuzzer> FILE).
#
# Usage: bash tools/fuzz.sh SECONDS [WORKDIR]
#   WORKDIR defaults to $GRADWIRE_FUZZ_DIR, then $TEST_TMPDIR (under Bazel),
#   then .fuzz/ in the repository; its corpus/ and input-corpus/ persist
#   between runs.
#
# Built outside Bazel on purpose: libFuzzer needs clang, and the project's
# Bazel toolchain is gcc. Needs clang and libclang-rt-14-dev
# (tools/install_deps.sh). kernels/ is GCC's own C (vector extensions
# clang lacks): codec_fuzzer links it built by g++ as it ships (-O3, the
# x86-64-v3/v4 clones included), outside the sanitizers and the coverage,
# so the codecs' checks are what the fuzzer steers by, and the kernels'
# vector loops are what runs behind them.
set -euo pipefail

seconds="${1:?usage: tools/fuzz.sh SECONDS [WORKDIR]}"
case "$seconds" in
  ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${2:-${GRADWIRE_FUZZ_DIR:-${TEST_TMPDIR:-$root/.fuzz}}}"
mkdir -p "$work/include" "$work/corpus" "$work/seeds" "$work/input-corpus" "$work/input-seeds" \
  "$work/codec-corpus" "$work/codec-seeds" "$work/kernels" "$work/artifacts"
work="$(cd "$work" && pwd)"

CXX="${CXX_FUZZ:-clang++}"
if ! command -v "$CXX" >/dev/null; then
  echo "fuzz.sh: $CXX not found; run tools/install_deps.sh (clang, libclang-rt-14-dev)" >&2
  exit 2
fi

# Our headers are included as "gradwire/lib/...": mirror Bazel's
# include_prefix with a symlink.
ln -sfn "$root" "$work/include/gradwire"

common=(-std=c++17 -g -O1 -fno-omit-frame-pointer -I"$work/include")
libs=(-labsl_statusor -labsl_status -labsl_strings -labsl_str_format_internal
      -labsl_cord -labsl_int128 -labsl_raw_logging_internal -labsl_throw_delegate
      -labsl_time -labsl_time_zone
      -lxxhash -lcrypto)
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=undefined)

# base/ (byte coding, checksums) is under the fuzzer too: the frame parser
# and index decoders are built on it.
base=("$root"/base/*.cc)

echo "fuzz.sh: building in $work" >&2
"$CXX" "${common[@]}" "${sanitize[@]}" -fsanitize=fuzzer \
  "${base[@]}" "$root/lib/codec/wire_format.cc" "$root/lib/codec/index_coding.cc" "$root/lib/codec/frame_auth.cc" \
  "$root/tests/fuzz/wire_format_fuzzer.cc" \
  "${libs[@]}" -o "$work/wire_format_fuzzer"
# What input_fuzzer and the seed writer parse beyond the frame.
inputs=("$root/lib/comm/region_frame.cc" "$root/lib/codec/compression_spec.cc"
        "$root/lib/cache/checksum.cc" "$root/lib/cache/disk_entry.cc"
        "$root/lib/cache/atomic_file.cc" "$root/lib/cache/shard_format.cc"
        "$root/lib/cache/manifest.cc" "$root/lib/cache/token.cc")
"$CXX" "${common[@]}" "${sanitize[@]}" -fsanitize=fuzzer \
  "${base[@]}" "$root/lib/codec/wire_format.cc" "$root/lib/codec/index_coding.cc" "${inputs[@]}" \
  "$root/tests/fuzz/input_fuzzer.cc" \
  "${libs[@]}" -o "$work/input_fuzzer"
"$CXX" "${common[@]}" "${sanitize[@]}" \
  "${base[@]}" "$root/lib/codec/wire_format.cc" "$root/lib/codec/index_coding.cc" "${inputs[@]}" "$root/tests/fuzz/make_seeds.cc" \
  "${libs[@]}" -o "$work/make_seeds"
"$work/make_seeds" "$work/seeds" "$work/input-seeds"

# codec_fuzzer: kernels/ by g++ (as Bazel builds it), the rest by clang
# (-I root: tests/clone_test_inputs.h's guarded buffers).
KERNEL_CXX="${CXX_KERNELS:-g++}"
kernel_objects=()
compiles=()
for src in "$root"/kernels/*.cc "$root"/kernels/cpu/*.cc "$root"/kernels/cuda/*_nocuda.cc; do
  obj="$work/kernels/$(basename "$(dirname "$src")")_$(basename "$src" .cc).o"
  "$KERNEL_CXX" -std=c++17 -O3 -g -ffp-contract=off -I"$work/include" -c "$src" -o "$obj" &
  compiles+=($!)
  kernel_objects+=("$obj")
done
for pid in "${compiles[@]}"; do wait "$pid"; done  # set -e: a failed compile stops here
"$CXX" "${common[@]}" -I"$root" -ffp-contract=off "${sanitize[@]}" -fsanitize=fuzzer \
  "${base[@]}" "$root"/lib/codec/*.cc "$root"/lib/codec/internal/*.cc \
  "$root/tests/fuzz/codec_fuzzer.cc" "${kernel_objects[@]}" \
  "${libs[@]}" -o "$work/codec_fuzzer"
# Seeds: 32 first bytes, which pick every spec of codec_fuzzer.cc's list
# (21 now; modulo its length), n = 321, two valid frames before the
# changed one, whose first byte after the header becomes 0xff.
for spec in $(seq 0 31); do
  printf "\\$(printf %03o "$spec")\\100\\001\\007\\002\\000\\000\\110\\000\\377" \
    > "$work/codec-seeds/spec-$spec"
done

# The magic and a few header values as a dictionary speed up reaching the
# deeper checks.
cat > "$work/wire_format.dict" <<'DICT'
magic="GWF1"
version="\x01"
cap="\x00\x00\x00\x00\x01\x00\x00\x00"
varint_max="\xff\xff\xff\xff\x0f"
DICT

# fuzz NAME CORPUS SEEDS [ARGS...]: one fuzzer for SECONDS; returns its
# exit status.
fuzz() {
  local name="$1" corpus="$2" seeds="$3"
  shift 3
  echo "fuzz.sh: $name for ${seconds}s" >&2
  "$work/$name" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$@" \
    "$corpus" "$seeds"
}

set +e
fuzz wire_format_fuzzer "$work/corpus" "$work/seeds" -dict="$work/wire_format.dict"
rc=$?
fuzz input_fuzzer "$work/input-corpus" "$work/input-seeds"
rc_input=$?
fuzz codec_fuzzer "$work/codec-corpus" "$work/codec-seeds"
rc_codec=$?
set -e
if [ $rc -ne 0 ] || [ $rc_input -ne 0 ] || [ $rc_codec -ne 0 ] ||
   [ -n "$(ls -A "$work/artifacts")" ]; then
  echo "fuzz.sh: FINDING (exit $rc, $rc_input, $rc_codec); inputs in $work/artifacts/" >&2
  exit 1
fi
echo "fuzz.sh: no finding in ${seconds}s of each fuzzer" >&2
