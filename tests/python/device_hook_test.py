"""The DDP hook's CUDA plumbing (gradwire.ddp, the device path), on a
CPU-only torch: which buckets go to the device path, with which pointer,
stream, bucket ids and paths, and that CPU buckets are unchanged. CPU
tensors stand in for CUDA ones where only data_ptr / numel are used."""

import argparse
import sys
import types
import unittest


class FakeComm:
    def __init__(self):
        self.calls = []

    def allreduce_mean_device(self, data_ptr, numel, bucket, step, stream, path):
        self.calls.append((data_ptr, numel, bucket, step, stream, path))


class DeviceHook(unittest.TestCase):
    def setUp(self):
        import torch
        import gradwire
        import gradwire.ddp
        from gradwire._exchange import _Segment
        self.torch, self.g, self.Segment = torch, gradwire, _Segment
        # Only the attributes these methods read (the constructor connects).
        self.state = gradwire.ddp.GradwireState.__new__(gradwire.ddp.GradwireState)
        self.state.momentum, self.state.auto, self.state.warmup_iters = 0.0, False, 1

    def cuda_like(self, dtype=None):
        return types.SimpleNamespace(device=types.SimpleNamespace(type="cuda"),
                                     dtype=dtype or self.torch.float32)

    def test_cuda_buckets_are_accepted_others_refused(self):
        self.state._check_bucket(self.cuda_like())  # no error: the device path
        self.state._check_bucket(self.torch.ones(4))  # CPU unchanged
        xla = types.SimpleNamespace(device=types.SimpleNamespace(type="xla"),
                                    dtype=self.torch.float32)
        with self.assertRaisesRegex(self.g.UnsupportedError, "XLA buckets are not supported"):
            self.state._check_bucket(xla)
        self.state.momentum = 0.9
        with self.assertRaisesRegex(self.g.UnsupportedError, "momentum correction"):
            self.state._check_bucket(self.cuda_like())

    def test_device_exchange_passes_pointer_stream_and_paths(self):
        torch, S = self.torch, self.Segment
        comm = FakeComm()
        self.state.comm = comm
        t = torch.arange(10, dtype=torch.float32)
        self.state._exchange_device(3, 5, t, [S(0, 10, False)], stream=1234)
        self.assertEqual(comm.calls, [(t.data_ptr(), 10, 7, 5, 1234, "compressed")])
        comm.calls.clear()
        self.state._exchange_device(3, 0, t, [S(0, 10, False)], stream=0)  # warm-up
        self.assertEqual(comm.calls, [(t.data_ptr(), 10, 6, 0, 0, "dense")])
        comm.calls.clear()
        # Mixed: each part exchanged on its own path, values scattered back.
        before = t.clone()
        self.state._exchange_device(3, 5, t, [S(0, 4, True), S(4, 10, False)], stream=9)
        self.assertEqual([(c[1], c[2], c[4], c[5]) for c in comm.calls],
                         [(4, 6, 9, "dense"), (6, 7, 9, "compressed")])
        self.assertTrue(torch.equal(t, before))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--package_dir", required=True)
    args, rest = parser.parse_known_args()
    sys.path.insert(0, args.package_dir)
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
