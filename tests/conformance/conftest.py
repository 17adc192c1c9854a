"""The conformance harness: a mock Kafka cluster, ferry and example workers as
real processes on 127.0.0.1, for every worker implementation.

Implementations (the `impl` fixture, one run of every scenario each), all
started with the same command-line contract (README.md):
  cpp     bazel-bin/clients/cpp/examples/example_worker (the C++ SDK)
  python  python -m ferry_worker.examples.worker (clients/python, the Python SDK)
  go      clients/go/cmd/example-worker, built into a temp dir (the Go SDK)
  plain   clients/plain-grpc/plain_worker.py (no SDK: the generated stubs only)

Needs: `bazel build //server:ferry //tests/tools:kafka_tool
//clients/cpp/examples:example_worker` (tools/test_sdks runs it), go on PATH,
and this interpreter with grpcio (the venv of tools/setup_sdks). Anything
missing is a failure, never a skip.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[2]
BAZEL_BIN = Path(os.environ.get("FERRY_BAZEL_BIN", ROOT / "bazel-bin"))
KAFKA_TOOL = BAZEL_BIN / "tests/tools/kafka_tool"
FERRY = BAZEL_BIN / "server/ferry"
CPP_WORKER = BAZEL_BIN / "clients/cpp/examples/example_worker"
PLAIN_WORKER = ROOT / "clients/plain-grpc/plain_worker.py"
GO_MODULE_DIR = ROOT / "clients/go"

IMPLEMENTATIONS = ["cpp", "python", "go", "plain"]


# ---------------------------------------------------------------- processes


class Proc:
    """A child process whose stdout+stderr go to a log file."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env=None, cwd=None):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_path
        self._log = open(log_path, "ab")
        # Own session: a signal meant for the test runner never reaches it.
        self.popen = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                      start_new_session=True)
        self.pid = self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> Optional[int]:
        """The exit code, or None if still running after `timeout` seconds."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self, timeout: float = 30) -> Optional[int]:
        """SIGTERM, then the exit code (None: did not exit in time)."""
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.alive():
            self.popen.kill()
        self.popen.wait()

    def close(self) -> None:
        self.kill()
        self._log.close()

    def text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def tail(self, chars: int = 4000) -> str:
        text = self.text()
        return f"---- {self.name} ({self.log_path}) ----\n{text[-chars:]}"


def wait_for_file(path: Path, proc: Proc, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text().strip()
        if not proc.alive():
            raise AssertionError(f"{proc.name} exited with {proc.popen.returncode} "
                                 f"before writing {path}\n{proc.tail()}")
        time.sleep(0.01)
    raise AssertionError(f"{path} not written in {timeout}s\n{proc.tail()}")


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Run:
    """One line of a worker's --record file: one run of the handler."""

    key: str
    seq: int  # the payload: the key's sequence number (kafka_tool produce)
    start_ns: int  # CLOCK_MONOTONIC at handler start (the same clock in every process)
    partition: int
    offset: int
    answer: str  # OK, RETRY or FAIL


def read_runs(path: Path) -> List[Run]:
    if not path.exists():
        return []
    runs = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line:
            continue
        fields = line.split("\t")
        assert len(fields) == 6, f"{path}:{number}: not a 6-column record line: {line!r}"
        assert fields[5] in ("OK", "RETRY", "FAIL"), f"{path}:{number}: answer {fields[5]!r}"
        runs.append(Run(fields[0], int(fields[1]), int(fields[2]), int(fields[3]),
                        int(fields[4]), fields[5]))
    return runs


def count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def read_stats(path: Path) -> Dict[str, int]:
    assert path.exists(), f"{path}: the worker wrote no --stats file"
    stats = {}
    for line in path.read_text().splitlines():
        if line:
            name, value = line.split("=", 1)
            stats[name] = int(value)
    missing = {"events_received", "max_held", "credit_violations", "cancelled"} - set(stats)
    assert not missing, f"{path}: stats without {sorted(missing)}: {stats}"
    return stats


def by_key_in_start_order(runs: Sequence[Run]) -> Dict[str, List[Run]]:
    keyed: Dict[str, List[Run]] = {}
    for r in runs:
        keyed.setdefault(r.key, []).append(r)
    for rs in keyed.values():
        rs.sort(key=lambda r: r.start_ns)
    return keyed


