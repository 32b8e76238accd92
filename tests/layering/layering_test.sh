#!/usr/bin/env bash
# Runs the layering check on the source tree this runfile links to.
set -euo pipefail
exec python3 "$(dirname "$0")/layering_test.py"
