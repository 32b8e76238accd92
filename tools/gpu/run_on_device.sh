#!/usr/bin/env bash
# Builds gradwire's GPU tests and benchmark here, then runs them on a lent
# GPU machine through the `device` tool, bringing results back under $OUT.
# docs/gpu.md explains it; in short:
#
#   here:   bash tools/gpu/run_on_device.sh build
#   device: run(command="bash tools/gpu/run_on_device.sh run", carry=[".device"], timeout_s=450)
#
# `build` writes .device/ (ignored by git): stripped binaries linked with
# static cudart, libstdc++ and libgcc, plus the few shared libraries they
# need that a CUDA image lacks (Debian's absl).
#
# Phases on the GPU machine (`run PHASE`; docs/gpu.md has the table):
#   lease     (the default) `checks` then `timings`: the whole check in one
#             call (~150 s on an H200), for a lease of 15 minutes of device time.
#   checks    every GPU test binary, memcheck and racecheck (quick and
#             loop sizes) and the device path under memcheck, in parallel
#             lanes (~120 s).
#   timings   the device path against host buffers, gpu_bench and torch at
#             1M and 25.6M (~25 s).
#   device    the device path alone (docs/device_path.md): memcheck runs,
#             then timings, for both APIs (APIS=exchanger: one).
#   large     n = 2^32 and 2^32 + 9 (~180 s, ~50 GB of GPU memory).
#   bench [gpu_bench args], torch: one benchmark alone (default sizes up to
#             340M; BENCH_BUDGET=, TORCH_BUDGET= seconds).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

TESTS=(cuda_device_test gpu_topk_test gpu_compress_test gpu_decode_accumulate_test gpu_fused_sgd_test dispatch_test)

