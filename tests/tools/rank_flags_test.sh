#!/bin/bash
# The rank programs refuse out-of-range flags with an error naming the flag
# (exit 1), before they rendezvous: no abort (a negative --elements or
# --buckets of scaling_rank once asked for a vector of 2^64 elements), and
# no run that reports zeros as a measurement (--iters=0); a --flagfile that
# is a directory or a FIFO, or names one, or names itself, is refused
# (exit 2).
set -uo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
failures=0
# expect BINARY FLAG TEXT [FLAG...]: exit status 1 and TEXT in what it
# printed.
expect() {
  local binary="$1" flag="$2" text="$3" out rc
  shift 3
  # No rendezvous settings: a flag that passed would fail later, naming
  # the job id instead.
  out="$(env -i PATH="$PATH" timeout 60 "$here/tools/$binary" "$flag" "$@" 2>&1)"
  rc=$?
  if [ $rc -ne 1 ] || [[ "$out" != *"$text"* ]]; then
    echo "FAIL: $binary $flag: exit $rc, wanted 1 and \"$text\"; printed: $out"
    failures=$((failures + 1))
  else
    echo "ok: $binary $flag: $(echo "$out" | tail -1)"
  fi
}
for flag in --elements=0 --elements=-5 --elements=8589934593; do
  expect scaling_rank "$flag" "--elements must be in"
done
for flag in --buckets=0 --buckets=-1 --buckets=65537 --iters=0 --iters=-1 --warmup=-1 \
    --warmup=2147483647 --ranks=0 --ranks=1073741824; do
  expect scaling_rank "$flag" "${flag%%=*} must be in"
done
expect scaling_rank --buckets=4096 "--elements x --buckets must be at most" --elements=2000000
for flag in --link_mbit=0 --link_mbit=-1 --link_mbit=nan --link_mbit=inf --link_mbit=1e-320; do
  expect scaling_rank "$flag" "--link_mbit must be"
done
expect scaling_rank --round_us=-5 "--round_us must be"
expect scaling_rank --round_us=nan "--round_us must be"
for flag in --iters=0 --iters=-1 --warmup=-3 --warmup=2147483647 --iters=1000001; do
  expect exchange_bench "$flag" "${flag%%=*} must be in"
done
for flag in --bucket_size_mb=0 --bucket_size_mb=-5 --bucket_size_mb=nan --bucket_size_mb=1e30; do
  expect exchange_bench "$flag" "--bucket_size_mb must be in"
done
expect exchange_bench --params=-1 "--params and --dense_below_elements must be"
expect exchange_bench --params=9999999999999 "--params must be at most"
expect exchange_bench --exchange=allreduce "--exchange must be auto, dense_ring"
for flag in --exchange_model=fast --exchange_model=bytes_per_second --exchange_model=link=1e9 \
    --exchange_model=bytes_per_second=0 --exchange_model=seconds_per_round=-1 \
    --exchange_model=bytes_per_second=nan --exchange_model=bytes_per_second=1e8, \
    --exchange_model=bytes_per_second=1,bytes_per_second=2; do
  expect exchange_bench "$flag" "--exchange_model=\"${flag#*=}\": exchange model"
done
# Profiles: a name is never handed to a shell, files are read only when
# they are regular, and shapes whose product would wrap are refused.
tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/rank_flags.XXXXXX")"
expect exchange_bench "--profile=x; touch $tmp/ran #" "is not a profile name"
[ -e "$tmp/ran" ] && { echo "FAIL: --profile ran a shell command"; failures=$((failures + 1)); }
expect exchange_bench --profile=-h "is not a profile name"
expect exchange_bench "--profile_file=$tmp" "is not a regular file"
expect exchange_bench "--profile_file=$tmp/none" "No such file"
printf '4294967296x4294967296\n' > "$tmp/wrap"
expect exchange_bench "--profile_file=$tmp/wrap" "the profile has over"
printf '0\n5x0\n' > "$tmp/empty"
expect exchange_bench "--profile_file=$tmp/empty" "profile has no parameters"
rm -rf "$tmp"
for flag in --redis=:6379 --redis=127.0.0.1:1:2 --redis=host:port; do
  expect exchange_bench "$flag" "--redis must be host[:port]"
done
# --help prints the flags and exits 0 (abseil's own --help exits 1); a stray
# argument is refused (exit 2).
for binary in exchange_bench scaling_rank; do
  out="$(timeout 60 "$here/tools/$binary" --help 2>&1)"
  if [ $? -ne 0 ] || [[ "$out" != *"--iters (default"* ]]; then
    echo "FAIL: $binary --help: exit status or flag list wrong: $(echo "$out" | head -3)"
    failures=$((failures + 1))
  fi
  timeout 60 "$here/tools/$binary" stray > /dev/null 2>&1
  rc=$?
  if [ $rc -ne 2 ]; then
    echo "FAIL: $binary stray: exit $rc, wanted 2"
    failures=$((failures + 1))
  fi
done
# --flagfile must name a regular file: abseil reads a directory as an empty
# file (the run went on with every default, exit 0) and blocks on a FIFO.
# A good one is read: its out-of-range --iters is refused.
tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/rank_flags.XXXXXX")"
mkfifo "$tmp/fifo"
printf -- '--iters=0\n' > "$tmp/flags"
# Named inside a flag file: a FIFO, and a file that names itself (abseil
# looped for ever).
printf -- '# nested\n  --flagfile=%s \n' "$tmp/fifo" > "$tmp/nested"
printf -- '--flagfile=%s\n' "$tmp/self" > "$tmp/self"
for binary in exchange_bench scaling_rank; do
  for args in "--flagfile=$tmp" "-flagfile $tmp" "--flagfile=$tmp/flags,$tmp/fifo" \
      "--flagfile=$tmp/nested" "--flagfile $tmp/self"; do
    # shellcheck disable=SC2086
    out="$(env -i PATH="$PATH" timeout 60 "$here/tools/$binary" $args 2>&1)"
    rc=$?
    if [ $rc -ne 2 ] || [[ "$out" != *"--flagfile"* ]]; then
      echo "FAIL: $binary $args: exit $rc, wanted 2 naming --flagfile; printed: $out"
      failures=$((failures + 1))
    else
      echo "ok: $binary $args: $out"
    fi
  done
  expect "$binary" "--flagfile=$tmp/flags" "--iters must be in"
done
rm -rf "$tmp"
if [ $failures -ne 0 ]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "every out-of-range flag refused"
