"""Training data through gradwire's data cache (lib/cache), for numpy/torch.

    from gradwire import data
    data.pack_fashion_mnist("/usr/share/datasets/fashion-mnist", "/tmp/fmnist")  # once
    train = data.FashionMnist.open("train", path="/tmp/fmnist",
                                   memory_budget_bytes=64 << 20,
                                   disk_dir="/tmp/rank0-cache", disk_budget_bytes=64 << 20)
    train.cache.begin_epoch(1)
    for images, labels in train.batches(order, batch=32):   # order: sample indices
        ...                                                  # uint8 [n,28,28], uint8 [n]
    print(train.cache.stats())

Layout: one record per example, key "<split>/<index>", 785 bytes = the label
byte then the 28x28 pixels: what tools/pack_dataset, tools/data_server and
the C++ tools already use. Per-example records keep the training order free
(any permutation, exactly the one the trainer used before the cache) and
let the cache's budgets, fill policy and statistics count examples. The
per-iteration cost stays small because a whole batch crosses the binding
in one call (DataCache.read / Prefetcher.next_batch: one GIL release, one
bytes object, one numpy view), never one Python call per example. Chunked
records (many examples per key) would save little more and force either
chunk-level shuffling (another data order) or reading whole chunks for one
example each.
"""

import os
import zlib

from . import _load_data

# The data cache's own extension (_gradwire_data.so, which links gRPC),
# loaded here rather than by `import gradwire`.
_gradwire_data = _load_data()

DataCache = _gradwire_data.DataCache
Prefetcher = _gradwire_data.Prefetcher
epoch_order = _gradwire_data.epoch_order
pack_dataset = _gradwire_data.pack_dataset

__all__ = ["DataCache", "Prefetcher", "epoch_order", "epoch_indices", "pack_dataset", "read_idx",
           "fashion_mnist_idx", "pack_fashion_mnist", "FashionMnist", "normalize",
           "FASHION_MNIST_MEAN", "FASHION_MNIST_STD", "summarize_stats"]

IMAGE_SHAPE = (28, 28)
RECORD_BYTES = 1 + IMAGE_SHAPE[0] * IMAGE_SHAPE[1]
FASHION_MNIST_MEAN, FASHION_MNIST_STD = 0.2860, 0.3530


def epoch_indices(cache, split, seed, epoch, rank, world, sticky=True):
    """This rank's sample indices of `split` in an epoch (a list of ints), in reading order.

    sticky (default): each rank keeps one shard of the split for the whole run, reshuffled
    within each epoch, so a rank's own tiers that hold its shard serve every epoch after
    the first. sticky=False: DistributedSampler's order, the split reshuffled across the
    ranks each epoch; per-rank tiers then serve only 1 - (1 - 1/world)^(epoch-1) of an
    epoch (lib/cache/epoch_order.h)."""
    prefix = split + "/"
    keys = epoch_order(cache.keys(split), seed, epoch, rank, world, sticky)
    return [int(k[len(prefix):]) for k in keys]


# The most an IDX file may inflate to, as tools/idx_file.h's kMaxIdxBytes.
MAX_IDX_BYTES = 4 << 30


def _gunzip(raw, path):
    """The gzip members of `raw` inflated one after another, refused as
    tools/pack_dataset refuses them (ValueError): bytes after the last member
    that do not begin another (Python's gzip module skips zeros there), a
    truncated member, more than MAX_IDX_BYTES."""
    out, at, total = [], 0, 0
    while at < len(raw):
        if raw[at:at + 2] != b"\x1f\x8b":
            raise ValueError(f"{path}: {len(raw) - at} bytes after the last gzip member")
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            part = member.decompress(raw[at:], MAX_IDX_BYTES + 1 - total)
        except zlib.error as e:
            raise ValueError(f"{path}: corrupt gzip data ({e})") from None
        total += len(part)
        if total > MAX_IDX_BYTES:
            raise ValueError(f"{path}: inflates to more than {MAX_IDX_BYTES} bytes, the most read")
        if not member.eof:
            raise ValueError(f"{path}: truncated gzip member")
        out.append(part)
        at = len(raw) - len(member.unused_data)
    return b"".join(out)


