#!/bin/sh
echo "gradwire's offline Bazel setup ships no coverage tools" >&2
exit 1
