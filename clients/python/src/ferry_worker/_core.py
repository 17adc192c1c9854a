"""The worker side of the ferry.v1.Processor protocol, on asyncio (grpc.aio).

One _Core per Worker; one _Stream per Process stream ferry opens. Everything
here runs on the worker's event loop; only sync handlers run elsewhere (on the
handler thread pool), and they touch nothing but their Context.

The protocol (see proto/ferry/v1/processor.proto, and clients/cpp/worker.cc,
the reference implementation):
  * first message on a stream: Ready{max_in_flight, worker_name};
  * each Event uses one unit of credit; events beyond the credit granted are
    still processed, and counted in credit_violations;
  * results are batched (everything finished since the last write, up to
    max_results_batch per Results message), and each batch of k finished
    events returns k units of credit: in Results.credit when ferry's call
    metadata has `ferry-results-credit: 1`, else as a Credit{k} right after
    the Results; cancelled events send no result, but their credit comes
    back when their handler has finished;
  * Cancel{ids}: the handlers' contexts are cancelled (asyncio handlers get
    their task cancelled), events not started yet are skipped;
  * graceful stop: new streams are refused (UNAVAILABLE), no more credit is
    granted, events arriving now are not started, running handlers finish
    within the grace and their results are sent, then every stream ends with
    UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

import grpc
from grpc import aio

from ferry_worker._result import Result, Status
from ferry_worker.v1 import processor_pb2 as pb
from ferry_worker.v1 import processor_pb2_grpc as pb_grpc

_LOG = logging.getLogger("ferry_worker")
_SKIP = object()  # the event was not processed (cancelled / stream gone): no result
# Call metadata by which ferry says it takes credit inside Results
# (proto/ferry/v1/processor.proto).
_RESULTS_CREDIT_HEADER = "ferry-results-credit"


class Context:
    """Per-event context, passed as the second argument to handlers that take one.

    ``cancelled()`` becomes true when ferry cancels the event (Cancel{ids}),
    or its stream ends; its result is then dropped, so the handler may give up
    early. Sync handlers can sleep with ``wait(timeout)``, which returns early
    (True) on cancellation. Async handlers are cancelled the asyncio way
    (CancelledError at their next await).
    """

    __slots__ = ("event_id", "_event", "_core")

    def __init__(self, event_id: int, core: "_Core"):
        self.event_id = event_id
        self._event = threading.Event()
        self._core = core

    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until cancelled or ``timeout`` seconds passed; True if cancelled."""
        return self._event.wait(timeout)

    def stopping(self) -> bool:
        """True once the worker began a graceful stop."""
        return self._core.stopping

    def _cancel(self) -> None:
        self._event.set()


def _takes_context(fn: Callable) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    positional = 0
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


def _is_async(fn: Callable) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)
    )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


def _check(value: Any) -> Result:
    if isinstance(value, Result):
        return value
    if inspect.iscoroutine(value):
        value.close()
        return Result(
            Status.FAIL, "handler returned a coroutine: pass the async def itself as the handler"
        )
    return Result(
        Status.FAIL,
        f"handler returned {type(value).__name__}, not a ferry_worker.Result "
        "(return ferry_worker.ok(), ferry_worker.retry(...) or ferry_worker.fail(...))",
    )


def _default_name() -> str:
    try:
        return socket.gethostname() or "ferry-python-worker"
    except OSError:
        return "ferry-python-worker"


def _reap(task: "asyncio.Future") -> None:
    """Retrieves a finished task's exception so asyncio does not warn about it."""
    if not task.cancelled():
        task.exception()


class _Entry:
    __slots__ = ("count", "cancelled", "contexts", "tasks")

    def __init__(self):
        self.count = 0
        self.cancelled = False
        self.contexts = []
        self.tasks = []


def _results_carry_credit(context: aio.ServicerContext) -> bool:
    # An older ferry ignores Results.credit: without the header, credit put
    # there would be lost and the stream would starve.
    for key, value in context.invocation_metadata() or ():
        if key == _RESULTS_CREDIT_HEADER and value == "1":
            return True
    return False


