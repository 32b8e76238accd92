"""The layering rule, checked on every #include in the tree.

Dependencies point one way (see //:BUILD.bazel): base/ and kernels/ use
nothing of ours but themselves; transport/ uses base/; lib/codec uses
kernels/ and base/; lib/comm adds lib/codec and transport/; lib/cache uses
base/; lib/python may use any library layer. Bazel visibility states the same
for targets; this test states it for the headers a source file names, which
visibility alone cannot see (a header reached through another target).

Run by Bazel (the source root is found through this file's runfile link) or
by hand: python3 tests/layering/layering_test.py [--root DIR]
"""
import argparse
import os
import re
import sys
import unittest

# layer (a path prefix) -> the layers its sources may include.
ALLOWED = {
    "base/": ["base/"],
    "kernels/": ["kernels/"],
    # cpu/ and cuda/ mirror each other and share only what sits beside them.
    "kernels/cpu/": ["kernels/cpu/", "kernels/types.h", "kernels/validate.h",
                     "kernels/element_math.h", "kernels/sgd_math.h"],
    # cuda/ also implements the device abstraction beside dispatch (device.h).
    "kernels/cuda/": ["kernels/cuda/", "kernels/types.h", "kernels/validate.h",
                      "kernels/element_math.h", "kernels/sgd_math.h", "kernels/device.h"],
    "transport/": ["transport/", "base/"],
    "lib/codec/": ["lib/codec/", "kernels/", "base/"],
    "lib/comm/": ["lib/comm/", "lib/codec/", "transport/", "kernels/", "base/"],
    "lib/cache/": ["lib/cache/", "base/"],
    "lib/python/": ["lib/", "transport/", "kernels/", "base/"],
}
SOURCE_EXTENSIONS = (".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"gradwire/([^"]+)"', re.MULTILINE)


def layer_of(path):
    """The longest layer prefix of a repository-relative path, or None."""
    best = None
    for layer in ALLOWED:
        if path.startswith(layer) and (best is None or len(layer) > len(best)):
            best = layer
    return best


def violations(root):
    """Every include that breaks the rule, as 'file:line: message'."""
    found = []
    for layer in ALLOWED:
        top = os.path.join(root, layer)
        for dirpath, _, names in os.walk(top):
            for name in sorted(names):
                if not name.endswith(SOURCE_EXTENSIONS):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                if layer_of(rel) != layer:
                    continue  # a sub-layer's file, checked under its own rule
                with open(full, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    target = m.group(1)
                    if target == "gradwire.h" or any(
                            target.startswith(p) for p in ALLOWED[layer]):
                        continue
                    line = text.count("\n", 0, m.start()) + 1
                    found.append(f"{rel}:{line}: {layer} may not include "
                                 f"gradwire/{target} (allowed: "
                                 f"{', '.join(ALLOWED[layer])})")
    return found


def source_root():
    here = os.path.realpath(__file__)
    return os.path.dirname(os.path.dirname(os.path.dirname(here)))


class LayeringTest(unittest.TestCase):
    root = None

    def test_tree_follows_the_layers(self):
        v = violations(self.root)
        self.assertEqual(v, [], "layering violations:\n" + "\n".join(v))

    def test_every_layer_exists(self):
        for layer in ALLOWED:
            self.assertTrue(os.path.isdir(os.path.join(self.root, layer)), layer)

    def test_rule_catches_a_forbidden_include(self):
        # The checker itself, on a throwaway tree: kernels/ including lib/
        # and lib/codec including lib/comm are both caught.
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            for layer in ALLOWED:
                os.makedirs(os.path.join(d, layer), exist_ok=True)
            with open(os.path.join(d, "kernels", "bad.h"), "w") as f:
                f.write('#include "gradwire/lib/codec/codec.h"\n')
            with open(os.path.join(d, "lib", "codec", "bad.cc"), "w") as f:
                f.write('#include "gradwire/kernels/dispatch.h"\n'
                        '#include "gradwire/lib/comm/communicator.h"\n')
            with open(os.path.join(d, "transport", "ok.cc"), "w") as f:
                f.write('#include "gradwire/base/coding.h"\n')
            v = violations(d)
            self.assertEqual(len(v), 2, v)
            self.assertIn("kernels/bad.h:1", v[0] + v[1])
            self.assertIn("lib/codec/bad.cc:2", v[0] + v[1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=None)
    args, rest = parser.parse_known_args()
    LayeringTest.root = os.path.abspath(args.root) if args.root else source_root()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
