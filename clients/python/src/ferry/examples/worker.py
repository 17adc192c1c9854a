"""example worker: a ferry processor that acks every event, with the knobs that
end-to-end tests, benchmarks and the k8s example need (the flags of
clients/cpp/examples/example_worker.cc).

    python -m ferry.examples.worker --listen 127.0.0.1:0 --port_file /tmp/port

  --listen ADDR        address to serve on (default 127.0.0.1:50051; port 0 = any)
  --max_in_flight N    credit per stream (default 64)
  --concurrency N      handler threads (default 4; --handler_threads is an alias)
  --name NAME          worker name sent in Ready (default: host name)
  --work_us N          simulated work per event, microseconds (default 0)
  --record FILE        append "<key>\\t<payload>\\t<CLOCK_MONOTONIC ns at handler start>\\t
                       <partition>\\t<offset>\\n" per event (buffered, flushed on shutdown;
                       backslash, tab, CR and LF inside key/payload are escaped as \\\\ \\t \\r \\n)
  --stats FILE         on shutdown write "events_received=N\\nmax_held=M\\ncredit_violations=K\\n"
  --port_file FILE     after binding, write the port (atomically: temp file + rename)
SIGTERM / SIGINT: graceful stop with a 5 s grace, then exit 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time

import ferry


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

    def __init__(self, path: str):
        self._file = open(path, "ab", buffering=1 << 20)
        self._lock = threading.Lock()

    def record(self, event, start_ns: int) -> None:
        line = b"%s\t%s\t%d\t%d\t%d\n" % (
            _escape(event.key),
            _escape(event.payload),
            start_ns,
            event.partition,
            event.offset,
        )
        with self._lock:
            if self._file is not None:
                self._file.write(line)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()  # flushes
            self._file = None


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
    p = argparse.ArgumentParser(prog="python -m ferry.examples.worker", description=__doc__.split("\n")[0])
    p.add_argument("--listen", default="127.0.0.1:50051", help="address to serve on (port 0: any free port)")
    p.add_argument("--max_in_flight", type=int, default=64, help="credit per stream")
    p.add_argument("--concurrency", "--handler_threads", dest="concurrency", type=int, default=4,
                   help="threads running the handler")
    p.add_argument("--name", default="", help="worker name reported to ferry (default: host name)")
    p.add_argument("--record", default="", help="append one line per handled event to this file")
    p.add_argument("--stats", default="", help="write counters to this file on shutdown")
    p.add_argument("--work_us", type=int, default=0, help="simulated work per event, microseconds")
    p.add_argument("--port_file", default="", help="write the bound port to this file")
    return p.parse_args(argv)


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

    recorder = Recorder(args.record) if args.record else None
    work_s = args.work_us / 1e6

    # ---- The processor. This is the part to copy. ----
    def handle(event):
        start_ns = time.monotonic_ns()  # CLOCK_MONOTONIC
        # Real work goes here. Return ferry.retry("why") to be called again later
        # or ferry.fail("why") to dead-letter the event; an exception counts as fail.
        if work_s > 0:
            time.sleep(work_s)
        if recorder is not None:
            recorder.record(event, start_ns)
        return ferry.ok()

    try:
        worker = ferry.Worker(
            handle,
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
        )
        try:
            write_file_atomically(args.stats, stats)
        except OSError as exc:
            print(f"example_worker: cannot write --stats {args.stats}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
