"""One ferry.v1.Processor/Process stream: reading Events and Cancel, writing
Ready, Results and credit, and running the per-event handler form.

Everything here runs on the worker's event loop; only sync handlers run
elsewhere (on the handler thread pool), and they touch nothing but their
Context. The batch form's message handling is in ``_batch.py``; it reports
back through ``complete_batch``.

The protocol (proto/ferry/v1/processor.proto; clients/cpp/worker.cc is the
reference implementation):
  * first message: Ready{max_in_flight, worker_name, max_run};
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
  * runs (events of one message sharing a non-zero run_id): handled one at a
    time in message order; once one does not end OK (RETRY, FAIL, an error,
    a cancel, a graceful stop) every later member is answered NOT_ATTEMPTED
    without being handled (a cancelled member gets no result at all);
  * graceful stop: no more credit, events arriving now are not started,
    running handlers finish within the grace and their results are sent,
    then the stream ends with UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING, Any, Optional

import grpc
from grpc import aio

from ferry_worker._context import _SKIP, NOT_ATTEMPTED, Context, describe
from ferry_worker._result import Result, Status
from ferry_worker.v1 import processor_pb2 as pb

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ferry_worker._core import _Core

# Call metadata by which ferry says it takes credit inside Results
# (proto/ferry/v1/processor.proto).
_RESULTS_CREDIT_HEADER = "ferry-results-credit"
_OK = Status.OK


def _reap(task: "asyncio.Future") -> None:
    """Retrieves a finished task's exception so asyncio does not warn about it."""
    if not task.cancelled():
        task.exception()


def _results_carry_credit(context: aio.ServicerContext) -> bool:
    # An older ferry ignores Results.credit: without the header, credit put
    # there would be lost and the stream would starve.
    for key, value in context.invocation_metadata() or ():
        if key == _RESULTS_CREDIT_HEADER and value == "1":
            return True
    return False


class _Entry:
    """The handler runs of one delivery id (per-event form; ids repeat only
    if ferry misbehaves, so a count rather than a flag)."""

    __slots__ = ("count", "cancelled", "contexts", "tasks")

    def __init__(self):
        self.count = 0
        self.cancelled = False
        self.contexts = []
        self.tasks = []


