#!/usr/bin/env python3
"""Multi-process tests of gradwire's transport over loopback.

    transport_test.py <transport_rank binary> <tools/launch.py> [test name substrings...]

Every rank is a separate process (transport_rank), as in a real job. The
driver starts ranks through tools/launch.py where the whole job is uniform,
and directly where it must control one rank (kill it, stop it, start it
late, keep it away). Deadlines are short (2 s) so fault tests stay quick;
each fault test prints how long the survivors took to report the fault.

Writes JUnit XML to $XML_OUTPUT_FILE (Bazel), one <testcase> per test, with
<skipped> for tests whose prerequisite (redis-server) is missing.
"""
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

RANK_BIN = os.path.abspath(sys.argv[1])
LAUNCH = os.path.abspath(sys.argv[2])
ONLY = sys.argv[3:]
sys.path.insert(0, os.path.dirname(LAUNCH))
import launch  # noqa: E402  (free_port, start_redis)

# Under --config=tsan: name the one benign Gloo race we suppress.
if "TSAN_OPTIONS" in os.environ:
    supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tsan.supp")
    os.environ["TSAN_OPTIONS"] += f" suppressions={supp}"

TIMEOUT_MS = 2000  # collective and store deadline used by the fault tests
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp(prefix="transport_test-")


class Skip(Exception):
    pass


def now_ms():
    return time.time() * 1000.0


