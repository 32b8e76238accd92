#!/usr/bin/env python3
"""tools/emulated_cluster.py's shapers on two emulated hosts.

Two TCP flows started at once in opposite directions over a 20 Mbit/s link
must both cross at (nearly) the link's rate under `htb-ack`: each host's
egress carries its own flow's data and the pure ACKs of the other's. Under
`tbf` those ACKs queue behind up to 100 ms of data and one flow has crossed
at half the rate here (20.3 against 10.9 Mbit/s), which is what htb-ack's
ACK class is for. Also: a shaper that is not one of SHAPERS is refused by
name, and the ACK class takes pure ACKs only (data, FIN and RST keep their
flow's order).

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

    case("refuses_unknown_shapers", refuses_unknown_shapers)
    case("ack_class_takes_pure_acks_only", ack_class_takes_pure_acks_only)

    ok, why = emulated_cluster.namespaces_available()
    if not ok:
        print(f"SKIPPED opposite_flows_both_at_the_link_rate: {why}")
        cases.append(("opposite_flows_both_at_the_link_rate", "skipped", 0.0))
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
