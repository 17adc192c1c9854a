"""The Dockerfiles against the binaries they ship (no Docker engine runs on
the build machines, so the image is checked piece by piece):

  * the runtime stage installs exactly the Debian 12 packages that own the
    shared libraries `ldd` resolves for the binaries the build stage copies
    out (plus ca-certificates, the one non-library runtime need), so nothing
    is missing at run time and nothing unneeded is installed;
  * both stages are Debian 12; the runtime user is a numeric non-root uid;
  * the build stage builds the Bazel targets whose outputs it copies;
  * .dockerignore keeps no file out of the context that those Bazel targets
    need (per `bazel query`);
  * ferry runs as PID 1 (the container's ENTRYPOINT, no init) and still
    drains and exits 0 on SIGTERM.
"""

from __future__ import annotations

import fnmatch
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Set

import pytest

from conftest import BAZEL_BIN, DOCKERFILES, FERRY, ROOT, require_file

# Runtime packages that no ldd line explains, and why they are needed.
NON_LIBRARY_PACKAGES = {
    "ferry": {"ca-certificates"},  # trust roots: Kafka SSL, processors[].tls without ca_file
    "worker": set(),
}


def stages(dockerfile: Path) -> List[Dict]:
    """[{from, name, instructions: [(INSTRUCTION, args)]}], continuations joined."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            parts = args.split()
            result.append({"from": parts[0],
                           "name": parts[2] if len(parts) > 2 else None,
                           "instructions": []})
        else:
            result[-1]["instructions"].append((instruction, " ".join(args.split())))
    return result


def apt_packages(stage: Dict) -> Set[str]:
    packages = set()
    for instruction, args in stage["instructions"]:
        if instruction != "RUN":
            continue
        for command in re.split(r"&&|;", args):
            words = command.split()
            if "apt-get" in words and "install" in words:
                after = words[words.index("install") + 1:]
                packages |= {w for w in after if not w.startswith("-")}
    return packages


def built_binaries(stage: Dict) -> Dict[str, str]:
    """bazel-bin path -> Bazel label, from the build stage's install lines."""
    binaries = {}
    for instruction, args in stage["instructions"]:
        if instruction != "RUN":
            continue
        labels = re.findall(r"(//[\w/]+:[\w]+)", args)
        for path in re.findall(r"install -D -m \d+ bazel-bin/(\S+) /out/", args):
            package, _, name = path.rpartition("/")
            label = f"//{package}:{name}"
            assert label in labels, f"{path} is copied but {label} is not built"
            binaries[path] = label
    return binaries


def package_of(library: str) -> str:
    """The Debian package that owns a library path (usrmerge aware)."""
    real = os.path.realpath(library)
    candidates = [library, real]
    for path in (library, real):
        if path.startswith("/usr/"):
            candidates.append(path[len("/usr"):])
        else:
            candidates.append("/usr" + path)
    for candidate in candidates:
        result = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
        if result.returncode == 0:
            owner = result.stdout.splitlines()[0].split(":")[0]
            return owner.split(",")[0].strip()
    pytest.fail(f"no Debian package owns {library}")


def ldd_packages(binary: Path) -> Dict[str, str]:
    """library path -> owning package, for every library ldd resolves."""
    result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "not found" not in result.stdout, result.stdout
    libraries = {}
    for line in result.stdout.splitlines():
        match = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if match:
            libraries[match.group(1)] = package_of(match.group(1))
    assert libraries, f"ldd found no libraries in {binary}"
    return libraries


def test_build_machine_is_debian_12():
    """The package names below are Debian 12's; the image is Debian 12."""
    assert Path("/etc/debian_version").read_text().startswith("12."), (
        "the ldd-to-package mapping must run on Debian 12 (the image's release)")


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_runtime_packages_match_ldd(image):
    all_stages = stages(DOCKERFILES[image])
    assert len(all_stages) == 2, "a build stage and a runtime stage"
    build, runtime = all_stages
    assert build["from"].startswith("debian:12") and build["name"]
    assert runtime["from"].startswith("debian:12")
    assert ("COPY", f"--from={build['name']}") in [
        (i, a.split()[0]) for i, a in runtime["instructions"] if i == "COPY"]
    assert not apt_packages(runtime) & {p for p in apt_packages(runtime) if p.endswith("-dev")}
    binaries = built_binaries(build)
    assert binaries, "the build stage copies no binary out"
    needed: Dict[str, Set[str]] = {}
    for path in binaries:
        binary = require_file(BAZEL_BIN / path, f"run `bazel build {binaries[path]}`")
        for library, package in ldd_packages(binary).items():
            needed.setdefault(package, set()).add(f"{Path(path).name}: {library}")
    declared = apt_packages(runtime)
    expected = set(needed) | NON_LIBRARY_PACKAGES[image]
    missing = sorted(expected - declared)
    unneeded = sorted(declared - expected)
    assert not missing and not unneeded, (
        f"{DOCKERFILES[image].name}: runtime packages differ from what ldd needs\n"
        f"  missing: {missing} ({[sorted(needed.get(p, [])) for p in missing]})\n"
        f"  unneeded: {unneeded}\n"
        f"  expected list: {' '.join(sorted(expected))}")
    print(f"{image}: {len(declared)} runtime packages = ldd of {sorted(binaries)} "
          f"({sum(len(v) for v in needed.values())} libraries) + {sorted(NON_LIBRARY_PACKAGES[image])}")


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_runtime_stage_runs_as_non_root(image):
    runtime = stages(DOCKERFILES[image])[-1]
    users = [a for i, a in runtime["instructions"] if i == "USER"]
    assert len(users) == 1 and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[0]), users
    uid = users[0].split(":")[0]
    assert any(i == "RUN" and f"--uid {uid}" in a for i, a in runtime["instructions"])
    entrypoint = [a for i, a in runtime["instructions"] if i == "ENTRYPOINT"]
    assert len(entrypoint) == 1 and entrypoint[0].startswith('["/usr/local/bin/'), entrypoint