class Rank:
    """One rank process; collects its output lines as they arrive."""

    def __init__(self, rank, world, scenario, args=(), env=None):
        self.rank = rank
        self.lines = []
        self.ready = threading.Event()
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env.update({"RANK": str(rank), "WORLD_SIZE": str(world)})
        full_env.setdefault("LOCAL_RANK", str(rank))
        full_env.setdefault("LOCAL_WORLD_SIZE", str(world))
        self.proc = subprocess.Popen([RANK_BIN, scenario, *args], env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            if line.startswith("READY"):
                self.ready.set()

    def wait(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"rank {self.rank} still running after {timeout} s (hang)")
        self.thread.join(timeout=2)
        return self.proc.returncode

    def statuses(self):
        out = []
        for line in self.lines:
            m = re.match(r"STATUS code=(\S+) t_ms=(\d+) call_ms=(\d+) msg=(.*)", line)
            if m:
                out.append({"code": m.group(1), "t_ms": int(m.group(2)),
                            "call_ms": int(m.group(3)), "msg": m.group(4)})
        return out

    def failed_checks(self):
        return [l for l in self.lines if l.startswith("CHECK") and "FAILED" in l]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def job_env(name, **extra):
    env = {"GRADWIRE_JOB_ID": f"{name}-{os.getpid()}-{random.getrandbits(32)}",
           "GRADWIRE_STORE_DIR": os.path.join(TMP, "store"),
           "GRADWIRE_TIMEOUT_MS": str(TIMEOUT_MS)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_launch(nproc, scenario, *args, launch_args=(), timeout=60):
    """Runs a whole job through tools/launch.py; returns (status, lines)."""
    cmd = [sys.executable, LAUNCH, f"--nproc={nproc}", f"--timeout={timeout}", *launch_args,
           "--", RANK_BIN, scenario, *args]
    env = dict(os.environ)
    env["GRADWIRE_TIMEOUT_MS"] = "10000"
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=timeout + 10)
    return p.returncode, p.stdout.decode("utf-8", "replace").splitlines()


def expect_job_ok(nproc, scenario, *args, launch_args=()):
    status, lines = run_launch(nproc, scenario, *args, launch_args=launch_args)
    failed = [l for l in lines if "FAILED" in l or "STATUS" in l]
    assert status == 0 and not failed, f"launch exit {status}; " + "\n".join(failed or lines[-20:])
    checks = sum(1 for l in lines if l.endswith(" ok"))
    assert checks > 0, "no checks ran"
    return lines


# ---------------------------------------------------------------- results

def test_allgatherv(n, *args):
    def t():
        expect_job_ok(n, "allgatherv", *args)
    return t


def test_allreduce(n):
    def t():
        expect_job_ok(n, "allreduce")
    return t


def test_hierarchical(n, per_node):
    def t():
        expect_job_ok(n, "hier", "emulate_nodes=1", launch_args=(f"--ranks_per_node={per_node}",))
    return t


def test_mismatch(kind):
    def t():
        status, lines = run_launch(3, "mismatch", f"kind={kind}")
        statuses = [l for l in lines if "STATUS" in l]
        assert len(statuses) == 3, f"expected a status from each rank: {lines[-20:]}"
        for l in statuses:
            assert "INVALID_ARGUMENT" in l and "collective mismatch" in l, l
            assert "rank 2" in l or "[1, 2]" in l or "rank 0" in l, f"culprit not named: {l}"
        assert status == 0, f"a rank failed after the mismatch: {lines[-20:]}"
        print(f"    {statuses[0].split('msg=')[1]}")
    return t


def test_sealed(n, *args):
    def t():
        expect_job_ok(n, "sealed", *args)
    return t


def test_sealed_forged(n, kind, culprit=1):
    """Issue 19: one rank seals with another key, or alters chunks after
    sealing: every rank fails, the rank receiving from it with
    Unauthenticated naming it; nothing hangs."""
    def t():
        status, lines = run_launch(n, "sealed_forged", f"kind={kind}", f"culprit={culprit}",
                                   "timeout_ms=3000")
        statuses = {int(l.split("]")[0].split()[-1]): l for l in lines if "STATUS" in l}
        assert len(statuses) == n, f"expected a status from each rank: {lines[-20:]}"
        victim = (culprit + 1) % n
        if kind == "key":
            # The culprit cannot verify its predecessor's chunk either; its
            # successor may find its connections closed by the culprit's
            # failure before its own verdict, unless they are alone.
            before = (culprit + n - 1) % n
            assert "UNAUTHENTICATED" in statuses[culprit], statuses[culprit]
            assert f"from rank {before}" in statuses[culprit], statuses[culprit]
            if n == 2:
                assert "UNAUTHENTICATED" in statuses[victim], statuses[victim]
        else:
            # A tampering culprit verifies fine itself: its successor must
            # be the one to refuse.
            assert "UNAUTHENTICATED" in statuses[victim], statuses[victim]
            assert f"from rank {culprit}" in statuses[victim], statuses[victim]
        for r, l in statuses.items():
            assert "code=OK" not in l, f"rank {r} accepted: {l}"
        assert status == 0, f"a check failed: {lines[-20:]}"
        for r in sorted(statuses):
            print(f"    rank {r}: {statuses[r].split('code=')[1].split()[0]} "
                  f"{statuses[r].split('msg=')[1][:150]}")
    return t


# --------------------------------------------------------------- launcher

def test_launcher_stops_all_on_failure():
    start = time.monotonic()
    cmd = [sys.executable, LAUNCH, "--nproc=3", "--timeout=30", "--grace=1", "--", "sh", "-c",
           'echo started; if [ "$RANK" = 1 ]; then sleep 0.2; exit 7; fi; sleep 60']
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=40)
    elapsed = time.monotonic() - start
    out = p.stdout.decode()
    assert p.returncode == 7, f"exit {p.returncode}, wanted rank 1's 7: {out}"
    assert elapsed < 10, f"took {elapsed:.1f} s: other ranks not stopped"
    for r in range(3):
        assert f"[rank {r}] started" in out, out
    print(f"    failing rank stopped the job in {elapsed:.2f} s")


def test_launcher_timeout():
    cmd = [sys.executable, LAUNCH, "--nproc=2", "--timeout=1", "--grace=1", "--", "sleep", "60"]
    start = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    assert p.returncode == 124, p.stdout.decode()
    assert time.monotonic() - start < 6


