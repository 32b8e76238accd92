#!/usr/bin/env python3
"""The Python surface of gradwire in one process (issue 15): errors, specs,
tensors in and out, the extension's loading rule, and GradwireState's
settings, pickling and failures on a one-rank torch.distributed group; and
the job secret tools/launch.py makes when none is given.

    binding_test.py --package_dir lib/python --launch tools/launch.py
"""
import argparse
import datetime
import io
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

ARGS = None
SECRET = "binding-test-secret-0123456789"


def assert_refused(test, cases):
    """Each (call, error class, text) of `cases`: call() raises that class,
    its message holding the text."""
    for i, (call, error, want) in enumerate(cases):
        with test.subTest(case=i, want=want):
            with test.assertRaises(error) as cm:
                call()
            test.assertIn(want, str(cm.exception))


def unmapped_address(span=1 << 20):
    """An address 64 bytes below the middle of a gap of at least `span`
    bytes between this process's mappings (/proc/self/maps), high in the
    user range: nothing is mapped within span / 2 of it when read."""
    with open("/proc/self/maps") as f:
        ranges = sorted(tuple(int(x, 16) for x in line.split()[0].split("-")) for line in f)
    for (_, end), (start, _) in reversed(list(zip(ranges, ranges[1:]))):
        if start - end >= span and start <= 1 << 47:
            return end + (start - end) // 2 - 64
    raise AssertionError("no unmapped gap in /proc/self/maps")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ErrorsAndSpecs(unittest.TestCase):
    """Error classes, Python names in messages, settings per method."""

    def setUp(self):
        import gradwire
        self.g = gradwire

    def test_hierarchy(self):
        g = self.g
        self.assertTrue(issubclass(g.InvalidArgumentError, (g.Error, ValueError)))
        self.assertTrue(issubclass(g.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(g.MismatchError, g.InvalidArgumentError))
        self.assertTrue(issubclass(g.UnsupportedError, TypeError))
        self.assertTrue(issubclass(g.NotFoundError, FileNotFoundError))
        self.assertTrue(issubclass(g.CommunicationError, RuntimeError))
        for cls in (g.InvalidArgumentError, g.UnsupportedError, g.NotFoundError,
                    g.CommunicationError):
            self.assertTrue(issubclass(cls, g.Error), cls)
        with self.assertRaises(g.InvalidArgumentError) as cm:
            g.canonical_spec("topk:ratio=2")
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertEqual(type(cm.exception).__module__, "gradwire")

    def test_objects_made_without_init_raise(self):
        """Class.__new__(Class) alone once crashed the process (or read garbage)
        at its first method; now every method raises TypeError."""
        g = self.g
        calls = {g.Communicator: [lambda c: c.rank, lambda c: c.totals(), lambda c: c.close(),
                                  lambda c: c.save_state(), lambda c: c.path_for(10)],
                 g._gradwire.Communicator: [lambda c: c.size, lambda c: c.describe()],
                 g.ReferenceExchange: [lambda r: r.max_encoded_bytes(10)]}
        for cls, fns in calls.items():
            for fn in fns:
                with self.assertRaisesRegex(TypeError, "never initialized"):
                    fn(cls.__new__(cls))

    def test_messages_name_python_arguments(self):
        g = self.g
        cases = [("topk:ratio=2", "ratio must be in (0, 1]"), ("qsgd:bits=9", "bits must be"),
                 ("sign:bucket=0", "bucket must be"), ("topk:ef=maybe", "ef must be one of"),
                 ("bogus", "compression method must be one of"),
                 ("topk:values=fp8", "values must be"), ("topk:indices=x", "indices must be"),
                 ("topk:ratio", "ratio needs a value"),
                 ("topk:ratio=0.1,ratio=0.2", "ratio given twice"),
                 ("qsgd:seed=x", "seed must be")]
        for spec, want in cases:
            with self.subTest(spec=spec):
                with self.assertRaises(g.InvalidArgumentError) as cm:
                    g.canonical_spec(spec)
                self.assertIn(want, str(cm.exception))
                self.assertNotIn("--", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            g.make_spec(method="topk", ratio=2.0)
        self.assertIn("ratio must be in (0, 1]", str(cm.exception))
        self.assertNotIn("--", str(cm.exception))

    def test_sizes_out_of_range_name_themselves(self):
        # The planning helpers' sizes, like the exchange calls' integers: a
        # ValueError or a TypeError naming the argument, not pybind11's
        # "incompatible function arguments".
        g = self.g
        assert_refused(self, [
                (lambda: g.path_for("topk", -5), g.InvalidArgumentError,
                 "elements must be in 0..18446744073709551615, got -5"),
                (lambda: g.path_for("topk", 5.5), g.UnsupportedError,
                 "elements must be an int, got float"),
                (lambda: g.path_for("topk", 5, dense_below_elements=-1), g.InvalidArgumentError,
                 "dense_below_elements must be in"),
                (lambda: g.selected_count("topk:ratio=0.01", -1), g.InvalidArgumentError,
                 "n must be in"),
                (lambda: g.bucket_plan("topk", [(4,)], bucket_bytes=-1), g.InvalidArgumentError,
                 "bucket_bytes must be in"),
                (lambda: g.bucket_plan("topk", [(4,)], dense_below_elements="8"),
                 g.UnsupportedError, "dense_below_elements must be an int, got str")])
        self.assertEqual(g.path_for("topk", 1 << 20), "compressed")

    def test_settings_that_do_not_apply(self):
        g = self.g
        for spec, setting, method in [("sign:ratio=0.01", "ratio", "sign"),
                                      ("topk:ratio=0.01,bits=4", "bits", "topk"),
                                      ("none:ratio=0.5", "ratio", "none"),
                                      ("qsgd:values=fp16", "values", "qsgd"),
                                      ("randomk:ratio=0.1,indices=raw", "indices", "randomk")]:
            with self.subTest(spec=spec):
                with self.assertRaises(g.InvalidArgumentError) as cm:
                    g.canonical_spec(spec)
                self.assertIn(f"setting {setting} does not apply to method {method}",
                              str(cm.exception))
        with self.assertRaisesRegex(ValueError, "sign takes: bucket, ef"):
            g.make_spec(method="sign", ratio=0.01)
        with self.assertRaisesRegex(ValueError, "bits does not apply to method topk"):
            g.make_spec(method="topk", ratio=0.01, bits=4)
        # A canonical spec names every setting by design: accepted as is.
        for spec in ("sign:bucket=64", "none", "qsgd:bits=8", "topk:ratio=0.001,ef=off"):
            canonical = g.canonical_spec(spec)
            self.assertEqual(g.canonical_spec(canonical), canonical)
        self.assertEqual(g.spec_settings("sign"), ["bucket", "ef"])
        self.assertEqual(g.spec_settings("none"), [])
        self.assertEqual(g.path_for("topk", 1 << 20), "compressed")

    def test_typed_settings(self):
        g = self.g
        self.assertEqual(g.make_spec(method="topk", ratio=0.01, error_feedback=True),
                         g.canonical_spec("topk:ratio=0.01,ef=on"))
        self.assertEqual(g.make_spec("qsgd", bits=8, bucket=128),
                         g.canonical_spec("qsgd:bits=8,bucket=128"))
        self.assertEqual(g.make_spec("topk:ratio=0.1", error_feedback=False),
                         g.canonical_spec("topk:ratio=0.1,ef=off"))
        for kwargs in ({"ratio": "0.1"}, {"error_feedback": 1}, {"bits": 4.0}):
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(g.UnsupportedError):
                    g.make_spec(method="qsgd" if "bits" in kwargs else "topk", **kwargs)
        with self.assertRaisesRegex(ValueError, "given twice"):
            g.make_spec("topk:ratio=0.1", ratio=0.2)
        with self.assertRaisesRegex(ValueError, "not both"):
            g.make_spec("topk", method="topk")
        # A typed setting is one value: it cannot carry other settings.
        for kwargs in ({"method": "topk", "values": "fp16,ratio=0.9"},
                       {"method": "randomk", "values": "fp32,seed=7"},
                       {"method": "topk", "indices": "raw:x"},
                       {"method": "topk:ratio=0.5"}):
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(g.InvalidArgumentError):
                    g.make_spec(**kwargs)

class Tensors(unittest.TestCase):
    """Tensors in and out without .numpy(); float16/bfloat16 rounded as torch rounds."""

    def setUp(self):
        import gradwire
        import torch
        self.g, self.torch = gradwire, torch

    def bits(self, t):
        torch = self.torch
        return t.view(torch.int16 if t.element_size() == 2 else torch.int32)

    def test_rounding_equals_torch(self):
        """A one-rank dense reference divides by 1: out is the input rounded
        to out's dtype by the binding, which must be torch's .to(dtype)."""
        torch = self.torch
        gen = torch.Generator().manual_seed(3)
        x = torch.randn(200000, generator=gen) * torch.exp2(
            torch.randint(-40, 40, (200000,), generator=gen).float())
        edges = torch.tensor([65504.0, 65519.99, 65520.0, 65536.0, 1e30, float("inf"),
                              float("nan"), 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 1e-45,
                              3.3895313e38, 3.3895314e38, 3.4e38, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -9])
        x = torch.cat([x, edges, -edges])
        x[x == 0] = 0.0  # 0 + (-0) is +0 in the reference's sum
        ref = self.g.ReferenceExchange("none", 1)
        for dtype in (torch.float16, torch.bfloat16):
            out = torch.empty(x.numel(), dtype=dtype)
            ref.average(0, 0, [x], out, "dense")
            want = x.to(dtype)
            # A NaN must stay a NaN; its bits are no contract (torch's own
            # differ between versions).
            same = (self.bits(out) == self.bits(want)) | (out.isnan() & want.isnan())
            self.assertTrue(bool(same.all()), f"{dtype}: {int((~same).sum())} elements differ, "
                                              f"e.g. {x[~same][:4].tolist()}")

    def test_dtypes_and_layouts(self):
        torch, g = self.torch, self.g
        ref = g.ReferenceExchange("topk:ratio=0.5", 2)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            a = torch.arange(8, dtype=dtype)
            b = torch.ones(8, dtype=dtype)
            out = torch.empty(8, dtype=dtype)
            ref.average(0, 1, [a, b], out, "dense")
            self.assertTrue(torch.equal(out, ((a.float() + b.float()) / 2).to(dtype)), dtype)
        ref.average(1, 1, [torch.ones(8).numpy(), torch.ones(8)], torch.empty(8).numpy(),
                    "compressed")
        bad = [(torch.ones(8, dtype=torch.int32), "float32, float16 or bfloat16"),
               (torch.ones(8, dtype=torch.float64), "float32, float16 or bfloat16"),
               (torch.ones(8, 2)[:, 0], "contiguous"),
               (torch.ones(8, requires_grad=True), "detach"),
               (torch.empty(8, device="meta"), "cannot tell where this Tensor lives"),
               ("eight floats", "must be a tensor or array")]
        for tensor, want in bad:
            with self.subTest(want=want):
                with self.assertRaises(g.UnsupportedError) as cm:
                    ref.average(2, 1, [tensor, torch.ones(8)], torch.empty(8), "dense")
                self.assertIn(want, str(cm.exception))
                self.assertNotIn("At:", str(cm.exception))  # no Python traceback in it
        with self.assertRaises(g.InvalidArgumentError):
            ref.max_encoded_bytes(2**64 - 1)  # the bound once wrapped to 79
        with self.assertRaisesRegex(g.InvalidArgumentError, "cast_allreduce"):
            g.exchange_cost("bogus", 4, 100, "topk")
        with self.assertRaisesRegex(g.UnsupportedError, "writable"):
            ro = torch.ones(8).numpy()
            ro.flags.writeable = False
            ref.average(2, 1, [torch.ones(8), torch.ones(8)], ro, "dense")

    def test_cuda_refused(self):
        torch, g = self.torch, self.g

        class CudaLike:  # what a CUDA tensor tells a DLPack consumer first
            def __dlpack_device__(self):
                return (2, 0)

            def __dlpack__(self, stream=None):
                raise AssertionError("exported although on the GPU")
        tensors = [CudaLike()]
        if torch.cuda.is_available():
            tensors.append(torch.ones(8, device="cuda"))
        ref = g.ReferenceExchange("none", 1)
        for t in tensors:
            with self.assertRaisesRegex(g.UnsupportedError, "CUDA tensors are not supported "
                                                            "until the device path lands"):
                ref.average(0, 0, [t], torch.empty(8), "dense")


class ExtensionPath(unittest.TestCase):
    """A chosen extension path that does not exist is an error; no bazel-out globbing."""

    def run_python(self, env_extra, package_dir, code="import gradwire"):
        env = {k: v for k, v in os.environ.items()
               if k not in ("TEST_SRCDIR", "RUNFILES_DIR", "GRADWIRE_EXTENSION", "PYTHONPATH")}
        env.update(env_extra)
        env["PYTHONPATH"] = package_dir
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, cwd="/")

    def test_missing_chosen_extension_is_an_error(self):
        import gradwire
        r = self.run_python({"GRADWIRE_EXTENSION": "/nonexistent/_gradwire.so"},
                            ARGS.package_dir)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("GRADWIRE_EXTENSION=/nonexistent/_gradwire.so does not exist", r.stderr)
        r = self.run_python({"GRADWIRE_EXTENSION": gradwire.extension_path}, ARGS.package_dir,
                            "import gradwire; print(gradwire.extension_path)")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), gradwire.extension_path)

    def test_an_extension_that_does_not_load_says_why(self):
        """An extension built for another Python fails in the dynamic loader
        ("undefined symbol ..."); the error now names this Python and the
        way to build for it. A file that is no extension at all stands in."""
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "_gradwire.so")
            with open(bad, "wb") as f:
                f.write(b"not an ELF file")
            r = self.run_python({"GRADWIRE_EXTENSION": bad}, ARGS.package_dir)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        for want in (f"{bad} does not load in this Python", sys.executable,
                     "GRADWIRE_PYTHON=", "-m pip install ."):
            self.assertIn(want, r.stderr)

    def test_no_globbing_of_bazel_out(self):
        """A source tree whose only build sits under bazel-out/<config>/ (not
        bazel-bin): the package must not go looking for it."""
        import gradwire
        with tempfile.TemporaryDirectory() as ws:
            pkg = os.path.join(ws, "lib", "python")
            shutil.copytree(os.path.dirname(gradwire.__file__), os.path.join(pkg, "gradwire"),
                            ignore=shutil.ignore_patterns("*.so", "__pycache__"))
            stray = os.path.join(ws, "bazel-out", "k8-opt", "bin", "lib", "python")
            os.makedirs(stray)
            shutil.copy(gradwire.extension_path, stray)
            r = self.run_python({}, pkg)
            self.assertNotEqual(r.returncode, 0, "loaded an extension from bazel-out/")
            self.assertIn("extension _gradwire.so not found", r.stderr)
            self.assertNotIn("last build", r.stderr)  # there is no bazel-bin to blame
            # bazel-bin at another configuration's build, without the .so: said so.
            other = os.path.join(ws, "bazel-out", "k8-fastbuild", "bin")
            os.makedirs(other)
            os.symlink(other, os.path.join(ws, "bazel-bin"))
            r = self.run_python({}, pkg)
            self.assertNotEqual(r.returncode, 0, "loaded an extension from bazel-out/")
            self.assertIn("configuration of the workspace's last build", r.stderr)
            os.remove(os.path.join(ws, "bazel-bin"))
            os.symlink(os.path.join(ws, "bazel-out", "k8-opt", "bin"),
                       os.path.join(ws, "bazel-bin"))
            r = self.run_python({}, pkg, "import gradwire; print(gradwire.extension_path)")
            self.assertEqual(r.returncode, 0, r.stderr)  # bazel-bin is the documented place


