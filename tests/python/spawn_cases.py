"""What the multi-rank hook tests share (torch_pg_test.py, ddp_exchange_test.py),
and the entry point of the one-process unittest files (unittest_main).

Each case runs as its own job: a fresh interpreter that spawns the ranks with
torch.multiprocessing.spawn (torchrun from Debian's torch crashes on Python
3.11), under a fresh job secret and without GRADWIRE_* or launcher variables
from outside. The driver (no --case) runs every case this way and prints one
line per case; a case that fails prints the tail of its output.
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_missing(python):
    """True (and says SKIPPED) if `python` cannot import torch."""
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        print(f"SKIPPED: torch is not importable by {python}")
    return probe.returncode != 0


def case_env(tmp, package_dir, drop=()):
    """The environment of every case: a fresh job secret file in `tmp`, the
    package on PYTHONPATH, nothing of gradwire's or of `drop` from outside."""
    secret_file = os.path.join(tmp, "job.secret")
    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADWIRE_") and k not in drop}
    env["GRADWIRE_JOB_SECRET_FILE"] = secret_file
    env["PYTHONPATH"] = package_dir
    return env


def run_case(args, script, name, case, port, env, passes, timeout):
    """Runs `case` of `script` as one job; True if `passes` ranks said PASS."""
    cmd = [args.python, os.path.abspath(script), "--package_dir", args.package_dir,
           "--case", case, "--port", str(port)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    ok = proc.returncode == 0 and proc.stdout.count("PASS") == passes
    print(f"{'ok  ' if ok else 'FAIL'} {name} ({time.monotonic() - t0:.1f} s)", flush=True)
    if not ok:
        print(proc.stdout[-6000:], proc.stderr[-6000:])
    return ok, proc.stdout


def checker(rank):
    """(failures, check): check(cond, what) records and prints what failed."""
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print(f"rank {rank}: CHECK FAILED: {what}", flush=True)

    return failures, check


def expect_refusals(construct, cases, failures, forbid=None):
    """For each (kwargs, cls, text) of `cases`, construct(**kwargs) must raise
    a `cls` whose message holds `text` (and not `forbid`); what does not is
    appended to `failures`."""
    for kwargs, cls, text in cases:
        try:
            construct(**kwargs)
            failures.append(f"{kwargs}: no error")
        except Exception as e:  # noqa: BLE001 - the class is what is checked
            if not isinstance(e, cls) or text not in str(e) or (forbid and forbid in str(e)):
                failures.append(f"{kwargs}: {type(e).__name__}: {e}")


def main(driver, rank_main, world, single=None):
    """The test's entry point: the driver without --case; with --case, that
    case (a `single`-process one, or `world` spawned ranks)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--package_dir", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--case", default="")
    parser.add_argument("--only", default="", help="comma-separated cases to run")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    args.package_dir = os.path.abspath(args.package_dir)
    if not args.case:
        return driver(args)
    sys.path.insert(0, args.package_dir)
    if single and args.case in single:
        return single[args.case]()
    import torch.multiprocessing as mp
    mp.spawn(rank_main, args=(args.case, args.port), nprocs=world, join=True)
    return 0


def unittest_main(needs_torch=False):
    """A one-process test file's entry point: --package_dir (the gradwire
    package) goes on sys.path, the rest of the arguments to unittest.
    With needs_torch, says SKIPPED (and passes) where torch cannot be
    imported. Returns the exit status."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--package_dir", required=True)
    args, rest = parser.parse_known_args()
    sys.path.insert(0, os.path.abspath(args.package_dir))
    if needs_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("SKIPPED: torch is not importable; install python3-torch")
            return 0
    import unittest
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1
