#!/usr/bin/env bash
# Runs every gradwire test: installs what it needs, then builds and tests the
# project and the consumer workspace that uses it as an outside project would,
# and installs the Python package with pip into a fresh virtualenv.
# Usage: bash tools/test.sh [extra bazel flags, e.g. --config=asan]
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bash tools/test.sh [bazel flags]

Runs every gradwire test: installs what is missing (apt-get), runs
`bazel test //...` here and in tests/consumer/ (an outside workspace that
depends on gradwire), installs the Python package into a fresh virtualenv,
and prints one line: "N passed, N failed, N skipped" (test cases, not
targets). Exit status 0 when nothing failed.

Any arguments are passed to both `bazel test` runs, e.g.
  bash tools/test.sh --config=asan      # or ubsan, tsan (see .bazelrc)
  bash tools/test.sh --test_output=all
EOF
}
# --help needs nothing built or installed (bazel would take it as its own,
# after the install and a build).
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash tools/install_deps.sh

status=0
bazel test "$@" //... || status=$?
(cd tests/consumer && bazel test "$@" //...) || status=$?
# The pip install a new user does (a fresh virtualenv, `pip install .`,
# `import gradwire` from /); reuses the outputs of the build above.
bash tools/pip_install_test.sh || status=$?

# One closing line counting test cases (not targets) from the JUnit XML.
python3 tools/summarize_tests.py bazel-testlogs tests/consumer/bazel-testlogs || status=1
exit $status