def test_launcher_sigterm_stops_ranks():
    cmd = [sys.executable, LAUNCH, "--nproc=2", "--timeout=30", "--grace=1", "--", "sh", "-c",
           "echo pid=$$; exec sleep 60"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pids = []
    deadline = time.monotonic() + 10
    while len(pids) < 2 and time.monotonic() < deadline:
        line = p.stdout.readline().decode()
        m = re.search(r"pid=(\d+)", line)
        if m:
            pid = int(m.group(1))
            pids.append((pid, process_start_time(pid)))
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    assert p.returncode == 130, p.returncode
    # A pid is only "still alive" if the same process (same start time) is
    # there: on a busy machine a reaped rank's pid can be reused at once.
    alive = [pid for pid, start in pids if process_start_time(pid) == start]
    assert len(pids) == 2 and not alive, f"ranks {pids}, still alive {alive}"


def process_start_time(pid):
    """Start time of a live, non-zombie process `pid`, else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def test_launcher_redis():
    if shutil.which("redis-server") is None:
        raise Skip("redis-server not installed")
    lines = expect_job_ok(2, "allgatherv", "iters=5", launch_args=("--redis",))
    assert any(l.startswith("[launch] redis-server on 127.0.0.1:") for l in lines), lines[:5]


def test_recreate_no_fd_leak():
    expect_job_ok(3, "recreate", "generations=8")


# ------------------------------------------------------------------ redis

class RedisServer:
    def __enter__(self):
        if shutil.which("redis-server") is None:
            raise Skip("redis-server not installed")
        self.password = "pw-" + os.urandom(8).hex()
        self.proc, self.port = launch.start_redis(self.password, sys.stdout)
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()

    def env(self, name, password):
        env = job_env(name, GRADWIRE_REDIS=f"127.0.0.1:{self.port}")
        env.pop("GRADWIRE_STORE_DIR")
        if password is not None:
            env["GRADWIRE_REDIS_PASSWORD"] = password
        return env


def run_ranks(world, scenario, args, env, timeout=30):
    ranks = [Rank(r, world, scenario, args, env) for r in range(world)]
    codes = [r.wait(timeout) for r in ranks]
    return ranks, codes


def test_redis_rendezvous():
    with RedisServer() as redis:
        env = redis.env("redis", redis.password)
        ranks, codes = run_ranks(3, "allgatherv", ["iters=6"], env)
        assert codes == [0, 0, 0], [r.lines[-5:] for r in ranks]
        # Reusing a job id must fail loudly, not read the old job's addresses.
        ranks, codes = run_ranks(2, "allgatherv", ["iters=1"], env)
        msgs = [s["msg"] for r in ranks for s in r.statuses()]
        assert all(c == 2 for c in codes) and any("already exists" in m for m in msgs), msgs
        print(f"    job id reuse: {msgs[0][:160]}")


def test_redis_wrong_password():
    with RedisServer() as redis:
        for password, code, words in [("wrong", "PERMISSION_DENIED", "authentication failed"),
                                      (None, "PERMISSION_DENIED", "requires a password")]:
            start = time.monotonic()
            ranks, codes = run_ranks(2, "allgatherv", [], redis.env("badpw", password))
            elapsed = time.monotonic() - start
            for r in ranks:
                st = r.statuses()
                assert r.proc.returncode == 2 and st, r.lines
                assert st[0]["code"] == code and words in st[0]["msg"], st[0]
                assert redis.password not in st[0]["msg"]
            assert elapsed < 5, f"password error took {elapsed:.1f} s"
            print(f"    {st[0]['msg']}")


def test_redis_unreachable():
    port = launch.free_port()  # nothing listens there
    env = job_env("noredis", GRADWIRE_REDIS=f"127.0.0.1:{port}")
    env.pop("GRADWIRE_STORE_DIR")
    ranks, codes = run_ranks(1, "allgatherv", [], env)
    st = ranks[0].statuses()
    assert codes == [2] and st and st[0]["code"] == "UNAVAILABLE", ranks[0].lines
    assert "cannot connect" in st[0]["msg"], st[0]
    print(f"    {st[0]['msg']}")


def test_redis_stalled():
    # A server that accepts connections but never answers (SIGSTOPped):
    # every Redis command has a timeout, so rendezvous fails, not hangs.
    with RedisServer() as redis:
        redis.proc.send_signal(signal.SIGSTOP)
        try:
            start = time.monotonic()
            ranks, codes = run_ranks(2, "allgatherv", [], redis.env("stalled", redis.password))
            elapsed = time.monotonic() - start
        finally:
            redis.proc.send_signal(signal.SIGCONT)
        for r in ranks:
            st = r.statuses()
            assert r.proc.returncode == 2 and st and st[0]["code"] == "DEADLINE_EXCEEDED", r.lines
        assert elapsed < TIMEOUT_MS / 1000 + 3, f"took {elapsed:.1f} s"
        print(f"    stalled Redis reported after {st[0]['call_ms']} ms: {st[0]['msg']}")


# ----------------------------------------------------------------- faults

def start_loop_world(world, name, *args):
    env = job_env(name)
    ranks = [Rank(r, world, "loop", ["loop_ms=20000", *args], env) for r in range(world)]
    for r in ranks:
        if not r.ready.wait(15):
            for x in ranks:
                x.kill()
            raise AssertionError(f"rank {r.rank} never formed the group: {r.lines[-5:]}")
    return ranks


def survivor_reports(ranks, victim, since_ms):
    """Waits for every rank but `victim` to end and checks each reported an
    error, then ended cleanly (exit 0, no failed check: the group poisoned).
    Returns (rank, first status, ms from since_ms to it) per survivor."""
    reports = []
    for r in ranks:
        if r.rank == victim:
            continue
        code = r.wait(2 * TIMEOUT_MS / 1000 + 5)
        st = r.statuses()
        assert st, f"rank {r.rank} (exit {code}) reported no error: {r.lines[-5:]}"
        assert code == 0 and not r.failed_checks(), r.failed_checks() or r.lines[-5:]
        reports.append((r.rank, st[0], st[0]["t_ms"] - since_ms))
    return reports


def print_reports(headline, reports):
    print(f"    {headline}: survivors reported after " +
          ", ".join(f"rank {r}: {lat:.0f} ms ({st['code']})" for r, st, lat in reports) +
          f" (deadline {TIMEOUT_MS} ms)")
    for r, st, _ in reports:
        print(f"      rank {r}: {st['msg']}")


def test_kill(delay_ms, *args, world=4, victim=2):
    def t():
        ranks = start_loop_world(world, f"kill{delay_ms}{len(args)}", *args)
        ready_ms = float(re.search(r"t_ms=(\d+)", next(l for l in ranks[victim].lines
                                                       if l.startswith("READY"))).group(1))
        time.sleep(max(0.0, (ready_ms + delay_ms - now_ms()) / 1000.0))
        kill_ms = now_ms()
        ranks[victim].proc.send_signal(signal.SIGKILL)
        try:
            ranks[victim].wait(5)
            reports = survivor_reports(ranks, victim, kill_ms)
        finally:
            for r in ranks:
                r.kill()
        print_reports(f"SIGKILL rank {victim} at {delay_ms} ms", reports)
        for r, st, latency in reports:
            assert st["code"] in ("UNAVAILABLE", "DEADLINE_EXCEEDED"), st
            assert latency <= 2 * TIMEOUT_MS, f"rank {r} took {latency:.0f} ms"
    return t


def test_sigstop(world=3, victim=1):
    ranks = start_loop_world(world, "sigstop")
    time.sleep(0.05)
    stop_ms = now_ms()
    ranks[victim].proc.send_signal(signal.SIGSTOP)
    try:
        reports = survivor_reports(ranks, victim, stop_ms)
    finally:
        ranks[victim].proc.send_signal(signal.SIGKILL)
        for r in ranks:
            r.kill()
    print_reports(f"SIGSTOP rank {victim} (allowed [{TIMEOUT_MS // 2}, {2 * TIMEOUT_MS}] ms)",
                  reports)
    for r, st, latency in reports:
        assert st["code"] in ("UNAVAILABLE", "DEADLINE_EXCEEDED"), st
        assert TIMEOUT_MS / 2 <= latency <= 2 * TIMEOUT_MS, f"rank {r} failed after {latency} ms"


def test_stopped_rank_named(world=4, victim=2):
    """Issue 19: a rank stopped between collectives is named by every
    survivor, which lists the ranks that did arrive, within 2x the deadline."""
    def t():
        ranks = start_loop_world(world, "named", f"stop_rank={victim}", "stop_iter=3")
        try:
            deadline = time.monotonic() + 10
            stop = None
            while stop is None and time.monotonic() < deadline:
                stop = next((l for l in ranks[victim].lines if l.startswith("STOPPING")), None)
                time.sleep(0.01)
            assert stop, f"rank {victim} never stopped: {ranks[victim].lines[-5:]}"
            stop_ms = int(re.search(r"t_ms=(\d+)", stop).group(1))
            reports = survivor_reports(ranks, victim, stop_ms)
        finally:
            ranks[victim].proc.send_signal(signal.SIGKILL)
            for r in ranks:
                r.kill()
        print_reports(f"rank {victim} stopped itself", reports)
        did = "ranks [" + ", ".join(str(r) for r, _, _ in reports) + "] did"
        for r, st, latency in reports:
            assert st["code"] == "DEADLINE_EXCEEDED", st
            assert f"rank {victim} did not arrive within" in st["msg"], \
                f"rank {r} does not name rank {victim}: {st}"
            assert did in st["msg"], f"rank {r} does not list {did!r}: {st['msg']}"
            assert TIMEOUT_MS / 2 <= latency <= 2 * TIMEOUT_MS, f"rank {r} after {latency} ms"
    return t


def test_rank_never_shows_up():
    env = job_env("noshow")
    ranks = [Rank(r, 3, "allgatherv", [], env) for r in range(2)]  # rank 2 never starts
    report = []
    for r in ranks:
        code = r.wait(TIMEOUT_MS / 1000 + 10)
        st = r.statuses()
        assert code == 2 and st, f"rank {r.rank}: exit {code}, {r.lines[-5:]}"
        assert st[0]["code"] == "DEADLINE_EXCEEDED", st[0]
        assert st[0]["call_ms"] <= TIMEOUT_MS + 1000, st[0]
        report.append((r.rank, st[0]["call_ms"]))
    print(f"    missing rank 2: " + ", ".join(f"rank {r} gave up after {ms} ms" for r, ms in report) +
          f" (store timeout {TIMEOUT_MS} ms); {st[0]['msg'][:150]}")


def listening_ports(pid):
    """TCP ports process `pid` is listening on (from /proc, no tools)."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        for fd in os.listdir(fd_dir):
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return []
    ports = []
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                        ports.append(int(fields[1].split(":")[-1], 16))
        except OSError:
            pass
    return sorted(set(ports))


def send_garbage(port, nbytes=256):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(os.urandom(nbytes))
            time.sleep(0.05)
        return "sent"
    except OSError as e:
        return f"refused ({e.strerror})"


def test_garbage_connections():
    # During rendezvous: ranks 0 and 1 wait for late rank 2 with their
    # per-pair listening sockets open; hit every one with random bytes.
    env = job_env("garbage")
    ranks = [Rank(r, 3, "allgatherv", ["iters=6"], env) for r in range(2)]
    # Wait (bounded) until the early ranks listen for the late one.
    deadline = time.monotonic() + 5
    ports = {}
    while time.monotonic() < deadline and not ports:
        time.sleep(0.1)
        ports = {(r.rank, p): None for r in ranks for p in listening_ports(r.proc.pid)}
    assert ports, "no rank listened during rendezvous: nothing was probed"
    probed = {key: send_garbage(key[1]) for key in ports}
    ranks.append(Rank(2, 3, "allgatherv", ["iters=6"], env))
    t0 = time.monotonic()
    codes = [r.wait(20) for r in ranks]
    print(f"    rendezvous outcome known after {time.monotonic() - t0:.2f} s")
    died = [(r.rank, c) for r, c in zip(ranks, codes) if c < 0]
    assert not died, f"ranks killed by signals {died}: {[r.lines[-3:] for r in ranks]}"
    outcome = []
    for r, c in zip(ranks, codes):
        st = r.statuses()
        failed = r.failed_checks()
        if c == 0:
            outcome.append(f"rank {r.rank}: collectives correct")
        elif c == 1 and r.ready.is_set() and len(failed) == 1 and "did not arrive" in failed[0]:
            # It connected before the garbage struck its peers, which then
            # failed rendezvous: its first collective names them (seen when
            # only a peer's ports were probed).
            outcome.append(f"rank {r.rank}: group formed, peers missing: {failed[0][:120]}")
        else:
            assert st and c == 2, f"rank {r.rank} exit {c} without a clean status: {r.lines[-5:]}"
            # Store wait + connect, each bounded by the deadline.
            assert st[0]["call_ms"] <= 2 * TIMEOUT_MS + 1000, st[0]
            outcome.append(f"rank {r.rank}: clean error {st[0]['code']}: {st[0]['msg'][:120]}")
    print(f"    during rendezvous: probed {len(probed)} listening ports "
          f"({sorted(set(probed.values()))}); " + "; ".join(outcome))

    # After rendezvous: Gloo's pairs stop listening once connected, so
    # there is nothing to connect to; probe what was open and any new port.
    env = job_env("garbage2")
    ranks = [Rank(r, 2, "idle", ["idle_ms=1500", "iters=4"], env) for r in range(2)]
    for r in ranks:
        assert r.ready.wait(15), r.lines[-5:]
    after = {}
    for r in ranks:
        for port in listening_ports(r.proc.pid):
            after[(r.rank, port)] = send_garbage(port)
    old = {k: send_garbage(k[1]) for k in list(probed)[:4]}
    codes = [r.wait(20) for r in ranks]
    assert codes == [0, 0], [r.lines[-5:] for r in ranks]
    print(f"    after rendezvous: {len(after)} listening ports; stale ports: "
          f"{sorted(set(old.values())) or 'none'}; collectives still correct")


TESTS = [
    *[(f"allgatherv_{n}_ranks", test_allgatherv(n)) for n in (1, 2, 3, 5, 8)],
    # The ring (groups above GroupOptions::direct_allgather_max_ranks).
    *[(f"allgatherv_{n}_ranks_ring", test_allgatherv(n, "direct_max=0")) for n in (3, 5)],
    # Every allgatherv block direct, the 1 MiB ones included.
    ("allgatherv_5_ranks_all_direct", test_allgatherv(5, "direct_block=1000000000")),
    # Receive windows (receive_window.h): one source at a time, and none.
    ("allgatherv_5_ranks_window_1", test_allgatherv(5, "direct_block=1000000000", "window=1")),
    ("allgatherv_8_ranks_window_0", test_allgatherv(8, "window=0")),
    # GroupOptions::event_loop_nice: the loop thread niced, the caller not.
    ("allgatherv_3_ranks_loop_nice", test_allgatherv(3, "loop_nice=19")),
    ("allgatherv_2_ranks_loop_nice_5", test_allgatherv(2, "loop_nice=5")),
    *[(f"allreduce_{n}_ranks", test_allreduce(n)) for n in (2, 3, 8)],
    *[(f"hierarchical_{n}x{k}", test_hierarchical(n, k)) for n, k in ((4, 2), (6, 3), (3, 1))],
    *[(f"sealed_{n}_ranks", test_sealed(n)) for n in (2, 3, 5)],
    # Segments of 1 KiB: hundreds per chunk, every bank buffer reused many times.
    *[(f"sealed_{n}_ranks_small_segments", test_sealed(n, "seg=1024")) for n in (2, 4)],
    ("sealed_forged_key_2_ranks", test_sealed_forged(2, "key")),
    ("sealed_forged_key_4_ranks", test_sealed_forged(4, "key", culprit=2)),
    ("sealed_tampered_3_ranks", test_sealed_forged(3, "tamper", culprit=0)),
    *[(f"mismatch_{k}", test_mismatch(k)) for k in ("count", "cap", "table", "op", "inline_length", "fingerprint")],
    ("recreate_no_fd_leak", test_recreate_no_fd_leak),
    ("launcher_stops_all_on_failure", test_launcher_stops_all_on_failure),
    ("launcher_timeout", test_launcher_timeout),
    ("launcher_sigterm_stops_ranks", test_launcher_sigterm_stops_ranks),
    ("launcher_redis", test_launcher_redis),
    ("redis_rendezvous", test_redis_rendezvous),
    ("redis_wrong_password", test_redis_wrong_password),
    ("redis_unreachable", test_redis_unreachable),
    ("redis_stalled", test_redis_stalled),
    *[(f"sigkill_at_{d}ms", test_kill(d)) for d in (0, 5, 50)],
    ("sigkill_at_5ms_ring", test_kill(5, "direct_max=0")),
    ("sigstop", test_sigstop),
    ("stopped_rank_named", test_stopped_rank_named()),
    ("stopped_rank_named_3_ranks", test_stopped_rank_named(world=3, victim=0)),
    ("rank_never_shows_up", test_rank_never_shows_up),
    ("garbage_connections", test_garbage_connections),
]


def main():
    results = []
    total_start = time.monotonic()
    for name, fn in TESTS:
        if ONLY and not any(o in name for o in ONLY):
            continue
        print(f"[ RUN      ] {name}", flush=True)
        start = time.monotonic()
        try:
            fn()
            outcome, detail = "passed", ""
        except Skip as e:
            outcome, detail = "skipped", str(e)
        except Exception as e:  # noqa: BLE001 - any failure is reported, not raised
            outcome, detail = "failed", f"{type(e).__name__}: {e}"
        elapsed = time.monotonic() - start
        label = {"passed": "       OK", "skipped": "  SKIPPED", "failed": "  FAILED "}[outcome]
        print(f"[{label} ] {name} ({elapsed:.2f} s) {detail}", flush=True)
        results.append((name, outcome, detail, elapsed))
    failed = [r for r in results if r[1] == "failed"]
    skipped = [r for r in results if r[1] == "skipped"]
    print(f"{len(results) - len(failed) - len(skipped)} passed, {len(failed)} failed, "
          f"{len(skipped)} skipped in {time.monotonic() - total_start:.1f} s")
    xml_path = os.environ.get("XML_OUTPUT_FILE")
    if xml_path:
        suite = ET.Element("testsuite", name="transport_test", tests=str(len(results)),
                           failures=str(len(failed)), skipped=str(len(skipped)))
        for name, outcome, detail, elapsed in results:
            case = ET.SubElement(suite, "testcase", name=name, classname="transport_test",
                                 time=f"{elapsed:.3f}")
            if outcome == "failed":
                ET.SubElement(case, "failure", message=detail[:500]).text = detail
            elif outcome == "skipped":
                ET.SubElement(case, "skipped", message=detail)
        root = ET.Element("testsuites")
        root.append(suite)
        ET.ElementTree(root).write(xml_path, encoding="utf-8", xml_declaration=True)
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
