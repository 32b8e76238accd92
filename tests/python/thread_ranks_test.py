#!/usr/bin/env python3
"""Communicators whose ranks are threads of one process, on an in-memory
store: the rendezvous' settings check, the non-finite count and the
one-caller guard. No torch (numpy only).

    thread_ranks_test.py --package_dir lib/python
"""
import os
import sys
import threading
import time
import unittest

import spawn_cases  # beside this file

SECRET = "0123456789abcdef0123456789abcdef"


class ThreadStore:
    """gradwire's store protocol (set/get/wait) in memory, for ranks that
    are threads of this process."""

    def __init__(self):
        self.d, self.cv = {}, threading.Condition()

    def set(self, k, v):
        with self.cv:
            self.d[k] = bytes(v)
            self.cv.notify_all()

    def get(self, k):
        with self.cv:
            return self.d[k]

    def wait(self, keys, timeout_s):
        end = time.time() + timeout_s
        with self.cv:
            while not all(k in self.d for k in keys):
                if not self.cv.wait(max(0.0, end - time.time())):
                    raise TimeoutError(keys)


def on_threads(fn, ranks):
    """fn(rank) on one thread per rank; their results (or exceptions)."""
    out = [None] * ranks

    def run(r):
        try:
            out[r] = fn(r)
        except Exception as e:  # noqa: BLE001 - handed to the test
            out[r] = e
    threads = [threading.Thread(target=run, args=(r,)) for r in range(ranks)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return out


class ThreadRanks(unittest.TestCase):
    def setUp(self):
        import gradwire
        self.g = gradwire

    def test_settings_given_twice_still_differ(self):
        """settings= repeating a library key ('spec=same;') once hid a spec
        mismatch behind its last value; every value now counts."""
        g, store = self.g, ThreadStore()
        specs = ["topk:ratio=0.01", "topk:ratio=0.05"]
        out = on_threads(lambda r: g.Communicator(specs[r], SECRET, store=store, rank=r,
                                                  world_size=2, job_id="twice", timeout_s=20,
                                                  settings="spec=same;"), 2)
        for r, result in enumerate(out):
            self.assertIsInstance(result, g.MismatchError, (r, result))
            self.assertIn("ratio=0.05", str(result))

    def test_nonfinite_elements_are_counted(self):
        """The codecs send NaN/Inf as 0 (codec.h): the stats now say how many,
        so that a diverging run can be seen from Python."""
        import numpy as np
        g, store = self.g, ThreadStore()
        comms = on_threads(lambda r: g.Communicator("qsgd:bits=4", SECRET, store=store, rank=r,
                                                    world_size=2, job_id="nonfinite",
                                                    timeout_s=20), 2)
        for c in comms:
            self.assertNotIsInstance(c, Exception, c)
        x = [np.ones(50000, np.float32), np.ones(50000, np.float32)]
        x[0][[3, 40, 4000]] = [np.nan, np.inf, -np.inf]
        errors = on_threads(lambda r: comms[r].allreduce_mean(x[r], bucket=1, step=1,
                                                              path="compressed"), 2)
        self.assertEqual(errors, ["compressed", "compressed"])
        self.assertEqual(comms[0].last_call()["nonfinite"], 3)
        self.assertEqual(comms[1].last_call()["nonfinite"], 0)
        self.assertEqual(comms[0].totals()["nonfinite"], 3)
        on_threads(lambda r: comms[r].close(), 2)

    def test_buffers_that_share_memory_are_refused(self):
        """allreduce_mean_with_dense(x, x) (or two views of one array) once
        ran and left whichever write came last."""
        import numpy as np
        g = self.g
        comm = g.Communicator("topk:ratio=0.1", SECRET, store=ThreadStore(), rank=0,
                              world_size=1, job_id="aliases")
        x = np.ones(100, np.float32)
        for a, b in ((x, x), (x[:60], x[50:]), (x[10:20], x)):
            with self.assertRaisesRegex(g.InvalidArgumentError, "share memory"):
                comm.allreduce_mean_with_dense(a, b, bucket=1, step=1)
        np.testing.assert_array_equal(x, np.ones(100, np.float32))  # untouched
        comm.allreduce_mean_with_dense(x[:50], x[50:], bucket=1, step=1)  # adjacent: fine
        comm.close()

    def test_exchange_estimates_say_how_the_spec_chooses(self):
        """exchange_estimates' 'rule': QSGD, sign and the casts choose by
        bytes alone. The DDP hook's report once gave every choice as 'the
        cost model's smallest predicted time', also where the estimates it
        printed beside it had the ring faster than the allgather it took."""
        g = self.g
        want = {"topk:ratio=0.01": "smallest predicted time", "qsgd:bits=4": "bytes alone",
                "sign": "bytes alone", "fp16": "bytes alone", "none": "dense ring"}
        for i, (spec, words) in enumerate(want.items()):
            comm = g.Communicator(spec, SECRET, store=ThreadStore(), rank=0, world_size=1,
                                  job_id=f"rule{i}")
            why = comm.exchange_estimates(1 << 20)
            self.assertIn(words, why["rule"], (spec, why))
            comm.close()

    def test_exchange_model_is_given_or_measured(self):
        """exchange_model= reaches the cost model: a Python job on 1 Gbit/s
        links could only get the 10 Gbit/s defaults, under which top-k 30 %
        on two ranks takes the dense ring where the allgather sends less.
        Given figures: each the slowest rank's; 'measure': measured and
        agreed; ranks that differ on measuring fail together."""
        g = self.g
        spec, n = "topk:ratio=0.3", 1 << 20
        defaults = g.EXCHANGE_MODEL_DEFAULTS
        self.assertEqual(g.choose_exchange(2, n, spec), "dense_ring")
        slow = dict(defaults, bytes_per_second=1.25e8)
        self.assertEqual(g.choose_exchange(2, n, spec, **slow), "sparse_allgather")

        def make(models, job, **kw):
            store = ThreadStore()
            return on_threads(lambda r: g.Communicator(
                spec, SECRET, store=store, rank=r, world_size=2, job_id=job, timeout_s=20,
                exchange_model=models[r], **kw), 2)
        # Rank 1 gives the faster link and a slower round: each figure the slowest's.
        comms = make([{"bytes_per_second": 1.25e8},
                      {"bytes_per_second": 1.25e9, "seconds_per_round": 1e-3}], "given")
        for c in comms:
            self.assertNotIsInstance(c, Exception, c)
            self.assertEqual(c.exchange_model, dict(slow, seconds_per_round=1e-3))
            self.assertEqual(c.exchange_for(n), g.choose_exchange(2, n, spec,
                                                                  **c.exchange_model))
        self.assertEqual(comms[0].exchange_for(n), "sparse_allgather")
        on_threads(lambda r: comms[r].close(), 2)

        comms = make(["measure", "measure"], "measured")
        for c in comms:
            self.assertNotIsInstance(c, Exception, c)
        self.assertEqual(comms[0].exchange_model, comms[1].exchange_model)
        for key, value in comms[0].exchange_model.items():
            self.assertLess(value, float("inf"), key)
            # A time may be 0 (a byte's CPU on a busy machine measured as
            # nothing); rates and cores may not.
            if key.startswith("seconds_per_"):
                self.assertGreaterEqual(value, 0, key)
            else:
                self.assertGreater(value, 0, key)
        self.assertNotEqual(comms[0].exchange_model["bytes_per_second"],
                            defaults["bytes_per_second"])
        # Two ranks of one process share its CPUs (a cgroup quota may give less).
        self.assertLessEqual(comms[0].exchange_model["cores_per_rank"],
                             len(os.sched_getaffinity(0)) / 2)
        on_threads(lambda r: comms[r].close(), 2)

        for r, result in enumerate(make(["measure", None], "half")):
            self.assertIsInstance(result, g.MismatchError, (r, result))
            self.assertIn("measure_exchange_model", str(result))

    def test_a_bad_exchange_model_names_itself(self):
        """A bad exchange_model= fails before anyone is joined (also in the
        argument check a process group's Communicator runs first)."""
        import numpy as np
        g = self.g
        bad = [({"bytes_per_second": 0}, g.InvalidArgumentError, "bytes_per_second must be a pos"),
               ({"bytes_per_second": float("nan")}, g.InvalidArgumentError, "positive finite"),
               ({"seconds_per_round": -1e-6}, g.InvalidArgumentError, "seconds_per_round must"),
               ({"seconds_per_message": float("inf")}, g.InvalidArgumentError, "finite"),
               ({"cores_per_rank": 0}, g.InvalidArgumentError, "cores_per_rank must be a pos"),
               ({"reduced_entries_per_second": -1}, g.InvalidArgumentError,
                "reduced_entries_per_second must be a pos"),
               ({"link": 1e9}, g.InvalidArgumentError, "unknown key 'link'"),
               ({"bytes_per_second": True}, g.UnsupportedError, "must be a number"),
               ({"bytes_per_second": "1e9"}, g.UnsupportedError, "must be a number"),
               ({"bytes_per_second": None}, g.UnsupportedError, "must be a number"),
               ({1: 1e9}, g.UnsupportedError, "keys must be str"),
               ("fast", g.InvalidArgumentError, "'measure'"),
               ("fast", g.InvalidArgumentError, "is not name=value"),
               ("link=1e9", g.InvalidArgumentError, "unknown name \"link\""),
               ("bytes_per_second=0", g.InvalidArgumentError, "positive finite"),
               ("bytes_per_second=1e8,bytes_per_second=1e9", g.InvalidArgumentError, "twice"),
               ([1e9], g.UnsupportedError, "None, 'measure', a dict")]
        for i, (model, error, words) in enumerate(bad):
            with self.assertRaisesRegex(error, "exchange_model") as caught:
                g.Communicator("topk:ratio=0.01", SECRET, store=ThreadStore(), rank=0,
                               world_size=1, job_id=f"bad{i}", exchange_model=model)
            self.assertIn(words, str(caught.exception), model)
            with self.assertRaises(error):
                g._gradwire._check_communicator_arguments("topk:ratio=0.01", SECRET,
                                                          exchange_model=model)
        # numpy's scalars and ints are numbers; the rest of the model defaults.
        comm = g.Communicator("topk:ratio=0.01", SECRET, store=ThreadStore(), rank=0,
                              world_size=1, job_id="numpy",
                              exchange_model={"bytes_per_second": np.float32(2.5e8),
                                              "seconds_per_round": 0})
        self.assertEqual(comm.exchange_model, dict(g.EXCHANGE_MODEL_DEFAULTS,
                                                   bytes_per_second=2.5e8, seconds_per_round=0))
        comm.close()
        # The tools' text form gives the same model.
        comm = g.Communicator("topk:ratio=0.01", SECRET, store=ThreadStore(), rank=0,
                              world_size=1, job_id="text",
                              exchange_model="bytes_per_second=2.5e8,seconds_per_round=0")
        self.assertEqual(comm.exchange_model, dict(g.EXCHANGE_MODEL_DEFAULTS,
                                                   bytes_per_second=2.5e8, seconds_per_round=0))
        comm.close()

    def test_a_state_of_another_spec_is_an_argument_error(self):
        """restore_state with another spec's (or rank's) blob is the wrong
        argument: InvalidArgumentError, residuals unchanged. It was a
        CommunicationError, the class of dead peers."""
        import numpy as np
        g = self.g
        comms = [g.Communicator(spec, SECRET, store=ThreadStore(), rank=0, world_size=1,
                                job_id=f"restore{i}")
                 for i, spec in enumerate(("topk:ratio=0.1", "topk:ratio=0.2"))]
        for comm in comms:
            comm.allreduce_mean(np.arange(100, dtype=np.float32), bucket=1, step=1)
        before = comms[1].save_state()
        with self.assertRaisesRegex(g.InvalidArgumentError, "compression") as caught:
            comms[1].restore_state(comms[0].save_state())
        self.assertNotIsInstance(caught.exception, g.CommunicationError)
        self.assertEqual(comms[1].save_state(), before)
        for comm in comms:
            comm.close()
        with self.assertRaises(g.CommunicationError):  # closed: still the communicator's state
            comms[1].restore_state(before)

    def test_a_second_thread_is_refused_not_raced(self):
        """One call at a time: a call from another thread while one runs
        raises at once (two threads once raced into a garbled exchange)."""
        import numpy as np
        g = self.g
        comm = g.Communicator("topk:ratio=0.01", SECRET, store=ThreadStore(), rank=0,
                              world_size=1, job_id="threads")
        big = np.ones(4 << 20, np.float32)
        stop = threading.Event()

        def busy():
            step = 1
            while not stop.is_set():
                comm.allreduce_mean(big, bucket=1, step=step, path="compressed")
                step += 1
        worker = threading.Thread(target=busy)
        worker.start()
        refused = None
        deadline = time.time() + 20
        while refused is None and time.time() < deadline:
            try:
                comm.save_state()
            except g.InvalidArgumentError as e:
                refused = str(e)
        stop.set()
        worker.join()
        self.assertIsNotNone(refused, "a second thread was never refused")
        self.assertIn("not thread-safe", refused)
        comm.close()


if __name__ == "__main__":
    sys.exit(spawn_cases.unittest_main())