class _Stream:
    def __init__(self, core: "_Core", context: aio.ServicerContext):
        self.core = core
        self.ctx = context
        self.results_carry_credit = _results_carry_credit(context)
        self.granted = core.max_in_flight  # credit granted: Ready + Credits
        self.received = 0  # events accepted for processing
        self.held = 0  # received, credit not returned yet
        self.inflight: dict[int, _Entry] = {}
        self.completed: collections.deque = collections.deque()  # (id, Result | None)
        self.wake = asyncio.Event()
        self.ending = False  # peer gone or stream over: results are dropped
        self.finish_requested = False  # graceful stop: flush, then UNAVAILABLE

    async def run(self) -> None:
        core = self.core
        reader = asyncio.ensure_future(self._read_loop())
        writer = asyncio.ensure_future(self._write_loop())
        finish = False
        try:
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            if writer in done and not writer.cancelled() and writer.exception() is None:
                finish = True  # graceful stop: everything flushed
            elif reader in done and not reader.cancelled() and reader.exception() is not None:
                core.log.debug("ferry stream read failed: %s", reader.exception())
        finally:
            self.ending = True
            for t in (reader, writer):
                t.add_done_callback(_reap)
                t.cancel()
            self._cancel_all()
            held, self.held = self.held, 0
            self.completed.clear()
            core.log.debug("ferry stream closed (%d event(s) unanswered)", held)
        if finish:
            self.ctx.set_code(grpc.StatusCode.UNAVAILABLE)
            self.ctx.set_details("worker shutting down")

    def request_finish(self) -> None:
        self.finish_requested = True
        self.wake.set()

    async def _read_loop(self) -> None:
        while True:
            req = await self.ctx.read()
            if req is aio.EOF:
                return  # ferry closed its side: end the stream, drop running results
            kind = req.WhichOneof("kind")
            if kind == "events":
                self._take_events(req.events.events)
            elif kind == "cancel":
                self._cancel(req.cancel.ids)
            else:
                self.core.log.debug("ignoring a ProcessRequest of unknown kind")

    async def _write_loop(self) -> None:
        core = self.core
        await self.ctx.write(
            pb.ProcessResponse(
                ready=pb.Ready(max_in_flight=core.max_in_flight, worker_name=core.name)
            )
        )
        while True:
            if not self.completed:
                if self.finish_requested:
                    return
                self.wake.clear()
                await self.wake.wait()
                continue
            n = min(len(self.completed), core.max_results_batch)
            results = []
            for _ in range(n):
                event_id, result = self.completed.popleft()
                if result is not None:
                    results.append(result.to_proto(event_id))
            self.held -= n
            if self.results_carry_credit and not core.stopping:  # draining: no new work
                # One message instead of two; with no results (all cancelled)
                # it carries the credit alone.
                self.granted += n
                await self.ctx.write(
                    pb.ProcessResponse(results=pb.Results(results=results, credit=n))
                )
                continue
            if results:
                await self.ctx.write(pb.ProcessResponse(results=pb.Results(results=results)))
            if not core.stopping:  # draining: no new work
                self.granted += n
                await self.ctx.write(pb.ProcessResponse(credit=pb.Credit(n=n)))

    def _take_events(self, events) -> None:
        core = self.core
        n = len(events)
        if n == 0:
            return
        core.events_received += n
        if self.ending or self.finish_requested or core.draining:
            return  # not started: ferry redelivers them when this stream closes
        core.running += n
        self.received += n
        if self.received > self.granted:
            over = min(n, self.received - self.granted)
            core.credit_violations += over
            core.log.warning(
                "ferry protocol violation: %d event(s) beyond the %d credit granted; processing them",
                over,
                self.granted,
            )
        self.held += n
        if self.held > core.max_held:
            core.max_held = self.held
        loop = asyncio.get_running_loop()
        for event in events:
            entry = self.inflight.get(event.id)
            if entry is None:
                entry = self.inflight[event.id] = _Entry()
            entry.count += 1
            ctx = Context(event.id, core)
            entry.contexts.append(ctx)
            task = loop.create_task(self._run(event, ctx, entry))
            if core.is_async:
                entry.tasks.append(task)
            if entry.cancelled:  # a duplicate of an id cancelled already
                ctx._cancel()
                if core.is_async:
                    task.cancel()

    def _cancel(self, ids) -> None:
        for event_id in ids:
            entry = self.inflight.get(event_id)
            if entry is None or entry.cancelled:
                continue  # finished already, or unknown
            entry.cancelled = True
            self.core.mark_cancelled(event_id, +1)
            self._cancel_entry(entry)

    def _cancel_entry(self, entry: _Entry) -> None:
        for ctx in entry.contexts:
            ctx._cancel()
        for task in entry.tasks:  # asyncio handlers only; threads cannot be interrupted
            task.cancel()

    def _cancel_all(self) -> None:
        for entry in self.inflight.values():
            self._cancel_entry(entry)

    async def _run(self, event, ctx: Context, entry: _Entry) -> None:
        core = self.core
        result: Any = _SKIP
        try:
            if core.is_async:
                async with core.semaphore:
                    if not (entry.cancelled or self.ending):
                        result = await core.call_async(event, ctx)
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(core.executor, core.call_sync, event, ctx)
        except asyncio.CancelledError:
            result = _SKIP
        except RuntimeError as exc:  # the pool was shut down (stop() after its grace)
            result = Result(Status.FAIL, f"worker stopped: {exc}")
        except BaseException as exc:  # noqa: BLE001 - reported as FAIL
            result = Result(Status.FAIL, _describe(exc))
        finally:
            self._complete(event.id, result, entry, ctx)

    def _complete(self, event_id: int, result: Any, entry: _Entry, ctx: Context) -> None:
        core = self.core
        entry.count -= 1
        try:
            entry.contexts.remove(ctx)
        except ValueError:
            pass
        cancelled = entry.cancelled
        if entry.count == 0:
            if self.inflight.get(event_id) is entry:
                del self.inflight[event_id]
            if cancelled:
                core.mark_cancelled(event_id, -1)
        core.running -= 1
        if core.running == 0 and core.idle is not None:
            core.idle.set()
        if self.ending:
            return  # credit accounting was dropped with the stream
        if cancelled or result is _SKIP:
            result = None  # no result, but the credit comes back
        self.completed.append((event_id, result))
        self.wake.set()


