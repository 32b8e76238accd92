"""gradwire: compressed gradient exchange for data-parallel training.

    import torch, torch.distributed as dist, gradwire
    dist.init_process_group("gloo", ...)               # as usual
    comm = gradwire.Communicator(method="topk", ratio=0.01, process_group=dist.group.WORLD)
    comm.allreduce_mean(tensor, bucket=0, step=1)      # in place, averaged over ranks
    state = comm.save_state()                          # error-feedback residuals (bytes)

and, for PyTorch DDP, gradwire.ddp (model.register_comm_hook(state, gradwire.ddp.hook)).
Training data through gradwire's data cache (memory -> disk -> directory or
data server): gradwire.data (DataCache, FashionMnist batches for numpy/torch).

Errors are gradwire.Error subclasses that are also the Python exception
they stand for: InvalidArgumentError (ValueError; MismatchError when ranks
disagree), UnsupportedError (TypeError), NotFoundError (FileNotFoundError),
CommunicationError (RuntimeError): see docs/python.md.

The C++ core is the extension module _gradwire.so; gradwire.data loads a
second one, _gradwire_data.so, when it is imported, so `import gradwire,
gradwire.ddp` never loads the data cache's gRPC. `pip install .` at the
repository root builds both (with Bazel) into the installed package. This
package loads _gradwire.so from $GRADWIRE_EXTENSION when set (and only
from there: a path that does not exist is an error), else from next to
this file (an installed wheel), from Bazel runfiles, or from the
workspace's bazel-bin/ (lib/python on PYTHONPATH in a source tree);
_gradwire_data.so from $GRADWIRE_DATA_EXTENSION likewise, else next to the
_gradwire.so loaded, then the same places.
"""

import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["Communicator", "ReferenceExchange", "Error", "InvalidArgumentError",
           "MismatchError", "UnsupportedError", "NotFoundError", "CommunicationError",
           "canonical_spec", "make_spec", "spec_settings", "selected_count",
           "uses_error_feedback", "path_for", "bucket_plan", "extension_path"]


def _candidates(filename, first_dirs=()):
    for d in first_dirs:
        yield os.path.join(d, filename)
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, filename)
    for root in (os.environ.get("TEST_SRCDIR"), os.environ.get("RUNFILES_DIR")):
        if root:
            yield os.path.join(root, "gradwire", "lib", "python", filename)
    # Inside a Bazel runfiles tree the package itself sits next to the .so.
    yield os.path.join(os.path.dirname(here), filename)
    # A source tree: lib/python/gradwire -> the workspace root, whose
    # bazel-bin is the configuration of its last build.
    lib_python = os.path.dirname(here)
    if (os.path.basename(lib_python) == "python"
            and os.path.basename(os.path.dirname(lib_python)) == "lib"):
        workspace = os.path.dirname(os.path.dirname(lib_python))
        yield os.path.join(workspace, "bazel-bin", "lib", "python", filename)


