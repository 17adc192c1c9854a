"""A ferry Processor worker with nothing but the gRPC-generated stubs: no SDK.

Generate the stubs next to this file, then run it:

    python -m grpc_tools.protoc -I ../../proto/ferry/v1 --python_out=. \\
        --grpc_python_out=. processor.proto
    python plain_worker.py --listen 127.0.0.1:50051 --max_in_flight 64

It is the protocol reference: everything an SDK does, written out by hand.
The whole protocol, as this worker speaks it (see README.md):
  1. ferry opens Process (a bidirectional stream); we send Ready{max_in_flight}
     first: that many events of credit.
  2. ferry sends Events{events}; each event uses one unit of credit. We run
     the handler for each on a thread pool (several at once).
  3. We answer each event with a Result (id, status) in a Results message,
     then return the credit with Credit{n} (results alone return none).
  4. Cancel{ids}: ferry no longer wants those results (deadline passed,
     partition moved). A running handler is told (its stall ends early), an
     event not started yet is skipped; no Result is sent for either, but the
     credit comes back once we stopped working on it.
  5. Stopping (SIGTERM): refuse new streams, grant no more credit, do not
     start events that arrive from now on, finish and answer the events
     already taken (up to a grace), then end every stream with UNAVAILABLE:
     ferry redelivers what it did not get a result for.
  6. Runs (--max_run N > 1, sent in Ready.max_run): events of one Events
     message sharing a non-zero run_id are a run, consecutive events of one
     key. We handle a run's events one at a time, in message order, on one
     pool thread; once one does not end OK (RETRY, FAIL, an error, a cancel,
     a graceful stop) every later one is answered NOT_ATTEMPTED unhandled
     (no result for one ferry cancelled), and ferry delivers those again.

It takes the flags of clients/cpp/examples/example_worker.cc (tests/conformance
runs all example workers with the same flags):
  --listen ADDR, --max_in_flight N, --handler_threads N (alias --concurrency),
  --name NAME, --max_run N, --work_us N, --record FILE, --record_flush, --stats FILE,
  --port_file FILE, and the fault flags --retry_attempts K, --fail_every N,
  --throw_every N, --fail_rate P, --retry_rate P, --stall_rate P, --stall_ms MS,
  --seed S. See `--help`.
"""

import argparse
import os
import queue
import random
import signal
import socket
import sys
import threading
import time
from concurrent import futures

import grpc

import processor_pb2 as pb
import processor_pb2_grpc as pb_grpc

_ANSWERS = {pb.Result.OK: b"OK", pb.Result.RETRY: b"RETRY", pb.Result.FAIL: b"FAIL",
            pb.Result.NOT_ATTEMPTED: b"NOT_ATTEMPTED"}


def _escape(data: bytes) -> bytes:
    return (
        data.replace(b"\\", b"\\\\")
        .replace(b"\t", b"\\t")
        .replace(b"\n", b"\\n")
        .replace(b"\r", b"\\r")
    )


class Recorder:
    """--record: one line per handler run; shared by all handler threads."""

    def __init__(self, path: str, flush_each_line: bool):
        self._file = open(path, "ab", buffering=1 << 20)
        self._flush = flush_each_line
        self._lock = threading.Lock()

    def record(self, event, start_ns: int, status) -> None:
        line = b"%s\t%s\t%d\t%d\t%d\t%s\n" % (
            _escape(event.key), _escape(event.payload), start_ns, event.partition,
            event.offset, _ANSWERS[status])
        with self._lock:
            if self._file is not None:
                self._file.write(line)
                if self._flush:  # in the kernel before the answer leaves (kill -9 safe)
                    self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
            self._file = None


class InjectedError(Exception):
    """What --throw_every raises from the handler."""


