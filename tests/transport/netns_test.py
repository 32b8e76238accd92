#!/usr/bin/env python3
"""Two emulated hosts (network namespaces joined by a veth pair) for the
multi-host paths loopback cannot exercise:

  - rendezvous through a password-protected Redis on "host A", with each
    rank binding its host's interface (GRADWIRE_IFACE, like
    GLOO_SOCKET_IFNAME), then allgatherv and the hierarchical path
    (2 nodes x 2 ranks);
  - the loopback guard: a rank of a multi-host job told to bind 127.0.0.1
    must refuse with a clear error instead of advertising loopback.

    netns_test.py <transport_rank> <emulated_cluster.py> [<transport_bench> RATE]

With a bench binary and a rate (e.g. 1gbit) the link is shaped (the emulated
cluster's default shaper) and the bench runs across the two hosts instead of
the tests.

Needs root (CAP_NET_ADMIN), iproute2 and redis-server; prints SKIPPED and
exits 0 otherwise (Bazel's sandbox, for one, cannot create namespaces).
Namespaces are removed on exit.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

RANK_BIN = os.path.abspath(sys.argv[1])
# Under --config=tsan: the one benign Gloo race (see tsan.supp).
if "TSAN_OPTIONS" in os.environ:
    supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tsan.supp")
    os.environ["TSAN_OPTIONS"] += f" suppressions={supp}"
BENCH = sys.argv[3:5]
# The project's emulated hosts (tools/emulated_cluster.py: owned namespaces
# on a bridge, removed however the test ends); each host's link is eth0.
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[2])))
import emulated_cluster  # noqa: E402

IFACE = "eth0"
CLUSTER = None  # set in main()


def in_ns(i, cmd, env):
    return CLUSTER.popen(i, cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for_redis(redis, password, deadline_s=15.0):
    """Until host 0's Redis answers PING: a fixed half second was once too
    short on a loaded machine, and every rank's rendezvous then failed with
    "Connection refused"."""
    end = time.monotonic() + deadline_s
    while True:
        if redis.poll() is not None:
            raise RuntimeError(f"redis-server exited ({redis.returncode}): "
                               f"{redis.stdout.read().decode(errors='replace')[-400:]}")
        ping = CLUSTER.popen(0, ["redis-cli", "-h", CLUSTER.address(0), "-p", "6379",
                                 "--no-auth-warning", "-a", password, "ping"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if ping.communicate(timeout=deadline_s)[0].strip() == b"PONG":
            return
        if time.monotonic() > end:
            raise RuntimeError(f"redis-server did not answer PING within {deadline_s:g} s")
        time.sleep(0.05)


def run_job(binary, args, tmp, password, extra_env=None, ranks=range(4), timeout=120):
    procs = []
    job_id = f"netns-{time.monotonic_ns()}"
    for rank in ranks:
        node = rank // 2
        env = dict(os.environ)
        env.update({"RANK": str(rank), "WORLD_SIZE": "4", "LOCAL_RANK": str(rank % 2),
                    "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": str(node),
                    "GRADWIRE_REDIS": f"{CLUSTER.address(0)}:6379",
                    "GRADWIRE_REDIS_PASSWORD_FILE": password,
                    "GRADWIRE_JOB_ID": job_id,
                    "GRADWIRE_IFACE": IFACE, "GRADWIRE_TIMEOUT_MS": "20000"})
        env.update(extra_env or {})
        procs.append(in_ns(node, [binary, *args], env))
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        outs.append((p.returncode, out.decode("utf-8", "replace")))
    return outs


def main():
    global CLUSTER
    results = []
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("redis-server") is None:
        print("SKIPPED: needs root, iproute2 and redis-server")
        return write_xml([("netns_multi_host", "skipped", "needs root, iproute2, redis-server")])
    tmp = tempfile.mkdtemp(prefix="netns_test-")
    password = os.path.join(tmp, "pw")
    with open(password, "w") as f:
        f.write(os.urandom(12).hex())
    redis = None
    try:
        ok, why = emulated_cluster.namespaces_available()
        if not ok:
            print(f"SKIPPED: cannot create network namespaces: {why}")
            return write_xml([("netns_multi_host", "skipped", "no network namespaces here")])
        rate = BENCH[1] if len(BENCH) == 2 else None
        CLUSTER = emulated_cluster.EmulatedCluster(2, link=rate or "1gbit", subnet="10.77.0.0/24",
                                                   shaped=rate is not None).__enter__()
        redis = in_ns(0, ["redis-server", "--bind", CLUSTER.address(0), "--port", "6379",
                          "--requirepass",
                          open(password).read(), "--save", "", "--appendonly", "no"], None)
        wait_for_redis(redis, open(password).read())
        if len(BENCH) == 2:
            for code, out in run_job(os.path.abspath(BENCH[0]), [], tmp, password, timeout=300):
                print(out)
            return 0
        for scenario, args in (("allgatherv", []), ("hier", [])):
            name = f"netns_{scenario}_2_hosts_x_2"
            outs = run_job(RANK_BIN, [scenario, *args], tmp, password)
            bad = [(c, o[-400:]) for c, o in outs if c != 0 or "FAILED" in o]
            results.append((name, "failed" if bad else "passed", str(bad)))
            print(f"{name}: {'FAILED ' + str(bad) if bad else 'ok'}")
        outs = run_job(RANK_BIN, ["allgatherv"], tmp, password,
                       extra_env={"GRADWIRE_IFACE": "", "GRADWIRE_BIND_ADDRESS": "127.0.0.1"},
                       ranks=[2])
        code, out = outs[0]
        ok = code == 2 and "FAILED_PRECONDITION" in out and "--iface" in out
        results.append(("netns_loopback_refused", "passed" if ok else "failed", out[-400:]))
        print(f"netns_loopback_refused: {'ok' if ok else 'FAILED'}: {out.strip()[:300]}")
    finally:
        if redis is not None:
            redis.kill()
            redis.wait()
        if CLUSTER is not None:
            CLUSTER.__exit__(None, None, None)
        shutil.rmtree(tmp, ignore_errors=True)
    return write_xml(results)


def write_xml(results):
    path = os.environ.get("XML_OUTPUT_FILE")
    if path:
        suite = ET.Element("testsuite", name="netns_test", tests=str(len(results)))
        for name, outcome, detail in results:
            case = ET.SubElement(suite, "testcase", name=name, classname="netns_test")
            if outcome == "failed":
                ET.SubElement(case, "failure", message=detail[:300]).text = detail
            elif outcome == "skipped":
                ET.SubElement(case, "skipped", message=detail)
        root = ET.Element("testsuites")
        root.append(suite)
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return 1 if any(o == "failed" for _, o, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
