"""The phases of ferry's benchmark harness (bench/README.md): baselines A and
B, the transport floor, ferry's variants, the live peak, latency and memory.
Each returns a dict that bench/harness.py puts into results.json."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from harness_procs import (JAVA_CP, PARTITIONS, SETTINGS, TARGETS, TOOLS, Broker, CpuWindow,
                           Ferry, HarnessError, Proc, fmt_cores, last_json_line, log,
                           proc_nice, proc_status_kib, read_stats, run_tool, start_worker,
                           steady_rate,
                           wait_for_file)
from harness_report import fmt_rate, nice_label


def parse_variant(variant: str) -> tuple[str, str, str, bool]:
    """<ordering>-<worker>[+lanesN][+unix] -> (ordering, worker, ferry config
    extra, unix): ferry's defaults unless a suffix says otherwise."""
    base, *tweaks = variant.split("+")
    ordering, worker_kind = base.split("-", 1)
    extra, unix = "", False
    for tweak in tweaks:
        m = re.fullmatch(r"lanes(\d+)", tweak)
        if m:
            extra += f"lanes:\n  count: {m.group(1)}\n"
        elif tweak == "unix":
            unix = True
        else:
            raise HarnessError(f"unknown variant tweak {tweak!r} (lanesN, unix)")
    return ordering, worker_kind, extra, unix


def cpu_window(idle, first, done):
    """The two CPU samples, each (t, ferry_cpu, worker_cpu, acked), that
    bracket a variant's events: from the first progress line with events
    acked to the one with all of them, so start-up is not charged. A short run
    (bench/smoke) can ack everything within one progress interval; then the
    window starts at the last sample with nothing acked yet. None if no
    events fall inside either window."""
    if done is None:
        return None
    for start in (first, idle):
        if start is not None and done[3] > start[3]:
            return start, done
    return None


def set_headline_rate(result: dict, stats, rate, how: dict, timed_out: bool) -> None:
    """The headline rate: first to last handler call where the worker says
    (same definition as baselines A and B), else ferry's progress lines. The
    worker writes its final stats as it stops (a short run can end before its
    periodic rewrite), so `stats` is read only after it stopped."""
    if stats and stats["events"] > 1 and stats["last_wall_us"] > stats["first_wall_us"]:
        secs = (stats["last_wall_us"] - stats["first_wall_us"]) / 1e6
        result["rate_worker"] = (stats["events"] - 1) / secs
        result["worker_seconds"] = round(secs, 3)
        result["worker_events"] = stats["events"]
    # How ferry batched (C++ bench_worker only): events per Events message
    # and per Results message, over the whole run.
    for field, key in (("events_messages", "events_per_events_message"),
                       ("results_messages", "events_per_results_message")):
        if stats and stats.get(field):
            result[key] = round(stats["events"] / stats[field], 2)
    result["rate"] = rate if timed_out else (result.get("rate_worker") or rate)
    result["rate_source"] = ("worker: first to last handler call" if result.get("rate_worker")
                             and not timed_out else how.get("method"))


def run_ferry_variant(args, out: Path, broker: Broker, topic: str, total: int, variant: str) -> dict:
    ordering, worker_kind, extra, unix = parse_variant(variant)
    name = variant.replace("+", "-")
    log(f"ferry {name}: ordering={ordering} worker={worker_kind} {variant.partition('+')[2]}")
    worker, target, stats_path = start_worker(worker_kind, out, f"{name}-worker", unix=unix)
    ferry = None
    result: dict = {"name": name, "ordering": ordering, "worker": worker_kind, "events": total,
                    "config_extra": extra, "target": target}
    try:
        ferry = Ferry(out, name, broker.bootstrap, topic, ordering, target, extra=extra)
        deadline = time.monotonic() + args.max_seconds
        # CPU samples, each (t, ferry_cpu, worker_cpu, acked); see cpu_window.
        idle = (time.monotonic(), ferry.proc.cpu(), worker.cpu(), 0)
        first = None
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
                if line["acked"] == 0:
                    idle = (time.monotonic(), ferry.proc.cpu(), worker.cpu(), 0)
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
        window = cpu_window(idle, first, done_at)
        if window is not None:
            start, end = window
            events_window = end[3] - start[3]
            result["cpu_s_per_m_ferry"] = round((end[1] - start[1]) / events_window * 1e6, 2)
            result["cpu_s_per_m_worker"] = round((end[2] - start[2]) / events_window * 1e6, 2)
            result["cpu_window_from_idle"] = start is idle
    finally:
        if ferry is not None:
            rc = ferry.proc.stop(30)
            result["ferry_exit"] = rc
        worker.stop(15)
    set_headline_rate(result, read_stats(stats_path), rate, how, timed_out)
    log(f"ferry {name}: {fmt_rate(result.get('rate'))} ev/s"
        f"{' (partial: stopped after ' + str(args.max_seconds) + 's)' if result.get('partial') else ''}"
        f", ferry RSS peak {result.get('ferry_peak_rss_mib')} MiB,"
        f" CPU s/M ferry {result.get('cpu_s_per_m_ferry')} worker {result.get('cpu_s_per_m_worker')}"
        + (f", events per Events message {result['events_per_events_message']},"
           f" per Results message {result.get('events_per_results_message')}"
           if "events_per_events_message" in result else ""))
    return result