class Handler:
    """The processor: acks every event, plus the fault injection of the flags."""

    def __init__(self, args, recorder):
        self.args = args
        self.recorder = recorder
        self.random = random.Random(args.seed)
        self.lock = threading.Lock()

    def __call__(self, event, cancelled: threading.Event):
        """Returns (status, message). `cancelled` is set when ferry cancels the event."""
        a = self.args
        start_ns = time.monotonic_ns()  # CLOCK_MONOTONIC
        if a.work_us > 0:
            time.sleep(a.work_us / 1e6)
        status, message, raise_it = pb.Result.OK, "", False
        try:
            sequence = int(event.payload)
        except ValueError:
            sequence = None
        if a.retry_attempts > 0 and event.attempt < a.retry_attempts:
            status, message = pb.Result.RETRY, f"injected: retry until attempt {a.retry_attempts}"
        elif a.fail_every > 0 and sequence is not None and (sequence + 1) % a.fail_every == 0:
            status, message = pb.Result.FAIL, f"injected: every {a.fail_every}"
        elif a.throw_every > 0 and sequence is not None and (sequence + 1) % a.throw_every == 0:
            status, message, raise_it = pb.Result.FAIL, f"injected: throw every {a.throw_every}", True
        else:
            with self.lock:
                roll = self.random.random()
                stall = self.random.random() < a.stall_rate
            if stall and cancelled.wait(a.stall_ms / 1000.0):
                status, message = pb.Result.FAIL, "cancelled by ferry"
            elif roll < a.fail_rate:
                status, message = pb.Result.FAIL, "injected: random failure"
            elif roll < a.fail_rate + a.retry_rate:
                status, message = pb.Result.RETRY, "injected: random"
        if self.recorder is not None:
            self.recorder.record(event, start_ns, status)
        if raise_it:
            raise InjectedError(message)
        return status, message


class Worker(pb_grpc.ProcessorServicer):
    """Serves Process streams; all streams share one handler pool and the counters."""

    def __init__(self, args, handler):
        self.max_in_flight = args.max_in_flight
        self.max_run = args.max_run
        self.name = args.name
        self.handler = handler
        self.pool = futures.ThreadPoolExecutor(max_workers=args.handler_threads,
                                               thread_name_prefix="handler")
        self.lock = threading.Lock()
        self.stopping = False  # no credit, no new events, no new streams
        self.streams = set()
        self.events_received = 0
        self.max_held = 0
        self.credit_violations = 0
        self.cancelled = 0  # events whose Cancel arrived while running or before they started
        self.run_events = 0  # events received as members of a run
        self.not_attempted = 0  # run members answered NOT_ATTEMPTED

    def stop(self, grace: float) -> None:
        """Graceful stop: streams finish what is running, send it, then end."""
        with self.lock:
            self.stopping = True
            streams = list(self.streams)
        for s in streams:
            s.wake()
        deadline = time.monotonic() + grace
        for s in streams:
            s.ended.wait(max(0.0, deadline - time.monotonic()))

    # The gRPC method: one call per stream, on a gRPC server thread.
    def Process(self, request_iterator, context):  # noqa: N802 - the gRPC method name
        with self.lock:
            if self.stopping:
                context.abort(grpc.StatusCode.UNAVAILABLE, "worker shutting down")
            stream = _Stream(self, context)
            self.streams.add(stream)
        try:
            yield from stream.run(request_iterator)
        finally:
            with self.lock:
                self.streams.discard(stream)
            stream.ended.set()


class _InFlight:
    __slots__ = ("event", "cancelled", "submitted", "started")

    def __init__(self, event):
        self.event = event
        self.cancelled = threading.Event()
        self.submitted = False  # handed to the handler pool (it will answer or skip it)
        self.started = False