def dockerignore_patterns() -> List[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.strip().startswith("#")]


def pattern_regex(pattern: str) -> str:
    """A .dockerignore pattern (Go's filepath.Match plus `**`) as a regex."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i:end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return out


def ignored(path: str, patterns: List[str]) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes; a
    pattern matching a directory excludes everything under it."""
    result = False
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = pattern_regex(pattern.lstrip("!").strip("/"))
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            result = not negate
    return result


def test_dockerignore_pattern_matching():
    patterns = ["bazel-*", "**/__pycache__", "clients/python/.venv", "k8s", "!k8s/keep"]
    assert ignored("bazel-bin/server/ferry", patterns)
    assert ignored("tests/deploy/__pycache__/x.pyc", patterns)
    assert ignored("clients/python/.venv/bin/python", patterns)
    assert ignored("k8s/base/kustomization.yaml", patterns)
    assert not ignored("k8s/keep", patterns)
    assert not ignored("server/main.cc", patterns)
    assert not ignored("clients/python/setup.py", patterns)


@pytest.mark.timeout(900)  # bazel query waits for any other Bazel command first
def test_docker_context_holds_every_file_the_build_needs():
    labels = set()
    for image, dockerfile in DOCKERFILES.items():
        labels |= set(built_binaries(stages(dockerfile)[0]).values())
    expression = " + ".join(f"deps({label})" for label in sorted(labels))
    query = f'kind("source file", {expression}) + buildfiles({expression})'
    result = subprocess.run(["bazel", "query", query, "--noshow_progress"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    files = []
    for label in result.stdout.split():
        if label.startswith("@"):
            continue  # system libraries (tools/setup installs them) and Bazel's own
        package, _, name = label[2:].partition(":")
        files.append(f"{package}/{name}" if package else name)
    files += ["WORKSPACE", ".bazelrc", "tools/setup", "tools/build_librdkafka"]
    assert len(files) > 20, files
    patterns = dockerignore_patterns()
    excluded = [f for f in files if ignored(f, patterns)]
    assert not excluded, f".dockerignore keeps files the image build needs: {excluded}"
    assert all((ROOT / f).exists() for f in files), [f for f in files if not (ROOT / f).exists()]


def test_ferry_as_pid_1_drains_and_exits_0_on_sigterm(tmp_path):
    """The container runs ferry directly (no init). PID 1 gets no default
    signal actions, so SIGTERM works only because ferry blocks it and
    sigwait()s. Run it as PID 1 of a new PID namespace and stop it the way
    the kubelet does."""
    require_file(FERRY, "run `bazel build //server:ferry`")
    config = tmp_path / "ferry.yaml"
    config.write_text(
        "topics:\n  - name: events\n"
        "processors:\n  - name: default\n    target: ipv4:127.0.0.1:9\n"
        "embedded:\n  partitions: 2\n"
        "shutdown:\n  grace: 2s\n"
        "server:\n  listen: 127.0.0.1:0\n")
    log = tmp_path / "ferry.log"
    with open(log, "wb") as out:
        # Unprivileged developers get a user namespace too (CI runs as root).
        user_namespace = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        outer = subprocess.Popen(["unshare", *user_namespace, "--pid", "--fork", "--kill-child",
                                  str(FERRY), f"--config={config}"], stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 60
        while "running: group" not in log.read_text():
            assert outer.poll() is None, f"exited early:\n{log.read_text()}"
            assert time.time() < deadline, f"ferry did not start:\n{log.read_text()}"
            time.sleep(0.1)
        children = Path(f"/proc/{outer.pid}/task/{outer.pid}/children").read_text().split()
        assert len(children) == 1, children
        child = int(children[0])
        status = Path(f"/proc/{child}/status").read_text()
        namespace_pids = re.search(r"^NSpid:\s+(.*)$", status, re.M).group(1).split()
        assert namespace_pids[-1] == "1", f"ferry is not PID 1 in its namespace: {namespace_pids}"
        started = time.time()
        os.kill(child, signal.SIGTERM)
        code = outer.wait(timeout=30)
        elapsed = time.time() - started
    finally:
        if outer.poll() is None:
            os.killpg(outer.pid, signal.SIGKILL)
            outer.wait()
    text = log.read_text()
    assert code == 0, f"exit {code}:\n{text}"
    assert "stopped" in text, text
    print(f"ferry as PID 1: SIGTERM -> exit 0 in {elapsed:.1f}s")
