#!/usr/bin/env python3
"""Unit tests of tools/gwtools: rates, the spec grammar, ports, result files and
rank supervision (real processes: sh and sleep)."""

import json
import os
import signal
import socket
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.environ.get("GWTOOLS_DIR") or os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                                      "tools")
sys.path.insert(0, TOOLS)
from gwtools import ports, rates, ranks, results, spec  # noqa: E402


class RatesTest(unittest.TestCase):
    def test_rates(self):
        self.assertEqual(rates.parse_rate("1gbit"), 1e9)
        self.assertEqual(rates.parse_rate(" 200mbit "), 200e6)
        self.assertEqual(rates.parse_rate("2.5gbit"), 2.5e9)
        self.assertEqual(rates.parse_rate("10bit"), 10)
        for bad in ("", "0gbit", "1gbps", "fast", "-1gbit", None, "1 gbit/s"):
            with self.assertRaises(ValueError) as e:
                rates.parse_rate(bad, "--link")
            self.assertIn("--link", str(e.exception))

    def test_times_and_loss(self):
        self.assertEqual(rates.parse_time("0us"), 0)
        self.assertAlmostEqual(rates.parse_time("100us"), 1e-4)
        self.assertAlmostEqual(rates.parse_time("2ms"), 2e-3)
        with self.assertRaises(ValueError):
            rates.parse_time("2 minutes")
        self.assertEqual(rates.parse_loss("0.5%"), 0.5)
        for bad in ("100", "-1", "x"):
            with self.assertRaises(ValueError):
                rates.parse_loss(bad)

    def test_sort_key(self):
        self.assertEqual(sorted(["10gbit", "loopback", "1gbit"], key=rates.rate_sort_key),
                         ["loopback", "1gbit", "10gbit"])


class SpecTest(unittest.TestCase):
    def test_defaults_and_canonical(self):
        self.assertEqual(spec.parse_spec("topk").canonical(),
                         "topk:ratio=0.01,bits=4,bucket=512,seed=0,values=fp32,indices=varint")
        s = spec.parse_spec(" qsgd : bits=2 , bucket=128, ef=off ")
        self.assertEqual((s.method, s.bits, s.bucket, s.ef), ("qsgd", 2, 128, "off"))
        self.assertEqual(s.canonical(),
                         "qsgd:ratio=0.01,bits=2,bucket=128,seed=0,values=fp32,indices=varint,"
                         "ef=off")
        self.assertEqual(spec.parse_spec("approx_topk:ratio=1e-3").canonical().split(",")[0],
                         "approx_topk:ratio=0.001")
        self.assertEqual(spec.parse_spec(s.canonical()), s)
        self.assertFalse(spec.parse_spec("none").uses_error_feedback())
        self.assertTrue(spec.parse_spec("sign").uses_error_feedback())
        self.assertFalse(spec.parse_spec("topk:ef=off").uses_error_feedback())

    def test_refused(self):
        cases = {
            "gzip": "compression method", "topk:ratio=0": "ratio", "topk:ratio=1.5": "ratio",
            "topk:ratio=nan": "ratio", "topk:ratio=abc": "ratio", "qsgd:bits=9": "bits",
            "qsgd:bits=0": "bits", "qsgd:bits=1.5": "bits", "sign:bucket=0": "bucket",
            "sign:bucket=-1": "bucket", "randomk:seed=-1": "seed", "topk:values=fp64": "values",
            "topk:indices=zip": "indices", "topk:ef=maybe": "ef", "topk:": "unknown setting",
            "topk:speed=1": "unknown setting", "topk:ratio": "needs a value",
            "topk:ratio=": "needs a value", "topk:ratio=0.1,ratio=0.2": "twice",
            "topk:ratio=0.1,": "unknown setting", "": "compression method",
        }
        for text, want in cases.items():
            with self.assertRaises(spec.SpecError, msg=text) as e:
                spec.parse_spec(text)
            self.assertIn(want, str(e.exception), text)

    def test_old_spellings_point_to_the_grammar(self):
        for old, want in (("topk=0.01", "topk:ratio=0.01"), ("qsgd=4", "qsgd:bits=4"),
                          ("topk=0.01+hier", "separate switch"),
                          ("none,topk=0.01", "separate a list of specs with ';'")):
            with self.assertRaises(spec.SpecError) as e:
                spec.parse_spec(old)
            self.assertIn(want, str(e.exception), old)

    def test_method_lists_and_the_hierarchical_switch(self):
        text = "none; topk:ratio=0.01 ;;approx_topk:ratio=0.001"
        self.assertEqual(spec.split_list(text),
                         ["none", "topk:ratio=0.01", "approx_topk:ratio=0.001"])
        names = lambda h: [m["name"] for m in spec.method_list(text, h)]  # noqa: E731
        self.assertEqual(names("off"), ["none", "topk:ratio=0.01", "approx_topk:ratio=0.001"])
        self.assertEqual(names("on"), ["none", "topk:ratio=0.01 hier",
                                       "approx_topk:ratio=0.001 hier"])
        self.assertEqual(names("both"), ["none", "topk:ratio=0.01", "topk:ratio=0.01 hier",
                                         "approx_topk:ratio=0.001",
                                         "approx_topk:ratio=0.001 hier"])
        m = spec.method("qsgd:bits=2", hierarchical=True)
        self.assertEqual((m["codec"], m["bits"], m["density"], m["hierarchical"]),
                         ("qsgd", 2, None, True))
        self.assertEqual(spec.method("randomk:ratio=0.1")["density"], 0.1)
        with self.assertRaises(spec.SpecError):
            spec.method("none", hierarchical=True)
        with self.assertRaises(spec.SpecError):
            spec.method_list("none", "sometimes")