class _Stream:
    """One Process stream: a reader thread takes ferry's messages; the gRPC
    thread (run) writes ours from the `done` queue the handlers fill."""

    def __init__(self, worker: Worker, context):
        self.w = worker
        self.context = context
        self.lock = threading.Lock()
        self.inflight = {}  # event id -> _InFlight (received, credit not yet returned)
        self.granted = 0  # credit granted so far (Ready + Credit)
        self.received = 0  # events received so far
        self.done = queue.Queue()  # (id, Result or None) per finished event; None: wake up
        self.closed = False  # ferry half-closed or the call ended: nothing more arrives
        self.ended = threading.Event()
        context.add_callback(self.wake)  # the call ended (cancelled, deadline, ...)

    def wake(self) -> None:
        self.done.put(None)

    def run(self, request_iterator):
        # 1. Ready: the first message, and the initial credit.
        self.granted = self.w.max_in_flight
        yield pb.ProcessResponse(ready=pb.Ready(max_in_flight=self.w.max_in_flight,
                                                worker_name=self.w.name,
                                                max_run=max(0, self.w.max_run)))
        threading.Thread(target=self._read, args=(request_iterator,), daemon=True,
                         name="stream-reader").start()
        while self.context.is_active():
            # 3. Results for what finished (none for cancelled events), then its credit.
            finished = self._take_finished()
            results = [r for _, r in finished if r is not None]
            if results:
                yield pb.ProcessResponse(results=pb.Results(results=results))
            if finished:
                with self.lock:
                    for event_id, _ in finished:
                        self.inflight.pop(event_id, None)
                    give_credit = not self.w.stopping
                    if give_credit:
                        self.granted += len(finished)
                if give_credit:
                    yield pb.ProcessResponse(credit=pb.Credit(n=len(finished)))
            with self.lock:
                # 5. Stopping: end once every event taken before the stop is answered
                # (events that arrived during the stop were never started and get no
                # result: ferry redelivers them).
                busy = any(f.submitted for f in self.inflight.values())
                if self.w.stopping and not busy and self.done.empty():
                    self.context.set_code(grpc.StatusCode.UNAVAILABLE)
                    self.context.set_details("worker shutting down")
                    return
                # ferry half-closed: end once everything held is answered.
                if self.closed and not self.inflight and self.done.empty():
                    return
        # The call is over (ferry went away): tell running handlers; nothing can be sent.
        self._cancel_all()

    def _take_finished(self):
        """Blocks for the next finished event (or a wake-up), then takes all queued."""
        finished = []
        item = self.done.get()
        while True:
            if item is not None:
                finished.append(item)
            try:
                item = self.done.get_nowait()
            except queue.Empty:
                return finished

    def _read(self, request_iterator) -> None:
        try:
            for request in request_iterator:
                kind = request.WhichOneof("kind")
                if kind == "events":
                    self._take_events(request.events.events)
                elif kind == "cancel":
                    self._cancel(request.cancel.ids)
        except grpc.RpcError:
            pass  # the call ended
        finally:
            with self.lock:
                self.closed = True
            self.wake()
            if not self.context.is_active():
                self._cancel_all()

    def _take_events(self, events) -> None:
        w = self.w
        with self.lock:
            n = len(events)
            self.received += n
            over = max(0, min(n, self.received - self.granted))
            stopping = w.stopping
            for e in events:
                f = self.inflight[e.id] = _InFlight(e)
                f.submitted = not stopping
            held = len(self.inflight)
        with w.lock:
            w.events_received += n
            w.credit_violations += over
            w.max_held = max(w.max_held, held)
        if over:
            print(f"plain_worker: ferry sent {over} event(s) beyond the credit granted",
                  file=sys.stderr, flush=True)
        if stopping:
            return  # 5. not started: no result, ferry redelivers them when the stream ends
        # 6. A run's members (same non-zero run_id) run in order on one pool thread.
        runs = {}
        for e in events:
            if e.run_id == 0:
                w.pool.submit(self._run_one, e.id)
            else:
                runs.setdefault(e.run_id, []).append(e.id)
        if runs:
            with w.lock:
                w.run_events += sum(len(ids) for ids in runs.values())
        for ids in runs.values():  # whole: a pool thread must not see a run still filling
            w.pool.submit(self._run_run, ids)

    def _run_run(self, ids) -> None:
        """On a pool thread: a run's events in order; after one that did not end OK
        (or once stopping) the rest are answered NOT_ATTEMPTED without running."""
        went_ok = True
        for event_id in ids:
            if went_ok and not self.w.stopping:
                went_ok = self._run_one(event_id) == pb.Result.OK
                continue
            went_ok = False
            with self.lock:
                f = self.inflight.get(event_id)
            if f is None:
                continue
            result = None  # cancelled by ferry: no result, like any cancelled event
            if not f.cancelled.is_set():
                result = pb.Result(id=event_id, status=pb.Result.NOT_ATTEMPTED,
                                   message="an earlier event of its run did not end OK")
                with self.w.lock:
                    self.w.not_attempted += 1
            self.done.put((event_id, result))

    def _run_one(self, event_id: int):
        """On a pool thread: the handler for one event; its Result goes to `done`.
        Returns the status answered (None: none, the event was cancelled)."""
        with self.lock:
            f = self.inflight.get(event_id)
            if f is None:
                return None
            f.started = not f.cancelled.is_set()  # 4. cancelled before it started: skipped
        result = None
        if f.started:
            try:
                status, message = self.w.handler(f.event, f.cancelled)
            except Exception as exc:  # noqa: BLE001 - a handler error is a FAIL, the stream goes on
                status, message = pb.Result.FAIL, str(exc) or type(exc).__name__
            if not f.cancelled.is_set():
                result = pb.Result(id=event_id, status=status, message=message)
        if f.cancelled.is_set():
            with self.w.lock:
                self.w.cancelled += 1
        self.done.put((event_id, result))
        return None if result is None else result.status

    def _cancel(self, ids) -> None:
        # 4. No result for these; running handlers are told, the others skipped.
        with self.lock:
            for event_id in ids:
                f = self.inflight.get(event_id)
                if f is not None:
                    f.cancelled.set()

    def _cancel_all(self) -> None:
        with self.lock:
            for f in self.inflight.values():
                f.cancelled.set()


