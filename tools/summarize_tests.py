#!/usr/bin/env python3
"""Prints 'N passed, N failed, N skipped' over the test.xml files Bazel wrote.

Counts test cases, not targets, so a target that ran 40 cases counts 40.
Exits non-zero when any case failed or no case ran at all.
"""
import pathlib
import sys
import xml.etree.ElementTree as ET


def count(roots):
    passed = failed = skipped = 0
    for root in roots:
        base = pathlib.Path(root)
        if not base.exists():
            continue
        found = set(base.resolve().rglob("test.xml"))
        for xml in sorted(found):
            # A target's own test.xml is this run's; run_N_of_M/ or
            # shard_N_of_M/ folders beside it are left from an earlier
            # --runs_per_test or sharded run, and would be counted twice.
            if any((d / "test.xml") in found for d in xml.parent.parents):
                continue
            try:
                tree = ET.parse(xml)
            except ET.ParseError:
                failed += 1  # a test that crashed before writing its XML
                continue
            for case in tree.iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed += 1
                elif case.find("skipped") is not None or case.get("result") == "skipped":
                    skipped += 1
                else:
                    passed += 1
    return passed, failed, skipped


def main():
    passed, failed, skipped = count(sys.argv[1:])
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if passed + failed + skipped == 0:
        print("no test results found under " + ", ".join(sys.argv[1:]) +
              " (did bazel test run? its errors are above)")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
