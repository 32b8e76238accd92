"""cuda_library: compiles .cu files with nvcc for Hopper (sm_90 SASS + PTX).

Bazel 4 has no CUDA support, so this rule runs nvcc itself and hands the
objects to an ordinary cc_library. Include paths and headers come from the
CcInfo of `deps`, so .cu files include gradwire headers by their
"gradwire/..." names like any other source. Without a CUDA toolkit the
library is built from `fallback_srcs` instead (GRADWIRE_HAVE_CUDA=0).
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "NVCC")

_GENCODE = [
    "-gencode=arch=compute_90,code=sm_90",
    # PTX too, so newer GPUs can JIT it.
    "-gencode=arch=compute_90,code=compute_90",
]

def _nvcc_objects_impl(ctx):
    cc = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps]).compilation_context
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_nvcc/%s/%s.pic.o" % (ctx.label.name, src.basename[:-len(src.extension) - 1]))
        args = ctx.actions.args()
        args.add_all(["-x", "cu", "-std=c++17", "-O3", "--expt-relaxed-constexpr"])
        args.add_all(_GENCODE)
        args.add("-Xcompiler=-fPIC")
        args.add_all(ctx.attr.copts)
        args.add_all(cc.defines, format_each = "-D%s")
        args.add_all(cc.quote_includes, format_each = "-I%s")
        args.add_all(cc.includes, format_each = "-I%s")
        args.add_all(cc.system_includes, before_each = "-isystem")
        args.add("-I.")
        args.add_all(["-c", src, "-o", obj])
        # nvcc names its temporary files after its pid; in Bazel's sandbox
        # every action is pid 2 in its own namespace while /tmp is shared,
        # so parallel nvcc actions clobbered each other's files. A private
        # TMPDIR per action avoids that.
        ctx.actions.run_shell(
            command = 'd="$(mktemp -d)" && TMPDIR="$d" "%s" "$@"; s=$?; rm -rf "$d"; exit $s' % NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [cc.headers]),
            outputs = [obj],
            mnemonic = "NvccCompile",
            progress_message = "nvcc %s" % src.short_path,
            env = {"PATH": "/usr/bin:/bin"},
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

_nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], fallback_srcs = [], **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc for sm_90.

    Header attributes (include_prefix, strip_include_prefix, visibility...)
    in kwargs apply to `hdrs`, which nvcc sees exactly as gcc does.
    """
    native.cc_library(
        name = name + "_hdrs",
        hdrs = hdrs,
        deps = deps,
        **kwargs
    )
    kwargs.pop("include_prefix", None)
    kwargs.pop("strip_include_prefix", None)
    if CUDA_AVAILABLE:
        _nvcc_objects(
            name = name + "_nvcc",
            srcs = srcs,
            deps = [":" + name + "_hdrs", "@local_cuda//:cuda_headers"],
            copts = copts,
            testonly = kwargs.get("testonly", False),
        )
        lib_srcs = [":" + name + "_nvcc"]
        runtime = ["@local_cuda//:cudart_static"]
    else:
        lib_srcs = fallback_srcs
        runtime = []
    native.cc_library(
        name = name,
        srcs = lib_srcs,
        deps = [":" + name + "_hdrs", "@local_cuda//:cuda_config"] + runtime,
        # libcudart_static's symbols are hidden: only code in the binary's
        # own link can call them, never a library's .so (dynamic linking).
        linkstatic = True,
        **kwargs
    )
