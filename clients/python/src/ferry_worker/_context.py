"""Per-event Context and the small helpers every handler call uses.

Threading: a Context is made on the worker's event loop and read from the
handler's thread (sync handlers) or task (async handlers); its cancellation
flag is a threading.Event, so both sides may touch it. The helpers are pure.
"""

from __future__ import annotations

import inspect
import socket
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

from ferry_worker._result import Result, Status

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ferry_worker._core import _Core

# The event was not processed (cancelled, stream gone): no result, credit back.
_SKIP = object()
# What the SDK answers for a run member it did not hand to the handler because
# an earlier member of its run did not end OK (see "Runs" in processor.proto).
NOT_ATTEMPTED = Result(Status.NOT_ATTEMPTED, "an earlier event of its run did not end OK")


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


def takes_context(fn: Callable) -> bool:
    """True if ``fn`` takes a second positional argument (the Context)."""
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


def is_async(fn: Callable) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)
    )


def describe(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


def check(value: Any) -> Result:
    """``value`` if it is a Result, else a FAIL saying what the handler returned."""
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


def default_name() -> str:
    try:
        return socket.gethostname() or "ferry-python-worker"
    except OSError:
        return "ferry-python-worker"
