#!/usr/bin/env python3
"""gradwire/_regroup.py in one process: DDP's buckets of a restarted job
re-laid into a checkpoint's bucket layouts (ddp_restart_test runs it in real
DDP jobs). Checks the checkpoint buckets are put together in the
checkpoint's order as soon as complete, ascending, the averages go back into
DDP's buffers, each Future completes only when all of its bucket is back, a
bucket that is one checkpoint bucket goes through uncopied (and re-laying
may end only when every bucket is one under its own index), a later
iteration's buckets are placed by their parameters' first places, and a
checkpoint of another model fails every Future (none waits forever).

    regroup_test.py --package_dir lib/python
"""
import sys
import unittest

import spawn_cases  # beside this file


def futures_done(futs):
    return [f.done() for f in futs]


class RegroupTest(unittest.TestCase):
    def setUp(self):
        import torch
        from gradwire import _regroup
        self.torch, self.Regroup = torch, _regroup.Regroup
        # Four parameters; DDP's first iteration: bucket 0 = [p3, p1],
        # bucket 1 = [p0, p2]; the checkpoint: bucket 0 = [p0, p1],
        # bucket 1 = [p2, p3] (each spans both of DDP's).
        self.sizes = [2, 3, 1, 4]
        self.params = [torch.zeros(n) for n in self.sizes]
        self.layouts = {0: ((1, 0), (0, 1)), 1: ((1, 1), (0, 0))}
        self.grads = [torch.arange(n, dtype=torch.float32) + 10 * (k + 1)
                      for k, n in enumerate(self.sizes)]

    def bucket(self, members):
        return self.torch.cat([self.grads[k] for k in members]), [self.params[k] for k in members]

    def test_checkpoint_buckets_in_checkpoint_order_and_back(self):
        torch = self.torch
        r = self.Regroup(self.layouts)
        t0, p0 = self.bucket([3, 1])
        t1, p1 = self.bucket([0, 2])
        f0, f1 = torch.futures.Future(), torch.futures.Future()
        self.assertEqual(r.add(0, t0, p0, f0), [])
        ready = r.add(1, t1, p1, f1)
        self.assertEqual([i for i, _, _ in ready], [0, 1])
        for (i, flat, members), order in zip(ready, ([0, 1], [2, 3])):
            self.assertTrue(torch.equal(flat, torch.cat([self.grads[k] for k in order])))
            self.assertEqual([id(p) for p in members], [id(self.params[k]) for k in order])
        r.returned(1, -ready[1][1])
        self.assertEqual(futures_done([f0, f1]), [False, False])  # both wait on bucket 0
        r.returned(0, -ready[0][1])
        self.assertEqual(futures_done([f0, f1]), [True, True])
        self.assertIs(f0.value(), t0)
        self.assertTrue(torch.equal(t0, -torch.cat([self.grads[3], self.grads[1]])))
        self.assertTrue(torch.equal(t1, -torch.cat([self.grads[0], self.grads[2]])))
        r.finish()

    def test_a_bucket_completes_when_its_last_part_is_back(self):
        torch = self.torch
        # The checkpoint: bucket 0 = [p3], bucket 1 = [p1, p0, p2].
        r = self.Regroup({0: ((0, 0),), 1: ((0, 1), (1, 0), (1, 1))})
        t0, p0 = self.bucket([3, 1])
        t1, p1 = self.bucket([0, 2])
        f0, f1 = torch.futures.Future(), torch.futures.Future()
        ready = r.add(0, t0, p0, f0)
        self.assertEqual([i for i, _, _ in ready], [0])
        r.returned(0, ready[0][1] * 2)
        self.assertFalse(f0.done())
        ready = r.add(1, t1, p1, f1)
        self.assertEqual([i for i, _, _ in ready], [1])
        r.returned(1, ready[0][1] * 2)
        self.assertEqual(futures_done([f0, f1]), [True, True])
        self.assertTrue(torch.equal(t1, 2 * torch.cat([self.grads[0], self.grads[2]])))

    def test_another_models_checkpoint_fails_every_future(self):
        torch = self.torch
        r = self.Regroup(self.layouts)
        t0, p0 = self.bucket([3, 1])
        f0 = torch.futures.Future()
        r.add(0, t0, p0, f0)
        t1, p1 = self.bucket([0, 2, 1])  # three parameters, the checkpoint has two
        with self.assertRaisesRegex(ValueError, "bucket 1 DDP handed over holds 3"):
            r.add(1, t1, p1, torch.futures.Future())
        r.fail(RuntimeError("stop"))
        self.assertTrue(f0.done())
        with self.assertRaisesRegex(RuntimeError, "stop"):
            f0.wait()
        with self.assertRaisesRegex(ValueError, r"checkpoint buckets \[0, 1\] hold parameters"):
            r.finish()

    def test_parameters_not_covering_the_buffer_and_twice_named_places(self):
        torch = self.torch
        r = self.Regroup(self.layouts)
        with self.assertRaisesRegex(ValueError, "do not cover its buffer"):
            r.add(0, torch.zeros(4), [self.params[3], self.params[1]], torch.futures.Future())
        with self.assertRaisesRegex(ValueError, r"name the parameter place \[0, 0\] twice"):
            self.Regroup({0: ((0, 0),), 1: ((0, 0), (0, 1))})

    def test_a_checkpoint_bucket_goes_through_whole(self):
        torch = self.torch
        # DDP's bucket 0 is checkpoint bucket 0, its bucket 1 checkpoint
        # bucket 1: uncopied, and the layouts are DDP's (finish() True).
        layouts = {0: ((0, 0), (0, 1)), 1: ((1, 0), (1, 1))}
        r = self.Regroup(layouts)
        t0, p0 = self.bucket([3, 1])
        t1, p1 = self.bucket([0, 2])
        f0, f1 = torch.futures.Future(), torch.futures.Future()
        (i0, flat0, _), = r.add(0, t0, p0, f0)
        self.assertEqual(i0, 0)
        self.assertIs(flat0, t0)
        flat0.mul_(-1)  # the exchange, in place
        r.returned(0, flat0)
        self.assertIs(f0.wait(), t0)
        self.assertTrue(torch.equal(t0, -torch.cat([self.grads[3], self.grads[1]])))
        (i1, flat1, _), = r.add(1, t1, p1, f1)
        self.assertIs(flat1, t1)
        r.returned(1, flat1)
        self.assertTrue(r.finish())
        # The same buckets handed under each other's index: through whole,
        # but re-laying goes on (finish() False).
        r = self.Regroup({1: layouts[0], 0: layouts[1]})
        self.assertEqual([i for i, _, _ in r.add(0, t0, p0, torch.futures.Future())], [1])
        self.assertEqual([i for i, _, _ in r.add(1, t1, p1, torch.futures.Future())], [0])
        self.assertFalse(r.finish())
        # Re-laid buckets: finish() False.
        r = self.Regroup(self.layouts)
        r.add(0, t0, p0, torch.futures.Future())
        r.add(1, t1, p1, torch.futures.Future())
        self.assertFalse(r.finish())

    def test_later_iterations_place_parameters_by_their_first_places(self):
        torch = self.torch
        # DDP rebuilt other buckets than the checkpoint's: bucket 0 =
        # [p0, p2, p3], bucket 1 = [p1]; each parameter named by where it sat
        # in the first iteration (p3: (0, 0), p1: (0, 1), p0: (1, 0), p2: (1, 1)).
        first = {0: (1, 0), 1: (0, 1), 2: (1, 1), 3: (0, 0)}
        r = self.Regroup(self.layouts)
        t0, p0 = self.bucket([0, 2, 3])
        t1, p1 = self.bucket([1])
        f0, f1 = torch.futures.Future(), torch.futures.Future()
        ready = r.add(0, t0, p0, f0, [first[k] for k in (0, 2, 3)])
        self.assertEqual([i for i, _, _ in ready], [1])  # [p2, p3]
        self.assertTrue(torch.equal(ready[0][1], torch.cat([self.grads[2], self.grads[3]])))
        ready += r.add(1, t1, p1, f1, [first[1]])
        self.assertEqual([i for i, _, _ in ready], [1, 0])  # then [p0, p1]
        for i, flat, _ in ready:
            r.returned(i, flat * 3)
        self.assertEqual(futures_done([f0, f1]), [True, True])
        self.assertTrue(torch.equal(t0, 3 * torch.cat([self.grads[k] for k in (0, 2, 3)])))
        self.assertTrue(torch.equal(t1, 3 * self.grads[1]))
        self.assertFalse(r.finish())
        # A place named twice in one bucket, or a parameter the checkpoint
        # does not place: refused.
        r = self.Regroup(self.layouts)
        with self.assertRaisesRegex(ValueError, "bucket 0 DDP handed over holds 2"):
            r.add(0, *self.bucket([0, 1]), torch.futures.Future(), [(1, 0), (1, 0)])
        with self.assertRaisesRegex(ValueError, "bucket 1 DDP handed over holds 1"):
            r.add(1, *self.bucket([1]), torch.futures.Future(), [None])

    def test_a_failed_exchange_fails_its_holders(self):
        torch = self.torch
        r = self.Regroup({0: ((0, 0), (0, 1)), 1: ((1, 0), (1, 1))})
        t0, p0 = self.bucket([3, 1])
        t1, p1 = self.bucket([0, 2])
        f0, f1 = torch.futures.Future(), torch.futures.Future()
        (_, flat0, _), = r.add(0, t0, p0, f0)
        (_, flat1, _), = r.add(1, t1, p1, f1)
        r.returned(0, flat0, RuntimeError("peer gone"))
        r.returned(1, flat1 * 0)
        with self.assertRaisesRegex(RuntimeError, "peer gone"):
            f0.wait()
        self.assertTrue(torch.equal(t0, torch.cat([self.grads[3], self.grads[1]])))  # untouched
        self.assertTrue(torch.equal(f1.wait(), torch.zeros(3)))


if __name__ == "__main__":
    sys.exit(spawn_cases.unittest_main(needs_torch=True))
