#!/usr/bin/env python3
"""tools/emulated_cluster.py's shapers on two emulated hosts.

Two TCP flows started at once in opposite directions over a 20 Mbit/s link
must both cross at (nearly) the link's rate under `htb-ack`: each host's
egress carries its own flow's data and the pure ACKs of the other's. Under
`tbf` those ACKs queue behind up to 100 ms of data and one flow has crossed
at half the rate here (20.3 against 10.9 Mbit/s), which is what htb-ack's
ACK class is for. Under `htb-fair`, a 150 KB message sent after the link
has been idle must take its time at the link's rate (htb-ack's 128 KiB
bucket and 64 KiB super-packets send it in 2.3 ms instead of 60), and four
hosts each sending it to the three others at once must all finish within
1.2x the byte time: a host's link serves its peers in turn (with one FIFO
the slowest host took 1.74x and 1.77x in two runs). Also: a shaper that is
not one of SHAPERS is refused by name, and the ACK class takes pure ACKs
only (data, FIN and RST keep their flow's order).

Needs root (network namespaces); prints SKIPPED otherwise. Writes its own
test.xml cases.
"""
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.environ["GWTOOLS_DIR"])
import emulated_cluster  # noqa: E402

RATE_BPS = 20e6
FLOW_BYTES = 1_500_000
MESSAGE_BYTES = 150_000

RECEIVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0; first = None
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    first = first or time.monotonic()
    n += len(b)
print(n, time.monotonic() - first, flush=True)
"""
SENDER = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"x" * int(sys.argv[3])); s.close()
"""

# Host 1 answers each MESSAGE_BYTES it receives with one byte; host 0 sends
# one message every 0.3 s (the link idle in between) and prints each round
# trip's seconds.
ANSWERER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
m = int(sys.argv[2])
while True:
    n = 0
    while n < m:
        b = c.recv(1 << 20)
        if not b:
            raise SystemExit
        n += len(b)
    c.sendall(b"k")
"""
ASKER = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
m = b"x" * int(sys.argv[3])
for _ in range(5):
    time.sleep(0.3); t = time.monotonic(); s.sendall(m); s.recv(1)
    print(time.monotonic() - t, flush=True)
"""

# Every host sends MESSAGE_BYTES to every other at the same instants (the
# machine's one CLOCK_MONOTONIC), and prints the median over 6 rounds of
# the time until it has received every peer's message.
ALL_TO_ALL = """
import socket, statistics, sys, threading, time
me, peers, m, t0 = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4])
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 5610 + me)); srv.listen(len(peers))
out = {}
def connect(j):
    for _ in range(400):
        try:
            out[j] = socket.create_connection((peers[j], 5610 + j)); return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"host {me} could not reach host {j}")
ts = [threading.Thread(target=connect, args=(j,)) for j in range(len(peers)) if j != me]
[t.start() for t in ts]
ins = [srv.accept()[0] for _ in range(len(peers) - 1)]
[t.join() for t in ts]
def take(c, done, k):
    n = 0
    while n < m:
        b = c.recv(1 << 20)
        if not b:
            raise SystemExit("peer closed")
        n += len(b)
    done[k] = time.monotonic()
times, data = [], b"x" * m
for r in range(7):
    start = t0 + r * 0.6
    time.sleep(max(0.0, start - time.monotonic()))
    done = [0.0] * len(ins)
    th = [threading.Thread(target=take, args=(c, done, k)) for k, c in enumerate(ins)]
    th += [threading.Thread(target=out[j].sendall, args=(data,)) for j in out]
    [t.start() for t in th]; [t.join() for t in th]
    times.append(max(done) - start)
print(statistics.median(times[1:]), flush=True)
"""


def all_to_all_seconds(cluster, hosts):
    """Each host's median seconds to receive MESSAGE_BYTES from every other."""
    peers = ",".join(cluster.address(h) for h in range(hosts))
    t0 = time.monotonic() + 2.0
    procs = [cluster.popen(h, [sys.executable, "-c", ALL_TO_ALL, str(h), peers,
                               str(MESSAGE_BYTES), str(t0)], stdout=subprocess.PIPE, text=True)
             for h in range(hosts)]
    seconds = []
    for h, p in enumerate(procs):
        out = p.communicate(timeout=60)[0]
        assert p.returncode == 0 and out.strip(), f"host {h}: exit {p.returncode}, {out!r}"
        seconds.append(float(out))
    return seconds