class PortsAndResultsTest(unittest.TestCase):
    def test_free_port_is_bindable(self):
        port = ports.free_port()
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))

    def test_json_files(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            self.assertIsNone(results.read_json(path))
            results.write_json(path, {"a": [1, 2]})
            self.assertEqual(results.read_json(path), {"a": [1, 2]})
            self.assertEqual(os.listdir(d), ["r.json"])  # no temporary left behind
            with open(path, "w") as f:
                f.write("{truncated")
            self.assertIsNone(results.read_json(path))

    def test_percentile(self):
        self.assertEqual(results.percentile([3, 1, 2], 0.5), 2)
        self.assertEqual(results.percentile(list(range(11)), 0.9), 9)
        self.assertEqual(results.percentile([1, 2], 0.5), 2)  # lround: half away from zero
        with self.assertRaises(ValueError):
            results.percentile([], 0.5)


def sh(script):
    return ["sh", "-c", script]


class RanksTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gwtools-test-")

    def group(self, **kw):
        return ranks.RankGroup("job", log_dir=self.dir, **kw)

    def test_all_ok(self):
        g = self.group()
        for r in range(3):
            g.start(r, sh(f"echo hello from {r}"))
        out = g.supervise(timeout_s=20)
        self.assertTrue(out.ok)
        self.assertEqual(out.exit_status(), 0)
        self.assertEqual(g.output(2).strip(), "hello from 2")
        self.assertTrue(os.path.exists(os.path.join(self.dir, "job.rank1.log")))

    def test_survivors_report_their_own_errors(self):
        # Rank 1 dies from SIGKILL with no output; the others notice within
        # the linger time and exit with their own errors, naming it.
        g = self.group()
        g.start(0, sh("sleep 0.5; echo 'step 3: Connection reset by rank 1' >&2; exit 1"))
        g.start(1, sh("kill -9 $$"))
        g.start(2, sh("sleep 0.5; echo 'peer gone' >&2; exit 2"))
        out = g.supervise(timeout_s=20, linger_s=5)
        self.assertEqual(out.status, "failed")
        self.assertEqual(out.first, 1)
        self.assertEqual(out.exit_status(), 128 + signal.SIGKILL)
        self.assertEqual([r.rank for r in out.failed()], [0, 1, 2])
        self.assertFalse(any(r.stopped for r in out.ranks))
        self.assertIn("SIGKILL", out.suspects()[1])
        text = out.report()
        self.assertIn("Connection reset by rank 1", text)
        self.assertIn("peer gone", text)
        self.assertIn("rank 1 (killed by SIGKILL): no output", text)
        self.assertLess(text.index("peer gone"), text.index("no output"))  # errors first

    def test_linger_ends_and_the_rest_is_stopped(self):
        g = self.group()
        g.start(0, sh("exit 3"))
        g.start(1, ["sleep", "60"])
        t0 = time.monotonic()
        out = g.supervise(timeout_s=30, linger_s=0.5, grace_s=0.5)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(out.exit_status(), 3)
        self.assertTrue(out.ranks[1].stopped)
        self.assertFalse(out.ranks[1].failed)
        self.assertIn("hung", out.suspects()[1])
        self.assertIn("stopped by the supervisor: rank 1", out.report())

    def test_timeout_names_the_hung_rank(self):
        g = self.group()
        g.start(0, sh("echo done"))
        g.start(1, ["sleep", "60"])
        out = g.supervise(timeout_s=0.5, grace_s=0.5)
        self.assertEqual(out.status, "timeout")
        self.assertEqual(out.exit_status(), 124)
        self.assertEqual(list(out.suspects()), [1])
        self.assertIn("timed out", out.report())

    def test_errors_name_ranks_and_addresses(self):
        self.assertEqual(ranks.ranks_named("ranks [0, 2] pass 4 bytes; rank 3 called x", 4),
                         {0, 2, 3})
        self.assertEqual(ranks.ranks_named("rank 9", 4), set())
        addr = {"10.0.0.1": [0], "10.0.0.2": [1], "10.0.0.12": [2]}
        self.assertEqual(ranks.ranks_named("Read error [10.0.0.2]:4567: reset", 3, addr), {1})
        self.assertEqual(ranks.ranks_named("from 10.0.0.12:80", 3, addr), {2})
        g = self.group()
        g.start(0, sh("echo 'Read error [10.0.0.2]:4567' >&2; exit 1"))
        g.start(1, sh("echo 'Read error [10.0.0.1]:4567' >&2; exit 1"))
        g.start(2, sh("exit 0"))
        out = g.supervise(timeout_s=20, linger_s=5)
        self.assertEqual(set(out.suspects(addr)), {0, 1})
        self.assertIn("named by rank", out.suspects(addr)[1])
        json.dumps(out.to_json(addr))

    def test_forward_mode_and_interruption(self):
        import io
        stream = io.StringIO()
        g = ranks.RankGroup("fw", forward=stream)
        g.start(0, sh("echo one; echo two"))
        g.start(1, ["sleep", "60"])
        t0 = time.monotonic()
        out = g.supervise(timeout_s=30, stop=lambda: time.monotonic() - t0 > 0.5, grace_s=0.5)
        self.assertEqual(out.status, "interrupted")
        self.assertEqual(out.exit_status(), 130)
        self.assertIn("[rank 0] one\n[rank 0] two", stream.getvalue())
        self.assertEqual(g.tail(0), "one\ntwo")

    def test_ctrl_c_stops_every_rank(self):
        g = self.group()
        p = g.start(0, ["sleep", "60"])

        def interrupt(elapsed):
            raise KeyboardInterrupt
        with self.assertRaises(KeyboardInterrupt):
            g.supervise(timeout_s=30, tick=interrupt)
        self.assertIsNotNone(p.poll())

    def test_torchrun_env(self):
        env = ranks.torchrun_env({"PATH": "/bin", "RANK": "9"}, 5, 8, 4, MASTER_PORT=29500)
        self.assertEqual({k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                              "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_PORT")},
                         {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
                          "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1", "MASTER_PORT": "29500"})
        self.assertEqual(env["PATH"], "/bin")

    def test_bad_use(self):
        with self.assertRaises(ValueError):
            ranks.RankGroup("x")
        g = self.group()
        with self.assertRaises(ValueError):
            g.start(1, ["true"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
