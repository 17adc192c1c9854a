#!/usr/bin/env python3
"""ferry's benchmark harness (bench/README.md). Run it through bench/run or
bench/smoke, which build the tools first; this file parses the flags and runs
the phases (bench/harness_phases.py) with the processes of
bench/harness_procs.py, then reports (bench/harness_report.py).

Phases, all on one real Kafka broker (tests/kafka/kafka_broker) on 127.0.0.1:
  1. workload   topic with 8 partitions, --events records of 200 B, keys
                key-0..key-9999, produced before anything is timed;
  2. baseline A bench_consume: plain librdkafka consumer, reads to the end;
  3. baseline B Confluent Parallel Consumer, KEY ordering, no-op function;
  4. floor      transport_floor: the same consumer forwarding every record
                over one gRPC stream to a no-op sink (no engine);
  5. ferry      one run per variant (ordering x worker x transport), each a
                fresh consumer group on the same topic, commits on;
  6. live       ferry key-cpp and the producer at full speed together (the
                live peak);
  7. latency    ferry (KEY, C++ bench worker) while bench_produce writes at
                half of ferry's backlog peak (with baseline A at that rate as
                the floor), then at half of the live peak, then at
                --latency_extra_rates;
  8. memory     a --backlog topic read by ferry with a slow worker; ferry's
                RSS is sampled against its memory budget.
Writes OUT/results.json (with issue 17's headline fields at the top level)
and (with matplotlib) OUT/results.png, and prints a summary. Exit status: 0
unless the harness itself broke (a tool failed to start, a run did not
finish); timings never fail it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import harness_phases as phases
from harness_procs import (KEYS, PARTITIONS, ROOT, SETTINGS, TARGETS, TOOLS, VALUE_BYTES, Broker,
                           HarnessError, loadavg, log, machine_busy)
from harness_report import headline, plot, summarize

DEFAULT_VARIANTS = "key-cpp,key-go,key-python,unordered-cpp,key-cpp+lanes64,key-cpp+unix"
PHASES = "a,b,floor,ferry,live,latency,memory"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000, help="records in the throughput topic")
    p.add_argument("--backlog", type=int, default=5_000_000, help="records in the memory-check backlog")
    p.add_argument("--out", default="", help="output directory (default bench/out/<time>)")
    p.add_argument("--variants", default=DEFAULT_VARIANTS,
                   help="ferry variants, comma-separated: <key|partition|unordered>-<cpp|go|python>"
                        "[+lanesN][+unix] (+lanesN: lanes.count N instead of ferry's default, "
                        "auto: 2048 for 2 streams x 256 in flight; +unix: the C++ worker on a "
                        "unix: socket, the sidecar layout)")
    p.add_argument("--max_seconds", type=float, default=120,
                   help="a ferry variant still running after this is stopped and its steady rate "
                        "reported as partial")
    p.add_argument("--skip", default="", help=f"phases to skip: {PHASES}")
    p.add_argument("--a_runs", type=int, default=3, help="baseline A runs (the median counts)")
    p.add_argument("--pc_concurrency", type=int, default=16, help="Parallel Consumer maxConcurrency")
    p.add_argument("--java_heap", default="1g", help="baseline B's -Xmx")
    p.add_argument("--floor_runs", type=int, default=3, help="transport floor runs (the median counts)")
    p.add_argument("--floor_credit", type=int, default=256,
                   help="the floor sink's credit (Ready.max_in_flight; ferry's workers use 256)")
    p.add_argument("--floor_batch", type=int, default=64,
                   help="the most events per Events message of the floor (ferry's default 64)")
    p.add_argument("--floor_kafka", action="append", default=[], metavar="NAME=VALUE",
                   help="an extra librdkafka property of the baseline A and floor consumers "
                        "(repeatable), e.g. fetch.queue.backoff.ms=10")
    p.add_argument("--ferry_kafka", action="append", default=[], metavar="NAME=VALUE",
                   help="an extra entry of every ferry config's kafka: map (repeatable)")
    p.add_argument("--live_events", type=int, default=0,
                   help="records the live phase produces (default: --events)")
    p.add_argument("--latency_rate", type=float, default=0,
                   help="events/s of the latency run (default: half of ferry key-cpp's rate)")
    p.add_argument("--latency_extra_rates", default="2000,10000",
                   help="also measure ferry's latency at these rates (events/s, comma-separated)")
    p.add_argument("--latency_nice", type=int, default=0,
                   help="diagnostic: run the latency phases' ferry and worker at this nice value "
                        "(e.g. -10, needs root) to see how much of the tail is CPU scheduling")
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
    for kv in args.floor_kafka + args.ferry_kafka:
        if "=" not in kv or kv.startswith("="):
            p.error(f"not NAME=VALUE: {kv!r}")
        if "," in kv and kv in args.floor_kafka:
            p.error(f"--floor_kafka takes one property per flag: {kv!r}")
    args.live_events = args.live_events or args.events
    return args


def apply_settings(args: argparse.Namespace) -> None:
    SETTINGS["progress_interval"] = args.progress_interval
    extra = args.ferry_extra.replace("\\n", "\n")
    SETTINGS["ferry_extra"] = extra if not extra or extra.endswith("\n") else extra + "\n"
    SETTINGS["ferry_kafka"] = list(args.ferry_kafka)
    SETTINGS["floor_kafka"] = ",".join(args.floor_kafka)
    if args.ferry_bin:
        TOOLS["ferry"] = Path(args.ferry_bin).resolve()
    if args.bench_worker_bin:
        TOOLS["bench_worker"] = Path(args.bench_worker_bin).resolve()


def new_result(args: argparse.Namespace) -> dict:
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": args.command or " ".join(sys.argv),
            "config": {"events": args.events, "backlog": args.backlog,
                       "ferry_extra": args.ferry_extra, "progress_interval": args.progress_interval,
                       "partitions": PARTITIONS, "keys": KEYS, "value_bytes": VALUE_BYTES,
                       "variants": args.variants, "pc_concurrency": args.pc_concurrency,
                       "floor_kafka": args.floor_kafka, "ferry_kafka": args.ferry_kafka,
                       "floor_credit": args.floor_credit, "floor_batch": args.floor_batch,
                       "live_events": args.live_events},
            "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
            "git": subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                                  capture_output=True, text=True).stdout.strip(),
            "targets": TARGETS, "errors": []}


def run_latency_phases(args, out: Path, broker: Broker, res: dict, phase) -> None:
    """Latency at half of the backlog peak (with A as the floor), at half of
    the live peak, and at the extra rates."""
    peak = next((v["rate"] for v in res["ferry"] if v["name"] == "key-cpp" and v.get("rate")), None)
    rate = args.latency_rate or (peak / 2 if peak else 0)
    if rate > 0:
        res["latency"] = phase("latency", lambda: phases.run_latency(args, out, broker, rate))
        if res["latency"] is not None:
            res["latency"]["basis"] = ("--latency_rate" if args.latency_rate
                                       else "half of ferry key-cpp's backlog rate")
    else:
        res["errors"].append("latency: no ferry key-cpp rate to halve (and no --latency_rate)")
    live = (res.get("live") or {}).get("rate")
    if live:
        res["latency_half_live"] = phase("latency at half the live peak", lambda: phases.run_latency(
            args, out, broker, live / 2, floor=False, tag="-half-live"))
        if res["latency_half_live"] is not None:
            res["latency_half_live"]["basis"] = "half of the live peak (producer and ferry together)"
    res["latency_sweep"] = []
    for i, extra in enumerate(float(x) for x in filter(None, args.latency_extra_rates.split(","))):
        r = phase(f"latency at {extra:.0f}", lambda: phases.run_latency(
            args, out, broker, extra, floor=False, tag=f"-{i + 1}"))
        if r:
            res["latency_sweep"].append(r)


def run_phases(args, out: Path, broker: Broker, res: dict, phase) -> None:
    skip = set(filter(None, args.skip.split(",")))
    topic = "bench-throughput"
    broker.create_topic(topic)
    log(f"workload: {args.events:,} records of {VALUE_BYTES} B, {KEYS} keys")
    res["workload"] = broker.produce(topic, args.events)
    if "a" not in skip:
        res["baseline_a"] = phase("baseline A", lambda: phases.run_baseline_a(
            broker, topic, args.events, args.a_runs))
    if "b" not in skip:
        res["baseline_b"] = phase("baseline B", lambda: phases.run_baseline_b(
            args, broker, topic, args.events))
    if "floor" not in skip:
        res["floor"] = phase("transport floor", lambda: phases.run_floor(
            args, out, broker, topic, args.events))
    res["ferry"] = []
    if "ferry" not in skip:
        for variant in filter(None, args.variants.split(",")):
            r = phase(f"ferry {variant}", lambda: phases.run_ferry_variant(
                args, out, broker, topic, args.events, variant))
            if r:
                res["ferry"].append(r)
    a, b, fl = (((res.get(k) or {}).get("rate")) for k in ("baseline_a", "baseline_b", "floor"))
    for v in res["ferry"]:
        if v.get("rate"):
            v["ferry_over_a"] = round(v["rate"] / a, 4) if a else None
            v["ferry_over_b"] = round(v["rate"] / b, 3) if b else None
            v["ferry_over_floor"] = round(v["rate"] / fl, 4) if fl else None
    if "live" not in skip:
        res["live"] = phase("live peak", lambda: phases.run_live(args, out, broker))
    if "latency" not in skip:
        run_latency_phases(args, out, broker, res, phase)
    if "memory" not in skip:
        res["memory"] = phase("memory", lambda: phases.run_memory(args, out, broker))


def main() -> int:
    args = parse_args()
    if args.replot:
        src = Path(args.replot)
        note = plot(json.loads(src.read_text()), src.with_name("results.png"))
        print(note or f"wrote {src.with_name('results.png')}")
        return 0
    # SIGTERM unwinds like Ctrl-C: every phase stops its processes, then the broker.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    apply_settings(args)
    out = Path(args.out) if args.out else ROOT / "bench/out" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    res = new_result(args)
    log(f"output in {out}")
    res["machine"]["busy_before_start"] = machine_busy(3)
    res["machine"]["loadavg"] = {"start": loadavg()}
    log(f"machine: {res['machine']['busy_before_start']:.0%} of the CPUs busy before the "
        f"benchmark started (other users); loadavg {res['machine']['loadavg']['start']}")
    broker = None

    def phase(name, fn):
        res["machine"]["loadavg"][name] = loadavg()
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - record, go on with the other phases
            res["errors"].append(f"{name}: {e}")
            log(f"ERROR in {name}: {e}")
            if not isinstance(e, HarnessError):
                traceback.print_exc()
            return None

    try:
        broker = Broker(out)
        log(f"broker at {broker.bootstrap}")
        run_phases(args, out, broker, res, phase)
    except HarnessError as e:
        res["errors"].append(str(e))
        log(f"ERROR: {e}")
    finally:
        if broker is not None:
            broker.stop(keep_data=args.keep_broker_data)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    # Issue 17's headline figures first, so anyone can read them off the file.
    res = {**headline(res), **res}
    (out / "results.json").write_text(json.dumps(res, indent=2) + "\n")
    note = phase("plot", lambda: plot(res, out / "results.png"))
    if note:
        log(note)
    print("\n".join(["", "==== ferry benchmark ===="] + summarize(res) +
                     [f"results: {out / 'results.json'}"]), flush=True)
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
