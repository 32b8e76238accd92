#!/usr/bin/env bash
# Data-cache benchmark on an emulated remote store (needs root).
#
# Two emulated hosts (tools/emulated_cluster.py run: network namespaces on a
# shaped star, removed when the run ends): host 0 runs tools/data_server
# over Fashion-MNIST, host 1 runs tools/cache_bench. Latency: netem where the
# kernel has it (the cluster's per-link delay, a quarter of the round trip:
# two links each way); where it does not (sch_netem missing, as on the CI
# machine) the server adds --rtt_ms to every reply instead, and says so.
#
# The disk tier lives on a dedicated ext4 image mounted on a loop device
# (a node's local SSD). Only addresses inside the emulated hosts are used
# (10.253.7.0/24). Everything (hosts, server, mount, image) is removed on
# exit, Ctrl-C or failure, and leftovers of a crashed run are removed first.
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
PORT=7070
work="${GDC_WORK:-/var/tmp/gradwire-cache-bench-work}"
data_dir="$work/fashion-mnist"

cleanup() {
  set +e
  if mountpoint -q "$work/disk" 2>/dev/null; then umount "$work/disk"; fi
  # The loop device may outlive the mount (and even the image's name):
  # mount namespaces created meanwhile (e.g. bazel sandboxes) hold copies
  # of the mount; the device is autocleared once they exit.
  losetup -a | grep -F "$work/disk.img" | cut -d: -f1 | while read -r dev; do losetup -d "$dev"; done
  rm -f "$work/disk.img"
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

# The hosts exist only while the inner script runs; emulated_cluster.py
# owns them (and kills anything left inside) however the run ends.
if python3 tools/emulated_cluster.py check | grep -q '^netem: available'; then
  delay_args=(--delay "$((rtt_ms * 250))us")
  server_delay=0
  latency_note="netem: ${rtt_ms} ms round trip on the links"
else
  delay_args=()
  server_delay="$rtt_ms"
  latency_note="no sch_netem in this kernel: the server delays each reply by ${rtt_ms} ms"
fi
echo "link: ${rate_mbit} Mbit/s each way (emulated_cluster.py's default shaper); $latency_note" >&2
export bin work data_dir server_delay rate_mbit rtt_ms latency_note PORT

inner='
set -euo pipefail
rm -f "$work/port"
ip netns exec "$GWC_NS_0" "$bin/data_server" --data_dir="$data_dir" --token_file="$work/token" \
  --address="$GWC_ADDR_0:$PORT" --port_file="$work/port" --response_delay_ms="$server_delay" &
server_pid=$!
trap "kill $server_pid 2>/dev/null; wait $server_pid 2>/dev/null" EXIT
for _ in $(seq 1 300); do
  [ -s "$work/port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "data_server exited" >&2; exit 1; }
  sleep 0.1
done
[ -s "$work/port" ] || { echo "data_server did not start within 30 s" >&2; exit 1; }
echo "# cache_bench: $(date -u +%FT%TZ), link ${rate_mbit} Mbit/s, ${rtt_ms} ms RTT ($latency_note)"
ip netns exec "$GWC_NS_1" "$bin/cache_bench" --target="$GWC_ADDR_0:$PORT" \
  --token_file="$work/token" --data_dir="$data_dir" --disk_dir="$work/disk/cache" \
  --link_mbit="$rate_mbit" "$@"
'
python3 tools/emulated_cluster.py run --hosts 2 --link "${rate_mbit}mbit" \
  --subnet 10.253.7.0/24 "${delay_args[@]}" -- bash -c "$inner" cache_bench_inner "$@"