def read_idx(path):
    """An IDX file (plain or .gz) as a numpy uint8 array of its dims;
    ValueError for a damaged one (as tools/pack_dataset's DataLoss)."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw, path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise ValueError(f"{path}: truncated in its header ({len(raw)} bytes for {ndim} dims)")
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {body.size} bytes of data for dims {dims}")
    return body.reshape(dims)


def fashion_mnist_idx(idx_dir, split):
    """(images uint8 [n,28,28], labels uint8 [n]) of split 'train'/'test' from IDX files."""
    prefix = "train" if split == "train" else "t10k"

    def find(kind, dims):
        for name in (f"{prefix}-{kind}-idx{dims}-ubyte.gz", f"{prefix}-{kind}-idx{dims}-ubyte"):
            path = os.path.join(idx_dir, name)
            if os.path.exists(path):
                return path
        raise FileNotFoundError(f"Fashion-MNIST {split} {kind} not in {idx_dir} "
                                "(apt-get install dataset-fashion-mnist)")
    return read_idx(find("images", 3)), read_idx(find("labels", 1))


def pack_fashion_mnist(idx_dir, out_dir, samples_per_shard=5000):
    """Packs the IDX files into out_dir (shards + MANIFEST), as tools/pack_dataset does."""
    import numpy as np
    os.makedirs(out_dir, exist_ok=True)
    splits = []
    for split in ("train", "test"):
        images, labels = fashion_mnist_idx(idx_dir, split)
        if images.shape[1:] != IMAGE_SHAPE or len(images) != len(labels):
            raise ValueError(f"{idx_dir}: {split} images {images.shape} / labels {labels.shape}")
        rows = np.concatenate([labels[:, None], images.reshape(len(images), -1)], axis=1)
        splits.append((split, [r.tobytes() for r in rows]))
    return pack_dataset(out_dir, "fashion-mnist", splits, samples_per_shard)


def normalize(images):
    """uint8 images -> float32 [n,1,28,28], standardized exactly as convergence.py always has."""
    import numpy as np
    return ((images.astype(np.float32) / 255 - FASHION_MNIST_MEAN) / FASHION_MNIST_STD)[:, None]


def _decode(buf, n):
    import numpy as np
    if len(buf) != n * RECORD_BYTES:
        raise ValueError(f"expected {n} Fashion-MNIST records of {RECORD_BYTES} bytes, "
                         f"got {len(buf)} bytes")
    rows = np.frombuffer(buf, dtype=np.uint8).reshape(n, RECORD_BYTES)
    return rows[:, 1:].reshape(n, *IMAGE_SHAPE), rows[:, 0]


class FashionMnist:
    """One split of a packed Fashion-MNIST read through a DataCache."""

    def __init__(self, cache, split):
        self.cache = cache
        self.split = split
        self.size = cache.num_samples(split)
        if self.size == 0:
            raise ValueError(f"no '{split}' samples in dataset {cache.dataset_id} ({cache.source})")

    @classmethod
    def open(cls, split, path=None, remote=None, token=None, **cache_options):
        """A DataCache over a packed directory (path=) or a data server (remote='host:port',
        token=), with cache_options as DataCache takes them (memory_budget_bytes, disk_dir...)."""
        if remote is not None:
            cache = DataCache(remote=remote, token=token, **cache_options)
        else:
            cache = DataCache(path=path, **cache_options)
        return cls(cache, split)

    def __len__(self):
        return self.size

    def epoch_indices(self, seed, epoch, rank, world, sticky=True):
        """This rank's sample indices in an epoch: epoch_indices() of this split."""
        return epoch_indices(self.cache, self.split, seed, epoch, rank, world, sticky)

    def read(self, indices):
        """(images uint8 [n,28,28], labels uint8 [n]) of these sample indices, one batch."""
        indices = [int(i) for i in indices]
        return _decode(self.cache.read(self.split, indices), len(indices))

    def batches(self, order, batch, depth=0, threads=2):
        """Yields (images, labels) of order[0:batch], order[batch:2 batch], ... (full batches
        only), prefetched in that order ahead of the reader."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an int >= 1, got {batch!r}")
        order = [int(i) for i in order]
        usable = len(order) // batch * batch
        keys = [f"{self.split}/{i}" for i in order[:usable]]
        prefetcher = self.cache.prefetch(keys, depth=depth, threads=threads)
        try:
            for _ in range(usable // batch):
                yield _decode(prefetcher.next_batch(batch), batch)
        finally:
            prefetcher.shutdown()


def summarize_stats(stats):
    """Totals over a DataCache's per-epoch stats (a list of dicts), plus the per-epoch rows
    in short form: what a run report needs to tell whether the cache did its work."""
    total = {"reads": 0, "memory_hits": 0, "disk_hits": 0, "source_reads": 0,
             "source_bytes": 0, "source_errors": 0, "corrupt": 0, "stall_s": 0.0}
    epochs = []
    for e in stats:
        row = {"epoch": e["epoch"], "reads": e["reads"], "memory_hits": e["memory"]["hits"],
               "disk_hits": e["disk"]["hits"], "source_reads": e["source_reads"],
               "source_bytes": e["source_bytes"], "source_errors": e["source_errors"],
               "corrupt": e["memory"]["corrupt"] + e["disk"]["corrupt"],
               "stall_s": e["stall_s"]}
        epochs.append(row)
        for k in total:
            total[k] += row[k]
    total["epochs"] = epochs
    return total
