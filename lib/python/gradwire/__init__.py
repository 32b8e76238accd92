"""gradwire: compressed gradient exchange for data-parallel training.

    import gradwire
    comm = gradwire.Communicator("topk:ratio=0.01")   # RANK/WORLD_SIZE/... from the env
    comm.allreduce_mean(array_or_tensor.numpy(), bucket=0, step=1)   # in place, averaged
    state = comm.save_state()                          # error-feedback residuals (bytes)

and, for PyTorch DDP, gradwire.ddp (model.register_comm_hook(state, gradwire.ddp.hook)).
Training data through gradwire's data cache (memory -> disk -> directory or
data server): gradwire.data (DataCache, FashionMnist batches for numpy/torch).

The C++ core is the extension module _gradwire.so (built by Bazel:
`bazel build //lib/python:_gradwire.so`). This package finds it, in order:
$GRADWIRE_EXTENSION (a path to the .so), next to this file, in Bazel
runfiles (lib/python/_gradwire.so), or the newest build under the
workspace's bazel-out/ (any configuration) or bazel-bin/.
"""

import glob
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["Communicator", "ReferenceExchange", "Error", "canonical_spec", "selected_count",
           "uses_error_feedback", "path_for", "bucket_plan", "extension_path"]


def _candidates():
    env = os.environ.get("GRADWIRE_EXTENSION")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "_gradwire.so")
    for root in (os.environ.get("TEST_SRCDIR"), os.environ.get("RUNFILES_DIR")):
        if root:
            yield os.path.join(root, "gradwire", "lib", "python", "_gradwire.so")
    # lib/python/gradwire -> workspace root. bazel-bin follows the last
    # build's configuration (tools/benchmark.sh builds -c opt), which may
    # hold an older extension than another configuration's tree: take the
    # newest build of any configuration.
    workspace = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    built = glob.glob(os.path.join(workspace, "bazel-out", "*", "bin", "lib", "python",
                                   "_gradwire.so"))
    built.append(os.path.join(workspace, "bazel-bin", "lib", "python", "_gradwire.so"))
    yield from sorted((p for p in built if os.path.isfile(p)), key=os.path.getmtime,
                      reverse=True)
    # Inside a Bazel runfiles tree the package itself sits next to the .so.
    yield os.path.join(os.path.dirname(here), "_gradwire.so")


def _load():
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.isfile(path):
            loader = importlib.machinery.ExtensionFileLoader("gradwire._gradwire", path)
            spec = importlib.util.spec_from_file_location("gradwire._gradwire", path,
                                                          loader=loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules["gradwire._gradwire"] = module
            return module, path
    raise ImportError("gradwire: extension _gradwire.so not found (build it with "
                      "`bazel build //lib/python:_gradwire.so` or set $GRADWIRE_EXTENSION); "
                      "tried: " + ", ".join(tried))


_gradwire, extension_path = _load()

Communicator = _gradwire.Communicator
ReferenceExchange = _gradwire.ReferenceExchange
Error = _gradwire.Error
canonical_spec = _gradwire.canonical_spec
selected_count = _gradwire.selected_count
uses_error_feedback = _gradwire.uses_error_feedback
# The library's path rule and bucket fusion (lib/comm/bucket_plan.h): the
# DDP hook and tools/planner.py use these rather than a rule of their own.
path_for = _gradwire.path_for
bucket_plan = _gradwire.bucket_plan
