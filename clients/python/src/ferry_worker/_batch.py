"""The batch form: ``handler(events) -> results`` for the events of one
received Events message, without a thread hand-off (or a task) per event.

A message is handled in waves. Wave 0 holds every event that is not in a run
and the first member of every run; wave k the (k+1)-th member of each run
whose k-th member ended OK. So the handler never sees two members of one run
in one call, and it sees a member only after the previous one ended OK: the
per-event contract of runs (proto/ferry/v1/processor.proto, "Runs") holds as
it is, and the handler needs no knowledge of runs. A run member after one
that did not end OK (RETRY, FAIL, a raising handler, a cancel, a graceful
stop) is answered NOT_ATTEMPTED and never given to the handler. Most
messages are one wave; a message that is one long run is as many waves as
members, so the waves of a message go to ONE pool thread together (sync
handler: one hand-off per message, whatever its waves) or are awaited one
after the other on the loop (async handler, under the ``concurrency``
semaphore). Results are sent when the message's last wave is done.

One wave = one handler call. If the handler raises, every event of the wave
is answered FAIL with the exception's message (a handler wanting per-event
failures catches per event and returns fail() for that event only).

Threading: ``run_message`` runs on the worker's event loop. ``_waves_sync``
runs on a pool thread: it calls the handler and only reads the stream's
state (``ending``, ``batch_cancelled`` membership: atomic under the GIL),
never writes it; the loop thread completes the events afterwards.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from ferry_worker._context import NOT_ATTEMPTED, check, describe
from ferry_worker._result import Result, Status

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ferry_worker._core import _Core
    from ferry_worker._stream import _Stream

_OK = Status.OK


class BatchContext:
    """The second argument of a batch handler that takes two: which events
    of the current call ferry cancelled (their results are dropped), and a
    way to sleep that wakes on a cancel. Thread-safe."""

    __slots__ = ("_cond", "_cancelled", "_all", "_core")

    def __init__(self, core: "_Core"):
        self._cond = threading.Condition()
        self._cancelled: set = set()
        self._all = False
        self._core = core

    def cancelled(self, event_id: int) -> bool:
        """True once ferry cancelled this event (or its stream ended)."""
        # No lock: a set lookup is atomic under the GIL, and this is the
        # per-event question a batch handler asks.
        return self._all or event_id in self._cancelled

    def wait(self, event_id: int, timeout: Optional[float] = None) -> bool:
        """Blocks until the event is cancelled or ``timeout`` seconds passed;
        True if cancelled."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._all or event_id in self._cancelled, timeout
            )

    def stopping(self) -> bool:
        """True once the worker began a graceful stop."""
        return self._core.stopping

    def _cancel(self, event_id: int) -> None:
        with self._cond:
            self._cancelled.add(event_id)
            self._cond.notify_all()

    def _cancel_all(self) -> None:
        with self._cond:
            self._all = True
            self._cond.notify_all()


def check_batch(value: Any, n: int) -> List[Result]:
    """The handler's return value as n Results, or n FAILs saying what is wrong."""
    try:
        results = list(value)
    except TypeError:
        results = None
    if results is None or len(results) != n:
        what = f"{len(results)} results" if results is not None else type(value).__name__
        return [
            Result(Status.FAIL, f"batch handler returned {what} for {n} events "
                   "(return one ferry_worker.Result per event, in order)")
        ] * n
    for i, r in enumerate(results):
        if r.__class__ is not Result:
            results[i] = check(r)
    return results


def split_waves(events: Sequence) -> list:
    """The events as chains: a list per run (message order) and a one-element
    list per event outside runs, in order of first appearance."""
    chains: list = []
    runs: dict = {}
    for e in events:
        run_id = e.run_id
        if run_id == 0:
            chains.append([e])
            continue
        members = runs.get(run_id)
        if members is None:
            members = runs[run_id] = [e]
            chains.append(members)
        else:
            members.append(e)
    return chains


