"""Release binaries are built in release mode (issue 20, item 11).

`ferry --version` of a release build says "release build" (server/version.cc
checks NDEBUG; //server:version_release_test compiles it that way). What
ships must therefore be built with `--config=release`, which .bazelrc maps
to an optimized build with NDEBUG: the images, tools/demo, the benchmark's
build and README's run command. Tests and CI keep the default mode.
"""

from __future__ import annotations

import re

from conftest import DOCKERFILES, ROOT


def bazel_build_lines(text: str):
    return [line for line in text.splitlines() if re.search(r"\bbazel build\b", line)]


def test_bazelrc_release_config_is_optimized_with_ndebug():
    release = [line.split(None, 1)[1].strip()
               for line in (ROOT / ".bazelrc").read_text().splitlines()
               if line.startswith("build:release ")]
    assert "--compilation_mode=opt" in release or "-c opt" in release, release
    assert "--copt=-DNDEBUG" in release, release


def test_ci_and_tests_build_the_default_mode():
    plain = [line for line in (ROOT / ".bazelrc").read_text().splitlines()
             if re.match(r"(build|test)\s", line)]
    assert not any("NDEBUG" in line or "opt" in line.split() for line in plain), plain


def test_images_build_release_binaries():
    for name, path in DOCKERFILES.items():
        lines = bazel_build_lines(path.read_text())
        assert lines, f"{name}: no bazel build in {path}"
        for line in lines:
            assert "--config=release" in line, f"{path}: {line.strip()}"


def test_demo_bench_and_readme_build_release_binaries():
    lines = bazel_build_lines((ROOT / "tools/demo").read_text())
    assert lines
    for line in lines:
        assert "--config=release" in line, f"tools/demo: {line.strip()}"
    # bench/setup: release unless FERRY_BENCH_RELEASE=0 (bench/smoke, in CI).
    setup = (ROOT / "bench/setup").read_text()
    assert "build_flags=(--config=release)" in setup
    assert [line for line in bazel_build_lines(setup) if '"${build_flags[@]}"' in line]
    readme = (ROOT / "README.md").read_text()
    assert "bazel build --config=release //server:ferry" in readme
