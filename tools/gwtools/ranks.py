"""Supervision of the processes of one multi-rank job.

    group = RankGroup("case3", log_dir=run_dir)      # or forward=sys.stdout
    for r in range(world):
        group.start(r, argv, env, host=r)            # wrap= runs it inside a host
    outcome = group.supervise(timeout_s=600, linger_s=10)
    if not outcome.ok:
        print(outcome.report())

Every rank runs in a session of its own, so stopping it reaches what it
started. supervise() waits for every rank. When one fails, the others get
linger_s to fail on their own (a dead peer resets their connections within
milliseconds, and their errors say what they saw), then whatever still runs
is stopped: SIGTERM, SIGKILL after grace_s. At the deadline every rank still
running is stopped. The Outcome holds each rank's exit (code, whether the
supervisor stopped it), the last lines of its output, and the ranks likely at
fault ("suspects"): ranks killed by a signal nobody here sent, ranks still
running at a deadline the others met, and ranks the failing ranks' errors name
(where a rank was killed or hung, not those that exited with an error of
their own: witnesses, not suspects).
"""

import collections
import dataclasses
import os
import re
import signal
import subprocess
import threading
import time
from typing import Optional

TAIL_LINES = 15
_NAMED = re.compile(r"\brank (\d+)|\branks \[([\d, ]+)\]")


def exit_status(returncode):
    """Popen's returncode as a shell exit status: 128 + N for signal N."""
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(returncode):
    """'exit status 1', 'killed by SIGKILL' or 'still running'."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def torchrun_env(base, rank, world_size, ranks_per_node, **extra):
    """`base` (a dict of the environment) plus the variables torchrun gives a
    rank: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (nodes of
    ranks_per_node consecutive ranks), and `extra` (values as strings)."""
    env = dict(base)
    env.update({"RANK": str(rank), "WORLD_SIZE": str(world_size),
                "LOCAL_RANK": str(rank % ranks_per_node),
                "LOCAL_WORLD_SIZE": str(ranks_per_node),
                "GROUP_RANK": str(rank // ranks_per_node)})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def ranks_named(text, world_size, addresses=None):
    """Ranks a rank's error names: "rank 3", "ranks [0, 2]", or (with `addresses`,
    {address: [ranks on that host]}) a peer's address."""
    found = set()
    for m in _NAMED.finditer(text):
        found.update(int(x) for x in re.findall(r"\d+", m.group(1) or m.group(2)))
    for address, ranks in (addresses or {}).items():
        if re.search(r"(?<![\d.])" + re.escape(address) + r"(?![\d])", text):
            found.update(ranks)
    return {r for r in found if 0 <= r < world_size}


@dataclasses.dataclass
class RankExit:
    rank: int
    returncode: Optional[int]  # Popen's: negative for a signal
    stopped: bool              # the supervisor stopped it (it had not exited)
    tail: str                  # the last lines of its output

    @property
    def failed(self):
        """Exited non-zero (or died from a signal) by itself."""
        return not self.stopped and self.returncode not in (None, 0)

    @property
    def foreign_signal(self):
        """Died from a signal the supervisor did not send (killed from outside)."""
        return self.failed and self.returncode < 0

    def describe(self):
        return "stopped by the supervisor" if self.stopped else describe_exit(self.returncode)