def _load_failure(filename, path, error):
    """Why an extension that exists did not load, and what to do: one built
    for another Python fails in the dynamic loader ("undefined symbol") or
    in pybind11's version check, neither naming the fix."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    return (f"gradwire: {path} does not load in this Python ({here}, {sys.executable}): "
            f"{error}. The extension is built for one Python version (/usr/bin/python3 unless "
            f"$GRADWIRE_PYTHON said otherwise): run that Python, or build for this one with "
            f"`{sys.executable} -m pip install .` at the repository root or "
            f"`GRADWIRE_PYTHON={sys.executable} bazel build //lib/python:{filename}`")


def _load_extension(name, env_var, first_dirs=()):
    """Loads extension `name` ("_gradwire", "_gradwire_data") as gradwire.<name>;
    returns (module, path)."""
    filename = name + ".so"
    chosen = os.environ.get(env_var)
    if chosen:
        if not os.path.isfile(chosen):
            raise ImportError(f"gradwire: ${env_var}={chosen} does not exist (or is not a "
                              "file); unset it to use the installed or built extension")
        paths = [chosen]
    else:
        paths = list(_candidates(filename, first_dirs))
    for path in paths:
        if os.path.isfile(path):
            full = "gradwire." + name
            loader = importlib.machinery.ExtensionFileLoader(full, path)
            spec = importlib.util.spec_from_file_location(full, path, loader=loader)
            try:
                module = importlib.util.module_from_spec(spec)  # dlopen
                # Registered before it runs: _gradwire_data imports gradwire._gradwire.
                sys.modules[full] = module
                loader.exec_module(module)
            except BaseException as e:
                sys.modules.pop(full, None)
                if isinstance(e, ImportError):
                    raise ImportError(_load_failure(filename, path, e)) from e
                raise
            return module, path
    # A source tree's bazel-bin (<ws>/bazel-bin/lib/python/<filename>) follows
    # its last build: after one in another configuration (tools/demo.sh
    # builds -c opt) it lacks the .so.
    bins = {os.path.dirname(os.path.dirname(os.path.dirname(p))) for p in paths}
    stale = any(os.path.basename(d) == "bazel-bin" and os.path.isdir(d) for d in bins)
    hint = (" (bazel-bin is the configuration of the workspace's last build, e.g. -c opt: "
            "build the extension again with the same flags)" if stale else "")
    raise ImportError(f"gradwire: extension {filename} not found: install the package "
                      "(`pip install .` at the repository root) or build it "
                      f"(`bazel build //lib/python:{filename}`){hint}, or set ${env_var}; "
                      "tried: " + ", ".join(paths))


def _load():
    return _load_extension("_gradwire", "GRADWIRE_EXTENSION")


def _load_data():
    """The data-cache extension (gRPC inside), for gradwire.data: preferably
    the build next to the core extension already loaded."""
    return _load_extension("_gradwire_data", "GRADWIRE_DATA_EXTENSION",
                           first_dirs=[os.path.dirname(extension_path)])[0]


_gradwire, extension_path = _load()

ReferenceExchange = _gradwire.ReferenceExchange
Error = _gradwire.Error
InvalidArgumentError = _gradwire.InvalidArgumentError
MismatchError = _gradwire.MismatchError
UnsupportedError = _gradwire.UnsupportedError
NotFoundError = _gradwire.NotFoundError
CommunicationError = _gradwire.CommunicationError
canonical_spec = _gradwire.canonical_spec
spec_settings = _gradwire.spec_settings
selected_count = _gradwire.selected_count
uses_error_feedback = _gradwire.uses_error_feedback
# The library's path rule and bucket fusion (lib/comm/bucket_plan.h): the
# DDP hook and tools/planner.py use these rather than a rule of their own.
path_for = _gradwire.path_for
bucket_plan = _gradwire.bucket_plan


def _error(cls, message):
    """An instance of one of the classes above, raised from Python code."""
    e = cls(message)
    e.code = "INVALID_ARGUMENT"
    return e


# Keyword arguments -> spec keys; how each value is written.
_SETTINGS = {"ratio": "ratio", "bits": "bits", "bucket": "bucket", "error_feedback": "ef",
             "seed": "seed", "values": "values", "indices": "indices"}


def _setting_text(name, value):
    if name == "error_feedback":
        if not isinstance(value, bool):
            raise _error(UnsupportedError, f"error_feedback must be True or False, got "
                                           f"{value!r}")
        return "on" if value else "off"
    if name == "ratio":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _error(UnsupportedError, f"ratio must be a number, got {value!r}")
        return repr(float(value))
    if name in ("bits", "bucket", "seed"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _error(UnsupportedError, f"{name} must be an int, got {value!r}")
        return str(value)
    if not isinstance(value, str):
        raise _error(UnsupportedError, f"{name} must be a str, got {value!r}")
    # One value, not more spec text: values="fp16,ratio=0.9" once set a ratio.
    if any(c in value for c in ",:=;"):
        raise _error(InvalidArgumentError, f"{name} must be one value (no ',', ':', '=' or "
                                           f"';'), got {value!r}")
    return value


def make_spec(spec=None, *, method=None, ratio=None, bits=None, bucket=None,
              error_feedback=None, seed=None, values=None, indices=None):
    """The spec string for a spec and/or typed settings, checked and canonical.

        make_spec(method="topk", ratio=0.01, error_feedback=True)
        make_spec("qsgd", bits=8)              # settings added to a spec string
        make_spec("sign:bucket=1024")

    Settings a method does not use are refused (spec_settings(method) lists
    the ones it does), as is a setting given twice. Returns the canonical
    spec (canonical_spec)."""
    if spec is not None and method is not None:
        raise _error(InvalidArgumentError, "pass a spec string or method=, not both")
    text = spec if spec is not None else method
    if text is None:
        raise _error(InvalidArgumentError, "no compression method: pass method= (e.g. 'topk', "
                                           "'qsgd', 'none') or a spec string")
    if not isinstance(text, str):
        raise _error(UnsupportedError, f"{'spec' if spec is not None else 'method'} must be a "
                                       f"str, got {text!r}")
    if method is not None and any(c in method for c in ",:=;"):
        raise _error(InvalidArgumentError, f"method must be a method name such as 'topk' (a "
                                           f"spec string goes in spec=), got {method!r}")
    given = {"ratio": ratio, "bits": bits, "bucket": bucket, "error_feedback": error_feedback,
             "seed": seed, "values": values, "indices": indices}
    parts = [f"{_SETTINGS[n]}={_setting_text(n, v)}" for n, v in given.items() if v is not None]
    if parts:
        text = text + ("," if ":" in text else ":") + ",".join(parts)
    return canonical_spec(text)


class Communicator(_gradwire.Communicator):
    """Averages tensors across the ranks of a job; see docs/python.md.

        Communicator(method="topk", ratio=0.01, process_group=dist.group.WORLD)
        Communicator("qsgd:bits=4,bucket=512")      # ranks from the environment

    spec / method + settings: as make_spec.
    process_group: a torch.distributed process group: ranks, world size and
        rendezvous come from it (its store; nothing else to configure), and
        the job key is unique per group and per communicator. None: the
        environment describes the job (RANK, WORLD_SIZE, GRADWIRE_STORE_DIR
        or GRADWIRE_REDIS, ...: torchrun, mpirun, tools/launch.py).
    secret / secret_file: the job secret (every rank the same, >= 16 bytes);
        default $GRADWIRE_JOB_SECRET, then $GRADWIRE_JOB_SECRET_FILE.
    Constructing is collective: every rank checks together that all hold
    the same secret and settings, and a mismatch raises MismatchError on
    every rank, naming the ranks.
    exchange_model: what the cost model predicts with when it picks each
        buffer's exchange: None (EXCHANGE_MODEL_DEFAULTS: a 10 Gbit/s link),
        a dict of some of those keys (e.g. {"bytes_per_second": 1.25e8} on
        1 Gbit/s links; the rest keep their defaults), the same as a str
        ("bytes_per_second=1.25e8", the C++ tools' --exchange_model form)
        or "measure" (the link, a round, the codec, the CPU of a byte and
        the cores each rank gets where ranks share a machine, measured
        while constructing). The ranks agree on each figure's slowest
        (the CPU of a message and of a byte: their mean); self.exchange_model says
        what they agreed on, and can be passed to the next Communicator.
    Other keyword arguments: hierarchical, dense_below_elements,
    dense_one_dimensional, timeout_s, dense_algorithm, exchange, job_suffix,
    emulate_nodes, event_loop_nice, iface, bind_address, settings (more
    text the ranks must agree on).
    """

    def __init__(self, spec=None, secret=None, *, process_group=None, secret_file=None,
                 method=None, ratio=None, bits=None, bucket=None, error_feedback=None,
                 seed=None, values=None, indices=None, **options):
        if spec is None and method is None:
            spec = "none"
        text = make_spec(spec, method=method, ratio=ratio, bits=bits, bucket=bucket,
                         error_feedback=error_feedback, seed=seed, values=values,
                         indices=indices)
        self.process_group = process_group
        if process_group is None:
            super().__init__(text, secret, secret_file=secret_file or "", **options)
            return
        # Arguments first, joining nobody: a bad one fails here on its rank,
        # before any key is set in the group's store that a peer waits on.
        _gradwire._check_communicator_arguments(text, secret, secret_file=secret_file or "",
                                                **options)
        from gradwire import _torch_join
        joined = _torch_join.join_args(process_group, options)
        super().__init__(text, secret, secret_file=secret_file or "", **joined, **options)
        # Only once this rank has joined: every peer has read the keys it set
        # (the rendezvous ends with the settings check on every rank). After a
        # failure they stay (under this communicator's own key prefix): a
        # peer may still be reading them, and deleting them under it left it
        # blocked in the store's get.
        joined["store"].cleanup()

# The library's exchange cost model (lib/comm/exchange_cost_model.h): what
# the Communicator predicts and picks per bucket; tools/planner.py uses it.
exchange_cost = _gradwire.exchange_cost
choose_exchange = _gradwire.choose_exchange
dense_two_level = _gradwire.dense_two_level
dense_rides_allgather = _gradwire.dense_rides_allgather
EXCHANGE_MODEL_DEFAULTS = _gradwire.EXCHANGE_MODEL_DEFAULTS
__all__ += ["exchange_cost", "choose_exchange", "dense_two_level", "dense_rides_allgather",
            "EXCHANGE_MODEL_DEFAULTS"]
