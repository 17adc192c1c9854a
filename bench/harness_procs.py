"""Processes of ferry's benchmark harness (bench/README.md): the tools' paths,
starting and stopping child processes by pid, CPU and memory accounting from
/proc, the Kafka broker, the workers and ferry itself. bench/harness.py
drives them through the phases of bench/harness_phases.py."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "bazel-bin"
TOOLS = {
    "ferry": BIN / "server/ferry",
    "kafka_tool": BIN / "tests/tools/kafka_tool",
    "produce": BIN / "bench/bench_produce",
    "consume": BIN / "bench/bench_consume",
    "bench_worker": BIN / "bench/bench_worker",
    "floor": BIN / "bench/transport_floor",
    "go_worker": ROOT / "bench/.bin/go-example-worker",
    "python": ROOT / "clients/python/.venv/bin/python",
    "broker": ROOT / "tests/kafka/kafka_broker",
}
JAVA_CP = f"{ROOT}/bench/java/target/ferry-bench-baseline-b.jar:{ROOT}/bench/java/target/lib/*"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PARTITIONS = 8
KEYS = 10000
VALUE_BYTES = 200
# Targets from issues 10 and 17 (reported, never asserted).
TARGETS = {"ferry_over_a": 0.5, "ferry_over_b": 3.0, "ferry_over_floor": 0.7, "p99_ms": 5.0,
           "rss_mib": 256}

# Set once by bench/harness.py from its flags before any phase runs.
SETTINGS = {
    "progress_interval": "200ms",  # --progress_interval: ferry's log.progress_interval
    "ferry_extra": "",             # --ferry_extra: YAML appended to every ferry config
    "ferry_kafka": [],             # --ferry_kafka: "name=value" lines of ferry's kafka: map
    "floor_kafka": "",             # --floor_kafka: "name=value,..." for A and the floor
}
PROGRESS_RE = re.compile(
    r"^(\S+) INFO progress: rate=(-?\d+)/s consumed=(\d+) acked=(\d+) failed=(\d+).*?"
    r"in_flight=(\d+) buffered=(\d+) streams=(\d+) partitions=(\d+) committed=(\d+)")


class HarnessError(Exception):
    pass


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- processes

def proc_cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        # fields[0] is state (field 3); utime/stime are fields 14/15.
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def proc_nice(pid: int) -> int | None:
    """The main thread's nice value (field 19 of /proc/PID/stat)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    except (OSError, IndexError, ValueError):
        return None


