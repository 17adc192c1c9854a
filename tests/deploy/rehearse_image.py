#!/usr/bin/env python3
"""Rehearses the Dockerfiles' runtime stages without a Docker engine (by hand,
as root; not part of tools/test, since it downloads a Debian root file system):

    clients/python/.venv/bin/python tests/deploy/rehearse_image.py [--rootfs DIR] [--build]

With --build, first the build stages: the context that .dockerignore leaves is
copied to /src of a fresh Debian 12 root file system and the stages' RUN
instructions run there verbatim (tools/setup, bazel build, install to /out);
their binaries are then the ones shipped below (else the host's bazel-bin).
For each image (deploy/docker/{ferry,worker}.Dockerfile):
  1. a Debian 12 minbase root file system (debootstrap --variant=minbase
     bookworm, what debian:12-slim is made of; cached in --rootfs) is copied;
  2. the runtime stage's RUN instructions run in it, verbatim, under chroot
     (apt-get installs the runtime packages; the user is created);
  3. its COPY --from=build puts the host's bazel-bin binaries where the image
     has them;
  4. as the image's USER (numeric uid:gid): `ldd` finds every library, and
     the binaries start: ferry --check_config on k8s/example's config with
     the pod's POD_NAME, then ferry (embedded mock cluster) with the example
     worker connected, both stopped with SIGTERM and exiting 0.
Needs debootstrap (apt-get install debootstrap) and the bazel-bin binaries.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import BAZEL_BIN, DOCKERFILES, ROOT  # noqa: E402
from test_image import built_binaries, dockerignore_patterns, ignored, stages  # noqa: E402

MIRROR = "http://deb.debian.org/debian"


def run(argv, **kwargs):
    print("+", " ".join(str(a) for a in argv), flush=True)
    return subprocess.run([str(a) for a in argv], check=True, **kwargs)


def ensure_rootfs(cache: Path) -> Path:
    if not (cache / "etc/debian_version").exists():
        run(["debootstrap", "--variant=minbase", "bookworm", cache, MIRROR])
    return cache


class Chroot:
    def __init__(self, rootfs: Path):
        self.root = rootfs
        self.mounts = []

    def __enter__(self):
        for source, target in (("/proc", "proc"), ("/dev", "dev")):
            path = self.root / target
            path.mkdir(exist_ok=True)
            run(["mount", "--rbind", source, path])
            self.mounts.append(path)
        shutil.copy("/etc/resolv.conf", self.root / "etc/resolv.conf")
        return self

    def __exit__(self, *exc):
        for path in reversed(self.mounts):
            subprocess.run(["umount", "-R", "-l", str(path)], check=False)

    def sh(self, command: str, user: str = "0:0", env=None):
        # What Docker gives a RUN step: root's HOME is /root.
        environment = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                       "HOME": "/root" if user.startswith("0:") else "/nonexistent"}
        environment.update(env or {})
        return run(["chroot", f"--userspec={user}", self.root, "/bin/sh", "-c", command],
                   env=environment)

    def start(self, argv, user: str, log: Path, env=None):
        out = open(log, "wb")
        return subprocess.Popen(["/usr/sbin/chroot", f"--userspec={user}", str(self.root)] + argv,
                                stdout=out, stderr=subprocess.STDOUT, env=env or {
                                    "PATH": "/usr/local/bin:/usr/bin:/bin"})


def wait_for(log: Path, text: str, process, timeout=60):
    deadline = time.time() + timeout
    while text not in log.read_text(errors="replace"):
        if process.poll() is not None:
            raise SystemExit(f"exited early:\n{log.read_text()}")
        if time.time() > deadline:
            raise SystemExit(f"no '{text}' in {log}:\n{log.read_text()}")
        time.sleep(0.2)


def copy_context(destination: Path) -> int:
    """The Docker build context: the repository minus .dockerignore."""
    patterns = dockerignore_patterns()
    count = 0
    for directory, dirs, files in os.walk(ROOT):
        relative = Path(directory).relative_to(ROOT)
        dirs[:] = [d for d in dirs
                   if not ignored(str(relative / d) if str(relative) != "." else d, patterns)]
        for name in files:
            path = relative / name if str(relative) != "." else Path(name)
            if ignored(str(path), patterns):
                continue
            target = destination / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, target, follow_symlinks=False)
            count += 1
    return count


def build_stages(base: Path, work: Path) -> Path:
    """Runs both Dockerfiles' build stages (COPY . . then RUN) in one Debian 12
    root file system; returns its /out."""
    rootfs = work / "build-rootfs"
    run(["cp", "-a", base, rootfs])
    with Chroot(rootfs) as chroot:
        for image in sorted(DOCKERFILES):
            build = stages(DOCKERFILES[image])[0]
            workdir = "/"
            for instruction, args in build["instructions"]:
                if instruction == "WORKDIR":
                    workdir = args
                elif instruction == "COPY":
                    assert args == ". .", args
                    # A fresh context per image (Bazel's cache under /root stays).
                    shutil.rmtree(rootfs / workdir.lstrip("/"), ignore_errors=True)
                    files = copy_context(rootfs / workdir.lstrip("/"))
                    print(f"{image}: build context: {files} files")
                elif instruction == "RUN":
                    chroot.sh(f"cd {workdir} && {args}")
    return rootfs / "out"


def rehearse(image: str, base: Path, work: Path, outputs_dir: Path = None) -> None:
    dockerfile = DOCKERFILES[image]
    build, runtime = stages(dockerfile)
    rootfs = work / f"{image}-rootfs"
    run(["cp", "-a", base, rootfs])
    user = None
    with Chroot(rootfs) as chroot:
        for instruction, args in runtime["instructions"]:
            if instruction == "RUN":
                chroot.sh(args)
            elif instruction == "COPY":
                parts = args.split()
                assert parts[0] == f"--from={build['name']}", args
                destination = rootfs / parts[-1].lstrip("/")
                destination.mkdir(parents=True, exist_ok=True)
                outputs = {f"/out/{Path(p).name}": p for p in built_binaries(build)}
                for source in parts[1:-1]:
                    built = (outputs_dir / Path(source).name if outputs_dir
                             else BAZEL_BIN / outputs[source])
                    shutil.copy2(built, destination / Path(source).name)
            elif instruction == "USER":
                user = args
        assert user, "no USER"
        binaries = [f"/usr/local/bin/{Path(p).name}" for p in built_binaries(build)]
        for binary in binaries:
            result = subprocess.run(["chroot", str(rootfs), "ldd", binary], capture_output=True,
                                    text=True, check=True)
            assert "not found" not in result.stdout, result.stdout
            print(f"{image}: ldd {binary}: every library found")
        if image == "ferry":
            config_dir = rootfs / "etc/ferry/config"
            config_dir.mkdir(parents=True)
            shutil.copy(ROOT / "k8s/example/ferry.yaml", config_dir / "ferry.yaml")
            # The Secret volume as k8s/base mounts it: root-owned, group
            # fsGroup (the image's gid), mode 0440 (defaultMode 288).
            token = rootfs / "etc/ferry/control/token"
            token.parent.mkdir(parents=True)
            token.write_text("rehearsal-token\n")
            gid = int(user.split(":")[1])
            os.chown(token, 0, gid)
            os.chmod(token, 0o440)
            chroot.sh("ferry --check_config --config=/etc/ferry/config/ferry.yaml", user=user,
                      env={"POD_NAME": "ferry-abc12"})
            # Starts and prints its usage (exit 2 without a command).
            chroot.sh("ferryctl 2>&1 | grep -q ferryctl", user=user)
        else:
            chroot.sh("example_worker --helpfull 2>&1 | grep -q -- --listen", user=user)
    print(f"{image}: runtime stage rehearsed in {rootfs}")


def live_run(work: Path) -> None:
    """ferry (embedded mock Kafka) and the example worker, each in its image."""
    ferry_root, worker_root = work / "ferry-rootfs", work / "worker-rootfs"
    ferry_user = [a for i, a in stages(DOCKERFILES["ferry"])[-1]["instructions"] if i == "USER"][0]
    worker_user = [a for i, a in stages(DOCKERFILES["worker"])[-1]["instructions"]
                   if i == "USER"][0]
    (ferry_root / "tmp/demo.yaml").write_text(
        "topics:\n  - name: events\nprocessors:\n  - name: default\n"
        "    target: ipv4:127.0.0.1:50061\nembedded:\n  partitions: 2\n"
        "server:\n  listen: 127.0.0.1:0\n")
    with Chroot(ferry_root), Chroot(worker_root):
        worker_log, ferry_log = work / "worker.log", work / "ferry.log"
        worker = Chroot(worker_root).start(
            ["/usr/local/bin/example_worker", "--listen=127.0.0.1:50061"], worker_user, worker_log)
        wait_for(worker_log, "listening", worker)
        ferry = Chroot(ferry_root).start(
            ["/usr/local/bin/ferry", "--config=/tmp/demo.yaml"], ferry_user, ferry_log)
        wait_for(ferry_log, "stream ready", ferry)
        for name, process in (("ferry", ferry), ("worker", worker)):
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=60)
            assert code == 0, f"{name} exited {code}"
            print(f"{name}: SIGTERM -> exit 0 (as uid {ferry_user if name == 'ferry' else worker_user})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rootfs", default="/var/tmp/ferry-bookworm-minbase",
                        help="cached debootstrap of bookworm (minbase)")
    parser.add_argument("--build", action="store_true",
                        help="also run the build stages (tools/setup + bazel build from the "
                             "context .dockerignore leaves; slow) and ship their binaries "
                             "instead of the host's bazel-bin")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (chroot, mount)")
    base = ensure_rootfs(Path(args.rootfs))
    work = Path(tempfile.mkdtemp(prefix="ferry-image-"))
    try:
        outputs = build_stages(base, work) if args.build else None
        for image in sorted(DOCKERFILES):
            rehearse(image, base, work, outputs)
        live_run(work)
    finally:
        # Never delete through a mount that is still there (/dev, /proc).
        mounted = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                   if line.split()[1].startswith(str(work))]
        if mounted:
            print(f"left {work} in place: still mounted {mounted}")
        else:
            subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)
    print("image rehearsal: OK")


if __name__ == "__main__":
    main()