build() {
  set -e
  local targets=()
  for t in "${TESTS[@]}"; do targets+=("//tests:$t"); done
  bazel build --jobs="${GRADWIRE_JOBS:-2}" --strip=always "${targets[@]}" //bench:gpu_bench \
    //tools:device_exchange
  rm -rf .device
  mkdir -p .device/bin .device/lib
  for t in "${TESTS[@]}"; do cp "bazel-bin/tests/$t" .device/bin/; done
  cp bazel-bin/bench/gpu_bench .device/bin/
  cp bazel-bin/tools/device_exchange .device/bin/
  python3 tools/model_profiles.py resnet50 > .device/resnet50.txt
  chmod u+w .device/bin/*
  # Shared libraries other than the C/C++ runtime (a newer one is on the GPU
  # image: these binaries need glibc >= the build machine's).
  for b in .device/bin/*; do
    ldd "$b" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;
      *) cp -L "$lib" .device/lib/ ;;
    esac
  done
  git rev-parse HEAD > .device/COMMIT 2>/dev/null || true
  echo "built $(ls .device/bin | wc -l) binaries, $(ls .device/lib | wc -l) libraries, $(du -sh .device | cut -f1) in .device/"
  echo 'now: device run(command="bash tools/gpu/run_on_device.sh run", carry=[".device"], timeout_s=450)'
}

out_dir() {
  OUT="${OUT:-$root/out}"
  mkdir -p "$OUT"
  export LD_LIBRARY_PATH="$root/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -x .device/bin/gpu_bench ] || { echo "no .device/bin: run 'build' here and carry .device" >&2; exit 2; }
}

# Seconds left before a phase's deadline (at least 1).
left() { local l=$(( $1 - $(date +%s) )); [ $l -gt 0 ] && echo $l || echo 1; }

# n = 2^32 (u32 indices at their limit) and n > 2^32 (64-bit offsets): ~50
# GB of GPU and ~70 GB of host memory, ~3 minutes on an H200. Not in `lease`.
# `run large topk` or `run large qsgd` runs one of the two.
phase_large() {
  local filter
  case "${1:-both}" in
    topk) filter='GpuTopKTest.AtTwoToThe32' ;;
    qsgd) filter='GpuCompressTest.QsgdAboveTwoToThe32' ;;
    *) filter='GpuTopKTest.AtTwoToThe32:GpuCompressTest.QsgdAboveTwoToThe32' ;;
  esac
  local status=0 end=$(( $(date +%s) + ${LARGE_BUDGET:-540} )) t
  : > "$OUT/large.log"
  for t in gpu_topk_test gpu_compress_test; do
    GRADWIRE_GPU_LARGE=1 timeout "$(left $end)" ".device/bin/$t" --gtest_color=no \
      --gtest_filter="$filter" >> "$OUT/large.log" 2>&1 || status=1
  done
  grep -E "^\[ *(PASSED|FAILED|SKIPPED|OK) *\]|Failure|seed" "$OUT/large.log"
  return $status
}

# The device path end to end (tools/gpu/device_exchange), through both
# APIs: per-tensor Communicator::AllreduceMeanOnDevice and a
# GradientExchanger with device gradients, each bit for bit against the
# same exchange from host buffers.
# device_memcheck END: under compute-sanitizer memcheck, a small tensor,
# then the ResNet-50 profile (2 ranks, one step per spec).
device_memcheck() {
  local end=$1 cs api args
  cs="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)"
  for api in ${APIS:-communicator exchanger}; do
    for args in "--params=300000 --steps=2 --spec=topk:ratio=0.01" \
                "--profile_file=.device/resnet50.txt --steps=1 --spec=topk:ratio=0.01" \
                "--profile_file=.device/resnet50.txt --steps=1 --spec=qsgd:bits=4,bucket=512"; do
      echo "=== memcheck device_exchange --api=$api --ranks=2 $args"
      [ -n "$cs" ] || { echo "SANITIZER FAILED: compute-sanitizer not found"; continue; }
      # shellcheck disable=SC2086
      timeout "$(left "$end")" "$cs" --tool memcheck --error-exitcode 9 .device/bin/device_exchange \
        --device=cuda --api="$api" --ranks=2 $args 2>&1 || echo "SANITIZER FAILED: device_exchange --api=$api $args"
    done
  done
}

# device_timings: the ResNet-50 profile, 2 and 4 ranks, 5 steps, per API
# and spec (one CSV line each: median ms per step, device and host).
device_timings() {
  local status=0 api spec ranks
  for api in ${APIS:-communicator exchanger}; do
    for spec in topk:ratio=0.01 qsgd:bits=4,bucket=512; do
      for ranks in 2 4; do
        timeout 40 .device/bin/device_exchange --device=cuda --api="$api" --ranks="$ranks" \
          --profile_file=.device/resnet50.txt --steps=5 --spec="$spec" 2>&1 \
          || { status=1; echo "FAILED: --api=$api $ranks ranks $spec"; }
      done
    done
  done
  return $status
}

# `device`: both, about 150 s on an H200 (APIS=exchanger: one API).
phase_device() {
  local status=0
  device_memcheck $(( $(date +%s) + ${DEVICE_BUDGET:-200} )) > "$OUT/device_memcheck.log"
  grep -E "^=== |^cuda,|ERROR SUMMARY|SANITIZER FAILED" "$OUT/device_memcheck.log"
  grep -q "SANITIZER FAILED" "$OUT/device_memcheck.log" && status=1
  device_timings > "$OUT/device_path.log" || status=1
  grep -E "^cuda,|FAILED|rank [0-9]" "$OUT/device_path.log"
  return $status
}

# One lease (15 minutes of device time, all calls together): `lease` is
# `checks` then `timings`, about 150 s on an H200 (2026-11-27: checks 121 s
# and timings about 25 s, run as separate calls).
# `checks`: correctness, in parallel lanes that share the GPU (each test
# binary in its own lane; memcheck and racecheck in four lanes, the
# loop-size racecheck runs included; the device path under memcheck on a
# small tensor and on the ResNet-50 profile). About 120 s.
# `timings`: the GPU to themselves (the device path against host buffers,
# gpu_bench at 1M and 25.6M, torch). About 25 s.
# The run's kernel (Firecracker or gVisor) is in device.txt: on gVisor
# compute-sanitizer refuses the device.
phase_lease() {
  local s=0
  phase_checks || s=1
  phase_timings || s=1
  return $s
}

phase_checks() {
  local status=0 cs end pids=() p t
  { echo "commit $(cat .device/COMMIT 2>/dev/null)"; echo "kernel $(uname -r)"; nproc; free -g | head -2
    nvidia-smi 2>&1; } > "$OUT/device.txt"
  head -n 14 "$OUT/device.txt"
  cs="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)"
  end=$(( $(date +%s) + ${CHECK_BUDGET:-200} ))
  # One lane per GPU test binary, at full sizes.
  for t in "${TESTS[@]}"; do
    ( echo "=== $t"
      timeout "$(left $end)" ".device/bin/$t" --gtest_color=no 2>&1 || echo "FAILED: $t"
    ) > "$OUT/test_$t.log" & pids+=($!)
  done
  lane() {  # lane LOG "tool binary filter" ...
    local log="$OUT/$1" r tool t filter; shift
    for r in "$@"; do
      read -r tool t filter <<< "$r"
      echo "=== $tool $t $filter" >> "$log"
      if [ -z "$cs" ]; then echo "SANITIZER FAILED: compute-sanitizer not found" >> "$log"; continue; fi
      GRADWIRE_GPU_QUICK=1 timeout "$(left $end)" "$cs" --tool "$tool" --error-exitcode 9 \
        ".device/bin/$t" --gtest_color=no --gtest_filter="$filter" >> "$log" 2>&1 \
        || echo "SANITIZER FAILED: $tool $t" >> "$log"
    done
  }
  lane sanitizer1.log "memcheck gpu_topk_test *" "memcheck gpu_compress_test *" & pids+=($!)
  lane sanitizer2.log "memcheck gpu_decode_accumulate_test *" "memcheck gpu_fused_sgd_test *" \
    "racecheck gpu_decode_accumulate_test *:-*BrokenIndices*" & pids+=($!)
  lane sanitizer3.log "racecheck gpu_compress_test *Qsgd*:*Sign*" \
    "racecheck gpu_topk_test *ExactTopK*" & pids+=($!)
  # Racecheck at the sizes where every block loops: the loops that reuse
  # shared memory across iterations (several tiles, groups, chunks per block).
  lane sanitizer4.log "racecheck gpu_decode_accumulate_test *SeveralTilesPerBlock*" \
    "racecheck gpu_compress_test *QuantizersLoopOverSeveralGroupsPerBlock*" \
    "racecheck gpu_topk_test *ManyCandidateChunksPerBlock*" & pids+=($!)
  # Lane: the device path under memcheck.
  device_memcheck "$end" > "$OUT/device_memcheck.log" & pids+=($!)
  for p in "${pids[@]}"; do wait "$p"; done
  cat "$OUT"/sanitizer[1234].log > "$OUT/sanitizer.log"; rm -f "$OUT"/sanitizer[1234].log
  for t in "${TESTS[@]}"; do cat "$OUT/test_$t.log"; rm -f "$OUT/test_$t.log"; done > "$OUT/gpu_tests.log"
  echo "--- tests"
  grep -E "^=== |^\[  PASSED  \] [0-9]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]|^FAILED: |Failure$" "$OUT/gpu_tests.log" | head -n 60
  grep -qE "^FAILED|\[  FAILED" "$OUT/gpu_tests.log" && status=1
  echo "--- sanitizer"
  grep -hE "^=== |ERROR SUMMARY|RACECHECK SUMMARY|SANITIZER FAILED|^cuda," "$OUT/sanitizer.log" "$OUT/device_memcheck.log"
  grep -q "SANITIZER FAILED" "$OUT/sanitizer.log" "$OUT/device_memcheck.log" && status=1
  return $status
}

phase_timings() {
  local status=0
  device_timings > "$OUT/device_path.log" || status=1
  echo "--- device path (ResNet-50, median ms per step)"
  grep -E "^cuda,|FAILED|rank [0-9]" "$OUT/device_path.log"
  # At most 8 files come back: torch's table and the summary go to bench.txt.
  timeout "${BENCH_BUDGET:-60}" .device/bin/gpu_bench --sizes=1000000,25600000 --reps=10 \
    > "$OUT/bench.csv" 2> "$OUT/bench.txt" || status=1
  PYTHONUNBUFFERED=1 timeout "${TORCH_BUDGET:-45}" python3 tools/gpu/torch_baseline.py \
    --sizes=1000000,25600000 --reps=10 > "$OUT/torch.csv" 2>> "$OUT/bench.txt" || status=1
  echo "--- kernels"
  python3 tools/gpu/summarize.py "$OUT/bench.csv" "$OUT/torch.csv" | tee -a "$OUT/bench.txt"
  return $status
}

phase_bench() {
  timeout "${BENCH_BUDGET:-150}" .device/bin/gpu_bench "$@" > "$OUT/bench.csv" 2> "$OUT/bench.txt"
  local s=$?
  cat "$OUT/bench.txt"
  return $s
}

phase_torch() {
  PYTHONUNBUFFERED=1 timeout "${TORCH_BUDGET:-60}" python3 tools/gpu/torch_baseline.py > "$OUT/torch.csv" 2> "$OUT/torch.txt"
  local s=$?
  tail -n 40 "$OUT/torch.txt"
  return $s
}

case "${1:-}" in
  build) build ;;
  run)
    out_dir
    shift
    case "${1:-lease}" in
      lease) phase_lease ;;
      checks) phase_checks ;;
      timings) phase_timings ;;
      device) phase_device ;;
      large) shift; phase_large "$@" ;;
      bench) shift; phase_bench "$@" ;;
      torch) phase_torch ;;
      *) echo "usage: $0 run [lease|checks|timings|device|large [topk|qsgd]|bench [args]|torch]" >&2; exit 2 ;;
    esac ;;
  *) echo "usage: $0 build | run [lease|checks|timings|device|large|bench|torch]" >&2; exit 2 ;;
esac
