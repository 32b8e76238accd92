#!/usr/bin/env bash
# Data-cache benchmark on an emulated remote store (needs root).
#
# Two network namespaces joined by a veth pair: "gdc-remote" runs
# tools/data_server over Fashion-MNIST, "gdc-client" runs tools/cache_bench.
# Both veth ends are rate-shaped with tc tbf. Latency: tc netem where the
# kernel has it (--delay one way on each end, so RTT = 2 x delay); where it
# does not (sch_netem missing, as on the CI machine) the server adds
# --rtt_ms to every reply instead, and the script says so.
#
# The disk tier lives on a dedicated ext4 image mounted on a loop device
# (a node's local SSD). Only addresses inside the namespaces this script
# creates are used (10.253.7.0/24). Everything (namespaces, server, mount,
# image) is removed on exit, Ctrl-C or failure, and leftovers of a crashed
# run are removed first.
#
# Usage: sudo bash tools/cache_bench.sh [--rate_mbit 200] [--rtt_ms 20] [-- cache_bench flags]
set -euo pipefail

rate_mbit=200
rtt_ms=20
while [ $# -gt 0 ]; do
  case "$1" in
    --rate_mbit) rate_mbit="$2"; shift 2 ;;
    --rtt_ms) rtt_ms="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "cache_bench.sh: unknown argument $1 (extra bench flags go after --)" >&2; exit 2 ;;
  esac
done
[[ "$rate_mbit" =~ ^[0-9]+$ && "$rate_mbit" -gt 0 ]] || { echo "--rate_mbit must be a positive integer" >&2; exit 2; }
[[ "$rtt_ms" =~ ^[0-9]+$ ]] || { echo "--rtt_ms must be a non-negative integer" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "cache_bench.sh: needs root (network namespaces, tc)" >&2; exit 1; }

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
NS_REMOTE=gdc-remote
NS_CLIENT=gdc-client
SERVER_ADDR=10.253.7.1
CLIENT_ADDR=10.253.7.2
PORT=7070
work="${GDC_WORK:-/var/tmp/gradwire-cache-bench-work}"
data_dir="$work/fashion-mnist"
server_pid=""

cleanup() {
  set +e
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  if mountpoint -q "$work/disk" 2>/dev/null; then umount "$work/disk"; fi
  # The loop device may outlive the mount (and even the image's name):
  # mount namespaces created meanwhile (e.g. bazel sandboxes) hold copies
  # of the mount; the device is autocleared once they exit.
  losetup -a | grep -F "$work/disk.img" | cut -d: -f1 | while read -r dev; do losetup -d "$dev"; done
  rm -f "$work/disk.img"
  for ns in "$NS_REMOTE" "$NS_CLIENT"; do
    if ip netns list | grep -qw "$ns"; then
      # Processes left inside (a crashed run) keep a namespace alive.
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
      ip netns del "$ns"
    fi
  done
  rm -f "$work/token" "$work/port"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup  # leftovers of an earlier, crashed run

bazel build --jobs=2 //tools:data_server //tools:cache_bench //tools:pack_dataset >&2
bin="$(bazel info bazel-bin 2>/dev/null)/tools"

mkdir -p "$work"
if [ ! -f "$data_dir/MANIFEST" ]; then
  "$bin/pack_dataset" --out_dir="$data_dir" >&2
fi
# The disk tier gets its own ext4 file system (a sparse image on a loop
# device), standing in for a node's local SSD: on the shared root file
# system other processes' file churn makes every inode allocation slow.
mkdir -p "$work/disk"
truncate -s 4G "$work/disk.img"
mkfs.ext4 -q -F -N 500000 "$work/disk.img"
mount -o loop "$work/disk.img" "$work/disk"

umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"

ip netns add "$NS_REMOTE"
ip netns add "$NS_CLIENT"
ip link add gdc-r0 type veth peer name gdc-c0
ip link set gdc-r0 netns "$NS_REMOTE"
ip link set gdc-c0 netns "$NS_CLIENT"
ip -n "$NS_REMOTE" addr add "$SERVER_ADDR/24" dev gdc-r0
ip -n "$NS_CLIENT" addr add "$CLIENT_ADDR/24" dev gdc-c0
for ns in "$NS_REMOTE" "$NS_CLIENT"; do ip -n "$ns" link set lo up; done
ip -n "$NS_REMOTE" link set gdc-r0 up
ip -n "$NS_CLIENT" link set gdc-c0 up

# tbf's bucket must hold at least one 64 KiB GSO packet or it stalls.
tbf="tbf rate ${rate_mbit}mbit burst 131072 latency 100ms"
server_delay=0
if tc -n "$NS_REMOTE" qdisc add dev gdc-r0 root handle 1: netem limit 100000 delay "$((rtt_ms * 500))us" 2>/dev/null; then
  tc -n "$NS_REMOTE" qdisc add dev gdc-r0 parent 1: handle 2: $tbf
  tc -n "$NS_CLIENT" qdisc add dev gdc-c0 root handle 1: netem limit 100000 delay "$((rtt_ms * 500))us"
  tc -n "$NS_CLIENT" qdisc add dev gdc-c0 parent 1: handle 2: $tbf
  latency_note="netem: ${rtt_ms} ms round trip on the link"
else
  tc -n "$NS_REMOTE" qdisc add dev gdc-r0 root $tbf
  tc -n "$NS_CLIENT" qdisc add dev gdc-c0 root $tbf
  server_delay="$rtt_ms"
  latency_note="no sch_netem in this kernel: the server delays each reply by ${rtt_ms} ms"
fi
echo "link: tbf ${rate_mbit} Mbit/s each way; $latency_note" >&2

rm -f "$work/port"
ip netns exec "$NS_REMOTE" "$bin/data_server" --data_dir="$data_dir" --token_file="$work/token" \
  --address="$SERVER_ADDR:$PORT" --port_file="$work/port" --response_delay_ms="$server_delay" &
server_pid=$!
for _ in $(seq 1 300); do
  [ -s "$work/port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "data_server exited" >&2; exit 1; }
  sleep 0.1
done
[ -s "$work/port" ] || { echo "data_server did not start within 30 s" >&2; exit 1; }

echo "# cache_bench: $(date -u +%FT%TZ), link ${rate_mbit} Mbit/s, ${rtt_ms} ms RTT ($latency_note)"
ip netns exec "$NS_CLIENT" "$bin/cache_bench" --target="$SERVER_ADDR:$PORT" \
  --token_file="$work/token" --data_dir="$data_dir" --disk_dir="$work/disk/cache" \
  --link_mbit="$rate_mbit" "$@"
