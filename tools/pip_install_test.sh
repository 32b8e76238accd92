#!/usr/bin/env bash
# The install a new user does: in a fresh virtualenv of Debian's python3 (the
# interpreter python3-torch is installed for), with its system packages
# (torch, numpy, setuptools, wheel), `pip install --no-build-isolation .` at
# the repository root (Bazel builds the extensions; no network), then
# `import gradwire` from / must load the installed package and extensions,
# not the source tree's. Run by tools/test.sh; about a minute when Bazel's
# outputs are warm.
#   bash tools/pip_install_test.sh [python]     (default /usr/bin/python3)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-/usr/bin/python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
"$python" -m venv --system-site-packages "$tmp/venv"
# Offline: Debian's setuptools and wheel build it; nothing is fetched.
(cd "$root" && PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$tmp/venv/bin/python" -m pip install -q --no-build-isolation .)
out="$(cd / && env -u PYTHONPATH -u GRADWIRE_EXTENSION -u GRADWIRE_DATA_EXTENSION \
  "$tmp/venv/bin/python" -c '
import gradwire, gradwire.data, os, sys
print(gradwire.__file__)
print(gradwire.extension_path)
print(os.path.realpath(gradwire.data._gradwire_data.__file__))
try:
    import torch, gradwire.ddp
    print("gradwire.ddp imported")
except ImportError as e:
    print(f"no torch: {e}")
')"
echo "$out"
status=0
while read -r path; do
  case "$path" in
    "$tmp"/venv/*) ;;
    gradwire.ddp*|"no torch"*) ;;
    *) echo "FAIL: loaded from outside the virtualenv: $path" >&2; status=1 ;;
  esac
done <<< "$out"
# The installed extensions are this tree's build, byte for byte.
bin="$(cd "$root" && bazel info bazel-bin 2>/dev/null)"
site="$(dirname "$(head -1 <<< "$out")")"
for name in _gradwire.so _gradwire_data.so; do
  if ! cmp -s "$bin/lib/python/$name" "$site/$name"; then
    echo "FAIL: the installed $name is not $bin/lib/python/$name" >&2
    status=1
  fi
done
# A checkout whose path holds a space (which Bazel cannot build in) stops
# with one line naming the path, before any build.
spaced="$tmp/a checkout"
mkdir -p "$spaced/lib/python"
cp "$root/setup.py" "$root/pyproject.toml" "$spaced/"
cp -r "$root/lib/python/gradwire" "$spaced/lib/python/"
if err="$(cd "$spaced" && "$tmp/venv/bin/python" setup.py -q build_py 2>&1)" ||
    [[ "$err" != *"holds whitespace"* ]]; then
  echo "FAIL: setup.py in \"$spaced\": $err" >&2
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "PASS: pip install --no-build-isolation . and import gradwire from /" \
    "($(( $(date +%s) - start )) s)"
fi
exit "$status"