class Outcome:
    """How one job ended; status is ok, failed, timeout or interrupted."""

    def __init__(self, label, status, ranks, first, elapsed_s, timeout_s):
        self.label = label
        self.status = status
        self.ranks = ranks
        self.first = first  # the rank seen failing first, or None
        self.elapsed_s = elapsed_s
        self.timeout_s = timeout_s

    @property
    def ok(self):
        return self.status == "ok"

    def failed(self):
        return [r for r in self.ranks if r.failed]

    def exit_status(self):
        """One status for the job, as a launcher returns it: the first failing
        rank's, 124 for a timeout, 130 when interrupted."""
        if self.status == "failed":
            return exit_status(self.ranks[self.first].returncode)
        return {"ok": 0, "timeout": 124, "interrupted": 130}[self.status]

    def suspects(self, addresses=None):
        """{rank: why} for the ranks likely at fault."""
        out = {}
        world = len(self.ranks)
        killed = [r for r in self.ranks if r.foreign_signal]
        for r in killed:
            out[r.rank] = f"{describe_exit(r.returncode)}, a signal the supervisor did not send"
        exited = [r for r in self.ranks if not r.stopped]
        if not killed and exited and self.status in ("failed", "timeout"):
            for r in self.ranks:
                if r.stopped:
                    out.setdefault(r.rank, "still running when the others had " +
                                   ("failed" if self.status == "failed" else "finished") +
                                   " (hung?)")
        # Where a rank was killed or hung, a named rank that exited with an
        # error of its own is a witness (it saw that peer fail too).
        witnesses = set()
        if out:
            witnesses = {r.rank for r in self.failed()
                         if r.returncode is not None and r.returncode > 0}
        for r in self.failed():
            own = set()
            if addresses:
                own = next((set(v) for v in addresses.values() if r.rank in v), set())
            for n in sorted(ranks_named(r.tail, world, addresses) - own - {r.rank} - witnesses):
                out.setdefault(n, f"named by rank {r.rank}'s error")
        return dict(sorted(out.items()))

    def headline(self):
        if self.status == "timeout":
            return f"timed out after {self.timeout_s:.0f} s"
        if self.status == "interrupted":
            return "interrupted"
        if self.status == "failed":
            r = self.ranks[self.first]
            return f"rank {r.rank} failed first: {describe_exit(r.returncode)}"
        return "ok"

    def report(self, addresses=None, indent="  "):
        """Several lines: what happened, the suspects, and the failing ranks'
        output tails (ranks with output first; the supervisor's kills last)."""
        lines = [f"{self.label}: {self.headline()} after {self.elapsed_s:.0f} s"]
        suspects = self.suspects(addresses)
        if suspects:
            lines.append(indent + "suspect ranks: " + "; ".join(
                f"rank {r} ({why})" for r, why in suspects.items()))
        failed = sorted(self.failed(), key=lambda r: (not r.tail.strip(), r.rank))
        for r in failed:
            if r.tail.strip():
                lines.append(f"{indent}rank {r.rank} ({r.describe()}):")
                lines += [indent * 3 + line for line in r.tail.splitlines()]
            else:
                lines.append(f"{indent}rank {r.rank} ({r.describe()}): no output")
        stopped = [r.rank for r in self.ranks if r.stopped]
        if stopped:
            lines.append(f"{indent}stopped by the supervisor: "
                         f"{', '.join(f'rank {r}' for r in stopped)}")
        return "\n".join(lines)

    def to_json(self, addresses=None):
        return {"label": self.label, "status": self.status, "first_failed_rank": self.first,
                "elapsed_s": round(self.elapsed_s, 3),
                "suspects": {str(r): why for r, why in self.suspects(addresses).items()},
                "ranks": [{"rank": r.rank, "exit": r.describe(), "returncode": r.returncode,
                           "stopped": r.stopped, "tail": r.tail} for r in self.ranks]}


