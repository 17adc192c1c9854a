"""The batch form: ``handler(events) -> results`` for the events of one
received Events message, without a thread hand-off (or a task) per event.

A message is handled in waves. Wave 0 holds every event that is not in a run
and the first member of every run; wave k the (k+1)-th member of each run
whose k-th member ended OK. So the handler never sees two members of one run
in one call, and it sees a member only after the previous one ended OK: the
per-event contract of runs (proto/ferry/v1/processor.proto, "Runs") holds as
it is, and the handler needs no knowledge of runs. A run member after one
that did not end OK (RETRY, FAIL, a raising handler, a cancel, a graceful
stop) is answered NOT_ATTEMPTED and never given to the handler. Typical
messages have one wave: most runs in a message are one event long.

One wave = one handler call: on a pool thread (sync handler; at most
``concurrency`` waves at once) or awaited on the loop (async handler, under
the same semaphore). If the handler raises, every event of the wave is
answered FAIL with the exception's message (a handler wanting per-event
failures catches per event and returns fail() for that event only).

Threading: runs on the worker's event loop; only the sync handler call runs
on a pool thread, and it touches nothing but its events and BatchContext.
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


async def run_message(stream: "_Stream", events: Sequence) -> None:
    """Handles one Events message in waves; completes every event of it
    exactly once (stream.complete_batch)."""
    core = stream.core
    if not any(e.run_id for e in events):
        await _wave(stream, list(events))  # the common case: one wave
        return
    chains = split_waves(events)
    k = 0
    while chains:
        results = await _wave(stream, [c[k] for c in chains])
        live = []
        not_attempted = []
        for c, result in zip(chains, results):
            if result is None or result.status != _OK:
                not_attempted.extend(c[k + 1:])
            elif len(c) > k + 1:
                live.append(c)
        k += 1
        if live and (core.draining or stream.ending):
            for c in live:  # a graceful stop ends a run like a failure
                not_attempted.extend(c[k:])
            live = []
        if not_attempted:
            stream.complete_batch([(e, NOT_ATTEMPTED) for e in not_attempted])
        chains = live


async def _wave(stream: "_Stream", wave: list) -> list:
    """One handler call for ``wave``; completes its events and returns their
    results (None where no result is sent)."""
    core = stream.core
    results: List[Optional[Result]]
    ctx: Optional[BatchContext] = None
    live = wave
    if stream.batch_cancelled:  # skip the events cancelled before they start
        live = [e for e in wave if e.id not in stream.batch_cancelled]
    if stream.ending:
        live = []
    if core.takes_context and live:
        ctx = BatchContext(core)
        for e in live:
            stream.batch_contexts[e.id] = ctx
    try:
        got = await _call(core, live, ctx) if live else []
    except asyncio.CancelledError:
        got = [None] * len(live)
    finally:
        if ctx is not None:
            for e in live:
                if stream.batch_contexts.get(e.id) is ctx:
                    del stream.batch_contexts[e.id]
    if live is wave:
        results = got
    else:
        by_id = {e.id: r for e, r in zip(live, got)}
        results = [by_id.get(e.id) for e in wave]
    cancelled = stream.batch_cancelled
    if cancelled:  # cancelled while in the handler: no result, and its run ends
        results = [None if e.id in cancelled else r for e, r in zip(wave, results)]
    stream.complete_batch(list(zip(wave, results)))
    return results


async def _call(core: "_Core", events: list, ctx: Optional[BatchContext]) -> list:
    try:
        if core.is_async:
            async with core.semaphore:
                return await core.call_batch_async(events, ctx)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(core.executor, core.call_batch, events, ctx)
    except asyncio.CancelledError:
        raise
    except RuntimeError as exc:  # the pool was shut down (stop() after its grace)
        return [Result(Status.FAIL, f"worker stopped: {exc}")] * len(events)
    except BaseException as exc:  # noqa: BLE001 - reported as FAIL
        return [Result(Status.FAIL, describe(exc))] * len(events)
