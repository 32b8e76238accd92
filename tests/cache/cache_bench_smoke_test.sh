#!/usr/bin/env bash
# Smoke test of the benchmark path (no namespaces, no shaping, so it runs in
# CI without root): pack Fashion-MNIST, serve it on loopback, run
# cache_bench for two epochs of one configuration and check its table.
set -euo pipefail
bin="${TEST_SRCDIR}/gradwire/tools"

# pack_dataset refuses a split with no samples (it packed one, and the
# server then served an empty train split) and writes nothing.
empty="$(mktemp -d "${TEST_TMPDIR:-/tmp}/empty.XXXXXX")"
for prefix in train t10k; do
  printf '\x00\x00\x08\x03\x00\x00\x00\x00\x00\x00\x00\x1c\x00\x00\x00\x1c' \
    > "$empty/$prefix-images-idx3-ubyte"
  printf '\x00\x00\x08\x01\x00\x00\x00\x00' > "$empty/$prefix-labels-idx1-ubyte"
done
if out="$("$bin/pack_dataset" --source_dir="$empty" --out_dir="$empty/out" 2>&1)" ||
    [[ "$out" != *"train-images-idx3-ubyte: holds no samples"* ]] || [ -e "$empty/out" ]; then
  echo "FAIL: pack_dataset on empty splits: $out"; exit 1
fi
echo "ok: $out"
rm -rf "$empty"

src=/usr/share/datasets/fashion-mnist
if [ ! -e "$src/t10k-images-idx3-ubyte.gz" ] && [ ! -e "$src/t10k-images-idx3-ubyte" ]; then
  echo "SKIPPED: dataset-fashion-mnist is not installed"
  exit 0
fi
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/bench.XXXXXX")"
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT

"$bin/pack_dataset" --source_dir="$src" --out_dir="$work/data"
echo "smoke-token" > "$work/token"
"$bin/data_server" --data_dir="$work/data" --token_file="$work/token" --port_file="$work/port" &
server_pid=$!
for _ in $(seq 1 300); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "FAIL: data_server did not start"; exit 1; }

# --disk_dir is the dataset's own directory: cache_bench works in a
# directory it makes there and removes only that, so the dataset stays.
find "$work/data" -printf '%P %s\n' | sort > "$work/data-before.txt"
# A smoke test, not a timing: calls may take their time (under --config=tsan
# a batch of 512 samples took longer than the default 10 s).
"$bin/cache_bench" --target="127.0.0.1:$(cat "$work/port")" --token_file="$work/token" \
  --data_dir="$work/data" --disk_dir="$work/data" --epochs=2 --configs=fill_once:25:25 \
  --direct_samples=20 --link_mbit=1000 --call_timeout_s=300 | tee "$work/out.txt"
# A bad deadline is refused with its name.
if out="$("$bin/cache_bench" --target=127.0.0.1:1 --token_file="$work/token" \
    --data_dir="$work/data" --call_timeout_s=0 2>&1)" || [[ "$out" != *"--call_timeout_s"* ]]; then
  echo "FAIL: --call_timeout_s=0 was not refused: $out"; exit 1
fi
find "$work/data" -printf '%P %s\n' | sort > "$work/data-after.txt"
cmp -s "$work/data-before.txt" "$work/data-after.txt" || {
  echo "FAIL: --disk_dir's contents changed:"; diff "$work/data-before.txt" "$work/data-after.txt"
  exit 1; }

# Epoch 2 of fill-once 25%/25% hits 25 % in memory and 25 % overall on disk
# once the disk tier is warm; at least the memory figure is exact.
grep -q '^| cache fill_once | 25%/25% | 2 | .* | 25.00% |' "$work/out.txt" || {
  echo "FAIL: epoch 2 memory hit rate is not 25.00%"; exit 1; }
grep -q '^| page cache (pread) |' "$work/out.txt" || { echo "FAIL: no page-cache row"; exit 1; }
echo "PASS"
