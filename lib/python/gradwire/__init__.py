"""gradwire: compressed gradient exchange for data-parallel training.

    import gradwire
    comm = gradwire.Communicator("topk:ratio=0.01")   # RANK/WORLD_SIZE/... from the env
    comm.allreduce_mean(array_or_tensor.numpy(), bucket=0, step=1)   # in place, averaged
    state = comm.save_state()                          # error-feedback residuals (bytes)

and, for PyTorch DDP, gradwire.ddp (model.register_comm_hook(state, gradwire.ddp.hook)).
Training data through gradwire's data cache (memory -> disk -> directory or
data server): gradwire.data (DataCache, FashionMnist batches for numpy/torch).

The C++ core is the extension module _gradwire.so (built by Bazel:
`bazel build //lib/python:_gradwire.so`); gradwire.data loads a second one,
_gradwire_data.so (`bazel build //lib/python:_gradwire_data.so`), when it is
imported, so `import gradwire, gradwire.ddp` never loads the data cache's
gRPC. This package finds _gradwire.so, in order: $GRADWIRE_EXTENSION (a
path to the .so), next to this file, in Bazel runfiles
(lib/python/_gradwire.so), or the newest build under the workspace's
bazel-out/ (any configuration) or bazel-bin/; _gradwire_data.so at
$GRADWIRE_DATA_EXTENSION, next to the _gradwire.so it loaded, then in the
same places.
"""

import glob
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["Communicator", "ReferenceExchange", "Error", "canonical_spec", "selected_count",
           "uses_error_feedback", "path_for", "bucket_plan", "extension_path"]


def _candidates(filename, env_var, first_dirs=()):
    env = os.environ.get(env_var)
    if env:
        yield env
    for d in first_dirs:
        yield os.path.join(d, filename)
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, filename)
    for root in (os.environ.get("TEST_SRCDIR"), os.environ.get("RUNFILES_DIR")):
        if root:
            yield os.path.join(root, "gradwire", "lib", "python", filename)
    # lib/python/gradwire -> workspace root. bazel-bin follows the last
    # build's configuration (tools/benchmark.sh builds -c opt), which may
    # hold an older extension than another configuration's tree: take the
    # newest build of any configuration.
    workspace = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    built = glob.glob(os.path.join(workspace, "bazel-out", "*", "bin", "lib", "python",
                                   filename))
    built.append(os.path.join(workspace, "bazel-bin", "lib", "python", filename))
    yield from sorted((p for p in built if os.path.isfile(p)), key=os.path.getmtime,
                      reverse=True)
    # Inside a Bazel runfiles tree the package itself sits next to the .so.
    yield os.path.join(os.path.dirname(here), filename)


def _load_extension(name, env_var, first_dirs=()):
    """Loads extension `name` ("_gradwire", "_gradwire_data") as gradwire.<name>;
    returns (module, path)."""
    filename = name + ".so"
    tried = []
    for path in _candidates(filename, env_var, first_dirs):
        tried.append(path)
        if os.path.isfile(path):
            full = "gradwire." + name
            loader = importlib.machinery.ExtensionFileLoader(full, path)
            spec = importlib.util.spec_from_file_location(full, path, loader=loader)
            module = importlib.util.module_from_spec(spec)
            # Registered before it runs: _gradwire_data imports gradwire._gradwire.
            sys.modules[full] = module
            try:
                loader.exec_module(module)
            except BaseException:
                del sys.modules[full]
                raise
            return module, path
    raise ImportError(f"gradwire: extension {filename} not found (build it with "
                      f"`bazel build //lib/python:{filename}` or set ${env_var}); "
                      "tried: " + ", ".join(tried))


def _load():
    return _load_extension("_gradwire", "GRADWIRE_EXTENSION")


def _load_data():
    """The data-cache extension (gRPC inside), for gradwire.data: preferably
    the build next to the core extension already loaded."""
    return _load_extension("_gradwire_data", "GRADWIRE_DATA_EXTENSION",
                           first_dirs=[os.path.dirname(extension_path)])[0]


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

# The library's exchange cost model (lib/comm/exchange_cost_model.h): what
# the Communicator predicts and picks per bucket; tools/planner.py uses it.
exchange_cost = _gradwire.exchange_cost
choose_exchange = _gradwire.choose_exchange
EXCHANGE_MODEL_DEFAULTS = _gradwire.EXCHANGE_MODEL_DEFAULTS
__all__ += ["exchange_cost", "choose_exchange", "EXCHANGE_MODEL_DEFAULTS"]
