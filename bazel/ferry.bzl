"""Macros that give every ferry target the same warning flags."""

FERRY_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
] + select({
    # clang builds (.bazelrc `--config=clang`, used by tsa, asan, tsan, fuzz):
    # the thread-safety analysis of the absl lock annotations, which gcc does
    # not have. -Wthread-safety-beta adds the checks on acquired-before and
    # on the annotations of function pointers and lambdas' captured locks.
    "//bazel:clang": [
        "-Wthread-safety",
        "-Wthread-safety-beta",
        "-Werror=thread-safety",
    ],
    "//conditions:default": [],
})

def ferry_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = FERRY_COPTS + copts, **kwargs)

def ferry_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = FERRY_COPTS + copts, **kwargs)

def ferry_cc_test(name, copts = [], **kwargs):
    native.cc_test(name = name, copts = FERRY_COPTS + copts, **kwargs)
