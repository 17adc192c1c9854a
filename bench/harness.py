#!/usr/bin/env python3
"""ferry's benchmark harness (bench/README.md). Run it through bench/run or
bench/smoke, which build the tools first; this file only orchestrates.

Phases, all on one real Kafka broker (tests/kafka/kafka_broker) on 127.0.0.1:
  1. workload   topic with 8 partitions, --events records of 200 B, keys
                key-0..key-9999, produced before anything is timed;
  2. baseline A bench_consume: plain librdkafka consumer, reads to the end;
  3. baseline B Confluent Parallel Consumer, KEY ordering, no-op function;
  4. ferry      one run per variant (ordering x worker), each a fresh consumer
                group on the same topic, commits on;
  5. latency    ferry (KEY, C++ bench worker) while bench_produce writes at
                half of ferry's peak rate; the same rate through baseline A
                gives the floor (producer -> broker -> librdkafka);
  6. memory     a --backlog topic read by ferry with a slow worker; ferry's
                RSS is sampled against its memory budget.
Writes OUT/results.json and (with matplotlib) OUT/results.png, and prints a
summary. Exit status: 0 unless the harness itself broke (a tool failed to
start, a run did not finish); timings never fail it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "bazel-bin"
TOOLS = {
    "ferry": BIN / "server/ferry",
    "kafka_tool": BIN / "tests/tools/kafka_tool",
    "produce": BIN / "bench/bench_produce",
    "consume": BIN / "bench/bench_consume",
    "bench_worker": BIN / "bench/bench_worker",
    "go_worker": ROOT / "bench/.bin/go-example-worker",
    "python": ROOT / "clients/python/.venv/bin/python",
    "broker": ROOT / "tests/kafka/kafka_broker",
}
JAVA_CP = f"{ROOT}/bench/java/target/ferry-bench-baseline-b.jar:{ROOT}/bench/java/target/lib/*"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PARTITIONS = 8
KEYS = 10000
VALUE_BYTES = 200
# Targets from issue 10 (reported, never asserted).
TARGETS = {"ferry_over_a": 0.5, "ferry_over_b": 3.0, "p99_ms": 5.0, "rss_mib": 256}

PROGRESS_INTERVAL = "200ms"  # --progress_interval
FERRY_EXTRA = ""  # --ferry_extra
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

    def __init__(self, name: str, argv: list[str], out_dir: Path, env: dict | None = None):
        self.name = name
        self.log_path = out_dir / f"{name}.log"
        self.log_file = open(self.log_path, "wb")
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
                 handler_threads: int | None = None,
                 extra: list[str] | None = None) -> tuple[Proc, int, Path | None]:
    port_file = out / f"{name}.port"
    port_file.unlink(missing_ok=True)  # a stale one (same --out again) names a dead worker
    stats = None
    if kind == "cpp":
        stats = out / f"{name}.stats.json"
        argv = [str(TOOLS["bench_worker"]), "--listen=127.0.0.1:0", f"--port_file={port_file}",
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
    proc = Proc(name, argv, out)
    port = int(wait_for_file(port_file, proc, 60))
    return proc, port, stats


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
                 worker_port: int, extra: str = ""):
        self.name = name
        self.config = out / f"{name}.yaml"
        self.group = f"bench-{name}-{int(time.time() * 1000)}"
        self.config.write_text(f"""# Written by bench/harness.py ({name}).
kafka:
  bootstrap.servers: {bootstrap}
  group.id: {self.group}
topics:
  - name: {topic}
    ordering: {ordering}
processors:
  - name: bench
    target: ipv4:127.0.0.1:{worker_port}
log:
  progress_interval: {PROGRESS_INTERVAL}
