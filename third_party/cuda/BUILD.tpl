# Generated from gradwire's third_party/cuda/BUILD.tpl by cuda_configure.
package(default_visibility = ["//visibility:public"])

# GRADWIRE_HAVE_CUDA tells the dispatch code whether CUDA kernels were built.
cc_library(
    name = "cuda_config",
    defines = ["GRADWIRE_HAVE_CUDA=%{have_cuda}"],
)

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/*.h", "include/*.hpp", "include/crt/**"]),
    includes = ["include"],
)

# Static runtime: a binary built here runs on any machine with a driver,
# which is how GPU tests travel to the lent device.
cc_library(
    name = "cudart_static",
    srcs = glob(["lib64/libcudart_static.a"]),
    linkopts = ["-ldl", "-lpthread", "-lrt"],
    deps = [":cuda_headers"],
)
