"""The worker core: options, handler calls, and the lifecycle of the grpc.aio
server that serves ferry's Process streams.

One _Core per Worker; one _Stream (``_stream.py``) per Process stream ferry
opens; the batch form's message handling is in ``_batch.py``. Everything here
runs on the worker's event loop, except ``call_sync`` and ``call_batch``, which
run on the handler thread pool and touch nothing but their arguments, and
``is_cancelled``, which any thread may call (under ``_cancelled_lock``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, List, Optional

import grpc
from grpc import aio

from ferry_worker import _batch
from ferry_worker._context import (
    _SKIP,
    Context,
    check,
    default_name,
    describe,
    is_async,
    takes_context,
)
from ferry_worker._result import Result, Status
from ferry_worker._stream import _Stream
from ferry_worker.v1 import processor_pb2_grpc as pb_grpc

_LOG = logging.getLogger("ferry_worker")
_MAX_U31 = 2**31 - 1


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
        batch: bool = False,
        max_run: int = 64,
    ):
        if not callable(handler):
            raise TypeError("handler must be callable")
        if not 1 <= int(max_in_flight) <= _MAX_U31:
            raise ValueError("max_in_flight must be in 1 .. 2^31-1")
        if not 0 <= int(max_run) <= _MAX_U31:
            raise ValueError("max_run must be in 0 .. 2^31-1 (0 or 1: no runs)")
        if int(concurrency) < 1:
            raise ValueError("concurrency must be >= 1")
        if int(max_results_batch) < 1:
            raise ValueError("max_results_batch must be >= 1")
        self.handler = handler
        self.is_async = is_async(handler)
        self.takes_context = takes_context(handler)
        self.batch = bool(batch)
        self.max_run = int(max_run)
        self.max_in_flight = int(max_in_flight)
        self.concurrency = int(concurrency)
        self.name = name or default_name()
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
            return Result(Status.FAIL, describe(exc))
        return check(value)

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
            return Result(Status.FAIL, describe(exc))
        return check(value)

    def call_batch(self, events: list, ctx: Optional[_batch.BatchContext]) -> List[Result]:
        """The sync batch handler on one wave; runs on a pool thread."""
        try:
            value = self.handler(events, ctx) if self.takes_context else self.handler(events)
        except BaseException as exc:  # noqa: BLE001 - a handler error is a FAIL, not a dead stream
            self.log.debug("batch handler raised (%d events reported as FAIL)", len(events),
                           exc_info=True)
            return [Result(Status.FAIL, describe(exc))] * len(events)
        return _batch.check_batch(value, len(events))

    async def call_batch_async(
        self, events: list, ctx: Optional[_batch.BatchContext]
    ) -> List[Result]:
        try:
            if self.takes_context:
                value = await self.handler(events, ctx)
            else:
                value = await self.handler(events)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a handler error is a FAIL, not a dead stream
            self.log.debug("batch handler raised (%d events reported as FAIL)", len(events),
                           exc_info=True)
            return [Result(Status.FAIL, describe(exc))] * len(events)
        return _batch.check_batch(value, len(events))

    def start_batch(self, stream: _Stream, events) -> None:
        """Batch form: one task handles the whole Events message (_batch.py)."""
        live = stream.batch_live
        for e in events:
            event_id = e.id
            live[event_id] = live.get(event_id, 0) + 1
        task = asyncio.get_running_loop().create_task(_batch.run_message(stream, events))
        stream.message_tasks.add(task)
        task.add_done_callback(stream.message_tasks.discard)

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
            "ferry worker %r listening on %s (port %d, max_in_flight=%d, concurrency=%d, "
            "max_run=%d, %s handler)",
            self.name,
            address,
            port,
            self.max_in_flight,
            self.concurrency,
            self.max_run,
            "batch" if self.batch else "per-event",
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