server:
  listen: 127.0.0.1:0
{"  metrics_listen: 127.0.0.1:0" if ferry_knows_metrics_listen() else ""}
shutdown:
  grace: 5s
{extra}{FERRY_EXTRA}""")
        self.proc = Proc(name, [str(TOOLS["ferry"]), f"--config={self.config}"], out)
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


def run_ferry_variant(args, out: Path, broker: Broker, topic: str, total: int, variant: str) -> dict:
    # <ordering>-<worker>[+lanesN]: ferry's defaults unless a suffix says otherwise.
    base, *tweaks = variant.split("+")
    ordering, worker_kind = base.split("-", 1)
    name = variant.replace("+", "-")
    extra = ""
    for tweak in tweaks:
        m = re.fullmatch(r"lanes(\d+)", tweak)
        if not m:
            raise HarnessError(f"unknown variant tweak {tweak!r} (lanesN)")
        extra += f"lanes:\n  count: {m.group(1)}\n"
    log(f"ferry {name}: ordering={ordering} worker={worker_kind} {' '.join(tweaks)}")
    worker, port, stats_path = start_worker(worker_kind, out, f"{name}-worker")
    ferry = None
    result: dict = {"name": name, "ordering": ordering, "worker": worker_kind, "events": total,
                    "config_extra": extra}
    try:
        ferry = Ferry(out, name, broker.bootstrap, topic, ordering, port, extra=extra)
        deadline = time.monotonic() + args.max_seconds
        first = None  # (t, ferry_cpu, worker_cpu, acked)
        done_at = None
        last = None
        timed_out = False
        while True:
            ferry.check_alive()
            if not worker.alive():
                raise HarnessError(f"worker {worker.name} exited:\n{worker.tail()}")
            line = ferry.poll_progress()
            if line is not None:
                last = line
                if first is None and line["acked"] > 0:
                    first = (time.monotonic(), ferry.proc.cpu(), worker.cpu(), line["acked"])
                if line["acked"] >= total and done_at is None:
                    done_at = (time.monotonic(), ferry.proc.cpu(), worker.cpu(), line["acked"])
                if done_at is not None and line["committed"] >= total:
                    break
            if time.monotonic() > deadline:
                timed_out = True
                if first is not None and last is not None and last["acked"] > first[3]:
                    done_at = done_at or (time.monotonic(), ferry.proc.cpu(), worker.cpu(),
                                          last["acked"])
                    break
                raise HarnessError(f"ferry {name}: no progress within {args.max_seconds}s:\n"
                                   f"{ferry.proc.tail(20)}")
            time.sleep(0.05)
        result["committed_all"] = not timed_out and last["committed"] >= total
        result["partial"] = timed_out
        result["acked_at_stop"] = last["acked"]
        rate, how = steady_rate(ferry.lines, total if not timed_out else 10**18)
        result["rate_progress"] = rate
        result["rate_progress_how"] = how
        result["ferry_peak_rss_mib"] = round((proc_status_kib(ferry.proc.pid, "VmHWM") or 0) / 1024, 1)
        events_window = done_at[3] - first[3]
        if events_window > 0:
            result["cpu_s_per_m_ferry"] = round((done_at[1] - first[1]) / events_window * 1e6, 2)
            result["cpu_s_per_m_worker"] = round((done_at[2] - first[2]) / events_window * 1e6, 2)
        stats = read_stats(stats_path)
        if stats and stats["events"] > 1 and stats["last_wall_us"] > stats["first_wall_us"]:
            secs = (stats["last_wall_us"] - stats["first_wall_us"]) / 1e6
            result["rate_worker"] = (stats["events"] - 1) / secs
            result["worker_seconds"] = round(secs, 3)
            result["worker_events"] = stats["events"]
        # The headline rate: first to last handler call where the worker says
        # (same definition as baselines A and B), else ferry's progress lines.
        result["rate"] = result.get("rate_worker") or rate
        if timed_out:
            result["rate"] = rate
        result["rate_source"] = ("worker: first to last handler call" if result.get("rate_worker")
                                 and not timed_out else how.get("method"))
    finally:
        if ferry is not None:
            rc = ferry.proc.stop(30)
            result["ferry_exit"] = rc
        worker.stop(15)
    log(f"ferry {name}: {fmt_rate(result.get('rate'))} ev/s"
        f"{' (partial: stopped after ' + str(args.max_seconds) + 's)' if result.get('partial') else ''}"
        f", ferry RSS peak {result.get('ferry_peak_rss_mib')} MiB,"
        f" CPU s/M ferry {result.get('cpu_s_per_m_ferry')} worker {result.get('cpu_s_per_m_worker')}")
    return result


# ---------------------------------------------------------------- baselines

def run_baseline_a(broker: Broker, topic: str, total: int, runs: int) -> dict:
    log(f"baseline A: plain librdkafka consumer ({runs} runs, median)")
    results = []
    for _ in range(runs):
        out = run_tool([str(TOOLS["consume"]), f"--bootstrap={broker.bootstrap}",
                        f"--topic={topic}", f"--count={total}"], 900, "bench_consume")
        results.append(last_json_line(out, "bench_consume"))
    results.sort(key=lambda r: r["rate"])
    r = dict(results[len(results) // 2])
    r.pop("latency", None)
    r.pop("append_latency", None)
    r["runs"] = [x["rate"] for x in results]
    r["cpu_s_per_m"] = round(r["cpu_s"] / r["events"] * 1e6, 2)
    log(f"baseline A: {fmt_rate(r['rate'])} ev/s (runs: {', '.join(fmt_rate(x) for x in r['runs'])})")
    return r


def run_baseline_b(args, broker: Broker, topic: str, total: int) -> dict:
    log("baseline B: Confluent Parallel Consumer (KEY, no-op)")
    argv = ["java", f"-Xmx{args.java_heap}", "-cp", JAVA_CP, "dev.ferry.bench.ParallelConsumerBench",
            "--bootstrap", broker.bootstrap, "--topic", topic, "--count", str(total),
            "--ordering", "KEY", "--concurrency", str(args.pc_concurrency),
            "--timeout_s", str(int(args.max_seconds * 3))]
    r = last_json_line(run_tool(argv, args.max_seconds * 3 + 60, "ParallelConsumerBench"),
                       "ParallelConsumerBench")
    r["cpu_s_per_m"] = round(r["cpu_s"] / r["events"] * 1e6, 2)
    r["what"] = "io.confluent.parallelconsumer:parallel-consumer-core 0.5.3.2, kafka-clients 3.9.1"
    log(f"baseline B: {fmt_rate(r['rate'])} ev/s")
    return r


# ---------------------------------------------------------------- latency

def run_latency(args, out: Path, broker: Broker, rate: float, floor: bool = True,
                tag: str = "") -> dict:
    warm_s, dur_s = args.latency_warmup_s, args.latency_seconds
    warm, total = int(rate * warm_s), int(rate * (warm_s + dur_s))
    result: dict = {"rate": round(rate), "warmup_s": warm_s, "measured_s": dur_s,
                    "events": total,
                    "what": "ferry/baseline_a: broker append time (LogAppendTime, 1 ms resolution, "
                            "so up to 1 ms high) -> handler (ferry) or consume() (A); "
                            "*_from_send: producer send time -> same (adds producer linger.ms=5)"}

    # ferry, KEY ordering, C++ bench worker.
    topic = f"bench-latency-ferry{tag}"
    broker.create_latency_topic(topic)
    log(f"latency: ferry at {fmt_rate(rate)} ev/s for {warm_s}+{dur_s}s")
    worker, port, stats_path = start_worker(
        "cpp", out, f"latency{tag}-worker",
        extra=[f"--slow_log={out}/latency{tag}-slow.tsv", "--slow_us=20000"])
    ferry = None
    try:
        ferry = Ferry(out, f"latency{tag}-ferry", broker.bootstrap, topic, "key", port)
        deadline = time.monotonic() + 60
        while True:  # ready: partitions assigned and worker streams up
            ferry.check_alive()
            line = ferry.poll_progress()
            if line and line["partitions"] >= PARTITIONS and line["streams"] > 0:
                break
            if time.monotonic() > deadline:
                raise HarnessError(f"latency: ferry not ready in 60s:\n{ferry.proc.tail(20)}")
            time.sleep(0.05)
        cpu0 = (ferry.proc.cpu(), worker.cpu())
        window = CpuWindow({"ferry": ferry.proc.popen.pid, "worker": worker.popen.pid,
                            "broker": broker.pid})
        produced = broker.produce(topic, total, rate=rate, warmup=warm)
        result["cpu_cores_while_producing"] = window.cores()
        deadline = time.monotonic() + 60
        while True:
            stats = read_stats(stats_path)
            if stats and stats["events"] >= total:
                break
            ferry.check_alive()
            if time.monotonic() > deadline:
                raise HarnessError(f"latency: the worker saw {stats and stats['events']} of {total}")
            time.sleep(0.1)
        cpu1 = (ferry.proc.cpu(), worker.cpu())
        result["producer"] = produced
        result["ferry"] = stats["append_latency"]
        result["ferry_from_send"] = stats["latency"]
        result["ferry_peak_rss_mib"] = round((proc_status_kib(ferry.proc.pid, "VmHWM") or 0) / 1024, 1)
        result["cpu_s_per_m_ferry"] = round((cpu1[0] - cpu0[0]) / total * 1e6, 2)
        result["cpu_s_per_m_worker"] = round((cpu1[1] - cpu0[1]) / total * 1e6, 2)
        result["cpu_cores_ferry"] = round((cpu1[0] - cpu0[0]) / (warm_s + dur_s), 2)
    finally:
        if ferry is not None:
            ferry.proc.stop(30)
        worker.stop(15)
    # Worker stats are final after its shutdown.
    final = read_stats(stats_path)
    if final:
        result["ferry"] = final["append_latency"]
        result["ferry_from_send"] = final["latency"]

    if not floor:
        f = result["ferry"]
        log(f"latency at {fmt_rate(rate)} ev/s: ferry p50 {f['p50_us'] / 1000:.2f} ms "
            f"p99 {f['p99_us'] / 1000:.2f} ms; {fmt_cores(result.get('cpu_cores_while_producing'))}")
        return result
    # The floor: baseline A reading the same rate.
    topic = "bench-latency-a"
    broker.create_latency_topic(topic)
    log(f"latency: baseline A at {fmt_rate(rate)} ev/s (the floor)")
    ready = out / "latency-a.ready"
    consumer = Proc("latency-a", [str(TOOLS["consume"]), f"--bootstrap={broker.bootstrap}",
                                  f"--topic={topic}", f"--count={total}",
                                  f"--ready_file={ready}"], out)
    try:
        wait_for_file(ready, consumer, 60)
        window = CpuWindow({"consumer": consumer.popen.pid, "broker": broker.pid})
        broker.produce(topic, total, rate=rate, warmup=warm)
        result["baseline_a_cpu_cores_while_producing"] = window.cores()
        consumer.popen.wait(120)
        if consumer.popen.returncode != 0:
            raise HarnessError(f"latency: bench_consume failed:\n{consumer.tail()}")
        a_result = last_json_line(consumer.log_path.read_text(), "bench_consume")
        result["baseline_a"] = a_result["append_latency"]
        result["baseline_a_from_send"] = a_result["latency"]
    finally:
        consumer.stop(10)
    f, a = result["ferry"], result["baseline_a"]
    log(f"latency at {fmt_rate(rate)} ev/s: ferry p50 {f['p50_us'] / 1000:.2f} ms p99 "
        f"{f['p99_us'] / 1000:.2f} ms; floor (A) p50 {a['p50_us'] / 1000:.2f} ms p99 "
        f"{a['p99_us'] / 1000:.2f} ms")
    log(f"  ferry's {fmt_cores(result.get('cpu_cores_while_producing'))}")
    log(f"  the floor's {fmt_cores(result.get('baseline_a_cpu_cores_while_producing'))}")
    return result


# ---------------------------------------------------------------- memory

def run_memory(args, out: Path, broker: Broker) -> dict:
    topic = "bench-memory"
    broker.create_topic(topic)
    log(f"memory: producing a backlog of {args.backlog:,} records")
    produced = broker.produce(topic, args.backlog)
    log(f"memory: ferry (KEY, default budgets) with a slow worker "
        f"({args.slow_work_us} us/event) for {args.memory_seconds}s")
    worker, port, _ = start_worker("cpp", out, "memory-worker", work_us=args.slow_work_us,
                                   handler_threads=2)
    ferry = None
    samples = []
    result: dict = {"backlog": args.backlog, "producer": produced,
                    "slow_worker_us_per_event": args.slow_work_us,
                    "seconds": args.memory_seconds,
                    "budget": {"max_buffered_events": 100000, "max_buffered_bytes_mib": 256,
                               "rss_target_mib": TARGETS["rss_mib"]}}
    try:
        ferry = Ferry(out, "memory-ferry", broker.bootstrap, topic, "key", port,
                      extra="budgets:\n  max_buffered_events: 100000\n"
                            "  max_buffered_bytes: 256MiB\n")
        start = time.monotonic()
        while time.monotonic() - start < args.memory_seconds:
            ferry.check_alive()
            ferry.poll_progress()
            rss = proc_status_kib(ferry.proc.pid, "VmRSS")
            if rss is not None:
                samples.append((round(time.monotonic() - start, 2), rss))
            time.sleep(0.1)
        ferry.poll_progress()
        hwm = proc_status_kib(ferry.proc.pid, "VmHWM") or 0
        result["ferry_peak_rss_mib"] = round(hwm / 1024, 1)
        result["ferry_last_rss_mib"] = round(samples[-1][1] / 1024, 1) if samples else None
        result["max_buffered_events"] = max((l["buffered"] for l in ferry.lines), default=None)
        result["max_consumed_minus_acked"] = max(
            (l["consumed"] - l["acked"] - l["failed"] for l in ferry.lines), default=None)
        result["acked"] = ferry.lines[-1]["acked"] if ferry.lines else 0
        result["rss_samples_mib"] = [(t, round(k / 1024, 1)) for t, k in samples[::5]]
        result["under_target"] = hwm / 1024 <= TARGETS["rss_mib"]
    finally:
        if ferry is not None:
            ferry.proc.stop(30)
        worker.stop(15)
    log(f"memory: ferry peak RSS {result.get('ferry_peak_rss_mib')} MiB with "
        f"{args.backlog:,} backlog (max buffered {result.get('max_buffered_events')})")
    return result


# ---------------------------------------------------------------- report

def fmt_rate(rate) -> str:
    return "n/a" if rate is None else f"{rate:,.0f}"


def summarize(res: dict) -> list[str]:
    lines = []
    a = res.get("baseline_a", {}).get("rate")
    b = res.get("baseline_b", {}).get("rate")
    lines.append(f"events per run: {res['config']['events']:,} x {VALUE_BYTES} B, {KEYS} keys, "
                 f"{PARTITIONS} partitions")
    busy = res.get("machine", {}).get("busy_before_start")
    if busy is not None:
        lines.append(f"machine: {busy:.0%} CPU busy before the start (other users of the machine)")
    lines.append(f"baseline A (librdkafka, no-op):       {fmt_rate(a)} ev/s")
    lines.append(f"baseline B (Parallel Consumer, KEY):  {fmt_rate(b)} ev/s")
    for v in res.get("ferry", []):
        extra = " (partial run)" if v.get("partial") else ""
        ra = f"{v['rate'] / a:.3f}" if v.get("rate") and a else "n/a"
        rb = f"{v['rate'] / b:.2f}" if v.get("rate") and b else "n/a"
        lines.append(f"ferry {v['name']:<16} {fmt_rate(v.get('rate')):>10} ev/s  ferry/A {ra}  "
                     f"ferry/B {rb}  CPU s/M ferry {v.get('cpu_s_per_m_ferry')} worker "
                     f"{v.get('cpu_s_per_m_worker')}  RSS {v.get('ferry_peak_rss_mib')} MiB{extra}")
    lat = res.get("latency")
    if lat and "ferry" in lat:
        f, fa = lat["ferry"], lat.get("baseline_a", {})
        lines.append(f"latency (broker append -> handler) at {fmt_rate(lat['rate'])} ev/s: ferry p50 "
                     f"{f['p50_us'] / 1000:.2f} ms p99 {f['p99_us'] / 1000:.2f} ms; "
                     f"floor (A) p50 {fa.get('p50_us', -1) / 1000:.2f} ms p99 "
                     f"{fa.get('p99_us', -1) / 1000:.2f} ms")
        if lat.get("cpu_cores_while_producing"):
            lines.append(f"  ferry's {fmt_cores(lat['cpu_cores_while_producing'])}")
        if lat.get("baseline_a_cpu_cores_while_producing"):
            lines.append(f"  the floor's {fmt_cores(lat['baseline_a_cpu_cores_while_producing'])}")
    for sw in res.get("latency_sweep") or []:
        f = sw["ferry"]
        lines.append(f"latency (broker append -> handler) at {fmt_rate(sw['rate'])} ev/s: ferry p50 "
                     f"{f['p50_us'] / 1000:.2f} ms p99 {f['p99_us'] / 1000:.2f} ms")
        if sw.get("cpu_cores_while_producing"):
            lines.append(f"  {fmt_cores(sw['cpu_cores_while_producing'])}")
    mem = res.get("memory")
    if mem and "ferry_peak_rss_mib" in mem:
        lines.append(f"memory: backlog {mem['backlog']:,}, slow worker: ferry peak RSS "
                     f"{mem['ferry_peak_rss_mib']} MiB (target <= {TARGETS['rss_mib']} MiB)")
    for err in res.get("errors", []):
        lines.append(f"ERROR: {err.splitlines()[0]}")
    return lines


def plot(res: dict, path: Path) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not available (bench/.venv); no plot"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names, rates, colors = [], [], []
    if (res.get("baseline_a") or {}).get("rate"):
        names.append("A\nlibrdkafka"); rates.append(res["baseline_a"]["rate"]); colors.append("#888")
    if (res.get("baseline_b") or {}).get("rate"):
        names.append("B\nParallel C."); rates.append(res["baseline_b"]["rate"]); colors.append("#c84")
    for v in res.get("ferry") or []:
        if v.get("rate"):
            names.append("ferry\n" + v["name"].replace("-", "\n"))
            rates.append(v["rate"]); colors.append("#48c")
    ax1.bar(range(len(rates)), [r / 1000 for r in rates], color=colors)
    for i, r in enumerate(rates):
        ax1.text(i, r / 1000 * 1.08, f"{r / 1000:.0f}k", ha="center", fontsize=7)
    ax1.set_xticks(range(len(rates)))
    ax1.set_xticklabels(names, fontsize=7)
    ax1.set_yscale("log")
    ax1.set_ylabel("thousand events/s (log)")
    ax1.set_title(f"throughput, {res['config']['events']:,} events x 200 B", fontsize=10)
    points = []
    for lat in [res.get("latency")] + list(res.get("latency_sweep") or []):
        if lat and "ferry" in lat:
            points.append(lat)
    points.sort(key=lambda l: l["rate"])
    if points:
        xs = [p["rate"] / 1000 for p in points]
        for q, style, label in (("p50_us", "o-", "ferry p50"), ("p99_us", "s-", "ferry p99")):
            ax2.plot(xs, [max(p["ferry"][q], 1) / 1000 for p in points], style, label=label)
        floor = [p for p in points if "baseline_a" in p]
        if floor:
            ax2.plot([p["rate"] / 1000 for p in floor], [p["baseline_a"]["p50_us"] / 1000 for p in floor],
                     "k^", label="A p50 (floor)")
            ax2.plot([p["rate"] / 1000 for p in floor], [p["baseline_a"]["p99_us"] / 1000 for p in floor],
                     "kv", label="A p99 (floor)")
        ax2.axhline(TARGETS["p99_ms"], color="r", ls="--", lw=1, label="p99 target 5 ms")
        ax2.set_yscale("log")
        ax2.set_xlabel("produce rate, thousand events/s (the last: half of ferry key-cpp's peak)")
        ax2.set_ylabel("ms, broker append -> handler (log)")
        ax2.set_title("latency, ferry KEY + C++ no-op worker", fontsize=10)
        ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return None


# ---------------------------------------------------------------- main

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000, help="records in the throughput topic")
    p.add_argument("--backlog", type=int, default=5_000_000, help="records in the memory-check backlog")
    p.add_argument("--out", default="", help="output directory (default bench/out/<time>)")
    p.add_argument("--variants", default="key-cpp,key-go,key-python,unordered-cpp,key-cpp+lanes64",
                   help="ferry variants, comma-separated: <key|partition|unordered>-<cpp|go|python>"
                        "[+lanesN] (+lanesN: lanes.count N instead of ferry's default, auto: "
                        "2048 for 2 streams x 256 in flight)")
    p.add_argument("--max_seconds", type=float, default=120,
                   help="a ferry variant still running after this is stopped and its steady rate "
                        "reported as partial")
    p.add_argument("--skip", default="", help="phases to skip: a,b,ferry,latency,memory")
    p.add_argument("--a_runs", type=int, default=3, help="baseline A runs (the median counts)")
    p.add_argument("--pc_concurrency", type=int, default=16, help="Parallel Consumer maxConcurrency")
    p.add_argument("--java_heap", default="1g", help="baseline B's -Xmx")
    p.add_argument("--latency_rate", type=float, default=0,
                   help="events/s of the latency run (default: half of ferry key-cpp's rate)")
    p.add_argument("--latency_extra_rates", default="2000,10000",
                   help="also measure ferry's latency at these rates (events/s, comma-separated)")
    p.add_argument("--latency_warmup_s", type=float, default=3)
    p.add_argument("--latency_seconds", type=float, default=20)
    p.add_argument("--memory_seconds", type=float, default=30)
    p.add_argument("--slow_work_us", type=int, default=1000)
    p.add_argument("--progress_interval", default="200ms",
                   help="ferry's log.progress_interval (the harness reads rates from those lines)")
    p.add_argument("--ferry_extra", default="",
                   help="YAML appended to every ferry config (top-level sections ferry's config "
                        "does not set already, e.g. 'commit:\\n  interval: 5s')")
    p.add_argument("--ferry_bin", default="",
                   help="run this ferry binary instead of bazel-bin/server/ferry (e.g. a copy "
                        "built from an earlier commit, for a before/after comparison)")
    p.add_argument("--bench_worker_bin", default="",
                   help="run this bench_worker instead of bazel-bin/bench/bench_worker")
    p.add_argument("--command", default="", help="the command line recorded in results.json")
    p.add_argument("--keep_broker_data", action="store_true",
                   help="keep the broker's log dirs in OUT/broker/data (default: deleted at the end)")
    p.add_argument("--replot", default="", help="only redraw results.png from this results.json")
    args = p.parse_args()
    if args.replot:
        src = Path(args.replot)
        note = plot(json.loads(src.read_text()), src.with_name("results.png"))
        print(note or f"wrote {src.with_name('results.png')}")
        return 0
    # SIGTERM unwinds like Ctrl-C: every phase stops its processes, then the broker.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    global PROGRESS_INTERVAL, FERRY_EXTRA
    PROGRESS_INTERVAL = args.progress_interval
    FERRY_EXTRA = args.ferry_extra.replace("\\n", "\n")
    if FERRY_EXTRA and not FERRY_EXTRA.endswith("\n"):
        FERRY_EXTRA += "\n"
    skip = set(filter(None, args.skip.split(",")))
    if args.ferry_bin:
        TOOLS["ferry"] = Path(args.ferry_bin).resolve()
    if args.bench_worker_bin:
        TOOLS["bench_worker"] = Path(args.bench_worker_bin).resolve()

    out = Path(args.out) if args.out else ROOT / "bench/out" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "command": args.command or " ".join(sys.argv),
                 "config": {"events": args.events, "backlog": args.backlog,
                            "ferry_extra": args.ferry_extra, "progress_interval": args.progress_interval,
                            "partitions": PARTITIONS, "keys": KEYS, "value_bytes": VALUE_BYTES,
                            "variants": args.variants, "pc_concurrency": args.pc_concurrency},
                 "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
                 "git": subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                                       capture_output=True, text=True).stdout.strip(),
                 "targets": TARGETS, "errors": []}
    log(f"output in {out}")
    res["machine"]["busy_before_start"] = machine_busy(3)
    res["machine"]["loadavg"] = {"start": loadavg()}
    log(f"machine: {res['machine']['busy_before_start']:.0%} of the CPUs busy before the "
        f"benchmark started (other users); loadavg {res['machine']['loadavg']['start']}")
    broker = None
    status = 0

    def phase(name, fn):
        nonlocal status
        res["machine"]["loadavg"][name] = loadavg()
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - record, go on with the other phases
            status = 1
            msg = f"{name}: {e}"
            res["errors"].append(msg)
            log(f"ERROR in {name}: {e}")
            if not isinstance(e, HarnessError):
                traceback.print_exc()
            return None

    try:
        broker = Broker(out)
        log(f"broker at {broker.bootstrap}")
        topic = "bench-throughput"
        broker.create_topic(topic)
        log(f"workload: {args.events:,} records of {VALUE_BYTES} B, {KEYS} keys")
        res["workload"] = broker.produce(topic, args.events)
        if "a" not in skip:
            res["baseline_a"] = phase("baseline A", lambda: run_baseline_a(broker, topic, args.events, args.a_runs))
        if "b" not in skip:
            res["baseline_b"] = phase("baseline B", lambda: run_baseline_b(args, broker, topic, args.events))
        res["ferry"] = []
        if "ferry" not in skip:
            for variant in filter(None, args.variants.split(",")):
                r = phase(f"ferry {variant}", lambda: run_ferry_variant(
                    args, out, broker, topic, args.events, variant))
                if r:
                    res["ferry"].append(r)
        a = (res.get("baseline_a") or {}).get("rate")
        b = (res.get("baseline_b") or {}).get("rate")
        for v in res["ferry"]:
            if v.get("rate"):
                v["ferry_over_a"] = round(v["rate"] / a, 4) if a else None
                v["ferry_over_b"] = round(v["rate"] / b, 3) if b else None
        if "latency" not in skip:
            peak = next((v["rate"] for v in res["ferry"] if v["name"] == "key-cpp" and v.get("rate")),
                        None)
            rate = args.latency_rate or (peak / 2 if peak else 0)
            if rate > 0:
                res["latency"] = phase("latency", lambda: run_latency(args, out, broker, rate))
                if res["latency"] is not None:
                    res["latency"]["basis"] = ("--latency_rate" if args.latency_rate
                                               else "half of ferry key-cpp's rate")
            else:
                res["errors"].append("latency: no ferry key-cpp rate to halve (and no --latency_rate)")
                status = 1
            res["latency_sweep"] = []
            for i, extra in enumerate(float(x) for x in filter(None, args.latency_extra_rates.split(","))):
                r = phase(f"latency at {extra:.0f}", lambda: run_latency(
                    args, out, broker, extra, floor=False, tag=f"-{i + 1}"))
                if r:
                    res["latency_sweep"].append(r)
        if "memory" not in skip:
            res["memory"] = phase("memory", lambda: run_memory(args, out, broker))
    except HarnessError as e:
        res["errors"].append(str(e))
        log(f"ERROR: {e}")
        status = 1
    finally:
        if broker is not None:
            broker.stop(keep_data=args.keep_broker_data)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    (out / "results.json").write_text(json.dumps(res, indent=2) + "\n")
    note = phase("plot", lambda: plot(res, out / "results.png"))
    if note:
        log(note)
    print("\n".join(["", "==== ferry benchmark ===="] + summarize(res) +
                     [f"results: {out / 'results.json'}"]), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
