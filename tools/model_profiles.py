#!/usr/bin/env python3
"""Gradient profiles of real models: the shapes of every parameter tensor.

A data-parallel step exchanges one gradient per parameter tensor, produced
in reverse layer order by backprop. The benchmark and the PyTorch peers read
the same profile so both move exactly the same tensors. Parameter counts
match the reference implementations (torchvision ResNet-50 25,557,032;
VGG-16 138,357,544; BERT-base-uncased 109,482,240; BERT-large-uncased 335,141,888; Transformer-base with a
shared 37,000-token vocabulary 63,084,544 — the paper quotes ~65M).

    model_profiles.py resnet50            # one "d0xd1x..." shape per line
    model_profiles.py --params 1000000    # a synthetic profile of 1M floats
    model_profiles.py --summary           # counts of every profile
"""

import argparse
import sys


def _conv(cin, cout, k):
    return [(cout, cin, k, k)]


def _bn(c):
    return [(c,), (c,)]


def resnet50():
    shapes = _conv(3, 64, 7) + _bn(64)
    cin = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        cout = width * 4
        for b in range(blocks):
            shapes += _conv(cin, width, 1) + _bn(width)
            shapes += _conv(width, width, 3) + _bn(width)
            shapes += _conv(width, cout, 1) + _bn(cout)
            if b == 0:  # projection shortcut
                shapes += _conv(cin, cout, 1) + _bn(cout)
            cin = cout
    shapes += [(1000, 2048), (1000,)]
    return shapes


def vgg16():
    shapes = []
    cin = 3
    for cout in (64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512):
        shapes += [(cout, cin, 3, 3), (cout,)]
        cin = cout
    for fin, fout in ((512 * 7 * 7, 4096), (4096, 4096), (4096, 1000)):
        shapes += [(fout, fin), (fout,)]
    return shapes


def _linear(fin, fout):
    return [(fout, fin), (fout,)]


def _layernorm(d):
    return [(d,), (d,)]


def bert_base(d=768, ff=3072, layers=12):
    vocab, positions, types = 30522, 512, 2
    shapes = [(vocab, d), (positions, d), (types, d)] + _layernorm(d)
    for _ in range(layers):
        shapes += _linear(d, d) * 3 + _linear(d, d) + _layernorm(d)  # q, k, v, out
        shapes += _linear(d, ff) + _linear(ff, d) + _layernorm(d)
    shapes += _linear(d, d)  # pooler
    return shapes


def bert_large():
    return bert_base(d=1024, ff=4096, layers=24)


def transformer_base():
    # "Attention is all you need" base: 6+6 layers, d=512, ff=2048, shared
    # source/target/output embedding of 37,000 word pieces.
    d, ff, vocab = 512, 2048, 37000
    shapes = [(vocab, d)]
    for _ in range(6):  # encoder: self-attention + feed-forward
        shapes += _linear(d, d) * 4 + _layernorm(d) + _linear(d, ff) + _linear(ff, d) + _layernorm(d)
    for _ in range(6):  # decoder: self-attention, cross-attention, feed-forward
        shapes += _linear(d, d) * 8 + _layernorm(d) * 2
        shapes += _linear(d, ff) + _linear(ff, d) + _layernorm(d)
    shapes += _layernorm(d) * 2  # final encoder/decoder norms
    return shapes


def synthetic(params, layers=50, width=1024):
    """`params` floats as `layers` equal weight matrices of `width` columns,
    plus a 1-D tensor for what is left (like a bias).

    Matrices, not flat vectors, so that every method compresses them as it
    would a real layer: gradwire sends 1-D tensors dense, PowerSGD leaves
    them uncompressed (and torch 1.13's PowerSGD hook hangs on a bucket
    with nothing to compress: an allreduce of zero elements).
    """
    if params < 1:
        raise ValueError(f"--params must be >= 1, got {params}")
    rows = params // (layers * width)
    if rows == 0:  # too small for matrices: flat tensors
        layers = max(1, min(layers, params))
        each = params // layers
        return [(each,)] * (layers - 1) + [(params - each * (layers - 1),)]
    shapes = [(rows, width)] * layers
    rest = params - rows * width * layers
    return shapes + ([(rest,)] if rest else [])


PROFILES = {
    "resnet50": resnet50,
    "vgg16": vgg16,
    "bert_base": bert_base,
    "bert_large": bert_large,
    "transformer": transformer_base,
}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def profile(name, params=None):
    """Shapes for `name`, or a synthetic profile when params is given."""
    if params is not None:
        return synthetic(params)
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)} "
                         "or pass --params=N")
    return PROFILES[name]()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", nargs="?", default="resnet50")
    parser.add_argument("--params", type=int)
    parser.add_argument("--summary", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.summary:
            for name in PROFILES:
                shapes = profile(name)
                print(f"{name:12s} {len(shapes):4d} tensors {sum(map(numel, shapes)):>12,d} params")
            return 0
        for shape in profile(args.name, args.params):
            print("x".join(str(d) for d in shape))
    except ValueError as e:
        print(f"model_profiles: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