def expected_records(count: int, keys: int) -> set:
    """(key, seq) of every record `kafka_tool produce --count --keys` writes."""
    return {(f"key-{i % keys}", i // keys) for i in range(count)}


# ---------------------------------------------------------------- the scenario


class Scenario:
    """Everything one test starts; every process is killed at the end."""

    def __init__(self, impl: str, tmp: Path, go_worker: Optional[Path]):
        self.impl = impl
        self.tmp = tmp
        self.go_worker = go_worker
        self.procs: List[Proc] = []
        self._mock: Optional[Proc] = None
        self._bootstrap = ""

    def close(self) -> None:
        for p in reversed(self.procs):
            p.close()

    def tails(self) -> str:
        return "\n".join(p.tail() for p in self.procs)

    def start(self, name: str, argv, **kw) -> Proc:
        p = Proc(name, argv, self.tmp / f"{name}.log", **kw)
        self.procs.append(p)
        return p

    # ---- Kafka (librdkafka's mock cluster in a kafka_tool process)

    def start_cluster(self, topics: Sequence[str], partitions: int) -> None:
        """Starts the cluster; `bootstrap` waits for it to be up."""
        self._mock = self.start("mock", [KAFKA_TOOL, "mock", f"--partitions={partitions}",
                                         "--topics=" + ",".join(topics),
                                         f"--bootstrap_file={self.tmp / 'bootstrap'}"])

    @property
    def bootstrap(self) -> str:
        if not self._bootstrap:
            assert self._mock is not None, "start_cluster first"
            self._bootstrap = wait_for_file(self.tmp / "bootstrap", self._mock)
        return self._bootstrap

    def produce(self, topic: str, count: int, keys: int, partitions: int) -> None:
        """`count` records over `keys` keys; key-i on partition i % partitions;
        payload = the key's sequence number."""
        out = subprocess.run([str(KAFKA_TOOL), "produce", f"--bootstrap={self.bootstrap}",
                              f"--topic={topic}", f"--count={count}", f"--keys={keys}",
                              f"--partitions={partitions}"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"produce failed: {out.stdout}{out.stderr}"

    def end_offsets_total(self, topic: str) -> int:
        """Records in `topic` (the sum of its end offsets)."""
        out = subprocess.run([str(KAFKA_TOOL), "offsets", f"--bootstrap={self.bootstrap}",
                              f"--topic={topic}", "--group=conformance-probe"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"offsets failed: {out.stdout}{out.stderr}"
        m = re.search(r"total_end=(\d+)", out.stdout)
        assert m, out.stdout
        return int(m.group(1))

    def wait_committed(self, topic: str, group: str, ferry: Proc, timeout: float = 60) -> int:
        """Waits until `group` committed every end offset of `topic`; returns
        CLOCK_MONOTONIC ns when that was seen. Fails at once if ferry exits."""
        waiter = subprocess.Popen([str(KAFKA_TOOL), "wait-committed",
                                   f"--bootstrap={self.bootstrap}", f"--topic={topic}",
                                   f"--group={group}", f"--timeout={int(timeout)}s",
                                   "--poll_interval=100ms"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            while waiter.poll() is None:
                if not ferry.alive():
                    raise AssertionError(f"ferry exited with {ferry.popen.returncode} before "
                                         f"committing {topic}\n{self.tails()}")
                time.sleep(0.02)
            done_ns = time.monotonic_ns()
            output = waiter.stdout.read()
            assert waiter.returncode == 0, (f"{topic} not all committed in {timeout}s:\n"
                                            f"{output}\n{self.tails()}")
            return done_ns
        finally:
            if waiter.poll() is None:
                waiter.kill()
            waiter.wait()
            waiter.stdout.close()

    # ---- workers

    def worker_argv(self) -> List[str]:
        if self.impl == "cpp":
            return [str(CPP_WORKER)]
        if self.impl == "python":
            return [sys.executable, "-m", "ferry_worker.examples.worker"]
        if self.impl == "go":
            return [str(self.go_worker)]
        if self.impl == "plain":
            return [sys.executable, str(PLAIN_WORKER)]
        raise ValueError(self.impl)

    def start_worker(self, name: str, max_in_flight: int, flags: Sequence[str] = (),
                     port: int = 0) -> "Worker":
        w = Worker(name, self.tmp)
        w.port_file.unlink(missing_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT / "clients/python/src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        argv = self.worker_argv() + [
            f"--listen=127.0.0.1:{port}", f"--max_in_flight={max_in_flight}", f"--name={name}",
            f"--port_file={w.port_file}", f"--record={w.record}", f"--stats={w.stats_path}",
            *flags]
        w.proc = self.start(f"worker-{name}", argv, env=env)
        w.port = int(wait_for_file(w.port_file, w.proc))
        assert port == 0 or w.port == port, (w.port, port)
        return w

    # ---- ferry

    def start_ferry(self, config: str, name: str = "ferry") -> Proc:
        path = self.tmp / f"{name}.yaml"
        path.write_text(config)
        return self.start(name, [FERRY, f"--config={path}"])


class Worker:
    def __init__(self, name: str, tmp: Path):
        self.name = name
        self.port_file = tmp / f"port-{name}"
        self.record = tmp / f"record-{name}.tsv"
        self.stats_path = tmp / f"stats-{name}"
        self.proc: Optional[Proc] = None
        self.port = 0

    def runs(self) -> List[Run]:
        return read_runs(self.record)

    def stats(self) -> Dict[str, int]:
        return read_stats(self.stats_path)


def processor_yaml(name: str, target: str, *, streams: int = 2, timeout: str = "60s",
                   max_attempts: Optional[int] = None, retry_backoff: Optional[str] = None,
                   event_types: Optional[Sequence[str]] = None) -> str:
    y = f"  - name: {name}\n    target: {target}\n    streams: {streams}\n    timeout: {timeout}\n"
    if event_types is not None:
        y += "    event_types: [" + ", ".join(f'"{t}"' for t in event_types) + "]\n"
    if max_attempts is not None:
        y += f"    max_attempts: {max_attempts}\n"
    if retry_backoff is not None:
        y += f"    retry_backoff: {retry_backoff}\n"
    return y


def ferry_config(bootstrap: str, group: str, topics: Sequence[str], processors: Sequence[str],
                 dead_letter_topic: Optional[str] = None, extra: str = "") -> str:
    """Like tests/e2e/e2e_support.cc's FerryConfig: short session timeout,
    200ms commits, a progress line every second (and one at shutdown)."""
    y = (f"kafka:\n  bootstrap.servers: {bootstrap}\n  group.id: {group}\n"
         "  session.timeout.ms: 6000\n  heartbeat.interval.ms: 500\n"
         "topics:\n")
    for t in topics:
        y += f"  - name: {t}\n    ordering: key\n"
    y += "processors:\n" + "".join(processors)
    y += ("server:\n  listen: 127.0.0.1:0\n"
          "commit:\n  interval: 200ms\n"
          "log:\n  progress_interval: 1s\n")
    if dead_letter_topic:
        y += f"failures:\n  dead_letter_topic: {dead_letter_topic}\n"
    return y + extra


def progress(ferry_log: str, name: str) -> int:
    """`name=` in ferry's last `progress:` line (ferry logs one at shutdown)."""
    lines = [ln for ln in ferry_log.splitlines() if " progress: " in ln]
    assert lines, "ferry logged no progress line"
    m = re.search(rf" {re.escape(name)}=(\d+)", lines[-1])
    assert m, f"no {name}= in {lines[-1]!r}"
    return int(m.group(1))


# ---------------------------------------------------------------- fixtures


def _check_binaries() -> None:
    missing = [str(p) for p in (KAFKA_TOOL, FERRY, CPP_WORKER) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail("missing " + ", ".join(missing) + ": run `bazel build //server:ferry "
                    "//tests/tools:kafka_tool //clients/cpp/examples:example_worker` "
                    "(tools/test_sdks does)", pytrace=False)


@pytest.fixture(scope="session")
def go_worker(tmp_path_factory) -> Path:
    """clients/go/cmd/example-worker, built once per session."""
    out = tmp_path_factory.mktemp("go") / "example-worker"
    env = dict(os.environ, GOTOOLCHAIN="local",
               GOFLAGS=(os.environ.get("GOFLAGS", "") + " -buildvcs=false").strip())
    build = subprocess.run(["go", "build", "-o", str(out), "./cmd/example-worker"],
                           cwd=GO_MODULE_DIR, env=env, capture_output=True, text=True,
                           timeout=600)
    assert build.returncode == 0, f"go build failed:\n{build.stdout}{build.stderr}"
    return out


@pytest.fixture(params=IMPLEMENTATIONS)
def scenario(request, tmp_path):
    _check_binaries()
    impl = request.param
    go = request.getfixturevalue("go_worker") if impl == "go" else None
    s = Scenario(impl, tmp_path, go)
    try:
        yield s
    finally:
        s.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, the tails of every process log of the scenario."""
    outcome = yield
    report = outcome.get_result()
    s = item.funcargs.get("scenario") if hasattr(item, "funcargs") else None
    if report.failed and isinstance(s, Scenario) and s.procs:
        report.sections.append(("process logs", s.tails()))