def proc_status_kib(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class Proc:
    """A child process with its output in a file; stopped by pid only."""

    def __init__(self, name: str, argv: list[str], out_dir: Path, env: dict | None = None,
                 nice: int = 0):
        """nice: added to the process's nice value (every thread it starts
        inherits it); below 0 needs root or CAP_SYS_NICE. coreutils' nice
        execs the program, so the pid is the program's."""
        self.name = name
        self.log_path = out_dir / f"{name}.log"
        self.log_file = open(self.log_path, "wb")
        if nice:
            argv = ["nice", "-n", str(nice), *argv]
        self.popen = subprocess.Popen(argv, stdout=self.log_file, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, cwd=ROOT,
                                      env={**os.environ, **(env or {})})
        self.pid = self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def cpu(self) -> float | None:
        return proc_cpu_seconds(self.pid)

    def stop(self, grace: float = 10.0) -> int | None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} (pid {self.pid}) still up after {grace}s: SIGKILL")
                self.popen.kill()
                self.popen.wait()
        self.log_file.close()
        return self.popen.returncode

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def run_tool(argv: list[str], timeout: float, what: str) -> str:
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"{what}: timed out after {timeout}s") from e
    if done.returncode != 0:
        raise HarnessError(f"{what}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def last_json_line(text: str, what: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise HarnessError(f"{what}: no JSON result in its output:\n{text[-2000:]}")


def wait_for_file(path: Path, proc: Proc, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        if not proc.alive():
            raise HarnessError(f"{proc.name} exited before writing {path.name}:\n{proc.tail()}")
        time.sleep(0.05)
    raise HarnessError(f"{proc.name} did not write {path.name} within {timeout}s:\n{proc.tail()}")


def machine_busy(seconds: float) -> float:
    """Fraction of all CPUs busy over `seconds` (before anything of ours runs:
    other users of the machine)."""
    def sample():
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = f[3] + f[4]
        return sum(f) - idle, sum(f)
    b0, t0 = sample()
    time.sleep(seconds)
    b1, t1 = sample()
    return round((b1 - b0) / max(1, t1 - t0), 3)


def machine_cpu_seconds() -> float:
    """CPU seconds all CPUs have been busy since boot (from /proc/stat)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(f) - f[3] - f[4]) / CLK_TCK


class CpuWindow:
    """Who used the CPUs during a latency run: cores (CPU seconds per second)
    of the machine as a whole and of each named process, plus the producer
    (this harness's waited-for children). Shows whether the machine itself
    was saturated, which is what makes queueing latency at a high rate."""

    def __init__(self, procs: dict):
        self.procs = procs  # name -> pid
        self.t0 = time.monotonic()
        self.machine0 = machine_cpu_seconds()
        self.each0 = {n: proc_cpu_seconds(pid) for n, pid in procs.items()}
        c = os.times()
        self.children0 = c.children_user + c.children_system

    def cores(self) -> dict:
        dt = max(1e-6, time.monotonic() - self.t0)
        out = {"seconds": round(dt, 2), "machine": round((machine_cpu_seconds() - self.machine0) / dt, 2),
               "machine_cpus": os.cpu_count()}
        for n, pid in self.procs.items():
            now = proc_cpu_seconds(pid)
            if now is not None and self.each0[n] is not None:
                out[n] = round((now - self.each0[n]) / dt, 2)
        c = os.times()
        out["producer"] = round((c.children_user + c.children_system - self.children0) / dt, 2)
        return out


def fmt_cores(c: dict | None) -> str:
    if not c:
        return ""
    parts = [f"{n} {c[n]:.2f}" for n in ("ferry", "worker", "consumer", "broker", "producer") if n in c]
    return (f"CPU cores during it: {', '.join(parts)}; machine {c['machine']:.2f} of "
            f"{c['machine_cpus']}")


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


# ---------------------------------------------------------------- kafka

class Broker:
    def __init__(self, out: Path):
        self.dir = out / "broker"
        env = {**os.environ, "FERRY_KAFKA_OWNER_PID": str(os.getpid()),
               "FERRY_KAFKA_HEAP": os.environ.get("FERRY_KAFKA_HEAP", "1g"),
               # C2 + G1 instead of the test broker's C1 + Serial (bench/java-broker).
               "JAVA": os.environ.get("JAVA", str(ROOT / "bench/java-broker"))}
        done = subprocess.run([str(TOOLS["broker"]), "start", str(self.dir)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise HarnessError(f"kafka_broker start failed:\n{done.stdout}{done.stderr}")
        self.bootstrap = (self.dir / "bootstrap").read_text().strip()
        self.pid = int((self.dir / "pid").read_text().strip())

    def stop(self, keep_data: bool = False) -> None:
        subprocess.run([str(TOOLS["broker"]), "stop", str(self.dir)], cwd=ROOT, timeout=60)
        if not keep_data:  # gigabytes after a full run; the logs stay
            shutil.rmtree(self.dir / "data", ignore_errors=True)

    def create_topic(self, topic: str) -> None:
        run_tool([str(TOOLS["kafka_tool"]), "create-topic", f"--bootstrap={self.bootstrap}",
                  f"--topic={topic}", f"--partitions={PARTITIONS}"], 120, f"create-topic {topic}")

    def create_latency_topic(self, topic: str) -> None:
        """A topic whose records carry the broker's append time (LogAppendTime)."""
        run_tool([str(TOOLS["produce"]), f"--bootstrap={self.bootstrap}", f"--topic={topic}",
                  f"--create_partitions={PARTITIONS}", "--log_append_time"], 120,
                 f"create {topic}")

    def produce(self, topic: str, count: int, rate: float = 0, warmup: int = 0,
                timeout: float = 1800) -> dict:
        argv = [str(TOOLS["produce"]), f"--bootstrap={self.bootstrap}", f"--topic={topic}",
                f"--count={count}", f"--keys={KEYS}", f"--value_bytes={VALUE_BYTES}"]
        if rate > 0:
            argv += [f"--rate={rate}", f"--warmup={warmup}"]
        return last_json_line(run_tool(argv, timeout, f"bench_produce {topic}"), "bench_produce")


# ---------------------------------------------------------------- workers

def start_worker(kind: str, out: Path, name: str, work_us: int = 0,
                 handler_threads: int | None = None, extra: list[str] | None = None,
                 unix: bool = False, nice: int = 0) -> tuple[Proc, str, Path | None]:
    """Starts a worker; returns it, ferry's target for it and its stats file
    (C++ only). unix: the C++ worker listens on a unix socket in `out` (the
    sidecar layout) instead of loopback TCP."""
    port_file = out / f"{name}.port"
    port_file.unlink(missing_ok=True)  # a stale one (same --out again) names a dead worker
    stats = None
    listen = "127.0.0.1:0"
    if unix:
        if kind != "cpp":
            raise HarnessError(f"+unix is for the C++ worker only, not {kind}")
        sock = out / f"{name}.sock"
        sock.unlink(missing_ok=True)
        listen = f"unix:{sock}"
    if kind == "cpp":
        stats = out / f"{name}.stats.json"
        argv = [str(TOOLS["bench_worker"]), f"--listen={listen}", f"--port_file={port_file}",
                f"--stats={stats}", "--max_in_flight=256",
                f"--handler_threads={handler_threads or 2}", f"--work_us={work_us}"] + (extra or [])
    elif kind == "python":
        argv = [str(TOOLS["python"]), "-m", "ferry_worker.examples.worker", "--listen=127.0.0.1:0",
                f"--port_file={port_file}", "--max_in_flight=256",
                f"--concurrency={handler_threads or 4}", f"--work_us={work_us}"]
    elif kind == "go":
        argv = [str(TOOLS["go_worker"]), "--listen=127.0.0.1:0", f"--port_file={port_file}",
                "--max_in_flight=256", f"--concurrency={handler_threads or 64}",
                f"--work_us={work_us}"]
    else:
        raise HarnessError(f"unknown worker kind {kind}")
    proc = Proc(name, argv, out, nice=nice)
    port = int(wait_for_file(port_file, proc, 60))  # 0 for unix:, once it serves
    return proc, (listen if unix else f"ipv4:127.0.0.1:{port}"), stats


def read_stats(path: Path | None) -> dict | None:
    if path is None:
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- ferry

class Ferry:
    def __init__(self, out: Path, name: str, bootstrap: str, topic: str, ordering: str,
                 worker_target: str, extra: str = "", nice: int = 0):
        self.name = name
        self.config = out / f"{name}.yaml"
        self.group = f"bench-{name}-{int(time.time() * 1000)}"
        self.config.write_text(ferry_config(name, bootstrap, self.group, topic, ordering,
                                            worker_target, extra))
        self.proc = Proc(name, [str(TOOLS["ferry"]), f"--config={self.config}"], out, nice=nice)
        self._offset = 0
        self._partial = b""
        self.lines: list[dict] = []  # parsed progress lines, with local receive time

    def poll_progress(self) -> dict | None:
        """Reads new log lines; returns the newest progress line (or None)."""
        try:
            with open(self.proc.log_path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return None
        self._offset += len(data)
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        now = time.monotonic()
        newest = None
        for raw in complete:
            m = PROGRESS_RE.match(raw.decode(errors="replace"))
            if not m:
                continue
            line = {"t": now, "ts": parse_log_time(m.group(1)), "consumed": int(m.group(3)),
                    "acked": int(m.group(4)), "failed": int(m.group(5)),
                    "in_flight": int(m.group(6)), "buffered": int(m.group(7)),
                    "streams": int(m.group(8)), "partitions": int(m.group(9)),
                    "committed": int(m.group(10))}
            self.lines.append(line)
            newest = line
        return newest

    def check_alive(self) -> None:
        if not self.proc.alive():
            raise HarnessError(f"ferry ({self.name}) exited with {self.proc.popen.returncode}:\n"
                               f"{self.proc.tail(30)}")


def ferry_config(name: str, bootstrap: str, group: str, topic: str, ordering: str,
                 worker_target: str, extra: str = "") -> str:
    """The YAML config of one ferry run: ferry's defaults plus the harness
    flags (SETTINGS) and the phase's `extra` sections."""
    # --ferry_kafka name=value: more librdkafka properties in ferry's kafka: map.
    kafka_extra = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in
                          (kv.split("=", 1) for kv in SETTINGS["ferry_kafka"]))
    return f"""# Written by bench/harness.py ({name}).
kafka:
  bootstrap.servers: {bootstrap}
  group.id: {group}
{kafka_extra}topics:
  - name: {topic}
    ordering: {ordering}
processors:
  - name: bench
    target: {worker_target}
log:
  progress_interval: {SETTINGS["progress_interval"]}
server:
  listen: 127.0.0.1:0
{"  metrics_listen: 127.0.0.1:0" if ferry_knows_metrics_listen() else ""}
shutdown:
  grace: 5s
{extra}{SETTINGS["ferry_extra"]}"""


_METRICS_LISTEN: bool | None = None


def ferry_knows_metrics_listen() -> bool:
    """server.metrics_listen is new; older ferry builds reject the key."""
    global _METRICS_LISTEN
    if _METRICS_LISTEN is None:
        probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"ferry-bench-probe-{os.getpid()}.yaml"
        probe.write_text("kafka:\n  bootstrap.servers: 127.0.0.1:9\ntopics:\n  - name: t\n"
                         "processors:\n  - name: p\n    target: ipv4:127.0.0.1:1\n"
                         "server:\n  metrics_listen: 127.0.0.1:0\n")
        done = subprocess.run([str(TOOLS["ferry"]), f"--config={probe}", "--check_config"],
                              capture_output=True, text=True)
        probe.unlink()
        _METRICS_LISTEN = done.returncode == 0
    return _METRICS_LISTEN


def parse_log_time(text: str) -> float:
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return float("nan")


def steady_rate(lines: list[dict], total: int) -> tuple[float | None, dict]:
    """Rate over the progress lines strictly inside the run (the first line
    with acked > 0 to the last with acked < total), by ferry's own timestamps;
    falls back to the whole run's bracket when the run is too short."""
    inside = [l for l in lines if 0 < l["acked"] < total]
    if len(inside) >= 3:
        a, b = inside[0], inside[-1]
        if b["ts"] > a["ts"]:
            return (b["acked"] - a["acked"]) / (b["ts"] - a["ts"]), {
                "method": "progress lines inside the run", "events": b["acked"] - a["acked"],
                "seconds": round(b["ts"] - a["ts"], 3)}
    started = [l for l in lines if l["acked"] > 0]
    after = [l for l in started if l["acked"] >= total]
    if started and after and after[0]["ts"] > started[0]["ts"]:
        a, b = started[0], after[0]
        return (b["acked"] - a["acked"]) / (b["ts"] - a["ts"]), {
            "method": "first progress line with acks to the first with all (a lower bound)",
            "events": b["acked"] - a["acked"], "seconds": round(b["ts"] - a["ts"], 3)}
    return None, {"method": "none (too few progress lines)"}

