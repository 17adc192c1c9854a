"""example worker: a ferry processor that acks every event, with the knobs that
end-to-end tests, benchmarks and the k8s example need (the flags of
clients/cpp/examples/example_worker.cc).

    python -m ferry_worker.examples.worker --listen 127.0.0.1:0 --port_file /tmp/port

  --listen ADDR        address to serve on (default 127.0.0.1:50051; port 0 = any)
  --max_in_flight N    credit per stream (default 64)
  --concurrency N      handler threads (default 4; --handler_threads is an alias)
  --max_run N          the most events of one run (Ready.max_run; default: the SDK's, 64;
                       0 or 1: no runs)
  --per_event          use the per-event handler form (default: the batch form, one
                       handler call per received message)
  --name NAME          worker name sent in Ready (default: host name)
  --work_us N          simulated work per event, microseconds (default 0)
  --record FILE        append "<key>\\t<payload>\\t<CLOCK_MONOTONIC ns at handler start>\\t
                       <partition>\\t<offset>\\t<answer>\\n" per handler run (answer: OK, RETRY
                       or FAIL; buffered, flushed on shutdown; backslash, tab, CR and LF
                       inside key/payload are escaped as \\\\ \\t \\r \\n)
  --record_flush       write each --record line through before answering (kill -9 safe)
  --stats FILE         on shutdown write "events_received=N\\nmax_held=M\\ncredit_violations=K\\n
                       cancelled=C\\n" (C: handler runs that saw ferry's Cancel for their event)
  --port_file FILE     after binding, write the port (atomically: temp file + rename)
Fault injection, for failure and conformance tests (all off by default):
  --retry_attempts K   answer RETRY until the event's attempt reaches K
  --fail_every N       answer FAIL when (payload as an integer + 1) % N == 0
  --throw_every N      raise from the handler when (payload as an integer + 1) % N == 0
                       (the SDK reports it as FAIL; recorded as FAIL)
  --fail_rate P, --retry_rate P, --stall_rate P   random FAIL / RETRY / stall
  --stall_ms MS        how long a stall holds the event (default 2000); it ends early when
                       ferry cancels the event (ctx.wait), and the handler then answers FAIL
                       (which the SDK drops)
In the batch form the handler catches per event, so --throw_every still answers FAIL for
exactly those events (and ends their runs: later members come back NOT_ATTEMPTED).
  --seed S             seed of the random choices
SIGTERM / SIGINT: graceful stop with a 5 s grace, then exit 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import threading
import time

import ferry_worker


def _escape(data: bytes) -> bytes:
    if not any(c in data for c in b"\\\t\r\n"):
        return data
    return (
        data.replace(b"\\", b"\\\\")
        .replace(b"\t", b"\\t")
        .replace(b"\n", b"\\n")
        .replace(b"\r", b"\\r")
    )


class Recorder:
    """Appends one line per event; many handler threads share it."""

    def __init__(self, path: str, flush_each_line: bool = False):
        self._file = open(path, "ab", buffering=1 << 20)
        self._flush = flush_each_line
        self._lock = threading.Lock()

    def record(self, event, start_ns: int, answer: str) -> None:
        line = b"%s\t%s\t%d\t%d\t%d\t%s\n" % (
            _escape(event.key),
            _escape(event.payload),
            start_ns,
            event.partition,
            event.offset,
            answer.encode(),
        )
        with self._lock:
            if self._file is not None:
                self._file.write(line)
                # In the kernel before the answer leaves, so a kill -9 loses
                # no line of an answered event.
                if self._flush:
                    self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()  # flushes
            self._file = None


class InjectedError(Exception):
    """What --throw_every raises from the handler."""


class Faults:
    """Fault injection for tests; see the flags. Thread-safe."""

    def __init__(self, args: argparse.Namespace):
        self.retry_attempts = args.retry_attempts
        self.fail_every = args.fail_every
        self.throw_every = args.throw_every
        self.fail_rate = args.fail_rate
        self.retry_rate = args.retry_rate
        self.stall_rate = args.stall_rate
        self.stall_s = args.stall_ms / 1000.0
        self._random = random.Random(args.seed)
        self._lock = threading.Lock()

        self.any = bool(
            self.retry_attempts > 0 or self.fail_every > 0 or self.throw_every > 0
            or self.fail_rate > 0 or self.retry_rate > 0 or self.stall_rate > 0
        )

    def decide(self, event, wait):
        """(result or None to process normally, raise_it). ``wait(seconds)``
        sleeps and returns True early when ferry cancels the event."""
        if not self.any:
            return None, False
        if self.retry_attempts > 0 and event.attempt < self.retry_attempts:
            return ferry_worker.retry(f"injected: retry until attempt {self.retry_attempts}"), False
        try:
            sequence = int(event.payload)
        except ValueError:
            sequence = None
        if self.fail_every > 0 and sequence is not None and (sequence + 1) % self.fail_every == 0:
            return ferry_worker.fail(f"injected: every {self.fail_every}"), False
        if self.throw_every > 0 and sequence is not None and (sequence + 1) % self.throw_every == 0:
            return ferry_worker.fail(f"injected: throw every {self.throw_every}"), True
        with self._lock:
            roll = self._random.random()
            stall = self._random.random() < self.stall_rate
        if stall and wait(self.stall_s):  # True: ferry cancelled it (or the stream ended)
            return ferry_worker.fail("cancelled by ferry"), False
        if roll < self.fail_rate:
            return ferry_worker.fail("injected: random failure"), False
        if roll < self.fail_rate + self.retry_rate:
            return ferry_worker.retry("injected: random"), False
        return None, False


_ANSWERS = {ferry_worker.Status.OK: "OK", ferry_worker.Status.RETRY: "RETRY", ferry_worker.Status.FAIL: "FAIL"}
_DEFAULT_MAX_RUN = 64  # ferry_worker.Worker's default


def write_file_atomically(path: str, content: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ferry_worker.examples.worker", description=__doc__.split("\n")[0])
    p.add_argument("--listen", default="127.0.0.1:50051", help="address to serve on (port 0: any free port)")
    p.add_argument("--max_in_flight", type=int, default=64, help="credit per stream")
    p.add_argument("--concurrency", "--handler_threads", dest="concurrency", type=int, default=4,
                   help="threads running the handler")
    p.add_argument("--max_run", type=int, default=_DEFAULT_MAX_RUN,
                   help="most events of one run (Ready.max_run); 0 or 1: no runs")
    p.add_argument("--per_event", action="store_true",
                   help="per-event handler form instead of the batch form")
    p.add_argument("--name", default="", help="worker name reported to ferry (default: host name)")
    p.add_argument("--record", default="", help="append one line per handled event to this file")
    p.add_argument("--stats", default="", help="write counters to this file on shutdown")
    p.add_argument("--work_us", type=int, default=0, help="simulated work per event, microseconds")
    p.add_argument("--port_file", default="", help="write the bound port to this file")
    p.add_argument("--record_flush", action="store_true",
                   help="write each --record line through before answering (survives kill -9)")
    p.add_argument("--retry_attempts", type=int, default=0,
                   help="answer RETRY until the event's attempt reaches this")
    p.add_argument("--fail_every", type=int, default=0,
                   help="answer FAIL when (payload as an integer + 1) %% N == 0")
    p.add_argument("--throw_every", type=int, default=0,
                   help="raise from the handler when (payload as an integer + 1) %% N == 0")
    p.add_argument("--fail_rate", type=float, default=0.0, help="probability of answering FAIL")
    p.add_argument("--retry_rate", type=float, default=0.0, help="probability of answering RETRY")
    p.add_argument("--stall_rate", type=float, default=0.0,
                   help="probability of holding an event for --stall_ms first")
    p.add_argument("--stall_ms", type=int, default=2000, help="how long a stalled event is held")
    p.add_argument("--seed", type=int, default=1, help="seed of the random fault choices")
    return p.parse_args(argv)


class Processor:
    """The handlers, in both forms, and what they count. This is the part to copy."""

    def __init__(self, args: argparse.Namespace, recorder):
        self.work_s = args.work_us / 1e6
        self.faults = Faults(args)
        self.recorder = recorder
        self.ok = ferry_worker.ok()
        # Asking about Cancel per event costs a lock; only --stats reports it.
        self.cancel_aware = bool(args.stats)
        self.cancelled_runs = 0  # handler runs that saw their event cancelled
        self.cancelled_lock = threading.Lock()
        self.worker = None  # set before it starts; handlers ask it about Cancel

    def handle(self, event, wait):
        start_ns = time.monotonic_ns()  # CLOCK_MONOTONIC
        # Real work goes here. Return ferry_worker.retry("why") to be called again later
        # or ferry_worker.fail("why") to dead-letter the event; an exception counts as
        # fail. wait(s) sleeps and says when ferry gave up on the event.
        if self.work_s > 0:
            time.sleep(self.work_s)
        result, raise_it = self.faults.decide(event, wait)
        if result is None:
            result = self.ok
        if self.cancel_aware and self.worker.is_cancelled(event.id):
            with self.cancelled_lock:
                self.cancelled_runs += 1
        if self.recorder is not None:
            self.recorder.record(event, start_ns, _ANSWERS[result.status])
        if raise_it:
            raise InjectedError(result.message)
        return result

    def handle_batch(self, events, ctx):
        # One call per received message (or per wave of runs; see the SDK's
        # README): one Result per event, in order. Catching per event keeps
        # one bad event from failing the others.
        # (An event ferry cancelled while earlier ones ran still goes through
        # handle(): it is recorded, and a stall on it ends at once.)
        results = []
        for event in events:
            try:
                results.append(self.handle(event, lambda s, i=event.id: ctx.wait(i, s)))
            except Exception as exc:  # noqa: BLE001 - one event's failure, not the batch's
                results.append(ferry_worker.fail(str(exc) or type(exc).__name__))
        return results

    def handle_one(self, event, ctx):
        return self.handle(event, ctx.wait)


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("FERRY_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    stop = threading.Event()
    got = []

    def on_signal(signum, _frame):
        got.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        recorder = Recorder(args.record, args.record_flush) if args.record else None
    except OSError as exc:
        print(f"example_worker: cannot open --record {args.record}: {exc}", file=sys.stderr)
        return 1
    processor = Processor(args, recorder)
    try:
        worker = processor.worker = ferry_worker.Worker(
            processor.handle_one if args.per_event else processor.handle_batch,
            batch=not args.per_event,
            max_run=args.max_run,
            max_in_flight=args.max_in_flight,
            concurrency=args.concurrency,
            name=args.name or None,
        )
        port = worker.start(args.listen)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"example_worker: {exc}", file=sys.stderr)
        return 1
    if args.port_file:
        try:
            write_file_atomically(args.port_file, str(port))
        except OSError as exc:
            print(f"example_worker: cannot write --port_file {args.port_file}: {exc}", file=sys.stderr)
            worker.stop(0)
            return 1
    host = args.listen.rsplit(":", 1)[0]
    print(f"example_worker listening on {host}:{port} (max_in_flight={args.max_in_flight})", flush=True)

    while not stop.wait(1.0):
        pass
    print(f"example_worker: signal {got[0]}, shutting down", file=sys.stderr, flush=True)
    worker.stop(5.0)
    if recorder is not None:
        recorder.close()
    if args.stats:
        stats = (
            f"events_received={worker.events_received}\n"
            f"max_held={worker.max_held}\n"
            f"credit_violations={worker.credit_violations}\n"
            f"cancelled={processor.cancelled_runs}\n"
        )
        try:
            write_file_atomically(args.stats, stats)
        except OSError as exc:
            print(f"example_worker: cannot write --stats {args.stats}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
