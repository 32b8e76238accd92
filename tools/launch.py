#!/usr/bin/env python3
"""Starts N local ranks of a command, the way torchrun would.

    python3 tools/launch.py --nproc=4 [--redis] [--timeout=600] -- CMD ARGS...

Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
MASTER_ADDR, MASTER_PORT and gradwire's rendezvous variables
(GRADWIRE_JOB_ID, GRADWIRE_STORE_DIR or GRADWIRE_REDIS +
GRADWIRE_REDIS_PASSWORD_FILE). With --redis a private redis-server is started
first on a free loopback port, with a random password (requirepass) and no
persistence. Output lines are forwarded with a "[rank i] " prefix.

Job secret: every rank needs the same one. With --job_secret_file, or
$GRADWIRE_JOB_SECRET / $GRADWIRE_JOB_SECRET_FILE already set, the ranks get
that; otherwise the launcher makes one (32 random bytes, hex) in a 0600 file
in its private directory, removed when the job ends, and hands the ranks
its path as $GRADWIRE_JOB_SECRET_FILE (read by the Python package and by
JobSecret::Resolve in the C++ tools), so the secret itself is in no
environment or command line.

If any rank exits non-zero (or dies from a signal), every other rank is
stopped (SIGTERM, then SIGKILL after --grace seconds) and the launcher
exits with that rank's status (128 + signal for a signal). If the whole
job outlives --timeout, all ranks are killed and the launcher exits 124.
SIGINT/SIGTERM to the launcher stop all ranks too (exit 130).
"""
import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gwtools.ports import free_port  # noqa: E402  (tests import it from here)
from gwtools.ranks import RankGroup, exit_status, torchrun_env  # noqa: E402


