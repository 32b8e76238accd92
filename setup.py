"""Builds gradwire's wheel: the Python package in lib/python/gradwire plus the
two extension modules, built by Bazel (//lib/python:_gradwire.so and
_gradwire_data.so) for the interpreter running this build and copied next
to the package's modules, where gradwire/__init__.py looks first.

    pip install .                            # at the repository root
    pip install --no-build-isolation .       # offline: Debian's setuptools and wheel

Metadata is in pyproject.toml. Needs Bazel and the Debian packages of
tools/install_deps.sh. $BAZEL names another bazel binary; $GRADWIRE_BAZEL_FLAGS
adds flags (e.g. "-c opt").
"""
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
EXTENSIONS = ("_gradwire.so", "_gradwire_data.so")


def bazel_env():
    """This process's environment for Bazel, less what the build front end
    adds to PATH (a virtualenv's bin/): Bazel keys its actions by PATH, so
    an unchanged one reuses the test suite's outputs instead of rebuilding."""
    env = dict(os.environ)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix)}
    if sys.prefix != sys.base_prefix:
        env["PATH"] = os.pathsep.join(
            p for p in env.get("PATH", "").split(os.pathsep)
            if not any(os.path.realpath(p).startswith(x + os.sep) for x in prefixes))
    # The extension is built for the interpreter python_configure finds
    # (/usr/bin/python3, or $GRADWIRE_PYTHON): this one, if its headers differ.
    default = subprocess.run(
        ["/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
        capture_output=True, text=True)
    if default.stdout.strip() != sysconfig.get_paths()["include"]:
        env["GRADWIRE_PYTHON"] = sys.executable
    return env


class BazelBuildPy(build_py):
    """build_py, then the extensions from Bazel into the package."""

    def run(self):
        # Bazel refuses a workspace whose path holds a space; said here in
        # one line, not as a traceback around its exit status.
        if any(c.isspace() for c in ROOT):
            raise SystemExit(f"gradwire: the repository's path {ROOT!r} holds whitespace, which "
                             "Bazel cannot build in; move or link it to a path without any")
        super().run()
        package = os.path.join(self.build_lib, "gradwire")
        # An earlier build's extensions in build/ must never ship.
        for name in EXTENSIONS:
            if os.path.exists(os.path.join(package, name)):
                os.remove(os.path.join(package, name))
        bazel = os.environ.get("BAZEL", "bazel")
        flags = shlex.split(os.environ.get("GRADWIRE_BAZEL_FLAGS", ""))
        env = bazel_env()
        targets = [f"//lib/python:{name}" for name in EXTENSIONS]
        print(f"gradwire: {bazel} build {' '.join(flags + targets)}", flush=True)
        try:
            subprocess.run([bazel, "build"] + flags + targets, cwd=ROOT, env=env, check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(f"gradwire: `{bazel} build` failed ({e}); its output is above. "
                             "Bazel and the Debian packages of tools/install_deps.sh are "
                             "needed") from None
        bin_dir = subprocess.run([bazel, "info"] + flags + ["bazel-bin"], cwd=ROOT, env=env,
                                 check=True, capture_output=True, text=True).stdout.strip()
        os.makedirs(package, exist_ok=True)
        for name in EXTENSIONS:
            built = os.path.join(bin_dir, "lib", "python", name)
            if not os.path.isfile(built):
                raise RuntimeError(f"gradwire: {built} was not built (python3-dev and "
                                   "pybind11-dev installed? see tools/install_deps.sh)")
            target = os.path.join(package, name)
            shutil.copyfile(built, target)
            os.chmod(target, 0o755)


class BinaryDistribution(Distribution):
    """The wheel holds compiled extensions: tag it for this interpreter and platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BazelBuildPy}, distclass=BinaryDistribution)
