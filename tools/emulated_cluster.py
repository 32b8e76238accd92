#!/usr/bin/env python3
"""An emulated Ethernet cluster on one machine: network namespaces + veth + tc.

Each emulated host is a network namespace with one interface ("eth0") on a
private subnet, joined through a veth pair to a bridge that lives in a
namespace of its own (the "switch"), so nothing in the machine's own network
namespace changes. Every host link is shaped in both directions:

    host eth0 egress  : netem (delay, jitter, loss) -> htb-ack, htb-fair or
                        tbf (rate; see SHAPERS)
    switch port egress: the same, towards the host

so a host-to-host packet crosses two shaped links, as in a star topology
with a store-and-forward switch. Ranks that share a host (one namespace)
talk over its loopback, unshaped: a "host" is a node of several GPUs, and
hierarchical mode's fast intra-node links come for free.

Only addresses inside namespaces this tool creates are used (10.251.0.0/16
by default). Everything is torn down on exit, on Ctrl-C and on failure, and
`up` first removes what a crashed earlier run left behind (namespaces named
with this tool's prefix).

Command line:
    emulated_cluster.py up --hosts 4 --link 1gbit --delay 100us
    emulated_cluster.py exec --host 2 -- CMD...
    emulated_cluster.py run --hosts 2 --link 200mbit -- CMD...   # up for CMD's lifetime
    emulated_cluster.py down
    emulated_cluster.py check          # prints whether namespaces can be made
Concurrent clusters (other worktrees, CI beside a benchmark) coexist: see _OWNED.
Python:
    with EmulatedCluster(hosts=4, link="1gbit", delay="100us") as c:
        c.popen(0, ["./rank", ...]); c.address(0)
"""

import argparse
import fcntl
import ipaddress
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gwtools import rates  # noqa: E402

PREFIX = "gwc"  # every namespace and link this tool makes starts with it
# A cluster made from Python is owned by its process: its namespaces are
# "gwc<token>-h0".. and "gwc<token>-switch", and the process holds an flock
# on LOCK_DIR/<token>.lock while it lives. Concurrent runs (two worktrees'
# tests, a benchmark beside CI, callers in other PID namespaces) never tear
# each other's down: leftovers are the namespaces whose lock nobody holds.
# The command line's `up` outlives its process, so it uses the unowned
# names "gwc-h0".., which only `up` and `down` remove.
_OWNED = re.compile(PREFIX + r"([0-9a-f]{8})-")
LOCK_DIR = "/run/gradwire-emulated-cluster"
TBF_LATENCY = "100ms"  # how long a packet may queue in a shaper (tbf drops beyond)
DEFAULT_SUBNET = "10.251.0.0/16"


class ClusterError(RuntimeError):
    """A clear, user-facing reason the cluster could not be made or used."""


def _parsed(parse, text, flag):
    """gwtools.rates' parse(text, flag), with its ValueError as a ClusterError."""
    try:
        return parse(text, flag)
    except ValueError as e:
        raise ClusterError(str(e)) from None


