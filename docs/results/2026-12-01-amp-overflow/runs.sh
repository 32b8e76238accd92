#!/bin/bash
# The AMP overflow runs: new build (HEAD) and the build before fb0d7c6 (0a0c32f).
set -u
export GRADWIRE_JOB_SECRET_FILE=$PWD/job.secret
S=$(dirname "$0")/amp_overflow.py
NEW=/work/main/lib/python  # this commit
OLD=/tmp/old/lib/python    # git worktree add /tmp/old 0a0c32f; bazel build //lib/python:_gradwire.so there
port=29620
run() { port=$((port+1)); /usr/bin/python3 $S --steps 400 --growth_interval 20 --warmup 5 --compress_all --port $port "$@" 2>&1 | grep '^{' ; }
run --package_dir $NEW --spec none
run --package_dir $NEW --spec qsgd:bits=4,bucket=512 --follow
run --package_dir $OLD --spec qsgd:bits=4,bucket=512
run --package_dir $NEW --spec topk:ratio=0.01 --follow
run --package_dir $OLD --spec topk:ratio=0.01
run --package_dir $NEW --spec sign --follow
run --package_dir $OLD --spec sign