class _Servicer(pb_grpc.ProcessorServicer):
    def __init__(self, core: "_Core"):
        self._core = core

    async def Process(self, request_iterator, context):  # noqa: N802 - gRPC method name
        await self._core.serve_stream(context)


class _Core:
    def __init__(
        self,
        handler: Callable,
        *,
        max_in_flight: int = 64,
        concurrency: int = 8,
        name: Optional[str] = None,
        max_results_batch: int = 256,
        logger: Optional[logging.Logger] = None,
    ):
        if not callable(handler):
            raise TypeError("handler must be callable")
        if not 1 <= int(max_in_flight) <= 2**31 - 1:
            raise ValueError("max_in_flight must be in 1 .. 2^31-1")
        if int(concurrency) < 1:
            raise ValueError("concurrency must be >= 1")
        if int(max_results_batch) < 1:
            raise ValueError("max_results_batch must be >= 1")
        self.handler = handler
        self.is_async = _is_async(handler)
        self.takes_context = _takes_context(handler)
        self.max_in_flight = int(max_in_flight)
        self.concurrency = int(concurrency)
        self.name = name or _default_name()
        self.max_results_batch = int(max_results_batch)
        self.log = logger or _LOG

        self.executor: Optional[ThreadPoolExecutor] = None
        if not self.is_async:
            self.executor = ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="ferry-handler"
            )
        self.semaphore: Optional[asyncio.Semaphore] = None

        # Counters over all streams (read from any thread).
        self.events_received = 0
        self.max_held = 0
        self.credit_violations = 0

        self.stopping = False  # no more credit
        self.draining = False  # no new streams, no new events
        self.running = 0  # handler tasks not completed
        self.idle: Optional[asyncio.Event] = None
        self.streams: set[_Stream] = set()
        self._cancelled: dict[int, int] = {}  # id -> streams on which it is cancelled
        self._cancelled_lock = threading.Lock()

        self.server: Optional[aio.Server] = None
        self.port = 0
        self.started = False
        self.stop_started = False
        self.stopped: Optional[asyncio.Event] = None

    # ---- handler calls ----

    def call_sync(self, event, ctx: Context) -> Any:
        """Runs on a pool thread."""
        if ctx.cancelled():
            return _SKIP  # cancelled (or its stream ended) before it started
        try:
            value = self.handler(event, ctx) if self.takes_context else self.handler(event)
        except BaseException as exc:  # noqa: BLE001 - a handler error is a FAIL, not a dead stream
            self.log.debug("handler raised for event %d (reported as FAIL)", event.id, exc_info=True)
            return Result(Status.FAIL, _describe(exc))
        return _check(value)

    async def call_async(self, event, ctx: Context) -> Result:
        try:
            if self.takes_context:
                value = await self.handler(event, ctx)
            else:
                value = await self.handler(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a handler error is a FAIL, not a dead stream
            self.log.debug("handler raised for event %d (reported as FAIL)", event.id, exc_info=True)
            return Result(Status.FAIL, _describe(exc))
        return _check(value)

    def mark_cancelled(self, event_id: int, delta: int) -> None:
        with self._cancelled_lock:
            n = self._cancelled.get(event_id, 0) + delta
            if n > 0:
                self._cancelled[event_id] = n
            else:
                self._cancelled.pop(event_id, None)

    def is_cancelled(self, event_id: int) -> bool:
        with self._cancelled_lock:
            return event_id in self._cancelled

    # ---- lifecycle (on the loop) ----

    async def start(self, address: str) -> int:
        if self.stop_started:
            raise RuntimeError("worker is stopped")
        if self.started:
            raise RuntimeError("worker already started")
        self.started = True
        self.semaphore = asyncio.Semaphore(self.concurrency)
        self.idle = asyncio.Event()
        self.stopped = asyncio.Event()
        server = aio.server(
            options=[
                ("grpc.max_receive_message_length", -1),  # ferry bounds its own batches
                ("grpc.so_reuseport", 0),  # a taken port is an error
                # ferry pings every processors[].keepalive.interval (at least
                # 1 s) to notice a vanished worker; gRPC's default (5 min on an
                # idle stream) would answer with GOAWAY too_many_pings. Half
                # of ferry's 1 s floor: pings may arrive a little early.
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 500),
            ]
        )
        pb_grpc.add_ProcessorServicer_to_server(_Servicer(self), server)
        try:
            port = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {address}: {exc}") from exc
        if address.startswith("unix:"):
            port = 0
        elif port == 0:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self.server = server
        self.port = port
        self.log.info(
            "ferry worker %r listening on %s (port %d, max_in_flight=%d, concurrency=%d)",
            self.name,
            address,
            port,
            self.max_in_flight,
            self.concurrency,
        )
        return port

    async def serve_stream(self, context: aio.ServicerContext) -> None:
        if self.draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "worker shutting down")
            return
        stream = _Stream(self, context)
        self.streams.add(stream)
        self.log.debug("ferry stream opened by %s", context.peer())
        try:
            await stream.run()
        finally:
            self.streams.discard(stream)

    async def stop(self, grace: float) -> None:
        if self.stop_started:
            if self.stopped is not None:
                await self.stopped.wait()
            return
        self.stop_started = True
        if self.stopped is None:  # never started
            self.stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, float(grace))
        self.stopping = True
        self.draining = True
        self.log.info(
            "ferry worker stopping: %d handler(s) running, grace %.1fs", self.running, grace
        )
        if self.running > 0 and self.idle is not None:
            self.idle.clear()
            try:
                await asyncio.wait_for(self.idle.wait(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                pass
            if self.running > 0:
                self.log.warning(
                    "ferry worker: grace expired with %d handler(s) still running; "
                    "their results are dropped",
                    self.running,
                )
        for stream in list(self.streams):
            stream.request_finish()  # sends what is queued, then UNAVAILABLE
        if self.server is not None:
            # Flushing the last results gets a short budget beyond the grace.
            await self.server.stop(max(deadline - loop.time(), 0.25))
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)
        self.stopped.set()
        self.log.info("ferry worker stopped")