def write_file_atomically(path: str, content: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(content)
    os.replace(tmp, path)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listen", default="127.0.0.1:50051", help="port 0 = any free port")
    p.add_argument("--max_in_flight", type=int, default=64, help="credit per stream")
    p.add_argument("--handler_threads", "--concurrency", dest="handler_threads", type=int,
                   default=4, help="threads running the handler")
    p.add_argument("--name", default=socket.gethostname(), help="worker name sent in Ready")
    p.add_argument("--max_run", type=int, default=0,
                   help="most events of one key per run, sent in Ready.max_run (0 = no runs)")
    p.add_argument("--work_us", type=int, default=0, help="simulated work per event, microseconds")
    p.add_argument("--record", default="", help="append one line per handler run to this file")
    p.add_argument("--record_flush", action="store_true",
                   help="write each --record line through before answering (survives kill -9)")
    p.add_argument("--stats", default="", help="write counters to this file on shutdown")
    p.add_argument("--port_file", default="", help="write the bound port to this file")
    p.add_argument("--retry_attempts", type=int, default=0,
                   help="answer RETRY until the event's attempt reaches this")
    p.add_argument("--fail_every", type=int, default=0,
                   help="answer FAIL when (payload as an integer + 1) %% N == 0")
    p.add_argument("--throw_every", type=int, default=0,
                   help="raise from the handler when (payload as an integer + 1) %% N == 0")
    p.add_argument("--fail_rate", type=float, default=0.0, help="probability of answering FAIL")
    p.add_argument("--retry_rate", type=float, default=0.0, help="probability of answering RETRY")
    p.add_argument("--stall_rate", type=float, default=0.0,
                   help="probability of holding an event for --stall_ms first (ends on Cancel)")
    p.add_argument("--stall_ms", type=int, default=2000, help="how long a stalled event is held")
    p.add_argument("--seed", type=int, default=1, help="seed of the random fault choices")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    recorder = Recorder(args.record, args.record_flush) if args.record else None
    worker = Worker(args, Handler(args, recorder))
    # One gRPC thread per open stream: ferry keeps `streams` (default 2) per target.
    # ferry pings every processors[].keepalive.interval (at least 1 s) to notice
    # a vanished worker; gRPC's default (5 min on an idle stream) answers those
    # pings with GOAWAY too_many_pings, so permit them (README, Semantics).
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64),
                         options=[("grpc.so_reuseport", 0),
                                  ("grpc.keepalive_permit_without_calls", 1),
                                  ("grpc.http2.min_ping_interval_without_data_ms", 500)])
    pb_grpc.add_ProcessorServicer_to_server(worker, server)
    try:
        port = server.add_insecure_port(args.listen)
    except RuntimeError as exc:
        print(f"plain_worker: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 1
    server.start()
    if args.port_file:
        write_file_atomically(args.port_file, str(port))
    print(f"plain_worker listening on {args.listen.rsplit(':', 1)[0]}:{port}", flush=True)

    while not stop.wait(1.0):
        pass
    print("plain_worker: signal received, shutting down", file=sys.stderr, flush=True)
    worker.stop(grace=5.0)
    server.stop(grace=1.0).wait()
    worker.pool.shutdown(wait=False, cancel_futures=True)
    if recorder is not None:
        recorder.close()
    if args.stats:
        write_file_atomically(args.stats, (
            f"events_received={worker.events_received}\n"
            f"max_held={worker.max_held}\n"
            f"credit_violations={worker.credit_violations}\n"
            f"cancelled={worker.cancelled}\n"
            f"run_events={worker.run_events}\n"
            f"not_attempted={worker.not_attempted}\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