class _Stream:
    def __init__(self, core: "_Core", context: aio.ServicerContext):
        self.core = core
        self.ctx = context
        self.results_carry_credit = _results_carry_credit(context)
        self.granted = core.max_in_flight  # credit granted: Ready + Credits
        self.received = 0  # events accepted for processing
        self.held = 0  # received, credit not returned yet
        self.inflight: dict[int, _Entry] = {}  # per-event form
        # Batch form: id -> handler runs not completed, the cancelled ones,
        # and the contexts of the events inside a handler call right now.
        self.batch_live: dict[int, int] = {}
        self.batch_cancelled: set[int] = set()
        self.batch_contexts: dict[int, Any] = {}
        self.message_tasks: set[asyncio.Task] = set()
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
            if core.is_async:  # their handler calls end at the next await
                for t in list(self.message_tasks):
                    t.cancel()
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
                ready=pb.Ready(
                    max_in_flight=core.max_in_flight, worker_name=core.name, max_run=core.max_run
                )
            )
        )
        completed = self.completed
        while True:
            if not completed:
                if self.finish_requested:
                    return
                self.wake.clear()
                await self.wake.wait()
                continue
            n = min(len(completed), core.max_results_batch)
            msg = pb.ProcessResponse()
            results = msg.results
            add = results.results.add
            for _ in range(n):
                event_id, result = completed.popleft()
                if result is not None:
                    result.fill(add(), event_id)
            self.held -= n
            if self.results_carry_credit and not core.stopping:  # draining: no new work
                # One message instead of two; with no results (all cancelled)
                # it carries the credit alone.
                self.granted += n
                results.credit = n
                await self.ctx.write(msg)
                continue
            if len(results.results):
                await self.ctx.write(msg)
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
        if core.batch:
            core.start_batch(self, events)
            return
        loop = asyncio.get_running_loop()
        runs: Optional[dict] = None
        for event in events:
            entry = self.inflight.get(event.id)
            if entry is None:
                entry = self.inflight[event.id] = _Entry()
            entry.count += 1
            if event.run_id:
                if runs is None:
                    runs = {}
                runs.setdefault(event.run_id, []).append((event, entry))
                continue
            ctx = Context(event.id, core)
            entry.contexts.append(ctx)
            task = loop.create_task(self._run(event, ctx, entry))
            if core.is_async:
                entry.tasks.append(task)
            if entry.cancelled:  # a duplicate of an id cancelled already
                ctx._cancel()
                if core.is_async:
                    task.cancel()
        if runs:
            for members in runs.values():
                task = loop.create_task(self._run_members(members))
                self.message_tasks.add(task)
                task.add_done_callback(self.message_tasks.discard)

    def _cancel(self, ids) -> None:
        core = self.core
        if core.batch:
            live, cancelled = self.batch_live, self.batch_cancelled
            for event_id in ids:
                if event_id in live and event_id not in cancelled:
                    cancelled.add(event_id)
                    core.mark_cancelled(event_id, +1)
                    ctx = self.batch_contexts.get(event_id)
                    if ctx is not None:
                        ctx._cancel(event_id)
            return
        for event_id in ids:
            entry = self.inflight.get(event_id)
            if entry is None or entry.cancelled:
                continue  # finished already, or unknown
            entry.cancelled = True
            core.mark_cancelled(event_id, +1)
            self._cancel_entry(entry)

    def _cancel_entry(self, entry: _Entry) -> None:
        for ctx in entry.contexts:
            ctx._cancel()
        for task in entry.tasks:  # asyncio handlers only; threads cannot be interrupted
            task.cancel()

    def _cancel_all(self) -> None:
        for entry in self.inflight.values():
            self._cancel_entry(entry)
        for ctx in set(self.batch_contexts.values()):
            ctx._cancel_all()

    # ---- the per-event form ----

    async def _handle(self, event, ctx: Context, entry: _Entry) -> Any:
        """Runs the handler for one event: its Result, or _SKIP."""
        core = self.core
        try:
            if core.is_async:
                async with core.semaphore:
                    if entry.cancelled or self.ending:
                        return _SKIP
                    return await core.call_async(event, ctx)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(core.executor, core.call_sync, event, ctx)
        except asyncio.CancelledError:
            return _SKIP
        except RuntimeError as exc:  # the pool was shut down (stop() after its grace)
            return Result(Status.FAIL, f"worker stopped: {exc}")
        except BaseException as exc:  # noqa: BLE001 - reported as FAIL
            return Result(Status.FAIL, describe(exc))

    async def _run(self, event, ctx: Context, entry: _Entry) -> None:
        result: Any = _SKIP
        try:
            result = await self._handle(event, ctx, entry)
        finally:
            self._complete(event.id, result, entry, ctx)

    async def _run_members(self, members) -> None:
        """One run, per-event form: members in order, each only after the
        previous ended OK; the rest NOT_ATTEMPTED (see the module comment)."""
        core = self.core
        loop = asyncio.get_running_loop()
        attempt = True
        for i, (event, entry) in enumerate(members):
            if not attempt or self.ending or (i > 0 and core.draining) or entry.cancelled:
                attempt = False
                self._complete(event.id, NOT_ATTEMPTED, entry, None)
                continue
            ctx = Context(event.id, core)
            entry.contexts.append(ctx)
            result: Any = _SKIP
            try:
                if core.is_async:
                    # Its own task, so a Cancel of this member cancels it alone.
                    sub = loop.create_task(self._handle(event, ctx, entry))
                    entry.tasks.append(sub)
                    result = await sub
                else:
                    result = await self._handle(event, ctx, entry)
            except asyncio.CancelledError:
                result = _SKIP
            finally:
                self._complete(event.id, result, entry, ctx)
            if result is _SKIP or entry.cancelled or result.status != _OK:
                attempt = False

    def _complete(self, event_id: int, result: Any, entry: _Entry, ctx: Optional[Context]) -> None:
        core = self.core
        entry.count -= 1
        if ctx is not None:
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

    # ---- the batch form (see _batch.py) ----

    def complete_batch(self, pairs) -> None:
        """Records the outcome of batch-form events: ``pairs`` of (event, Result
        or None for "no result"); a cancelled event never gets a result."""
        core = self.core
        live, cancelled, completed = self.batch_live, self.batch_cancelled, self.completed
        for event, result in pairs:
            event_id = event.id
            count = live.get(event_id, 1) - 1
            if count > 0:
                live[event_id] = count
            else:
                live.pop(event_id, None)
            if event_id in cancelled:
                result = None
                if count <= 0:
                    cancelled.discard(event_id)
                    core.mark_cancelled(event_id, -1)
            if not self.ending:
                completed.append((event_id, result))
        core.running -= len(pairs)
        if core.running == 0 and core.idle is not None:
            core.idle.set()
        if not self.ending:
            self.wake.set()
