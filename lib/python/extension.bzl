"""python_extension: a pybind11 extension module as Python imports it."""

load("@local_python//:defs.bzl", "PYTHON_HEADERS_AVAILABLE")

def python_extension(name, srcs, deps):
    """A shared object `name` ("_x.so") Python can import: our libraries
    linked in statically (compiled -fPIC for this link), Debian's system
    libraries dynamically, and only its PyInit_ function exported
    (exports.lds). Built for the interpreter python_configure found
    (Debian's /usr/bin/python3); skipped where python3-dev is missing."""
    native.cc_binary(
        name = name,
        srcs = srcs,
        additional_linker_inputs = ["exports.lds"],
        copts = [
            "-fvisibility=hidden",
            # pybind11 2.10's headers trip these; not our code.
            "-Wno-unused-value",
        ],
        linkopts = ["-Wl,--version-script=$(location exports.lds)"],
        linkshared = 1,
        linkstatic = 1,
        target_compatible_with = [] if PYTHON_HEADERS_AVAILABLE else ["@platforms//:incompatible"],
        deps = deps + ["@local_python//:python_headers"],
    )
