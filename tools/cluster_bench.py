#!/usr/bin/env python3
"""End-to-end gradient-exchange benchmark on an emulated Ethernet cluster (the
README's benchmark; tools/benchmark.sh runs it with its defaults). The parts
live in tools/clusterbench/ (cli: the flags and --help text, run, collect,
report, driver).

    /usr/bin/python3 tools/cluster_bench.py --help
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clusterbench import cli, driver  # noqa: E402


def main(argv=None):
    return driver.main(cli.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
