"""Rendezvous through torch.distributed: a process group's ranks and store.

gradwire.Communicator(process_group=pg) (and so gradwire.ddp.GradwireState)
meets its peers through the c10d Store the group was built on, so a job
that has called init_process_group needs nothing else: no RANK or
WORLD_SIZE, no store directory, no job id. What this module hands to the
extension (lib/python/python_store.h, join.h):

- store: TorchStore, gradwire's store protocol over the c10d Store; it
  remembers the keys it set, and the Communicator deletes them once every
  rank has joined, so the store holds nothing of gradwire's afterwards
  (and nothing ever goes to disk).
- job_id "torch/<group name>/<n>/<nonce>": the group's name (unique per
  group in the job), n counts the communicators this process made for the
  group (every rank makes them in the same order: construction is
  collective), and a random nonce from the group's rank 0 keeps jobs that
  reuse a store apart. Consecutive jobs, several communicators in one job
  and torchrun's run id "none" never share keys or MAC job ids.
- rank, world_size: the process's in the group.
- node_id, local_world_size (the hierarchical exchange, and whether the
  job spans hosts): ranks on one node are those with the same torchrun
  GROUP_RANK where it is set, else the same hostname; exchanged through the
  store (one key per rank).
- iface: the caller's iface=, else torch's GLOO_SOCKET_IFNAME (its first
  name), else the extension picks: loopback on one host, the hostname's
  address across hosts.
"""

import datetime
import os
import secrets
import socket
import threading
import time

_lock = threading.Lock()
_made = {}  # group name -> communicators this process made for it


class TorchStore:
    """set/get/wait (python_store.h) over a c10d Store; deletes what it set on cleanup()."""

    def __init__(self, store):
        self._store = store
        self._keys = []

    def set(self, key, value):
        self._store.set(key, value)
        self._keys.append(key)

    def get(self, key):
        return self._store.get(key)

    def wait(self, keys, timeout_s):
        self._store.wait(list(keys), datetime.timedelta(seconds=timeout_s))

    def cleanup(self):
        """Deletes every key this rank set (best effort: a store without
        delete_key, an MPI group's, keeps them)."""
        for key in self._keys:
            try:
                self._store.delete_key(key)
            except (RuntimeError, AttributeError, NotImplementedError):
                pass
        self._keys.clear()


def _group_store(dist, pg):
    """(c10d store, group name) of process group `pg`."""
    c10d = dist.distributed_c10d
    world = getattr(c10d, "_world", None)
    get_store = getattr(c10d, "_get_process_group_store", None)  # newer torch
    if get_store is not None:
        store = get_store(pg)
    else:
        pg_map = getattr(c10d, "_pg_map", None)
        if pg_map is None and world is not None:
            pg_map = world.pg_map
        store = pg_map[pg][1] if pg_map is not None and pg in pg_map else None
    names = getattr(c10d, "_pg_names", None)
    if names is None and world is not None:
        names = world.pg_names
    name = names.get(pg) if names is not None else None
    if store is None or name is None:
        raise RuntimeError("gradwire: this process group has no c10d store gradwire can use "
                           "(MPI?); leave process_group unset and describe the job in the "
                           "environment instead")
    return store, name


def join_args(process_group, options):
    """The Communicator's rendezvous arguments for `process_group` (the
    default group for torch.distributed.group.WORLD). Collective over the
    group. `options` are the Communicator's other keyword arguments."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("gradwire: torch.distributed is not initialized: call "
                           "torch.distributed.init_process_group first")
    pg = process_group
    if pg is dist.group.WORLD or pg is None:
        pg = dist.distributed_c10d._get_default_group()
    rank, size = dist.get_rank(pg), dist.get_world_size(pg)
    if rank < 0:
        raise ValueError("gradwire: this process is not a member of process_group")
    c10d_store, name = _group_store(dist, pg)
    with _lock:
        n = _made[name] = _made.get(name, 0) + 1
    store = TorchStore(c10d_store)
    base = f"gradwire/{name}/{n}"
    timeout_s = options.get("timeout_s") or 30.0
    group_rank = os.environ.get("GROUP_RANK")
    node = f"node {group_rank}" if group_rank is not None else f"host {socket.gethostname()}"
    waiting_for = 0  # the rank whose key is awaited, for the error
    try:
        if rank == 0:
            store.set(f"{base}/nonce", secrets.token_hex(8))
        deadline = time.monotonic() + timeout_s
        store.wait([f"{base}/nonce"], timeout_s)
        nonce = store.get(f"{base}/nonce").decode()
        store.set(f"{base}/node/{rank}", node)
        # One key at a time under one deadline, so that a timeout names the
        # rank that did not come.
        for waiting_for in range(size):
            store.wait([f"{base}/node/{waiting_for}"],
                       max(0.001, deadline - time.monotonic()))
        nodes = [store.get(f"{base}/node/{r}").decode() for r in range(size)]
    except (RuntimeError, OSError) as e:  # torch's store: timeouts, a peer or the store gone
        import gradwire
        error = gradwire._error(
            gradwire.CommunicationError,
            f"gradwire: joining process group {name!r} through its store failed, waiting for "
            f"rank {waiting_for} (did every rank construct the same communicator within "
            f"timeout_s={timeout_s:g}?): {type(e).__name__}: {e}")
        error.code = "UNAVAILABLE"
        raise error from e
    order = list(dict.fromkeys(nodes))  # node names in order of their first rank
    iface = options.pop("iface", "") or ""
    if not iface and not options.get("bind_address"):
        iface = os.environ.get("GLOO_SOCKET_IFNAME", "").split(",")[0]
    return {"store": store, "rank": rank, "world_size": size,
            "job_id": f"torch/{name}/{n}/{nonce}", "node_id": order.index(node),
            "local_world_size": nodes.count(node), "iface": iface}
