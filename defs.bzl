"""The shapes gradwire's BUILD files share, stated once.

Load from any package of this repository: load("//:defs.bzl", ...).
Labels here resolve in the calling package's repository, so the macros work
the same when gradwire is an external repository (tests/consumer).
"""

load("//third_party/cuda:cuda_library.bzl", "cuda_library")

# The Abseil parts most libraries and binaries use: Status, StatusOr,
# strings, time and spans.
ABSL_DEPS = [
    "@com_google_absl//absl/status",
    "@com_google_absl//absl/status:statusor",
    "@com_google_absl//absl/strings",
    "@com_google_absl//absl/time",
    "@com_google_absl//absl/types:span",
]

# What a binary with flags adds (flags live only in tools/ and bench/).
FLAG_DEPS = [
    "@com_google_absl//absl/flags:flag",
    "@com_google_absl//absl/flags:parse",
    "@com_google_absl//absl/strings:str_format",
]

def gw_cc_library(name, srcs = None, hdrs = None, **kwargs):
    """A cc_library whose headers are included as "gradwire/<path>".

    Without file lists it is one concept in one pair of files:
    <name>.h and <name>.cc.
    """
    if srcs == None and hdrs == None:
        srcs = [name + ".cc"]
        hdrs = [name + ".h"]
    # No .so per library where a consumer links dynamically (Bazel's default
    # for tests): the objects go into the binary, which links the system
    # libraries they need. Debian's libraries come through linkopts, and a
    # library's own .so would reach them only through the binary's
    # --as-needed link (an absl symbol was undefined at start-up).
    kwargs.setdefault("linkstatic", True)
    native.cc_library(
        name = name,
        srcs = srcs or [],
        hdrs = hdrs or [],
        include_prefix = "gradwire",
        strip_include_prefix = "/",
        **kwargs
    )

def gw_cuda_library(name, **kwargs):
    """A cuda_library (.cu sources built by nvcc; fallback_srcs where CUDA is
    not configured) whose headers are included as "gradwire/<path>"."""
    cuda_library(
        name = name,
        include_prefix = "gradwire",
        strip_include_prefix = "/",
        **kwargs
    )

def gw_cc_test(name, deps = [], srcs = None, **kwargs):
    """A googletest test: <name>.cc (unless srcs says otherwise) with gtest_main."""
    native.cc_test(
        name = name,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = deps + ["@com_google_googletest//:gtest_main"],
        **kwargs
    )

def gw_script_test(name, data = [], exclusive = False, tags = [], **kwargs):
    """A test that <name>.sh runs, with <name>.py (where there is one) in its data.

    exclusive: the test spawns rank processes or binds loopback ports, so it
    runs alone.
    """
    # //tests:script_test.sh runs <name>.sh, with a sanitizer's runtime
    # preloaded under the sanitizer configs (.bazelrc).
    native.sh_test(
        name = name,
        srcs = ["//tests:script_test.sh"],
        args = ["$(rootpath %s.sh)" % name],
        data = [name + ".sh"] + native.glob([name + ".py"]) + data,
        tags = (["exclusive"] if exclusive else []) + tags,
        **kwargs
    )
