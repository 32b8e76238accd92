#!/usr/bin/env python3
"""tools/planner_exchange.py and the binding of the library's exchange cost
model (gradwire.exchange_cost / choose_exchange) it predicts with.

    planner_exchange_test.py --package_dir lib/python --tools_dir tools
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

ARGS = None


class BindingTest(unittest.TestCase):
    def test_choice_is_the_cheapest_estimate(self):
        # The Communicator's choice and the estimates the planner reads
        # are one model: the choice is the argmin of the three estimates.
        for p in (2, 4, 16, 17, 64, 512):
            for n in (1 << 14, 1 << 20, 25 << 18):
                for spec in ("topk:ratio=0.01", "topk:ratio=0.001", "randomk:ratio=0.01",
                             "topk:ratio=0.3"):
                    for bw in (2.5e6, 1.25e9, 3e10):
                        t = {k: gw.exchange_cost(k, p, n, spec, bytes_per_second=bw)["seconds"]
                             for k in pe.KINDS}
                        got = gw.choose_exchange(p, n, spec, bytes_per_second=bw)
                        self.assertAlmostEqual(t[got], min(t.values()), delta=1e-12,
                                               msg=(p, n, spec, bw, got, t))
        self.assertEqual(gw.choose_exchange(64, 1 << 20, "qsgd:bits=4"), "dense_ring")

    def test_bytes_do_not_grow_with_p(self):
        b = {p: gw.exchange_cost("sparse_allreduce", p, 16 << 20, "topk:ratio=0.01")["bytes_sent"]
             for p in (4, 16, 64)}
        self.assertLessEqual(b[16] / b[4], 1.3)
        ag = {p: gw.exchange_cost("sparse_allgather", p, 16 << 20, "topk:ratio=0.01")["bytes_sent"]
              for p in (4, 16)}
        self.assertGreater(ag[16] / ag[4], 4.5)
        ring = gw.exchange_cost("dense_ring", 4, 1000, "none")
        self.assertAlmostEqual(ring["bytes_sent"], 2 * 3 / 4 * 4000 + 3 * 80)
        self.assertAlmostEqual(ring["seconds"], ring["wire_s"] + ring["compute_s"])
        # Messages beyond one per round cost CPU: 3 (P - 1) for the ring's
        # agreement and steps, in 1 + 2 (P - 1) rounds.
        self.assertEqual(ring["messages"], 9)
        free = gw.exchange_cost("dense_ring", 4, 1000, "none", seconds_per_message=0)
        self.assertAlmostEqual(ring["compute_s"] - free["compute_s"],
                               (9 - 7) * gw.EXCHANGE_MODEL_DEFAULTS["seconds_per_message"])

    def test_the_allreduce_entries_take_their_own_rate(self):
        # reduced_entries_per_second prices the sparse allreduce's entries
        # (k of them), the decode rate the allgather's P k.
        n, spec = 1 << 24, "topk:ratio=0.1"
        k = round(0.1 * n)
        base = gw.exchange_cost("sparse_allreduce", 4, n, spec, reduced_entries_per_second=2e7)
        slow = gw.exchange_cost("sparse_allreduce", 4, n, spec, reduced_entries_per_second=1e7)
        self.assertAlmostEqual(slow["compute_s"] - base["compute_s"], k / 1e7 - k / 2e7,
                               delta=1e-9)
        other = gw.exchange_cost("sparse_allreduce", 4, n, spec, reduced_entries_per_second=2e7,
                                 decoded_entries_per_second=1e6)
        self.assertEqual(other["compute_s"], base["compute_s"])
        d = gw.EXCHANGE_MODEL_DEFAULTS
        self.assertAlmostEqual(d["reduced_entries_per_second"],
                               d["decoded_entries_per_second"] / 11)

    def test_bad_arguments_are_value_errors(self):
        bad = [(("x", 4, 10, "topk"), {}), (("sparse_allreduce", 4, 10, "none"), {}),
               (("dense_ring", 0, 10, "none"), {}), (("dense_ring", 4, -1, "none"), {}),
               (("dense_ring", 4, 10, "topk:ratio=2"), {}),
               (("dense_ring", 4, 10, "none"), {"bytes_per_second": 0}),
               (("dense_ring", 4, 10, "none"), {"seconds_per_round": float("inf")}),
               (("dense_ring", 4, 10, "none"), {"encoded_elements_per_second": float("nan")}),
               (("dense_ring", 4, 10, "none"), {"decoded_entries_per_second": -1}),
               (("dense_ring", 4, 10, "none"), {"reduced_entries_per_second": 0}),
               (("dense_ring", 4, 10, "none"), {"streamed_elements_per_second": 0}),
               (("dense_ring", 4, 10, "none"), {"seconds_per_message": -1e-6}),
               (("dense_ring", 4, 10, "none"), {"seconds_per_message": float("nan")})]
        for args, kwargs in bad:
            with self.assertRaises(ValueError, msg=(args, kwargs)):
                gw.exchange_cost(*args, **kwargs)
        with self.assertRaises(ValueError):
            gw.choose_exchange(0, 10, "topk")
        # The model's figures are keywords checked by name: a misspelled one
        # is refused with the list of the figures, a value that is not a
        # number names its key.
        with self.assertRaisesRegex(ValueError, "unknown key 'bytes'.*reduced_entries_per_second"):
            gw.choose_exchange(4, 10, "topk", bytes=1e9)
        with self.assertRaisesRegex(TypeError, r"model\['seconds_per_round'\] must be a number"):
            gw.dense_rides_allgather(4, 10, seconds_per_round="1")

    def test_codecs_that_send_every_element_have_an_allgather_estimate(self):
        # Their frames to each of the P - 1 peers: 2n bytes for fp16, a
        # sixteenth as much and its scales for sign.
        n = 1 << 20
        fp16 = gw.exchange_cost("sparse_allgather", 4, n, "fp16")
        sign = gw.exchange_cost("sparse_allgather", 4, n, "sign")
        self.assertGreater(fp16["bytes_sent"], 3 * 2 * n)
        self.assertLess(fp16["bytes_sent"], 3 * (2 * n + 1024))
        self.assertLess(sign["bytes_sent"], fp16["bytes_sent"] / 10)
        with self.assertRaises(ValueError):
            gw.exchange_cost("sparse_allreduce", 4, n, "fp16")


class PlansTest(unittest.TestCase):
    def setUp(self):
        self.dense_b, self.comp_b = [300000], [6 << 20, 6 << 20, 1 << 20]
        self.s = pe.Setting(64, 8, 25e9)

    def test_flat_choice_is_the_librarys_per_bucket(self):
        ps = pe.plans(self.dense_b, self.comp_b, "topk:ratio=0.01", self.s)
        a2a = self.s.nic / pe.all_to_all_share(512, 8)
        want = {}
        for n in self.comp_b:
            k = gw.choose_exchange(512, n, "topk:ratio=0.01", bytes_per_second=a2a,
                                   seconds_per_round=self.s.alpha_s, **self.s.rates)
            want[k] = want.get(k, 0) + 1
        self.assertEqual(ps["flat chosen"]["choices"], want)
        if len(want) == 1:  # one kind for every bucket: that kind's plan exactly
            self.assertAlmostEqual(ps["flat chosen"]["seconds"],
                                   ps["flat " + pe.LABEL[next(iter(want))]]["seconds"])

    def test_library_plan_is_the_faster_mode(self):
        for spec in ("topk:ratio=0.01", "topk:ratio=0.001", "randomk:ratio=0.01"):
            ps = pe.plans(self.dense_b, self.comp_b, spec, self.s)
            self.assertAlmostEqual(ps["library plan"]["seconds"],
                                   min(ps["flat chosen"]["seconds"],
                                       ps["hierarchical chosen"]["seconds"]))

    def test_hierarchical_dense_baseline(self):
        s = pe.Setting(4, 2, 8e9, alpha_s=0.0, intra_bps=None, goodput=1.0)
        ps = pe.plans([], [1000], "topk:ratio=0.01", s)
        base = ps["hierarchical dense (tuned baseline)"]
        # Two rings of 500 elements across 4 nodes, each with half the NIC.
        self.assertAlmostEqual(base["nic_bytes"], 2 * 3 / 4 * 4 * 500)
        self.assertAlmostEqual(base["seconds"], 2 * 3 / 4 * 4 * 500 / (1e9 / 2))
        self.assertEqual(base["choices"], {"dense_ring": 1})

    def test_dense_buckets_follow_the_mode(self):
        # Flat plans: the world's ring of a dense bucket. Hierarchical ones:
        # where the library's rule picks two levels (256 x 8), the library's
        # ring across the nodes on a 1/8 shard with an eighth of the NIC plus
        # the node stages; where it does not (2 x 2), the world's ring.
        spec, n = "topk:ratio=0.01", 68000
        for nodes, gpus, two in ((256, 8, True), (2, 2, False)):
            s = pe.Setting(nodes, gpus, 25e9)
            self.assertEqual(gw.dense_two_level(nodes, gpus, n, bytes_per_second=s.nic / gpus,
                                                seconds_per_round=s.alpha_s, **s.rates), two)
            ring = pe.cost("dense_ring", nodes * gpus, n, spec, s.nic, s.alpha_s, s.rates)
            ps = pe.plans([n], [], spec, s)
            self.assertAlmostEqual(ps["flat chosen"]["seconds"], ring["seconds"])
            if two:
                cross = pe.cost("dense_ring", nodes, n // gpus, spec, s.nic / gpus, s.alpha_s,
                                s.rates)
                local = 2 * pe.intra_s(gpus, n, s.intra_bps, s.intra_alpha_s)
                self.assertAlmostEqual(ps["hierarchical chosen"]["seconds"],
                                       cross["seconds"] + local)
                self.assertLess(ps["hierarchical chosen"]["rounds"], ring["rounds"] / 5)
            else:
                self.assertAlmostEqual(ps["hierarchical chosen"]["seconds"], ring["seconds"])

    def test_dense_tail_rides_where_the_model_says(self):
        # The library's rule against its own costs: riding adds (P-1) x 4
        # bytes an element received; the ring costs its agreement, steps and
        # bytes. ResNet-50's 67,624 dense elements ride at P = 4 (the
        # default model), not at P = 8; a part of twice the size not at P = 4;
        # a tiny one at P = 64 (its ring would be 127 steps).
        for p, d, rides in ((2, 67624, True), (4, 67624, True), (8, 67624, False),
                            (4, 2 * 67624, False), (64, 100, True)):
            ride = (p - 1) * 4 * d / gw.EXCHANGE_MODEL_DEFAULTS["bytes_per_second"]
            ring = gw.exchange_cost("dense_ring", p, d, "none")["seconds"]
            self.assertEqual(ride <= ring, rides, (p, d))
            self.assertEqual(gw.dense_rides_allgather(p, d), rides, (p, d))
        self.assertFalse(gw.dense_rides_allgather(1, 100))
        # The planner follows it: ResNet-50 with 50 MiB buckets, top-k 1 %.
        import model_profiles
        import planner
        shapes = model_profiles.profile("resnet50")
        m = planner.parse_method("topk:ratio=0.01")
        self.assertEqual(planner.dense_tail(shapes, 50 << 20, m, 4), (67624, 11382784))
        self.assertIsNone(planner.dense_tail(shapes, 50 << 20, m, 8))
        self.assertIsNone(planner.dense_tail(shapes, 50 << 20, planner.parse_method("none"), 4))
        # No dense ring left; the dense section's bytes join the allgather.
        flat = planner.predict(shapes, m, 4, 1, 1e9, bucket_bytes=50 << 20)
        self.assertEqual(flat["dense_buckets"], 0)
        self.assertEqual(flat["compressed_buckets"], 2)
        comp = sum(3 * planner.payload_bytes(m, n)
                   for n in planner.bucket_plan(shapes, 50 << 20)[1])
        self.assertAlmostEqual(flat["nic_bytes_per_iter"], comp + 3 * 4 * 67624)

    def test_flat_link_by_pattern(self):
        self.assertEqual(pe.flat_link("dense_ring", 512, 8, 1.0), 1.0)
        self.assertEqual(pe.flat_link("sparse_allgather", 512, 8, 1.0), 1.0)
        self.assertAlmostEqual(pe.flat_link("sparse_allreduce", 512, 8, 1.0),
                               1 / (8 * 504 / 511))
        self.assertEqual(pe.flat_link("sparse_allreduce", 4, 1, 1.0), 1.0)


def scaling_json(with_model):
    """A synthetic scaling_bench result whose times are the model's own: the
    wire term plus the compute term x P / cores (P ranks on 2 cores)."""
    gw_cost = lambda kind, p, spec, alpha: gw.exchange_cost(  # noqa: E731
        kind, p, 1 << 20, spec, bytes_per_second=20e6 / 8 * pe.TCP_GOODPUT,
        seconds_per_round=alpha, encoded_elements_per_second=1e8,
        decoded_entries_per_second=5e7)
    cases = []
    for p in (4, 8):
        for kind, spec in (("dense_ring", "topk:ratio=0.01"),
                           ("sparse_allreduce", "topk:ratio=0.01")):
            alpha = 1e-3 * p
            c = gw_cost(kind, p, spec, alpha)
            compute = (p / 2) * c["compute_s"]
            case = {"hosts": p, "name": kind, "exchange": kind, "spec": spec,
                    "ms": 2 * (c["wire_s"] + compute) * 1e3, "bytes_sent": 2 * c["bytes_sent"],
                    "bytes_received": 2 * c["bytes_received"],
                    "compress_ms": 2 * compute * 1e3}
            if with_model:
                case["model"] = {"bytes_per_second": 1.0, "seconds_per_round": alpha,
                                 "encoded_elements_per_second": 1e8,
                                 "decoded_entries_per_second": 5e7}
            cases.append(case)
    return {"settings": {"link": "20mbit", "elements": 1 << 20, "buckets": 2, "cores": 2},
            "cases": cases}


class ValidationTest(unittest.TestCase):
    def test_exact_run_has_no_error(self):
        rows = pe.validate_scaling(scaling_json(True))
        self.assertEqual(len(rows), 4)
        for r in rows:
            self.assertAlmostEqual(r["error_pct"], 0, places=6, msg=r)
            self.assertAlmostEqual(r["error_inrun_pct"], 0, places=6, msg=r)
            self.assertAlmostEqual(r["bytes_error_pct"], 0, places=6, msg=r)
            self.assertAlmostEqual(r["round_us"], 1e3 * r["hosts"])
            self.assertEqual(r["cpu_share"], r["hosts"] / 2)
        text = pe.format_validation(rows)
        self.assertIn("(4/4 cases within 20 %; the model inside the case's own iterations in "
                      "4/4)", text)

    def test_errors_are_signed_and_reported(self):
        run = scaling_json(True)
        model_ms = run["cases"][1]["ms"]
        run["cases"][1]["ms"] *= 2  # measured twice the model: -50 %
        rows = pe.validate_scaling(run)
        self.assertAlmostEqual(rows[1]["error_pct"], -50, places=6)
        self.assertIn("(3/4 cases within 20 %; the model inside the case's own iterations in "
                      "3/4)", pe.format_validation(rows))
        # Iterations as fast as the model: the miss stays a miss, the range says so.
        run["cases"][1]["ms_all"] = [model_ms, 2 * model_ms, 3 * model_ms]
        rows = pe.validate_scaling(run)
        self.assertEqual(rows[1]["measured_range_ms"], [model_ms, 3 * model_ms])
        self.assertIn("(3/4 cases within 20 %; the model inside the case's own iterations in "
                      "4/4)", pe.format_validation(rows))

    def test_old_runs_use_defaults(self):
        rows = pe.validate_scaling(scaling_json(False), alpha_s=300e-6)
        self.assertTrue(all(r["round_us"] == 300 and r["model_source"] == "defaults"
                            for r in rows))


class HostOverheadTest(unittest.TestCase):
    """planner_validation's host term: what a dense gradwire run spends
    outside its wire, averaging and MACs, per element."""

    @staticmethod
    def dense_case(auth_ms):
        return {"system": "gradwire", "codec": "none", "profile": "resnet50", "link": "1gbit",
                "params": 1000000, "iter_ms_median": 1000.0 + auth_ms, "wire_ms_median": 900.0,
                "compress_ms_median": 60.0, "auth_ms_median": auth_ms}

    def test_the_dense_runs_macs_are_not_host_cost(self):
        # The run's wire excludes its MACs and the model's sealed ring
        # charges them: only the 40 ms left over are the host's.
        for auth_ms in (0.0, 80.0, 450.0):
            got = pv.host_overhead_ns({"cases": [self.dense_case(auth_ms)]})
            self.assertAlmostEqual(got[("resnet50", "1gbit")], 40.0, places=9, msg=auth_ms)

    def test_never_negative_and_old_runs_without_macs(self):
        case = self.dense_case(0.0)
        case["iter_ms_median"] = 900.0
        del case["auth_ms_median"]
        self.assertEqual(pv.host_overhead_ns({"cases": [case]})[("resnet50", "1gbit")], 0.0)


class SharedCoreBoundTest(unittest.TestCase):
    """planner_validation with more ranks than cores: the step is the smooth
    maximum of the chain a rank runs uncontended (host, compression alone,
    its largest bucket's share at the run's loopback/alone rate, wire) and
    ranks/cores x one rank's CPU per step. The cases are a run's
    own figures (8M floats in one bucket, 4 emulated hosts on 2 cores, 500
    Mbit/s, docs/results/2026-12-01-planner-links.md)."""

    SPEC = "approx_topk:ratio=0.01,bits=4,bucket=512,seed=0,values=fp32,indices=varint"

    def run_json(self, loopback_cpu_ms, dense_cpu_ms=None):
        common = {"system": "gradwire", "profile": "params=8000000", "link": "500mbit",
                  "link_bps": 5e8, "hosts": 4, "ranks_per_host": 1, "world_size": 4,
                  "params": 8000000, "hierarchical": False, "pipeline_depth": 2}
        dense = dict(common, method="none", codec="none", spec="none", iter_ms_median=820.074,
                     wire_ms_median=799.609, compress_ms_median=8.688, auth_ms_median=10.694,
                     bytes_on_wire_per_rank=48001584, process_cpu_ms_median=dense_cpu_ms)
        approx = dict(common, method="approx_topk:ratio=0.01", codec="approx_topk",
                      spec=self.SPEC, iter_ms_median=36.733, wire_ms_median=29.154,
                      compress_ms_median=8.521, auth_ms_median=0.344, compress_alone_ms=7.425,
                      cpu_loopback_ms=loopback_cpu_ms, bytes_on_wire_per_rank=1321376)
        return {"config": {"machine": {"cores": 2}, "bucket_size_mb": 50.0},
                "latency_probe": {"500mbit": {"alpha_us": 212.0}}, "cases": [dense, approx]}

    def row(self, loopback_cpu_ms, dense_cpu_ms=None):
        return self.row_of(self.run_json(loopback_cpu_ms, dense_cpu_ms))

    @staticmethod
    def row_of(run):
        rows, _ = pv.validate(run, 50e-6)
        return [r for r in rows if r["method"].startswith("approx")][0]

    def test_a_wire_bound_step_is_the_serial_chain(self):
        # One bucket whose transfer is most of the step: 2 x 13.6 ms of CPU
        # is a bound well below encode + wire, so that chain predicts. A
        # bound that also added the bucket's transfer (as if no CPU work ran
        # while it crosses) predicted 52 ms for this 36.7 ms step.
        r = self.row(13.56925)
        self.assertAlmostEqual(r["cpu_bound_ms"], 4 / 2 * 13.56925, places=6)
        self.assertEqual(r["composition"], "serial (shared cores)")
        self.assertGreater(r["chain_ms"], r["cpu_bound_ms"])
        # The chain charges the codec its time alone, not ranks/cores x it.
        self.assertAlmostEqual(r["predicted_compress_ms"], r["chain_ms"] - r["predicted_wire_ms"]
                               - r["host_overhead_ms"], places=6)
        # 33 ms of chain over a 27 ms bound: the ranks queue part of the
        # time, and the step (36.7 ms) is longer than either.
        self.assertGreater(r["predicted_ms"], r["chain_ms"])
        self.assertLess(abs(r["error_pct"]), 5, msg=r)

    def test_the_unhidden_bucket_compresses_at_the_runs_rate(self):
        # With one rank's CPU alone measured, the largest compressed
        # bucket's share of the compression (here the only bucket: all of
        # it) is charged at loopback / alone, the rate the run's ranks show:
        # 13.57 ms on loopback over 9.0 alone adds 0.508 x 7.425 ms.
        base = self.row(13.56925)
        run = self.run_json(13.56925)
        run["cases"][1]["cpu_alone_ms"] = 9.0
        r = self.row_of(run)
        exposed = 1.0 * (13.56925 / 9.0 - 1.0) * 7.425
        self.assertAlmostEqual(r["exposed_ms"], exposed, places=6)
        self.assertAlmostEqual(r["chain_ms"], base["chain_ms"] + exposed, places=6)
        self.assertAlmostEqual(r["predicted_ms"], 1e3 * pv.shared_core_step(
            r["chain_ms"] / 1e3, r["cpu_bound_ms"] / 1e3), places=6)
        self.assertEqual(base["exposed_ms"], 0.0)  # no CPU alone measured: nothing added
        # A loopback rank cheaper than one alone (noise) adds nothing either.
        run["cases"][1]["cpu_alone_ms"] = 20.0
        self.assertEqual(self.row_of(run)["exposed_ms"], 0.0)

    def test_the_largest_bucket_share(self):
        def largest_bucket_share(profile):
            return pv.predict(pv.shapes_for(profile), pv.parse_method(self.SPEC), 4, 1, 5e8,
                              bucket_bytes=50 << 20)["largest_bucket_share"]
        self.assertEqual(largest_bucket_share("params=8000000"), 1.0)
        share = largest_bucket_share("vgg16")
        self.assertGreater(share, 0.7)  # fc6's 102.8M of VGG-16's 138M floats
        self.assertLess(share, 0.8)

    def test_a_cpu_bound_step_is_the_cpu_over_the_cores(self):
        r = self.row(40.0)
        self.assertEqual(r["composition"], "cpu-bound (shared cores)")
        self.assertAlmostEqual(r["cpu_bound_ms"], 80.0, places=6)
        self.assertAlmostEqual(r["predicted_ms"], pv.shared_core_step(r["chain_ms"], 80.0),
                               places=6)
        self.assertGreaterEqual(r["predicted_ms"], 80.0)
        self.assertLess(r["predicted_ms"], 82.0)  # the chain (~30 ms) adds little

    def test_the_step_is_a_smooth_maximum(self):
        q = pv.SHARED_CORE_SMOOTHING
        self.assertAlmostEqual(pv.shared_core_step(0.05, 0.05), 0.05 * 2 ** (1 / q), places=12)
        for chain, bound in ((0.01, 0.05), (0.05, 0.01), (0.03, 0.04), (1.0, 1e-3)):
            step = pv.shared_core_step(chain, bound)
            self.assertGreaterEqual(step, max(chain, bound))
            self.assertLessEqual(step, max(chain, bound) * 2 ** (1 / q) + 1e-15)
            self.assertAlmostEqual(step, pv.shared_core_step(bound, chain), places=15)
        # Far apart, the larger alone: within 0.3 % at a ratio of 4.
        self.assertLess(pv.shared_core_step(1.0, 0.25), 1.003)

    def test_a_step_between_chain_and_bound(self):
        # The Intel VM's grid, ResNet-50 top-k 1 % at 2.5 Gbit/s
        # (docs/results/2026-12-02-intel-readme.md): chain 71 ms, bound
        # 76 ms, measured 76.9. Compression charged at ranks/cores x its time
        # alone (65 ms) made the chain 104 ms, 35 % over the step.
        step = pv.shared_core_step(0.0711, 0.0757)
        self.assertLess(abs(step - 0.0769) / 0.0769, 0.20)

    def test_the_links_bytes_cost_cpu(self):
        # The dense case spent 48.4 ms of process CPU, 19.4 of them averaging
        # and MACs, on 48.0 MB: 0.604 ns a byte moved over this link, which
        # the case's 1.32 MB add to each rank's CPU.
        per_byte = (48.4 - 8.688 - 10.694) * 1e6 / 48001584
        got = pv.link_cpu_ns_per_byte(self.run_json(13.0, dense_cpu_ms=48.4))
        self.assertAlmostEqual(got[("params=8000000", "500mbit")], per_byte, places=9)
        r = self.row(40.0, dense_cpu_ms=48.4)
        self.assertAlmostEqual(r["cpu_bound_ms"], 4 / 2 * (40.0 + per_byte * 1321376 * 1e-6),
                               places=6)
        # Runs that did not record the dense case's CPU add nothing.
        self.assertEqual(pv.link_cpu_ns_per_byte(self.run_json(13.0)), {})

    def test_hierarchical_steps_are_bounded_too(self):
        # 2 emulated hosts x 2 ranks: the intra-node dense phases run over
        # loopback on the same two cores (about 100 ms of CPU per rank for
        # ResNet-50), which the model's free intra-node transfer leaves out;
        # cluster_bench measures the hierarchical exchange's own loopback CPU.
        run = self.run_json(100.0)
        for c in run["cases"]:
            c.update(hosts=2, ranks_per_host=2)
        run["cases"][1]["hierarchical"] = True
        run["cases"][1]["method"] = "approx_topk:ratio=0.01 hier"
        r = self.row_of(run)
        self.assertEqual(r["composition"], "cpu-bound (shared cores)")
        self.assertAlmostEqual(r["cpu_bound_ms"], 200.0, places=6)
        self.assertGreaterEqual(r["predicted_ms"], 200.0)
        self.assertLess(r["predicted_ms"], 201.0)


class OneHostFiguresTest(unittest.TestCase):
    """clusterbench.run.Bench: the planner's one-host inputs are medians over
    processes (compression alone) and over loopback runs (the ranks' CPU),
    not one process's or one run's figure."""

    def bench(self, per_run_cpu):
        from clusterbench import run
        b = run.Bench.__new__(run.Bench)
        b.a = argparse.Namespace(world=4, ranks_per_host=1, exchange_bench="eb", iters=3,
                                 warmup=1, bucket_size_mb=50.0, timeout_ms=1000,
                                 bucket_views=1, event_loop_nice=19, pipeline_depth=0)
        calls = []
        figures = iter(per_run_cpu)

        def run_exchange(name, label, cluster, argv, world, per_host, tick=None):
            calls.append((world, per_host, argv))
            return [{"process_cpu_ms_median": c} for c in next(figures)]
        b.run_exchange = run_exchange
        return run, b, calls

    def test_loopback_cpu_is_the_median_of_runs(self):
        m = {"spec_text": "topk:ratio=0.01", "hierarchical": False}
        runs = [[150.0, 160.0, 150.0, 160.0], [110.0, 120.0, 110.0, 120.0],
                [125.0, 135.0, 125.0, 135.0]]
        run, b, calls = self.bench(runs)
        self.assertEqual(run.LOOPBACK_RUNS, 3)
        self.assertEqual(b.exchange_cpu_loopback("p.txt", m), 130.0)  # means 155, 115, 130
        self.assertEqual(len(calls), 3)
        self.assertTrue(all(c[0] == 4 and c[1] == 4 for c in calls))  # flat: one host
        self.assertTrue(all(f"--iters={run.FIGURE_MIN_ITERS}" in c[2] for c in calls))
        # A rank without a CPU figure: no figure at all.
        _, b, _ = self.bench([[150.0, None, 150.0, 150.0]] * 3)
        self.assertIsNone(b.exchange_cpu_loopback("p.txt", m))


class HostLinkBytesTest(unittest.TestCase):
    """clusterbench.collect: what crosses a host's shaped link with two ranks
    per host (4 ranks, hosts {0, 1} and {2, 3}), one MB per message."""

    @staticmethod
    def rank(sent, received, intra_sent, intra_received):
        return {"bytes_sent_per_iter": sent, "bytes_received_per_iter": received,
                "intra_node_bytes_sent_per_iter": intra_sent,
                "intra_node_bytes_received_per_iter": intra_received}

    def test_every_local_ranks_off_node_bytes(self):
        from clusterbench import collect
        mb = 10**6
        # An allgather: each rank sends its frame to 3 peers, one on its host.
        allgather = [self.rank(3 * mb, 3 * mb, mb, mb) for _ in range(4)]
        self.assertEqual(collect._bytes_off_node(allgather[:2]), 4 * mb)
        self.assertEqual(collect._bytes_off_node(allgather[:1]), 2 * mb)
        # A ring 0 -> 1 -> 2 -> 3 -> 0: one edge leaves each host each way.
        ring = [self.rank(mb, mb, mb, 0), self.rank(mb, mb, 0, mb),
                self.rank(mb, mb, mb, 0), self.rank(mb, mb, 0, mb)]
        self.assertEqual(collect._bytes_off_node(ring[:2]), mb)


class CpuFloorTest(unittest.TestCase):
    """clusterbench.collect: issue 18's floor, max(wire floor, ranks / cores x
    one rank's CPU per step alone), and its target."""

    @staticmethod
    def case(**kw):
        c = {"system": "gradwire", "profile": "resnet50", "link": "1gbit", "link_bps": 1e9,
             "world_size": 4, "method": "topk:ratio=0.01", "codec": "topk", "density": 0.01,
             "hierarchical": False, "iter_ms_median": 90.0, "floor_wire_ms": 39.0,
             "cpu_alone_ms": 30.0, "cpu_loopback_ms": 35.0}
        c.update(kw)
        return c

    def test_the_larger_of_wire_and_shared_cpu(self):
        from clusterbench import collect
        self.assertEqual(collect.cpu_floor(self.case(), 2), (60.0, 70.0))
        self.assertEqual(collect.cpu_floor(self.case(cpu_alone_ms=10.0), 2), (39.0, 70.0))
        self.assertEqual(collect.cpu_floor(self.case(cpu_loopback_ms=None), 2), (60.0, None))
        # Ranks that each have a core, dense cases and runs without the
        # alone figure have no such floor.
        self.assertIsNone(collect.cpu_floor(self.case(), 4))
        self.assertIsNone(collect.cpu_floor(self.case(codec="none"), 2))
        self.assertIsNone(collect.cpu_floor(self.case(cpu_alone_ms=None), 2))
        self.assertIsNone(collect.cpu_floor(self.case(), None))

    def test_target_judged_on_the_alone_floor(self):
        from clusterbench import collect
        for iter_ms, met in ((90.0, True), (91.0, False)):
            run = {"config": {"machine": {"cores": 2}},
                   "cases": [self.case(iter_ms_median=iter_ms)]}
            ts = [t for t in collect.evaluate_targets(run) if "CPU alone" in t["target"]]
            self.assertEqual(len(ts), 1)
            self.assertEqual(ts[0]["met"], met)
            self.assertAlmostEqual(ts[0]["value"], round(iter_ms / 60.0, 2))
            self.assertIn("with the loopback runs' CPU per rank (35.0 ms)", ts[0]["note"])


class CommandLineTest(unittest.TestCase):
    def run_planner(self, *argv):
        return subprocess.run([sys.executable, os.path.join(ARGS.tools_dir, "planner.py"), *argv],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": ARGS.package_dir})

    def test_scale_writes_results(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "scale")
            r = self.run_planner("--scale", "--scales", "64x8", "--links", "25gbit",
                                 "--profiles", "bert_large", "--specs", "topk:ratio=0.01",
                                 "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out + ".json") as f:
                rows = json.load(f)["rows"]
            keys = {row["key"] for row in rows}
            self.assertTrue({"library plan", "hierarchical dense (tuned baseline)",
                             "flat dense ring", "flat sparse allgather",
                             "flat sparse allreduce"} <= keys)
            for row in rows:
                self.assertTrue(math.isfinite(row["ms"]) and row["ms"] > 0, row)
            with open(out + ".md") as f:
                self.assertIn("tools/planner.py --scale", f.read())

    def test_validate_scaling_command(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "scaling.json")
            with open(path, "w") as f:
                json.dump(scaling_json(True), f)
            r = self.run_planner("--validate_scaling", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("4/4 cases within 20 %", r.stdout)

    def test_bad_input_exits_2(self):
        for argv in (["--scale", "--scales", "64y8"], ["--scale", "--scales", "0x8"],
                     ["--scale", "--specs", "topk:ratio=7"], ["--scale", "--links", "fast"],
                     ["--validate_scaling", "/nonexistent/scaling.json"]):
            r = self.run_planner(*argv)
            self.assertEqual(r.returncode, 2, (argv, r.stdout, r.stderr))
            self.assertIn("planner:", r.stderr)
            self.assertNotIn("Traceback", r.stderr)

    def test_hostile_files_and_numbers_exit_2_without_a_traceback(self):
        """Each of these once ended in a traceback (or, 2^30 ranks, never ended)."""
        with tempfile.TemporaryDirectory() as d:
            files = {"empty_object": "{}", "list": "[]", "not_json": "xx", "number": "7"}
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            cases = [["--scale", "--scales", "134217728x8"], ["--scale", "--round_us", "nan"],
                     ["--nodes", "0"], ["--nodes", "1073741824"], ["--gpus_per_node", "0"],
                     ["--alpha_us", "nan"], ["--json_out", "/nonexistent/x.json"],
                     ["--validate", d]]
            for name in files:
                path = os.path.join(d, name)
                cases += [["--validate", path], ["--calibrate", path],
                          ["--validate_scaling", path]]
            for argv in cases:
                r = subprocess.run(
                    [sys.executable, os.path.join(ARGS.tools_dir, "planner.py"), *argv],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                    env={**os.environ, "PYTHONPATH": ARGS.package_dir})
                self.assertEqual(r.returncode, 2, (argv, r.stdout, r.stderr))
                self.assertNotIn("Traceback", r.stderr, argv)

    def test_scaling_bench_refuses_bad_flags_before_building_hosts(self):
        with tempfile.TemporaryDirectory() as d:
            not_dir = os.path.join(d, "file")
            open(not_dir, "w").close()
            for flags in (["--hosts=4,x"], ["--hosts=1"], ["--densities=abc"],
                          ["--densities=2"], ["--spec=topk:ratio={x}"], ["--spec=qsgd:bits=0"],
                          ["--link=bogus"], ["--warmup=2147483647"], ["--case_timeout=nan"],
                          ["--elements=0"], ["--shaper=netem"], ["--out=" + not_dir]):
                argv = ["--out", os.path.join(d, "out")] + flags
                r = subprocess.run(
                    [sys.executable, os.path.join(ARGS.tools_dir, "scaling_bench.py"), *argv],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
                self.assertEqual(r.returncode, 2, (flags, r.stdout, r.stderr))
                self.assertIn("error:", r.stderr, flags)
                self.assertNotIn("Traceback", r.stderr, flags)
            self.assertFalse(os.path.exists(os.path.join(d, "out")))

    def test_buckets_the_library_rings_cost_no_codec_cpu(self):
        # 8-bit QSGD on 8 ranks: the frames' allgather would move the fp32
        # ring's bytes, so the library's model sends those buckets by the
        # ring, uncompressed; sign's frames are a sixteenth of them.
        qsgd8, sign = planner.parse_method("qsgd:bits=8"), planner.parse_method("sign")
        self.assertEqual(planner.library_exchange(qsgd8, 8, 1 << 22), "dense_ring")
        self.assertEqual(planner.library_exchange(sign, 8, 1 << 22), "sparse_allgather")
        shapes = planner.shapes_for("resnet50")
        cpu = lambda m: planner.predict(shapes, m, 8, 1, 1e9, cpu_ns_per_element=10.0)[
            "cpu_compress_s"]
        self.assertEqual(cpu(qsgd8), 0.0)
        self.assertGreater(cpu(sign), 0.0)

    def test_casts_take_the_cast_allreduce_from_three_ranks(self):
        # fp16/bf16: the allgather on 2 ranks, then the 16-bit
        # reduce-scatter + 16-bit allgather at half the ring's bytes.
        fp16, none = planner.parse_method("fp16"), planner.parse_method("none")
        self.assertEqual(planner.library_exchange(fp16, 2, 1 << 22), "sparse_allgather")
        self.assertEqual(planner.library_exchange(fp16, 3, 1 << 22), "cast_allreduce")
        shapes = planner.shapes_for("resnet50")
        for p in (4, 16):
            nic = lambda m: planner.predict(shapes, m, p, 1, 1e9)["nic_bytes_per_iter"]
            self.assertAlmostEqual(nic(fp16) / nic(none), 0.5, delta=0.01)

    def test_agreement_is_one_direct_step(self):
        for p in (2, 16, 17, 512):
            self.assertEqual(planner.agreement_s(p, 1e-4), 1e-4)
        self.assertEqual(planner.agreement_s(1, 1e-4), 0.0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--package_dir", required=True)
    ap.add_argument("--tools_dir", required=True)
    ARGS, rest = ap.parse_known_args()
    sys.path[:0] = [ARGS.package_dir, ARGS.tools_dir]
    import gradwire as gw  # noqa: E402
    import planner  # noqa: E402
    import planner_exchange as pe  # noqa: E402
    import planner_validation as pv  # noqa: E402
    unittest.main(argv=[sys.argv[0]] + rest)