def _run(args, check=True):
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and proc.returncode != 0:
        raise ClusterError(f"{' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def namespaces_available():
    """(True, '') if this process can create network namespaces, else (False, why)."""
    if os.geteuid() != 0:
        return False, "not root (network namespaces need CAP_SYS_ADMIN)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return False, "iproute2 (ip, tc) is not installed"
    probe = f"{PREFIX}{os.getpid()}-probe"
    proc = _run(["ip", "netns", "add", probe], check=False)
    if proc.returncode != 0:
        return False, "ip netns add failed: " + proc.stderr.strip()
    _run(["ip", "netns", "del", probe], check=False)
    return True, ""


def netem_available():
    """(True, '') if the kernel has sch_netem (delay, jitter, loss), else (False, why)."""
    probe = f"{PREFIX}{os.getpid()}-probe"
    _run(["ip", "netns", "add", probe], check=False)
    try:
        _run(["ip", "-n", probe, "link", "add", "v0", "type", "veth", "peer", "name", "v1"])
        proc = _run(["tc", "-n", probe, "qdisc", "add", "dev", "v0", "root", "netem",
                     "delay", "1ms"], check=False)
        if proc.returncode != 0:
            return False, ("this kernel has no sch_netem qdisc (" + proc.stderr.strip() +
                           "), so delay, jitter and loss cannot be emulated; rate shaping "
                           "(tbf) still works")
        return True, ""
    finally:
        _run(["ip", "netns", "del", probe], check=False)


def _owner_alive(token):
    """True while some process holds token's lock (see _OWNED)."""
    path = os.path.join(LOCK_DIR, token + ".lock")
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass
    return False


def _take_lock(token):
    os.makedirs(LOCK_DIR, exist_ok=True)
    fd = os.open(os.path.join(LOCK_DIR, token + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def leftover_namespaces(owner=None, everything=False):
    """This tool's namespaces that may be removed: those of `owner` (a
    token), those whose owning process is gone, the unowned command-line
    ones (owner == "") and, with everything=True, all of them."""
    out = _run(["ip", "netns", "list"], check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    picked = []
    for n in names:
        m = _OWNED.match(n)
        if m:
            token = m.group(1)
            if everything or token == owner or not _owner_alive(token):
                picked.append(n)
        elif n.startswith(PREFIX + "-") and (everything or owner == ""):
            picked.append(n)
    return picked


def remove_leftovers(owner=None, everything=False):
    """Deletes namespaces picked by leftover_namespaces; returns their names."""
    names = leftover_namespaces(owner, everything)
    for name in names:
        # Kill processes still inside (a crashed benchmark's ranks) first,
        # otherwise the namespace lingers until they exit.
        pids = _run(["ip", "netns", "pids", name], check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _run(["ip", "netns", "del", name], check=False)
    return names


BUCKET_SECONDS = 0.002  # a shaper's bucket: ~2 ms of the link's traffic keeps the rate accurate
MTU_FRAME = 1514  # bytes an Ethernet frame of the default 1500-byte MTU puts on a link
SEGMENT_BYTES = MTU_FRAME - 54  # TCP payload of such a frame (Ethernet 14, IPv4 20, TCP 20)


def burst_bytes(rate_bps, shaper="tbf"):
    """The shaper's bucket: what a link that has been idle sends at once.

    tbf never sends a packet larger than its bucket, so its bucket holds at
    least one GSO super-packet (64 KiB; 128 KiB here); htb-ack keeps tbf's.
    At 20 Mbit/s that is a 52 ms burst: after idle, a host sent 150 KB in
    2.3 ms instead of 60. htb lends a packet the tokens it lacks, so
    htb-fair's bucket is BUCKET_SECONDS of the rate (at least two frames),
    and `gso_bytes` keeps the hosts' super-packets within it."""
    least = 2 * MTU_FRAME if shaper == "htb-fair" else 128 * 1024
    return max(int(rate_bps / 8 * BUCKET_SECONDS), least)


def gso_bytes(rate_bps, shaper="tbf"):
    """The largest super-packet a host's TCP may hand its link (None: the
    kernel's 64 KiB): for htb-fair, no more than its bucket, so a link is
    never more than a bucket and a packet ahead of its rate."""
    if shaper != "htb-fair":
        return None
    burst = burst_bytes(rate_bps, shaper)
    return burst if burst < 64 * 1024 else None


# The shapers a host link can have (`shaper=`):
#   tbf     : one token bucket and one queue of up to TBF_LATENCY: the pure
#             ACKs a host sends for the data it receives wait behind the data
#             it sends. At 20 Mbit/s that queue holds 100 ms, and of two 2 MB
#             flows started at once in opposite directions one crossed at
#             20.3 Mbit/s and the other at 10.9 (its ACKs starved); at
#             1 Gbit/s both crossed at ~0.9 Gbit/s, as with htb-ack.
#   htb-ack : the same rate, bucket and queue limit (HTB), with pure ACKs
#             in a class served first, as a host NIC's shallow fair queue
#             sends them: the same two flows crossed at 20.7 and 20.8.
# htb-ack is the default since 2026-12-01: the cost model fits it (every
# dense ring of the scaling run within 0.2 %, against 5-8 % slower on tbf;
# the README's run within 6.4 % against 18.5 %), and at 1 Gbit/s it moved
# only exchanges of short bursts (in two alternating rounds of the
# README's run, top-k 1 % and DDP's PowerSGD faster, the dense rings of
# gradwire and DDP within 2 %). docs/results/2026-12-01-ack-priority.md.
#   htb-fair: htb-ack without the burst (a bucket of BUCKET_SECONDS, the
#             hosts' super-packets within it) and with a data class per
#             peer, served in turn, as a host's per-flow fair queue
#             (fq_codel; this kernel has none) sends them: what a real link
#             does. After idle, 150 KB took 60.0 ms at 20 Mbit/s (htb-ack:
#             2.3 ms); four hosts each sending 99 KB to the three others at
#             once all finished in 122-125 ms (the byte time with headers:
#             123 ms; with one FIFO and the small bucket: 122-200 ms).
#             scaling_bench.py's default (its 20 Mbit/s links stand for
#             fast ones, time scaled up, and htb-ack's 128 KiB bucket is
#             52 ms of them); at 1 Gbit/s the README's run measured the same
#             on both (docs/results/2026-12-01-burst-free-links.md).
SHAPERS = ("tbf", "htb-ack", "htb-fair")
DEFAULT_SHAPER = "htb-ack"


def _shaper_commands(ns, dev, parent, rate_bps, shaper, peers=()):
    """tc commands that rate-limit `dev` below `parent` ("root" or a handle).

    htb-fair with `peers` (a host's own link; the addresses of the other
    hosts): the data to each peer has a class of its own, and the link
    serves them in turn (see SHAPERS)."""
    burst = burst_bytes(rate_bps, shaper)
    where = ["root"] if parent == "root" else ["parent", parent]
    tc = ["tc", "-n", ns]
    if shaper == "tbf":
        return [tc + ["qdisc", "add", "dev", dev] + where + ["handle", "2:", "tbf", "rate",
                f"{int(rate_bps)}bit", "burst", str(burst), "latency", TBF_LATENCY]]
    rate = f"{int(rate_bps)}bit"  # every class may use the whole link (ceil)
    small = f"{max(int(rate_bps // 20), 8000)}bit"  # ACKs: a twentieth, borrowing the rest
    queue = int(rate_bps / 8 * rates.parse_time(TBF_LATENCY)) + burst  # tbf's, for its latency
    cls = tc + ["class", "add", "dev", dev, "parent"]
    buckets = ["ceil", rate, "burst", str(burst), "cburst", str(burst)]
    return [
        tc + ["qdisc", "add", "dev", dev] + where + ["handle", "2:", "htb", "default", "20"],
        cls + ["2:", "classid", "2:1", "htb", "rate", rate] + buckets,
        cls + ["2:1", "classid", "2:10", "htb", "rate", small, "prio", "0"] + buckets,
        cls + ["2:1", "classid", "2:20", "htb", "rate", rate, "prio", "1"] + buckets,
        tc + ["qdisc", "add", "dev", dev, "parent", "2:20", "handle", "20:", "bfifo", "limit",
              str(queue)],
        # Pure ACKs first: IPv4 without options, TCP, total length < 128
        # bytes, flags exactly ACK. Data, FIN and RST keep their flow's
        # order (a RST that overtook its flow's queued data would destroy
        # data the peer was still to receive).
        tc + ["filter", "add", "dev", dev, "parent", "2:", "protocol", "ip", "prio", "1", "u32",
              "match", "u8", "0x45", "0xff", "at", "0",
              "match", "u16", "0x0000", "0xff80", "at", "2",
              "match", "u8", "0x06", "0xff", "at", "9",
              "match", "u8", "0x10", "0xff", "at", "33", "flowid", "2:10"],
    ] + (_per_peer_classes(tc, dev, rate_bps, peers, buckets, queue)
         if shaper == "htb-fair" else [])


def _per_peer_classes(tc, dev, rate_bps, peers, buckets, queue):
    """htb-fair's data classes, one per peer address, served in turn."""
    cmds = []
    share = f"{max(int(rate_bps // max(1, len(peers))), 8000)}bit"
    for i, address in enumerate(peers):
        cid = f"2:{100 + i:x}"
        cmds += [
            tc + ["class", "add", "dev", dev, "parent", "2:1", "classid", cid, "htb", "rate",
                  share, "prio", "1", "quantum", str(2 * MTU_FRAME)] + buckets,
            tc + ["qdisc", "add", "dev", dev, "parent", cid, "bfifo", "limit", str(queue)],
            tc + ["filter", "add", "dev", dev, "parent", "2:", "protocol", "ip", "prio", "2",
                  "u32", "match", "ip", "dst", f"{address}/32", "flowid", cid],
        ]
    return cmds


def _shape_commands(ns, dev, rate_bps, delay_s, jitter_s, loss_pct, shaper=DEFAULT_SHAPER,
                   peers=()):
    """tc commands that shape `dev` in `ns`: netem (if any) then the shaper."""
    cmds = []
    if delay_s > 0 or jitter_s > 0 or loss_pct > 0:
        netem = ["netem", "limit", "100000"]
        if delay_s > 0 or jitter_s > 0:
            netem += ["delay", f"{round(delay_s * 1e6)}us"]
            if jitter_s > 0:
                netem += [f"{round(jitter_s * 1e6)}us"]
        if loss_pct > 0:
            netem += ["loss", f"{loss_pct}%"]
        cmds.append(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:"] + netem)
        cmds += _shaper_commands(ns, dev, "1:", rate_bps, shaper, peers)
    else:
        cmds += _shaper_commands(ns, dev, "root", rate_bps, shaper, peers)
    return cmds


class EmulatedCluster:
    """H hosts on a shaped star network. Use as a context manager."""

    def __init__(self, hosts, link="1gbit", delay="0us", jitter="0us", loss="0",
                 subnet=DEFAULT_SUBNET, shaped=True, owned=True, shaper=DEFAULT_SHAPER):
        if not isinstance(hosts, int) or not 1 <= hosts <= 250:
            raise ClusterError(f"--hosts must be an integer in [1, 250], got {hosts!r}")
        if shaper not in SHAPERS:
            raise ClusterError(f"--shaper must be one of {', '.join(SHAPERS)}, got {shaper!r}")
        self.shaper = shaper
        self.hosts = hosts
        self.link = link
        self.rate_bps = _parsed(rates.parse_rate, link, "--link")
        self.delay_s = _parsed(rates.parse_time, delay, "--delay")
        self.jitter_s = _parsed(rates.parse_time, jitter, "--jitter")
        self.loss_pct = _parsed(rates.parse_loss, loss, "--loss")
        net = ipaddress.ip_network(subnet)
        if net.num_addresses < hosts + 2:
            raise ClusterError(f"--subnet {subnet} is too small for {hosts} hosts")
        self._addresses = [str(net.network_address + 1 + i) for i in range(hosts)]
        self._prefixlen = net.prefixlen
        self.shaped = shaped
        # Owned: names carry our pid (see _OWNED); else the unowned CLI names.
        self.owner = secrets.token_hex(4) if owned else ""
        self._lock_fd = None
        self.prefix = f"{PREFIX}{self.owner}" if owned else PREFIX
        self.switch = self.prefix + "-switch"
        self._up = False
        self._old_handlers = {}

    # -- names ---------------------------------------------------------
    def namespace(self, host):
        return f"{self.prefix}-h{host}"

    def address(self, host):
        return self._addresses[host]

    # -- lifecycle -----------------------------------------------------
    def up(self):
        if self.owner and self._lock_fd is None:
            self._lock_fd = _take_lock(self.owner)
        remove_leftovers(self.owner)
        if self.shaped and (self.delay_s > 0 or self.jitter_s > 0 or self.loss_pct > 0):
            ok, why = netem_available()
            if not ok:
                raise ClusterError("--delay/--jitter/--loss requested but " + why)
        try:
            _run(["ip", "netns", "add", self.switch])
            _run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
            _run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
            for h in range(self.hosts):
                ns = self.namespace(h)
                port = f"{PREFIX}p{h}"
                _run(["ip", "netns", "add", ns])
                _run(["ip", "-n", ns, "link", "set", "lo", "up"])
                _run(["ip", "link", "add", port, "netns", self.switch, "type", "veth",
                      "peer", "name", "eth0", "netns", ns])
                _run(["ip", "-n", self.switch, "link", "set", port, "master", "br0"])
                _run(["ip", "-n", self.switch, "link", "set", port, "up"])
                _run(["ip", "-n", ns, "addr", "add",
                      f"{self.address(h)}/{self._prefixlen}", "dev", "eth0"])
                _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
                gso = gso_bytes(self.rate_bps, self.shaper) if self.shaped else None
                if gso:  # TCP sizes its super-packets from the host's interface
                    _run(["ip", "-n", ns, "link", "set", "eth0", "gso_max_size", str(gso),
                          "gso_max_segs", str(max(1, gso // SEGMENT_BYTES))])
                if self.shaped:
                    peers = [self.address(j) for j in range(self.hosts) if j != h]
                    for cmd in (_shape_commands(ns, "eth0", self.rate_bps, self.delay_s,
                                                self.jitter_s, self.loss_pct, self.shaper,
                                                peers) +
                                _shape_commands(self.switch, port, self.rate_bps, self.delay_s,
                                                self.jitter_s, self.loss_pct, self.shaper)):
                        _run(cmd)
            self._up = True
        except BaseException:
            self.down()
            raise
        return self

    def down(self):
        remove_leftovers(self.owner)
        if self._lock_fd is not None:
            try:
                os.unlink(os.path.join(LOCK_DIR, self.owner + ".lock"))
            except OSError:
                pass
            os.close(self._lock_fd)
            self._lock_fd = None
        self._up = False

    def __enter__(self):
        # Ctrl-C and kill both run __exit__, so namespaces never outlive us.
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.signal(sig, _raise_keyboard_interrupt)
        return self.up()

    def __exit__(self, *exc):
        self.down()
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        return False

    # -- running things ------------------------------------------------
    def command(self, host, argv):
        """argv wrapped to run inside `host`'s namespace."""
        return ["ip", "netns", "exec", self.namespace(host)] + list(argv)

    def popen(self, host, argv, **kwargs):
        return subprocess.Popen(self.command(host, argv), **kwargs)

    def describe(self):
        shaping = (f"{self.link} {self.shaper} links, delay {self.delay_s * 1e6:.0f}us, "
                   f"jitter {self.jitter_s * 1e6:.0f}us, loss {self.loss_pct}%"
                   if self.shaped else "unshaped")
        return f"{self.hosts} emulated hosts ({shaping})"


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="create the cluster and leave it up")
    up.add_argument("--hosts", type=int, default=4)
    up.add_argument("--link", default="1gbit")
    up.add_argument("--delay", default="0us")
    up.add_argument("--jitter", default="0us")
    up.add_argument("--loss", default="0")
    up.add_argument("--subnet", default=DEFAULT_SUBNET)
    up.add_argument("--shaper", default=DEFAULT_SHAPER, choices=SHAPERS,
                    help="the host links' shaper (see SHAPERS in this file)")
    run = sub.add_parser("run", help="bring a cluster up for one command's lifetime (run in "
                         "this namespace, with GWC_HOSTS, GWC_NS_<i>, GWC_ADDR_<i> set), "
                         "then tear it down")
    for flag, default in (("--hosts", 4), ("--link", "1gbit"), ("--delay", "0us"),
                          ("--jitter", "0us"), ("--loss", "0"), ("--subnet", DEFAULT_SUBNET)):
        run.add_argument(flag, type=type(default), default=default)
    run.add_argument("--shaper", default=DEFAULT_SHAPER, choices=SHAPERS, help="as for up")
    run.add_argument("argv", nargs=argparse.REMAINDER)
    ex = sub.add_parser("exec", help="run a command inside a host")
    ex.add_argument("--host", type=int, required=True)
    ex.add_argument("argv", nargs=argparse.REMAINDER)
    sub.add_parser("down", help="remove every namespace this tool made")
    sub.add_parser("check", help="say whether namespaces can be created here")
    return parser


def _command(args, what):
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise ClusterError(f"{what} needs a command after --")
    return argv


def _require_namespaces():
    ok, why = namespaces_available()
    if not ok:
        raise ClusterError(f"cannot emulate a cluster: {why}")


def cmd_check(args):
    ok, why = namespaces_available()
    print("namespaces: available" if ok else f"namespaces: unavailable ({why})")
    if ok:
        has_netem, why_not = netem_available()
        print("netem: available" if has_netem else f"netem: unavailable ({why_not})")
    return 0 if ok else 1


def cmd_down(args):
    names = remove_leftovers(everything=True)
    print(f"removed {len(names)} namespaces" + (f": {' '.join(names)}" if names else ""))
    return 0


def cmd_up(args):
    _require_namespaces()
    c = EmulatedCluster(args.hosts, args.link, args.delay, args.jitter, args.loss,
                        args.subnet, owned=False, shaper=args.shaper).up()
    print(c.describe())
    for h in range(c.hosts):
        print(f"  host {h}: namespace {c.namespace(h)} address {c.address(h)}")
    return 0


def cmd_run(args):
    argv = _command(args, "run")
    _require_namespaces()
    env = dict(os.environ)
    try:
        # Owned (per-run names, removed on exit, Ctrl-C or kill), so
        # a script never needs its own namespace or tc code.
        with EmulatedCluster(args.hosts, args.link, args.delay, args.jitter, args.loss,
                             args.subnet, shaper=args.shaper) as c:
            env["GWC_HOSTS"] = str(c.hosts)
            for h in range(c.hosts):
                env[f"GWC_NS_{h}"] = c.namespace(h)
                env[f"GWC_ADDR_{h}"] = c.address(h)
            print(c.describe(), file=sys.stderr, flush=True)
            return subprocess.call(argv, env=env)
    except KeyboardInterrupt:
        return 130


def cmd_exec(args):
    argv = _command(args, "exec")
    return subprocess.call(["ip", "netns", "exec", f"{PREFIX}-h{args.host}"] + argv)


def main(argv=None):
    args = build_parser().parse_args(argv)
    commands = {"check": cmd_check, "down": cmd_down, "up": cmd_up, "run": cmd_run,
                "exec": cmd_exec}
    try:
        return commands[args.cmd](args)
    except ClusterError as e:
        print(f"emulated_cluster: {e}", file=sys.stderr)
        return 2

if __name__ == "__main__":
    sys.exit(main())