def message_after_idle_seconds(cluster):
    """Median seconds for MESSAGE_BYTES from host 0 to 1 after 0.3 s idle."""
    answerer = cluster.popen(1, [sys.executable, "-c", ANSWERER, "5603", str(MESSAGE_BYTES)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert answerer.stdout.readline().strip() == "ready"
        out = subprocess.run(cluster.command(0, [sys.executable, "-c", ASKER,
                                                 cluster.address(1), "5603",
                                                 str(MESSAGE_BYTES)]),
                             capture_output=True, text=True, timeout=60, check=True).stdout
    finally:
        answerer.kill()
        answerer.wait()
    times = sorted(float(x) for x in out.split())
    assert len(times) == 5, out
    return times[2]


def opposite_flows(cluster):
    """Mbit/s of the flows 0 -> 1 and 1 -> 0, started together."""
    receivers = []
    for host, port in ((1, 5601), (0, 5602)):
        p = cluster.popen(host, [sys.executable, "-c", RECEIVER, str(port)],
                          stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        receivers.append(p)
    senders = [cluster.popen(src, [sys.executable, "-c", SENDER, cluster.address(dst),
                                   str(port), str(FLOW_BYTES)])
               for src, dst, port in ((0, 1, 5601), (1, 0, 5602))]
    for p in senders:
        assert p.wait(timeout=60) == 0
    rates = []
    for p in receivers:
        n, seconds = p.communicate(timeout=60)[0].split()
        assert int(n) == FLOW_BYTES, n
        rates.append(int(n) * 8 / float(seconds) / 1e6)
    return rates


def main():
    cases = []

    def case(name, fn):
        t0 = time.monotonic()
        try:
            fn()
            cases.append((name, None, time.monotonic() - t0))
            print(f"PASSED {name}")
        except Exception as e:  # noqa: BLE001 - reported as the case's failure
            cases.append((name, f"{type(e).__name__}: {e}", time.monotonic() - t0))
            print(f"FAILED {name}: {type(e).__name__}: {e}")

    def refuses_unknown_shapers():
        try:
            emulated_cluster.EmulatedCluster(2, "20mbit", shaper="fq")
        except emulated_cluster.ClusterError as e:
            assert "--shaper" in str(e) and "htb-ack" in str(e), e
        else:
            raise AssertionError("shaper 'fq' accepted")

    def ack_class_takes_pure_acks_only():
        cmds = emulated_cluster._shape_commands("ns", "eth0", RATE_BPS, 0, 0, 0, "htb-ack")
        flt = [c for c in cmds if "filter" in c]
        assert len(flt) == 1, cmds
        words = " ".join(flt[0])
        # TCP flags byte (IPv4 header of 20 bytes + 13) equal to ACK alone.
        assert "match u8 0x10 0xff at 33" in words, words
        assert "match u8 0x45 0xff at 0" in words and "match u8 0x06 0xff at 9" in words, words

    def hosts_serve_their_peers_in_turn():
        cmds = emulated_cluster._shape_commands("ns", "eth0", RATE_BPS, 0, 0, 0, "htb-fair",
                                                ["10.0.0.2", "10.0.0.3"])
        words = [" ".join(c) for c in cmds]
        for cid, address in (("2:64", "10.0.0.2"), ("2:65", "10.0.0.3")):
            assert any(f"classid {cid} htb rate 10000000bit" in w for w in words), words
            assert any(f"ip dst {address}/32 flowid {cid}" in w for w in words), words
        for shaper in ("tbf", "htb-ack"):
            assert not any("ip dst" in " ".join(c) for c in emulated_cluster._shape_commands(
                "ns", "eth0", RATE_BPS, 0, 0, 0, shaper, ["10.0.0.2"]))

    def buckets_hold_milliseconds_of_traffic():
        # htb-fair: 2 ms of the rate, super-packets within it below 64 KiB.
        assert emulated_cluster.burst_bytes(20e6, "htb-fair") == 5000
        assert emulated_cluster.gso_bytes(20e6, "htb-fair") == 5000
        assert emulated_cluster.burst_bytes(1e9, "htb-fair") == 250000
        assert emulated_cluster.gso_bytes(1e9, "htb-fair") is None
        # tbf cannot send a packet larger than its bucket: 128 KiB at least
        # (htb-ack keeps tbf's bucket).
        for shaper in ("tbf", "htb-ack"):
            assert emulated_cluster.burst_bytes(20e6, shaper) == 128 * 1024
            assert emulated_cluster.gso_bytes(20e6, shaper) is None

    case("refuses_unknown_shapers", refuses_unknown_shapers)
    case("ack_class_takes_pure_acks_only", ack_class_takes_pure_acks_only)
    case("buckets_hold_milliseconds_of_traffic", buckets_hold_milliseconds_of_traffic)
    case("hosts_serve_their_peers_in_turn", hosts_serve_their_peers_in_turn)

    ok, why = emulated_cluster.namespaces_available()
    if not ok:
        for name in ("opposite_flows_both_at_the_link_rate",
                     "fair_links_carry_messages_at_the_link_rate"):
            print(f"SKIPPED {name}: {why}")
            cases.append((name, "skipped", 0.0))
    else:
        def opposite_flows_both_at_the_link_rate():
            with emulated_cluster.EmulatedCluster(2, "20mbit", subnet="10.78.0.0/24",
                                                  shaper="htb-ack") as c:
                rates = opposite_flows(c)
                stats = subprocess.run(["tc", "-n", c.namespace(0), "-s", "class", "show",
                                        "dev", "eth0"], capture_output=True, text=True).stdout
            print(f"  htb-ack, two opposite 1.5 MB flows: {rates[0]:.1f} and {rates[1]:.1f} "
                  f"Mbit/s on a 20 Mbit/s link")
            assert min(rates) >= 0.8 * RATE_BPS / 1e6, rates
            ack = stats.split("class htb 2:10")[1].split("class htb")[0]
            assert " 0 pkt" not in ack.split("Sent", 1)[1].split("\n")[0], stats
        case("opposite_flows_both_at_the_link_rate", opposite_flows_both_at_the_link_rate)

        def fair_links_carry_messages_at_the_link_rate():
            with emulated_cluster.EmulatedCluster(4, "20mbit", subnet="10.78.0.0/24",
                                                  shaper="htb-fair") as c:
                message_s = message_after_idle_seconds(c)
                seconds = all_to_all_seconds(c, 4)
            one_s = MESSAGE_BYTES * 8 / RATE_BPS
            print(f"  htb-fair, a {MESSAGE_BYTES // 1000} KB message after 0.3 s idle: "
                  f"{message_s * 1e3:.1f} ms (at the link's rate: {one_s * 1e3:.1f} ms)")
            assert message_s >= 0.8 * one_s, (message_s, one_s)
            at_rate_s = 3 * MESSAGE_BYTES * 8 / RATE_BPS
            print(f"  4 hosts, {MESSAGE_BYTES // 1000} KB to each other host at once: "
                  + ", ".join(f"{x * 1e3:.0f}" for x in seconds)
                  + f" ms (at the link's rate: {at_rate_s * 1e3:.0f} ms)")
            assert max(seconds) <= 1.2 * at_rate_s, (seconds, at_rate_s)
        case("fair_links_carry_messages_at_the_link_rate",
             fair_links_carry_messages_at_the_link_rate)

    path = os.environ.get("XML_OUTPUT_FILE")
    if path:
        suite = ET.Element("testsuite", name="emulated_cluster_test", tests=str(len(cases)))
        for name, err, seconds in cases:
            tc = ET.SubElement(suite, "testcase", name=name, classname="emulated_cluster_test",
                               time=f"{seconds:.3f}")
            if err == "skipped":
                ET.SubElement(tc, "skipped", message="no network namespaces here")
            elif err:
                ET.SubElement(tc, "failure", message=err[:300]).text = err
        root = ET.Element("testsuites")
        root.append(suite)
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return 1 if any(err and err != "skipped" for _, err, _ in cases) else 0


if __name__ == "__main__":
    sys.exit(main())