class RankGroup:
    """The processes of one job, one per rank.

    Output goes to log_dir/<label>.rank<i>.log, or with `forward` (a text
    stream) line by line to it as "[rank i] line". `wrap(host, argv)` gives
    the command that runs argv on `host` (an emulated host's namespace)."""

    def __init__(self, label="job", log_dir=None, forward=None, wrap=None,
                 tail_lines=TAIL_LINES):
        if (log_dir is None) == (forward is None):
            raise ValueError("RankGroup needs exactly one of log_dir and forward")
        self.label = label
        self.log_dir = log_dir
        self.forward = forward
        self.wrap = wrap
        self.tail_lines = tail_lines
        self.procs = []
        self._logs = []      # (path, file) per rank in log mode
        self._recent = []    # deque of recent lines per rank in forward mode
        self._threads = []
        self._lock = threading.Lock()

    def start(self, rank, argv, env=None, host=None, cwd=None):
        if rank != len(self.procs):
            raise ValueError(f"ranks start in order: expected rank {len(self.procs)}, got {rank}")
        cmd = self.wrap(host, argv) if self.wrap is not None and host is not None else argv
        if self.log_dir is not None:
            path = os.path.join(self.log_dir, f"{self.label}.rank{rank}.log")
            log = open(path, "w")
            p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            self._logs.append((path, log))
        else:
            p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            self._recent.append(collections.deque(maxlen=max(1, self.tail_lines)))
            t = threading.Thread(target=self._pump, args=(rank, p.stdout), daemon=True)
            t.start()
            self._threads.append(t)
        self.procs.append(p)  # tracked before the caller can be interrupted again
        return p

    def _pump(self, rank, stream):
        for raw in iter(stream.readline, b""):  # whole lines: ranks never interleave mid-line
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lock:
                self._recent[rank].append(line)
                print(f"[rank {rank}] {line}", file=self.forward, flush=True)
        stream.close()

    def log_path(self, rank):
        return self._logs[rank][0] if self._logs else None

    def output(self, rank):
        """Everything rank wrote (log mode) or its recent lines (forward mode)."""
        if self._logs:
            with open(self._logs[rank][0], errors="replace") as f:
                return f.read()
        with self._lock:
            return "\n".join(self._recent[rank])

    def tail(self, rank, lines=None):
        return "\n".join(self.output(rank).splitlines()[-(lines or self.tail_lines):])

    def signal_all(self, sig):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)  # the rank and anything it started
                except ProcessLookupError:
                    pass

    def stop(self, grace_s=3.0):
        """SIGTERM to every rank still running, SIGKILL after grace_s; waits for all."""
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
            time.sleep(0.02)
        self.signal_all(signal.SIGKILL)
        for p in self.procs:
            p.wait()
        for t in self._threads:
            t.join(timeout=2)

    def close(self):
        for _, log in self._logs:
            log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop(0)
        self.close()
        return False

    def supervise(self, timeout_s, linger_s=0.0, grace_s=3.0, tick=None, stop=None,
                  poll_s=0.02):
        """Waits for every rank (see the module doc); returns an Outcome. `tick`
        gets the seconds elapsed on each poll; `stop()` true ends the job as
        interrupted. Any exception (Ctrl-C) stops every rank and propagates."""
        t0 = time.monotonic()
        first, first_at, status = None, None, None
        try:
            while status is None:
                now = time.monotonic()
                codes = [p.poll() for p in self.procs]
                bad = [r for r, c in enumerate(codes) if c not in (None, 0)]
                if bad and first is None:
                    # Of ranks seen failing together, one killed by a signal is the cause.
                    first, first_at = min(bad, key=lambda r: (codes[r] >= 0, r)), now
                if stop is not None and stop():
                    status = "interrupted"
                elif all(c is not None for c in codes):
                    status = "ok" if first is None else "failed"
                elif first is not None and now - first_at >= linger_s:
                    status = "failed"
                elif now - t0 > timeout_s:
                    status = "timeout"
                else:
                    if tick is not None:
                        tick(now - t0)
                    time.sleep(poll_s)
        except BaseException:
            self.stop(0)
            self.close()
            raise
        running = {r for r, c in enumerate(codes) if c is None}
        self.stop(grace_s)
        self.close()
        ranks = [RankExit(r, p.returncode, r in running, self.tail(r))
                 for r, p in enumerate(self.procs)]
        return Outcome(self.label, status, ranks, first, time.monotonic() - t0, timeout_s)
