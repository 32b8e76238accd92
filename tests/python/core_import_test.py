#!/usr/bin/env python3
"""`import gradwire, gradwire.ddp` loads no gRPC into the process: only
gradwire.data loads the data cache's extension (_gradwire_data.so), which
links it. Checked on /proc/self/maps; importing gradwire.data afterwards
must map gRPC, which shows the check can see it. Without torch, gradwire.ddp
cannot be imported: then gradwire alone is checked (and that is said).

    core_import_test.py --package_dir lib/python
"""
import argparse
import os
import re
import sys

GRPC = re.compile(r"/lib(grpc|gpr)[^/\s]*\.so")


def grpc_mapped():
    with open("/proc/self/maps") as f:
        return sorted({m.group(0) for m in GRPC.finditer(f.read())})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--package_dir", required=True)
    args = parser.parse_args()
    sys.path.insert(0, args.package_dir)
    failures = []
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
        print("torch is not importable: checking `import gradwire` without gradwire.ddp")
    before = grpc_mapped()
    if before:
        failures.append(f"gRPC mapped before gradwire was imported: {before}")
    import gradwire
    if have_torch:
        import gradwire.ddp  # noqa: F401
    core = grpc_mapped()
    print(f"after import gradwire{', gradwire.ddp' if have_torch else ''} "
          f"({gradwire.extension_path}): gRPC libraries mapped: {core or 'none'}")
    if core:
        failures.append(f"the core import mapped gRPC: {core}")
    if "gradwire._gradwire_data" in sys.modules:
        failures.append("the core import loaded the data cache's extension")
    import gradwire.data
    data = grpc_mapped()
    print(f"after import gradwire.data: gRPC libraries mapped: {data or 'none'}")
    if not data:
        failures.append("gradwire.data mapped no gRPC either: is the check still looking?")
    # Both extensions raise the one gradwire.Error.
    if gradwire.data._gradwire_data.Error is not gradwire.Error:
        failures.append("the data extension's Error is not gradwire.Error")
    for f in failures:
        print(f"FAIL: {f}")
    print("PASS" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
