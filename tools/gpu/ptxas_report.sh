#!/usr/bin/env bash
# Static evidence about the CUDA kernels, for a machine without a GPU:
# registers, spills and shared memory per kernel (ptxas -v), and the order
# of global loads, stores and shared atomics inside chosen kernels (SASS).
#
#   bash tools/gpu/ptxas_report.sh [OUTDIR]      (default /tmp/gradwire_ptxas)
#
# Compiles every kernels/cuda/*.cu of TREE (default: this checkout; any
# tree with the same layout, e.g. an older commit's `git archive`) exactly
# as //kernels:cuda_kernels does (nvcc -O3, sm_90, --fmad=false), outside
# Bazel, so that -Xptxas -v and the objects are at hand. Writes
# OUTDIR/<file>.ptxas and OUTDIR/<file>.o, then prints
#   registers  spill-stores  spill-loads  static-shared-bytes  kernel
# for every kernel, and for each SASS_KERNELS entry (file:regex on the
# mangled name) the sequence of LDG (global load), STG (global store),
# ATOMS (shared atomic), MATCH, VOTE and BAR in program order, repeats
# folded (LDGx8 = eight loads in a row). cuobjdump is not part of every
# toolkit image: CUOBJDUMP=/path (or PATH) names one (PyPI:
# nvidia-cuda-cuobjdump with nvidia-cuda-nvdisasm).
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
tree="${TREE:-$here}"
out="${1:-/tmp/gradwire_ptxas}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
cuobjdump="${CUOBJDUMP:-$(command -v cuobjdump || echo "$(dirname "$nvcc")/cuobjdump")}"
mkdir -p "$out/inc"
ln -sfn "$tree" "$out/inc/gradwire"
absl="${ABSL:-$(cd "$here" && bazel info output_base 2>/dev/null)/external/com_google_absl}"
[ -d "$absl" ] || { echo "no absl under Bazel's output base: run a bazel build first" >&2; exit 2; }

for cu in "$tree"/kernels/cuda/*.cu; do
  name="$(basename "$cu" .cu)"
  "$nvcc" -x cu -std=c++17 -O3 --expt-relaxed-constexpr --fmad=false \
    -gencode=arch=compute_90,code=sm_90 -Xptxas -v \
    -I"$out/inc" -I"$absl" -c "$cu" -o "$out/$name.o" 2> "$out/$name.ptxas"
done

echo "# regs spill_st spill_ld smem kernel"
for f in "$out"/*.ptxas; do
  awk '
    /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); fn = substr($0, RSTART + 1, RLENGTH - 2) }
    /bytes spill stores/ { st = $(NF - 7); ld = $(NF - 3) }
    /Used [0-9]+ registers/ {
      regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
      smem = 0; if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11)
      print regs, st, ld, smem, fn
    }' "$f"
done | grep -v "cub::\|_ZN3cub" | while read -r regs st ld smem fn; do
  printf '%4s %5s %5s %6s %s\n' "$regs" "$st" "$ld" "$smem" \
    "$(echo "$fn" | c++filt | sed -E 's/gradwire::kernels::(cuda::)?//g; s/radix:://g; s/\(anonymous namespace\):://g; s/\(.*//')"
done
echo "# (CUB's own kernels left out; template arguments kept)"

[ -x "$cuobjdump" ] || { echo "no cuobjdump: SASS order not shown" >&2; exit 0; }
SASS_KERNELS="${SASS_KERNELS:-topk:Level0Kernel.*MagnitudeOfAcc.*FloatLoader topk:Level0Kernel.*FloatLoader.*MagnitudeOfAcc topk:SelectCandidatesKernel.*Magnitude topk:DeviceSelectSweepKernel.*MagnitudeSource}"
echo
for spec in $SASS_KERNELS; do
  file="${spec%%:*}"
  pat="${spec#*:}"
  [ -f "$out/$file.o" ] || continue
  "$cuobjdump" -sass "$out/$file.o" > "$out/$file.sass"
  awk -v pat="$pat" '
    function flush() { if (last != "") { printf "%s%s ", last, (reps > 1 ? "x" reps : "") } last = ""; reps = 0 }
    /Function :/ { if (keep) { flush(); print "" } keep = ($3 ~ pat); if (keep) print "## " $3 }
    keep && /(LDG|STG|ATOMS|MATCH|VOTE|BAR\.SYNC|STL|LDL)/ {
      op = $0; sub(/^ *\/\*[0-9a-f]+\*\/ */, "", op); sub(/ *;.*/, "", op); sub(/^@!?U?P[0-9T] +/, "", op)
      split(op, w, " "); o = w[1]; sub(/\..*/, "", o)
      if (o == last) reps++; else { flush(); last = o; reps = 1 }
    }
    END { if (keep) { flush(); print "" } }
  ' "$out/$file.sass"
done
