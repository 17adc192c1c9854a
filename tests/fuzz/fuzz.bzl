"""ferry_fuzz_target: one libFuzzer target and its corpus as a regression test.

For a target NAME with source NAME_fuzzer.cc it declares:
  * NAME_fuzzer (cc_binary): under `--config=fuzz` (clang, see .bazelrc and
    tools/fuzz) a libFuzzer binary; under the normal gcc build a plain
    runner that feeds the files named on its command line to the target
    (`bazel run //tests/fuzz:NAME_fuzzer -- FILE...` reproduces a crash).
  * NAME_corpus_test (cc_test): every file of corpus/NAME/ (the seeds and
    every crash ever found) fed to the target, one gtest test per file, in
    the normal `bazel test //...`. Files in crashes/NAME/ are reproducers of
    defects not fixed yet: registered as DISABLED_ tests (each with a TODO in
    crashes/README.md) until their fix lands and they move to corpus/NAME/.
"""

load("//bazel:ferry.bzl", "ferry_cc_binary", "ferry_cc_library", "ferry_cc_test")

def ferry_fuzz_target(name, deps = [], extra_srcs = []):
    ferry_cc_library(
        name = name + "_target",
        testonly = True,
        srcs = [name + "_fuzzer.cc"] + extra_srcs,
        deps = deps,
        alwayslink = True,
    )
    ferry_cc_binary(
        name = name + "_fuzzer",
        testonly = True,
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = [":" + name + "_target"] + select({
            ":fuzzing": [],
            "//conditions:default": [":standalone_main"],
        }),
    )
    ferry_cc_test(
        name = name + "_corpus_test",
        size = "small",
        args = [
            "--corpus=tests/fuzz/corpus/" + name,
            "--known_crashes=tests/fuzz/crashes/" + name,
        ],
        data = native.glob(["corpus/" + name + "/**", "crashes/" + name + "/**"]),
        deps = [
            ":" + name + "_target",
            ":corpus_test_main",
        ],
    )