class LaunchSecret(unittest.TestCase):
    """tools/launch.py makes a job secret when none is given: a 0600 file,
    the same for every rank, named by $GRADWIRE_JOB_SECRET_FILE only, gone
    after the job; ranks joining from the environment use it."""

    RANK = r"""
import os, stat, sys
sys.path.insert(0, sys.argv[1])
import gradwire, numpy as np
path = os.environ["GRADWIRE_JOB_SECRET_FILE"]
mode = stat.S_IMODE(os.stat(path).st_mode)
assert "GRADWIRE_JOB_SECRET" not in os.environ, "the secret itself is in the environment"
assert mode == 0o600, oct(mode)
assert len(open(path).read().strip()) >= 32
c = gradwire.Communicator("none")   # ranks and store from launch.py's environment
x = np.full(16, c.rank + 1.0, np.float32)
c.allreduce_mean(x, bucket=0, step=1)
assert x[0] == 1.5, x
c.close()
print("SECRET", path, flush=True)
"""

    def test_made_when_none_given(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRADWIRE_JOB_SECRET")}
        env.pop("PYTHONPATH", None)
        r = subprocess.run([sys.executable, ARGS.launch, "--nproc=2", "--timeout=120", "--",
                            sys.executable, "-c", self.RANK, ARGS.package_dir],
                           env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("made one for this job", r.stdout)
        paths = {line.split()[-1] for line in r.stdout.splitlines() if "SECRET /" in line}
        self.assertEqual(len(paths), 1, r.stdout)  # one file for both ranks
        self.assertFalse(os.path.exists(paths.pop()), "the secret outlived the job")

    def test_bad_flags_refused(self):
        """A NaN --timeout once meant no deadline at all; a directory as the
        secret file was reported as missing."""
        for flags, text in [(["--timeout=nan"], "--timeout must be"),
                            (["--timeout=-1"], "--timeout must be"),
                            (["--grace=nan"], "--grace must be"),
                            (["--ranks_per_node=-1"], "--ranks_per_node must be"),
                            (["--nproc=0"], "--nproc must be"),
                            (["--job_secret_file=/"], "is not a regular file")]:
            args = [sys.executable, ARGS.launch] + (flags if "--nproc=0" in flags else
                                                    ["--nproc=1"] + flags) + ["--", "true"]
            r = subprocess.run(args, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0, flags)
            self.assertIn(text, r.stdout + r.stderr, flags)


class OneRankGroup(unittest.TestCase):
    """GradwireState and Communicator on a one-rank torch.distributed group."""

    @classmethod
    def setUpClass(cls):
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        if not dist.is_initialized():
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}",
                                    rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
        os.environ["GRADWIRE_JOB_SECRET"] = SECRET

    def setUp(self):
        import torch
        import torch.distributed as dist
        import gradwire
        import gradwire.ddp
        self.torch, self.dist, self.g = torch, dist, gradwire

    def model(self, state, dtype=None):
        torch = self.torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        ddp.register_comm_hook(state, self.g.ddp.hook)
        return ddp

    def step(self, ddp, opt, i=0):
        torch = self.torch
        x = torch.randn(32, 64, generator=torch.Generator().manual_seed(i))
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()

    def test_missing_secret_says_how_to_make_one(self):
        saved = os.environ.pop("GRADWIRE_JOB_SECRET")
        try:
            with self.assertRaises(self.g.InvalidArgumentError) as cm:
                self.g.Communicator("topk", process_group=self.dist.group.WORLD)
        finally:
            os.environ["GRADWIRE_JOB_SECRET"] = saved
        for want in ("no job secret", "secrets.token_hex", "GRADWIRE_JOB_SECRET_FILE",
                     "tools/launch.py"):
            self.assertIn(want, str(cm.exception))

    def test_tensors_and_store_keys(self):
        torch, g = self.torch, self.g
        store = self.dist.distributed_c10d._get_default_store()
        before = store.num_keys()
        with self.assertRaisesRegex(g.InvalidArgumentError, "dense_below_elements must be in"):
            g.Communicator("topk", process_group=self.dist.group.WORLD, dense_below_elements=-1)
        comm = g.Communicator(method="topk", ratio=0.5, process_group=self.dist.group.WORLD)
        self.assertEqual(store.num_keys(), before, "gradwire left keys in torch's store")
        for step, dtype in enumerate((torch.float32, torch.float16, torch.bfloat16), 1):
            t = torch.arange(1000, dtype=dtype) / 7
            want = t.clone()
            self.assertEqual(comm.allreduce_mean(t, bucket=3, step=step, path="dense"), "dense")
            self.assertTrue(torch.equal(t, want), dtype)  # one rank: its own values
        with self.assertRaisesRegex(g.InvalidArgumentError, "reserved"):
            comm.allreduce_mean(torch.ones(4), bucket=0xFFFFFFFF, step=1)
        # A bucket's steps grow: a repeated one is refused, poisoning nothing.
        with self.assertRaisesRegex(g.InvalidArgumentError, "not after its previous step 3"):
            comm.allreduce_mean(torch.ones(1000), bucket=3, step=3, path="dense")
        # The device path refuses host memory (on this CPU-only machine,
        # everything is), poisoning nothing.
        host = torch.ones(4)
        with self.assertRaisesRegex(g.InvalidArgumentError, "host memory"):
            comm.allreduce_mean_device(host.data_ptr(), 4, bucket=5, step=1, stream=0,
                                       path="compressed")
        with self.assertRaisesRegex(g.InvalidArgumentError, "null"):
            comm.allreduce_mean_device(0, 4, bucket=5, step=1, stream=0)
        # allreduce_mean_ptr checks the address against this process's
        # mappings: a wrong one is an error, not a crash, poisoning nothing.
        import mmap
        import numpy as np
        ro_page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ)  # a read-only mapping
        ro_addr = np.frombuffer(ro_page, dtype=np.float32).__array_interface__["data"][0]
        host = torch.arange(1000, dtype=torch.float32)
        assert_refused(self, [
                (lambda: comm.allreduce_mean_ptr(4096, 1000, bucket=6, step=1, path="dense"),
                 g.InvalidArgumentError, "is not mapped in this process"),
                (lambda: comm.allreduce_mean_ptr(unmapped_address(), 1000, bucket=6, step=1),
                 g.InvalidArgumentError, "is not mapped in this process"),
                (lambda: comm.allreduce_mean_ptr(host.data_ptr(), 2**40, bucket=6, step=1),
                 g.InvalidArgumentError, "allreduce_mean_ptr: data_ptr: byte "),
                (lambda: comm.allreduce_mean_ptr(ro_addr, 1024, bucket=6, step=1),
                 g.InvalidArgumentError, "read-only")])
        want = host.clone()
        self.assertEqual(comm.allreduce_mean_ptr(host.data_ptr(), host.numel(), bucket=6, step=1,
                                                 path="dense"), "dense")
        self.assertTrue(torch.equal(host, want))
        # Integers out of range or not integers at all: a ValueError or a
        # TypeError naming the argument (not pybind11's "incompatible function
        # arguments"), poisoning nothing. numpy's integers are integers.
        import numpy as np
        t = torch.ones(1000)
        u64 = "0..18446744073709551615"
        bad_integers = [
                (dict(bucket=-1, step=4), g.InvalidArgumentError,
                 "bucket must be in 0..4294967295, got -1"),
                (dict(bucket=2**32, step=4), g.InvalidArgumentError, "got 4294967296"),
                (dict(bucket=3, step=-5), g.InvalidArgumentError, f"step must be in {u64}, got -5"),
                (dict(bucket=3, step=2**64), g.InvalidArgumentError, "got 18446744073709551616"),
                (dict(bucket=3, step=10**400), g.InvalidArgumentError,
                 "got 10000000000000000000...00000000"),
                (dict(bucket=3.0, step=4), g.UnsupportedError, "bucket must be an int, got float"),
                (dict(bucket=True, step=4), g.UnsupportedError, "bucket must be an int, got bool"),
                (dict(bucket=3, step=None), g.UnsupportedError,
                 "step must be an int, got NoneType")]
        assert_refused(self, [(lambda kw=kw: comm.allreduce_mean(t, path="dense", **kw), e, w)
                              for kw, e, w in bad_integers])
        assert_refused(self, [
                (lambda: comm.allreduce_mean_ptr(t.data_ptr(), -1, bucket=3, step=4),
                 g.InvalidArgumentError, "numel must be in 0.."),
                (lambda: comm.allreduce_mean_with_dense(t, torch.ones(4), -2, 4),
                 g.InvalidArgumentError, "bucket must be in 0..4294967295, got -2"),
                (lambda: comm.copy_residual("3", t), g.UnsupportedError,
                 "bucket must be an int, got str"),
                (lambda: g.ReferenceExchange("none", 1).average(0, -1, [t], t, "dense"),
                 g.InvalidArgumentError, f"step must be in {u64}, got -1"),
                (lambda: comm.exchange_for(-1), g.InvalidArgumentError,
                 f"elements must be in {u64}, got -1"),
                (lambda: comm.path_for(1.5), g.UnsupportedError,
                 "elements must be an int, got float")])
        self.assertEqual(comm.allreduce_mean(t, bucket=np.uint32(3), step=np.int64(4),
                                             path="dense"), "dense")
        comm.health()
        comm.close()
        comm.close()  # a second close does nothing (it once raised "not closed in order")
        with self.assertRaisesRegex(g.CommunicationError, "communicator was closed"):
            comm.allreduce_mean(t, bucket=3, step=5)

    def test_job_keys_unique(self):
        """Per group, per communicator, and per job (a fresh process counts
        from 1 again: the nonce keeps it apart); keys deleted after joining."""
        from gradwire import _torch_join
        dist = self.dist
        other = dist.new_group([0])
        ids = []
        for group in (dist.group.WORLD, dist.group.WORLD, other):
            args = _torch_join.join_args(group, {})
            ids.append(args["job_id"])
            args["store"].cleanup()
        saved = dict(_torch_join._made)
        _torch_join._made.clear()  # as in the next job's process
        try:
            args = _torch_join.join_args(dist.group.WORLD, {})
            args["store"].cleanup()
            ids.append(args["job_id"])
        finally:
            _torch_join._made.update(saved)
        self.assertEqual(len(set(ids)), len(ids), ids)
        self.assertNotEqual(ids[0].split("/")[1], ids[2].split("/")[1], ids)  # group names

    def test_settings_refused(self):
        g = self.g
        with self.assertRaisesRegex(g.InvalidArgumentError, "ratio does not apply to method sign"):
            g.ddp.GradwireState("sign:ratio=0.01")
        with self.assertRaisesRegex(ValueError, "warmup_iters must be >= 1"):
            g.ddp.GradwireState(method="topk", warmup_iters=0)

    def test_momentum_correction_takes_over_sgd(self):
        torch, g = self.torch, self.g
        params = [torch.nn.Parameter(torch.zeros(3))]
        opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=5e-4)
        off = g.ddp.GradwireState(method="topk", ratio=0.01, optimizer=opt)  # the default
        self.assertEqual((off.momentum, off.weight_decay), (0.0, 0.0))
        self.assertEqual(opt.param_groups[0]["momentum"], 0.9)
        off.close()
        state = g.ddp.GradwireState(method="topk", ratio=0.01, optimizer=opt,
                                    momentum_correction=True)
        self.assertEqual((state.momentum, state.weight_decay), (0.9, 5e-4))
        group = opt.param_groups[0]
        self.assertEqual((group["momentum"], group["weight_decay"]), (0.0, 0.0))
        self.assertEqual(group["gradwire_momentum"], 0.9)
        state.close()
        # A state built again on the same (taken over) optimizer takes the same.
        again = g.ddp.GradwireState(method="topk", ratio=0.01, optimizer=opt,
                                    momentum_correction=True)
        self.assertEqual(again.momentum, 0.9)
        again.close()
        for spec, optimizer, want in (
                ("qsgd:bits=4", torch.optim.SGD(params, lr=0.1, momentum=0.9),
                 "not a selection codec"),
                ("topk", torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True),
                 "Nesterov"),
                ("topk", torch.optim.Adam(params), "not torch.optim.SGD"),
                ("topk", torch.optim.SGD(params, lr=0.1), "no momentum")):
            with self.subTest(want=want):
                before = dict(optimizer.param_groups[0])
                with self.assertRaisesRegex(g.InvalidArgumentError, want):
                    g.ddp.GradwireState(spec, optimizer=optimizer, momentum_correction=True)
                self.assertEqual(optimizer.param_groups[0], before)  # left alone

    def trained(self, steps=3):
        """A top-k 5 % state after `steps` steps: (state, ddp, optimizer)."""
        state = self.g.ddp.GradwireState(method="topk", ratio=0.05, warmup_iters=1)
        ddp = self.model(state)
        opt = self.torch.optim.SGD(ddp.parameters(), lr=0.01)
        for i in range(steps):
            self.step(ddp, opt, i)
        return state, ddp, opt

    def test_pickle_and_state_dict(self):
        torch = self.torch
        state, _, _ = self.trained()
        blob = pickle.dumps(state)
        self.assertNotIn(SECRET.encode(), blob)
        saved = state.state_dict()
        state.close()
        restored = pickle.loads(blob)
        self.assertIsNone(restored.comm)  # joins at first use
        sd = restored.state_dict()  # collective: the one rank joins here
        self.assertEqual(sd["residuals"], saved["residuals"])
        self.assertEqual(sd["iteration"], 3)
        buf = io.BytesIO()
        torch.save(restored, buf)  # the whole state, as torch.save does for PowerSGDState
        restored.close()

    def test_bad_checkpoints_refused_whole(self):
        """load_state_dict checks every field before restoring any: bad ones
        were taken (iteration=-5, warmup_iters=0 broke the next step) or
        failed half-way, after the residuals were already replaced."""
        g = self.g
        state, ddp, opt = self.trained()
        good = state.state_dict()
        cases = [None, [1], {}, dict(good, iteration=-5), dict(good, iteration="x"),
                 dict(good, iteration=True), dict(good, warmup_iters=0),
                 dict(good, warmup_iters=None), dict(good, residuals=None),
                 dict(good, velocity={"a": 1}), dict(good, velocity={0: [1.0]}),
                 dict(good, auto_residuals=b"xx"), dict(good, auto_spec=7),
                 dict(good, loss_scale=0.0), dict(good, loss_scale=float("nan")),
                 dict(good, loss_scale="1"), dict(good, loss_scale=True),
                 dict(good, layouts=[0]), dict(good, layouts={0: [[1]]}),
                 dict(good, layouts={"a": [[0, 1]]}), dict(good, layouts={0: [[0, -1]]}),
                 dict(good, layouts={0: [[0, 0], [0, 1]], 1: [[0, 1]]})]
        missing = dict(good)
        del missing["residuals"]
        cases.append(missing)
        for bad in cases:
            with self.subTest(bad=str(bad)[:80]):
                with self.assertRaises(g.InvalidArgumentError):
                    state.load_state_dict(bad)
                self.assertEqual(state.state_dict()["residuals"], good["residuals"])
                self.assertEqual(state.iteration, 3)
                self.assertEqual(state.warmup_iters, 1)
        self.step(ddp, opt, 3)  # still trains
        state.close()

    def test_failure_reaches_backward_with_its_name(self):
        torch, g = self.torch, self.g
        state = g.ddp.GradwireState("topk:ratio=0.05", warmup_iters=1, overlap=True)
        ddp = self.model(state)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        self.step(ddp, opt)
        state.comm.close()  # every later exchange fails
        with self.assertRaises(RuntimeError) as cm:
            self.step(ddp, opt, 1)
        self.assertIsInstance(state.failure, g.CommunicationError)
        self.assertIn("CommunicationError", str(cm.exception))
        self.assertIn(str(state.failure).splitlines()[0], str(cm.exception))
        self.assertNotIn("Unable to cast", str(cm.exception))
        # close() after a failure lets go without a second exception (in a
        # `finally:` it once buried the real one under "not closed in order").
        state.close()
        self.assertIsNone(state.comm)
        with self.assertRaisesRegex(RuntimeError, "closed"):
            self.step(ddp, opt, 2)
        for bad, want in ((torch.empty(4, device="meta"), "META buckets are not supported"),
                          (torch.empty(4, dtype=torch.float64), "float16")):
            with self.assertRaisesRegex(g.UnsupportedError, want):
                state._check_bucket(bad)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--package_dir", required=True)
    parser.add_argument("--launch", required=True, help="tools/launch.py")
    ARGS, rest = parser.parse_known_args()
    ARGS.package_dir = os.path.abspath(ARGS.package_dir)
    sys.path.insert(0, ARGS.package_dir)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIPPED: torch is not importable; install python3-torch")
        return 0
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    sys.stdout.flush()
    # Debian torch's process-group teardown can abort: exit hard.
    os._exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    sys.exit(main())
