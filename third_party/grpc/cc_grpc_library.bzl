"""cc_grpc_library: protobuf messages + gRPC stubs from the system compilers.

Upstream's rules (rules_proto, grpc's cc_grpc_library) would build protoc
from source, which an offline Debian build cannot do. This macro runs
Debian's /usr/bin/protoc with /usr/bin/grpc_cpp_plugin (packages
protobuf-compiler, protobuf-compiler-grpc) in a genrule and wraps the four
generated files in a cc_library.

The .proto is compiled under the import path "<import_prefix>/<package>/<file>"
(by default "gradwire/lib/cache/data_service.proto"), so the generated code
includes "gradwire/lib/cache/data_service.pb.h", the same "gradwire/..."
spelling every other header of ours uses, and so do we. The proto's own
`import` statements are not supported (a single self-contained file).

    load("//third_party/grpc:cc_grpc_library.bzl", "cc_grpc_library")
    cc_grpc_library(name = "data_service_cc_grpc", src = "data_service.proto")
"""

def cc_grpc_library(name, src, import_prefix = "gradwire", visibility = None, **kwargs):
    if not src.endswith(".proto") or "/" in src or ":" in src:
        fail("cc_grpc_library: src must be a .proto file in this package, got %r" % src)
    base = src[:-len(".proto")]
    package = native.package_name()
    import_dir = import_prefix + ("/" + package if package else "")
    import_path = import_dir + "/" + src
    outs = [base + ext for ext in [".pb.h", ".pb.cc", ".grpc.pb.h", ".grpc.pb.cc"]]

    native.genrule(
        name = name + "_codegen",
        srcs = [src],
        outs = outs,
        # Stage the file under its import path so protoc names it, and
        # the generated #includes say, "gradwire/<package>/<file>".
        cmd = " && ".join([
            "stage=$$(mktemp -d)",
            "trap 'rm -rf \"$$stage\"' EXIT",
            "mkdir -p \"$$stage/%s\"" % import_dir,
            "cp $(location %s) \"$$stage/%s\"" % (src, import_path),
            ("/usr/bin/protoc -I\"$$stage\" --cpp_out=\"$$stage\" --grpc_out=\"$$stage\" " +
             "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin \"$$stage/%s\"") % import_path,
            "for f in %s; do cp \"$$stage/%s/$$f\" \"$(@D)/$$f\"; done" % (" ".join(outs), import_dir),
        ]),
        message = "protoc + grpc_cpp_plugin %s" % src,
    )

    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc", base + ".grpc.pb.cc"],
        hdrs = [base + ".pb.h", base + ".grpc.pb.h"],
        include_prefix = import_prefix,
        strip_include_prefix = "/",
        visibility = visibility,
        deps = [
            "@com_github_grpc_grpc//:grpc++",
            "@com_google_protobuf//:protobuf",
        ],
        linkstatic = True,  # as gw_cc_library (defs.bzl)
        **kwargs
    )