# ---------------------------------------------------------------- baselines

def run_baseline_a(broker: Broker, topic: str, total: int, runs: int) -> dict:
    log(f"baseline A: plain librdkafka consumer ({runs} runs, median)")
    results = []
    for _ in range(runs):
        out = run_tool([str(TOOLS["consume"]), f"--bootstrap={broker.bootstrap}",
                        f"--topic={topic}", f"--count={total}",
                        f"--kafka={SETTINGS['floor_kafka']}"], 900, "bench_consume")
        results.append(last_json_line(out, "bench_consume"))
    results.sort(key=lambda r: r["rate"])
    r = dict(results[len(results) // 2])
    r.pop("latency", None)
    r.pop("append_latency", None)
    r["runs"] = [x["rate"] for x in results]
    r["cpu_s_per_m"] = round(r["cpu_s"] / r["events"] * 1e6, 2)
    r["kafka_extra"] = SETTINGS["floor_kafka"]
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


# ---------------------------------------------------------------- transport floor

def run_floor(args, out: Path, broker: Broker, topic: str, total: int) -> dict:
    """The transport floor (issue 17): bench/transport_floor forwards the topic
    over one gRPC stream to its no-op sink; --floor_runs runs, the median
    counts. CPU per event of both processes, like ferry's."""
    runs = max(1, args.floor_runs)
    log(f"transport floor: librdkafka -> 1 gRPC stream -> no-op sink (credit "
        f"{args.floor_credit}, batch {args.floor_batch}; {runs} runs, median)")
    results = []
    for i in range(runs):
        port_file = out / f"floor-sink-{i + 1}.port"
        port_file.unlink(missing_ok=True)
        sink = Proc(f"floor-sink-{i + 1}", [str(TOOLS["floor"]), "--mode=sink",
                                            "--listen=127.0.0.1:0", f"--port_file={port_file}",
                                            f"--credit={args.floor_credit}"], out)
        try:
            port = int(wait_for_file(port_file, sink, 60))
            sink_cpu0 = sink.cpu()
            text = run_tool([str(TOOLS["floor"]), "--mode=forward",
                             f"--target=ipv4:127.0.0.1:{port}", f"--bootstrap={broker.bootstrap}",
                             f"--topic={topic}", f"--count={total}", f"--batch={args.floor_batch}",
                             f"--kafka={SETTINGS['floor_kafka']}"], 900, "transport_floor forward")
            r = last_json_line(text, "transport_floor forward")
            sink_cpu1 = sink.cpu()
            if not sink.alive():
                raise HarnessError(f"floor sink exited:\n{sink.tail()}")
        finally:
            sink.stop(10)
        r["cpu_s_per_m_forward"] = round(r["cpu_s"] / r["events"] * 1e6, 2)
        if sink_cpu0 is not None and sink_cpu1 is not None:
            r["cpu_s_per_m_sink"] = round((sink_cpu1 - sink_cpu0) / r["events"] * 1e6, 2)
        results.append(r)
    results.sort(key=lambda x: x["rate"])
    r = dict(results[len(results) // 2])
    r["runs"] = [x["rate"] for x in results]
    r["kafka_extra"] = SETTINGS["floor_kafka"]
    log(f"transport floor: {fmt_rate(r['rate'])} ev/s (runs: "
        f"{', '.join(fmt_rate(x) for x in r['runs'])}), CPU s/M forward "
        f"{r['cpu_s_per_m_forward']} sink {r.get('cpu_s_per_m_sink')}, mean batch "
        f"{r.get('mean_batch')}")
    return r


# ---------------------------------------------------------------- live peak

def run_live(args, out: Path, broker: Broker) -> dict:
    """The live peak (issue 17): ferry (KEY, C++ worker) reads a fresh topic
    while bench_produce writes --live_events records to it at full speed; the
    rate is the worker's first to last handler call. CPU per process over the
    run (the producer is this harness's waited-for child)."""
    topic, total = "bench-live", args.live_events
    broker.create_topic(topic)
    log(f"live peak: ferry key-cpp while the producer writes {total:,} records at full speed")
    worker, target, stats_path = start_worker("cpp", out, "live-worker")
    ferry = None
    result: dict = {"events": total, "what": "producer and ferry (KEY, C++ worker) at full "
                                             "speed together; rate: first to last handler call"}
    try:
        ferry = Ferry(out, "live-ferry", broker.bootstrap, topic, "key", target)
        wait_ready(ferry, "live")
        cpu0 = (ferry.proc.cpu(), worker.cpu())
        window = CpuWindow({"ferry": ferry.proc.popen.pid, "worker": worker.popen.pid,
                            "broker": broker.pid})
        produced: dict = {}
        failed: list[Exception] = []

        def produce() -> None:
            try:
                produced.update(broker.produce(topic, total))
            except Exception as e:  # noqa: BLE001 - reported by the loop below
                failed.append(e)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        deadline = time.monotonic() + args.max_seconds + 60
        while True:
            stats = read_stats(stats_path)
            if stats and stats["events"] >= total:
                break
            if failed:
                raise HarnessError(f"live: the producer failed: {failed[0]}")
            ferry.check_alive()
            if time.monotonic() > deadline:
                raise HarnessError(f"live: the worker saw {stats and stats['events']} of {total} "
                                   f"in {args.max_seconds + 60}s")
            time.sleep(0.05)
        cpu1 = (ferry.proc.cpu(), worker.cpu())
        producer.join(120)
        result["cpu_cores"] = window.cores()
        result["producer"] = produced
        secs = (stats["last_wall_us"] - stats["first_wall_us"]) / 1e6
        result["rate"] = (stats["events"] - 1) / secs if secs > 0 else None
        result["seconds"] = round(secs, 3)
        result["cpu_s_per_m_ferry"] = round((cpu1[0] - cpu0[0]) / total * 1e6, 2)
        result["cpu_s_per_m_worker"] = round((cpu1[1] - cpu0[1]) / total * 1e6, 2)
        result["ferry_peak_rss_mib"] = round((proc_status_kib(ferry.proc.pid, "VmHWM") or 0) / 1024, 1)
    finally:
        if ferry is not None:
            ferry.proc.stop(30)
        worker.stop(15)
    log(f"live peak: {fmt_rate(result.get('rate'))} ev/s (producer "
        f"{fmt_rate(result['producer'].get('rate'))} ev/s); "
        f"{fmt_cores(result.get('cpu_cores'))}")
    return result


# ---------------------------------------------------------------- latency

def wait_ready(ferry: Ferry, what: str, timeout: float = 60) -> None:
    """Until ferry has every partition and a worker stream up."""
    deadline = time.monotonic() + timeout
    while True:
        ferry.check_alive()
        line = ferry.poll_progress()
        if line and line["partitions"] >= PARTITIONS and line["streams"] > 0:
            return
        if time.monotonic() > deadline:
            raise HarnessError(f"{what}: ferry not ready in {timeout}s:\n{ferry.proc.tail(20)}")
        time.sleep(0.05)


def run_latency(args, out: Path, broker: Broker, rate: float, floor: bool = True,
                tag: str = "") -> dict:
    """ferry's latency at `rate` (and, with floor, baseline A's at the same rate)."""
    warm_s, dur_s = args.latency_warmup_s, args.latency_seconds
    total = int(rate * (warm_s + dur_s))
    result: dict = {"rate": round(rate), "warmup_s": warm_s, "measured_s": dur_s,
                    "events": total,
                    "what": "ferry/baseline_a: broker append time (LogAppendTime, 1 ms resolution, "
                            "so up to 1 ms high) -> handler (ferry) or consume() (A); "
                            "*_from_send: producer send time -> same (adds producer linger.ms=5)"}
    latency_ferry(args, out, broker, rate, tag, result)
    niced = nice_label(result)
    if not floor:
        f = result["ferry"]
        log(f"latency at {fmt_rate(rate)} ev/s{niced}: ferry p50 {f['p50_us'] / 1000:.2f} ms "
            f"p99 {f['p99_us'] / 1000:.2f} ms; {fmt_cores(result.get('cpu_cores_while_producing'))}")
        return result
    latency_baseline_a(out, broker, rate, result)
    f, a = result["ferry"], result["baseline_a"]
    log(f"latency at {fmt_rate(rate)} ev/s{niced}: ferry p50 {f['p50_us'] / 1000:.2f} ms p99 "
        f"{f['p99_us'] / 1000:.2f} ms; floor (A) p50 {a['p50_us'] / 1000:.2f} ms p99 "
        f"{a['p99_us'] / 1000:.2f} ms")
    log(f"  ferry's {fmt_cores(result.get('cpu_cores_while_producing'))}")
    log(f"  the floor's {fmt_cores(result.get('baseline_a_cpu_cores_while_producing'))}")
    return result


def latency_ferry(args, out: Path, broker: Broker, rate: float, tag: str, result: dict) -> None:
    """ferry (KEY ordering, C++ bench worker) while the producer writes at `rate`."""
    warm_s, dur_s = args.latency_warmup_s, args.latency_seconds
    warm, total = int(rate * warm_s), int(rate * (warm_s + dur_s))
    topic = f"bench-latency-ferry{tag}"
    broker.create_latency_topic(topic)
    log(f"latency: ferry at {fmt_rate(rate)} ev/s for {warm_s}+{dur_s}s")
    # --latency_nice: a diagnostic, not a setting to report targets with: it
    # tells how much of the tail is the scheduler of a machine that the broker
    # and the producer share with ferry and its worker.
    nice = args.latency_nice
    if nice:
        result["nice"] = nice
    worker, target, stats_path = start_worker(
        "cpp", out, f"latency{tag}-worker",
        extra=[f"--slow_log={out}/latency{tag}-slow.tsv", "--slow_us=20000"], nice=nice)
    ferry = None
    try:
        ferry = Ferry(out, f"latency{tag}-ferry", broker.bootstrap, topic, "key", target,
                      nice=nice)
        wait_ready(ferry, "latency")
        if nice:
            # coreutils' nice runs the program anyway when it may not lower the value.
            want = max(-20, min(19, os.nice(0) + nice))
            got = {p.name: proc_nice(p.pid) for p in (ferry.proc, worker)}
            if any(v != want for v in got.values()):
                raise HarnessError(f"--latency_nice {nice}: wanted nice {want}, got {got} "
                                   "(a value below 0 needs root or CAP_SYS_NICE)")
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


def latency_baseline_a(out: Path, broker: Broker, rate: float, result: dict) -> None:
    """The latency floor: baseline A reading the same rate."""
    warm, total = int(rate * result["warmup_s"]), result["events"]
    topic = "bench-latency-a"
    broker.create_latency_topic(topic)
    log(f"latency: baseline A at {fmt_rate(rate)} ev/s (the floor)")
    ready = out / "latency-a.ready"
    consumer = Proc("latency-a", [str(TOOLS["consume"]), f"--bootstrap={broker.bootstrap}",
                                  f"--topic={topic}", f"--count={total}",
                                  f"--ready_file={ready}",
                                  f"--kafka={SETTINGS['floor_kafka']}"], out)
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


# ---------------------------------------------------------------- memory

def run_memory(args, out: Path, broker: Broker) -> dict:
    topic = "bench-memory"
    broker.create_topic(topic)
    log(f"memory: producing a backlog of {args.backlog:,} records")
    produced = broker.produce(topic, args.backlog)
    log(f"memory: ferry (KEY, default budgets) with a slow worker "
        f"({args.slow_work_us} us/event) for {args.memory_seconds}s")
    worker, target, _ = start_worker("cpp", out, "memory-worker", work_us=args.slow_work_us,
                                     handler_threads=2)
    ferry = None
    samples = []
    result: dict = {"backlog": args.backlog, "producer": produced,
                    "slow_worker_us_per_event": args.slow_work_us,
                    "seconds": args.memory_seconds,
                    "budget": {"max_buffered_events": 100000, "max_buffered_bytes_mib": 256,
                               "rss_target_mib": TARGETS["rss_mib"]}}
    try:
        ferry = Ferry(out, "memory-ferry", broker.bootstrap, topic, "key", target,
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


