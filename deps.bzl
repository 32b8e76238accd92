"""gradwire_deps(): every external repository gradwire needs, offline.

A consumer's WORKSPACE:

    local_repository(name = "gradwire", path = "...")   # or any other rule
    load("@gradwire//:deps.bzl", "gradwire_deps")
    gradwire_deps()

Repositories the consumer declared earlier are left alone, so a project
with its own abseil or googletest keeps it.
"""

load(
    "//third_party:repositories.bzl",
    "cuda_configure",
    "python_configure",
    "shim_repository",
    "system_library_repository",
)

_ABSL_PACKAGES = {
    "absl/algorithm": ["algorithm", "container"],
    "absl/base": ["base", "core_headers"],
    "absl/cleanup": ["cleanup"],
    "absl/container": ["fixed_array", "flat_hash_map", "flat_hash_set", "inlined_vector", "btree"],
    "absl/flags": ["flag", "parse", "usage"],
    "absl/functional": ["any_invocable", "bind_front", "function_ref"],
    "absl/hash": ["hash"],
    "absl/memory": ["memory"],
    "absl/numeric": ["bits", "int128"],
    "absl/status": ["status", "statusor"],
    "absl/strings": ["strings", "str_format", "cord"],
    "absl/synchronization": ["synchronization"],
    "absl/time": ["time"],
    "absl/types": ["span", "optional", "variant"],
    "absl/utility": ["utility"],
}

def _declare(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def gradwire_deps():
    """Declares gradwire's external repositories (Debian system libraries)."""

    # Bazel 4.2 would download these; Debian ships platforms and rules_java,
    # and gradwire carries the two small shims.
    _declare(native.local_repository, "platforms", path = "/usr/share/bazel/platforms")
    _declare(native.local_repository, "rules_java", path = "/usr/share/bazel/rules/java")
    _declare(shim_repository, "rules_cc", marker = "@gradwire//third_party/shims/rules_cc:BUILD")
    _declare(
        shim_repository,
        "remote_coverage_tools",
        marker = "@gradwire//third_party/shims/remote_coverage_tools:BUILD",
    )

    _declare(
        system_library_repository,
        "com_google_absl",
        build_file = "@gradwire//third_party:systemlibs/absl.BUILD",
        packages = _ABSL_PACKAGES,
    )
    for name, build in [
        ("com_google_googletest", "googletest"),
        ("com_github_google_benchmark", "benchmark"),
        ("gloo", "gloo"),
        ("xxhash", "xxhash"),
        ("hiredis", "hiredis"),
        ("openssl", "openssl"),
        ("com_google_protobuf", "protobuf"),
        ("com_github_grpc_grpc", "grpc"),
        ("zlib", "zlib"),
    ]:
        _declare(
            system_library_repository,
            name,
            build_file = "@gradwire//third_party:systemlibs/%s.BUILD" % build,
        )
    _declare(cuda_configure, "local_cuda", build_template = "@gradwire//third_party/cuda:BUILD.tpl")
    _declare(python_configure, "local_python")