def redis_ping(port, password, deadline):
    """Waits until the server answers an authenticated PING."""
    word = password.encode()  # RESP counts bytes, not characters
    auth = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(word), word)
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(auth + b"*1\r\n$4\r\nPING\r\n")
                data = b""
                while b"PONG" not in data and len(data) < 1024:
                    chunk = s.recv(1024)
                    if not chunk:
                        break
                    data += chunk
                if b"PONG" in data:
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def start_redis(password, out):
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server not found (Debian package redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--requirepass", password,
         "--save", "", "--appendonly", "no", "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    if not redis_ping(port, password, time.monotonic() + 10):
        proc.kill()
        raise RuntimeError("redis-server did not come up within 10 s")
    print(f"[launch] redis-server on 127.0.0.1:{port} (pid {proc.pid})", file=out, flush=True)
    return proc, port


def write_private(path, text):
    """Creates `path` readable by this user only (0600) holding `text`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def job_secret_env(args, store_dir, out):
    """The ranks' secret variables: the given file, the launcher's own
    variables, or a new secret in a 0600 file (module doc)."""
    if args.job_secret_file:
        path = os.path.abspath(args.job_secret_file)
        if not os.path.isfile(path):
            raise RuntimeError(f"--job_secret_file={args.job_secret_file} "
                               + ("is not a regular file" if os.path.exists(path)
                                  else "does not exist"))
        return {"GRADWIRE_JOB_SECRET_FILE": path}
    if os.environ.get("GRADWIRE_JOB_SECRET") or os.environ.get("GRADWIRE_JOB_SECRET_FILE"):
        return {}
    path = os.path.join(store_dir, "job_secret")
    write_private(path, secrets.token_hex(32) + "\n")
    print(f"[launch] no job secret given: made one for this job in {path} (0600; "
          "$GRADWIRE_JOB_SECRET_FILE)", file=out, flush=True)
    return {"GRADWIRE_JOB_SECRET_FILE": path}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, required=True, help="number of local ranks")
    parser.add_argument("--ranks_per_node", type=int, default=0,
                        help="emulate nodes of this many ranks (LOCAL_WORLD_SIZE); default all")
    parser.add_argument("--redis", action="store_true",
                        help="start a password-protected redis-server for rendezvous")
    parser.add_argument("--redis_password", default="",
                        help="password for --redis (default: random)")
    parser.add_argument("--job_id", default="", help="default: unique per launch")
    parser.add_argument("--job_secret_file", default="",
                        help="file holding the job secret (default: $GRADWIRE_JOB_SECRET or "
                             "$GRADWIRE_JOB_SECRET_FILE if set, else one made for this job)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the whole job")
    parser.add_argument("--grace", type=float, default=3,
                        help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    args.cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not args.cmd:
        parser.error("no command given (put it after --)")
    if args.nproc < 1 or args.nproc > 4096:
        parser.error(f"--nproc must be in 1..4096, got {args.nproc}")
    if args.ranks_per_node < 0:
        parser.error(f"--ranks_per_node must be >= 1 (0: all ranks), got {args.ranks_per_node}")
    # NaN compares false with everything: it would disable the deadline.
    if not 0 < args.timeout <= 30 * 86400:
        parser.error(f"--timeout must be in (0, 2592000] seconds, got {args.timeout}")
    if not 0 <= args.grace <= 3600:
        parser.error(f"--grace must be in [0, 3600] seconds, got {args.grace}")
    args.per_node = args.ranks_per_node or args.nproc
    if args.nproc % args.per_node != 0:
        parser.error("--nproc must be a multiple of --ranks_per_node")
    return args


def rank_env(args, rank, job_id, master_port, store_dir, redis_port, password_file):
    """torchrun's variables and gradwire's rendezvous (a store directory, or
    the private Redis with its password in a 0600 file, not the environment)."""
    env = torchrun_env(os.environ, rank, args.nproc, args.per_node, MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=master_port, GRADWIRE_JOB_ID=job_id)
    if redis_port is not None:
        env["GRADWIRE_REDIS"] = f"127.0.0.1:{redis_port}"
        env["GRADWIRE_REDIS_PASSWORD_FILE"] = password_file
        env.pop("GRADWIRE_REDIS_PASSWORD", None)
        env.pop("GRADWIRE_STORE_DIR", None)
    else:
        env["GRADWIRE_STORE_DIR"] = store_dir
    return env


def say_outcome(outcome, args, out):
    if outcome.status == "failed":
        r = outcome.ranks[outcome.first]
        print(f"[launch] rank {r.rank} exited with status {exit_status(r.returncode)}; "
              "stopped all ranks", file=out, flush=True)
    elif outcome.status == "timeout":
        print(f"[launch] job exceeded --timeout={args.timeout}s; killed all ranks",
              file=out, flush=True)
    elif outcome.status == "interrupted":
        print("[launch] interrupted; stopped all ranks", file=out, flush=True)


def main(argv):
    args = parse_args(argv)
    out = sys.stdout
    # A launcher killed by SIGTERM (a scheduler, CI timeout) or Ctrl-C must
    # not leave its ranks running. The handler only records the request:
    # raising from it could interrupt start() between Popen and tracking
    # the rank, orphaning it. The supervision loop acts on it.
    stop_requested = []

    def on_stop_signal(signum, frame):
        stop_requested.append(signum)
    signal.signal(signal.SIGTERM, on_stop_signal)
    signal.signal(signal.SIGINT, on_stop_signal)

    redis, redis_port, password_file = None, None, None
    store_dir = tempfile.mkdtemp(prefix="gradwire-launch-")
    job_id = args.job_id or f"launch-{os.getpid()}-{secrets.token_hex(4)}"
    ranks = RankGroup("launch", forward=out)
    try:
        if args.redis:
            password = args.redis_password or secrets.token_hex(16)
            redis, redis_port = start_redis(password, out)
            password_file = os.path.join(store_dir, "redis_password")
            write_private(password_file, password)
        secret_env = job_secret_env(args, store_dir, out)
        master_port = free_port()
        for rank in range(args.nproc):
            if stop_requested:
                raise KeyboardInterrupt
            env = rank_env(args, rank, job_id, master_port, store_dir, redis_port, password_file)
            env.update(secret_env)
            if "GRADWIRE_JOB_SECRET_FILE" in secret_env:
                env.pop("GRADWIRE_JOB_SECRET", None)
            ranks.start(rank, args.cmd, env)
        outcome = ranks.supervise(args.timeout, grace_s=args.grace,
                                  stop=lambda: bool(stop_requested))
        say_outcome(outcome, args, out)
        return outcome.exit_status()
    except (RuntimeError, OSError) as e:
        print(f"[launch] error: {e}", file=out, flush=True)
        return 1
    except KeyboardInterrupt:
        print("[launch] interrupted; stopping all ranks", file=out, flush=True)
        return 130
    finally:
        ranks.stop(args.grace)
        if redis is not None:
            redis.kill()
            redis.wait()
        shutil.rmtree(store_dir, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