def _plan(stream: "_Stream", events: Sequence):
    """A generator: yields each wave to hand to the handler (events not
    cancelled yet), is sent the wave's results (a list of Result or None, in
    order), and returns (event, Result or None) for every event of the
    message: NOT_ATTEMPTED for the run members it never yielded."""
    core = stream.core
    cancelled = stream.batch_cancelled
    if not any(e.run_id for e in events):  # the common case: one wave
        wave = list(events)
        if stream.ending:
            return [(e, None) for e in wave]
        live = [e for e in wave if e.id not in cancelled] if cancelled else wave
        got = (yield live) if live else []
        return list(zip(live, got)) if live is wave else _merge(wave, live, got)
    out = []
    chains = split_waves(events)
    k = 0
    while chains:
        wave = [c[k] for c in chains]
        if stream.ending:
            out.extend((e, None) for c in chains for e in c[k:])
            break
        live = [e for e in wave if e.id not in cancelled] if cancelled else wave
        got = (yield live) if live else []
        pairs = list(zip(live, got)) if live is wave else _merge(wave, live, got)
        out.extend(pairs)
        k += 1
        rest = []
        stop = core.draining  # a graceful stop ends a run like a failure
        for c, (e, result) in zip(chains, pairs):
            if len(c) == k:
                continue
            if stop or result is None or result.status != _OK or e.id in cancelled:
                out.extend((m, NOT_ATTEMPTED) for m in c[k:])
            else:
                rest.append(c)
        chains = rest
    return out


def _merge(wave: list, live: list, got: list) -> list:
    """(event, result) for the whole wave; None where the handler did not get it."""
    by_id = {e.id: r for e, r in zip(live, got)}
    return [(e, by_id.get(e.id)) for e in wave]


def _waves_sync(stream: "_Stream", events: Sequence, ctx: Optional[BatchContext]) -> list:
    """All waves of one message with the sync handler; runs on a pool thread."""
    call = stream.core.call_batch
    plan = _plan(stream, events)
    try:
        wave = next(plan)
        while True:
            wave = plan.send(call(wave, ctx))
    except StopIteration as done:
        return done.value


async def _waves_async(stream: "_Stream", events: Sequence, ctx: Optional[BatchContext]) -> list:
    core = stream.core
    plan = _plan(stream, events)
    try:
        wave = next(plan)
        while True:
            try:
                async with core.semaphore:
                    results = await core.call_batch_async(wave, ctx)
            except asyncio.CancelledError:  # the stream ended: no results
                results = [None] * len(wave)
            wave = plan.send(results)
    except StopIteration as done:
        return done.value


async def run_message(stream: "_Stream", events: Sequence) -> None:
    """Handles one Events message; completes every event of it exactly once
    (stream.complete_batch), whatever happens."""
    core = stream.core
    ctx: Optional[BatchContext] = None
    if core.takes_context:
        ctx = BatchContext(core)
        for e in events:
            stream.batch_contexts[e.id] = ctx
    try:
        if core.is_async:
            pairs = await _waves_async(stream, events, ctx)
        else:
            loop = asyncio.get_running_loop()
            pairs = await loop.run_in_executor(core.executor, _waves_sync, stream, events, ctx)
    except asyncio.CancelledError:  # the loop is closing
        pairs = [(e, None) for e in events]
    except RuntimeError as exc:  # the pool was shut down (stop() after its grace)
        pairs = [(e, Result(Status.FAIL, f"worker stopped: {exc}")) for e in events]
    except BaseException as exc:  # noqa: BLE001 - a bug of ours: FAIL, not a lost credit
        core.log.error("batch handling failed: %s", describe(exc), exc_info=True)
        pairs = [(e, Result(Status.FAIL, describe(exc))) for e in events]
    finally:
        if ctx is not None:
            contexts = stream.batch_contexts
            for e in events:
                if contexts.get(e.id) is ctx:
                    del contexts[e.id]
    stream.complete_batch(pairs)
