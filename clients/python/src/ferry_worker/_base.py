"""What the blocking and the asyncio Worker share: the options they take and
the state they report, both held by one ``_Core`` (see ``_core.py``).

Threading: the properties read ``_Core`` counters and flags, which only the
core's event loop writes; reading them from any thread is safe (plain
attribute reads)."""

from __future__ import annotations

from typing import Callable

from ferry_worker._core import _Core


class _WorkerBase:
    """Builds the ``_Core`` from ``handler`` and the keyword options of
    :class:`ferry_worker.Worker` (``max_in_flight``, ``concurrency``, ``name``,
    ``max_results_batch``, ``logger``, ``batch``, ``max_run``; ``_Core`` checks them) and reports its state."""

    def __init__(self, handler: Callable, **options):
        self._core = _Core(handler, **options)

    @property
    def port(self) -> int:
        """The bound TCP port (0 before start() or for unix:)."""
        return self._core.port

    @property
    def stopping(self) -> bool:
        """True once stop() was called; long handlers may poll it."""
        return self._core.stopping

    def is_cancelled(self, event_id: int) -> bool:
        """True while the event with this delivery id is being processed after
        ferry cancelled it (its result will not be sent)."""
        return self._core.is_cancelled(event_id)

    @property
    def events_received(self) -> int:
        """Events received over all streams."""
        return self._core.events_received

    @property
    def max_held(self) -> int:
        """Most events held at once on one stream (received, credit not returned)."""
        return self._core.max_held

    @property
    def credit_violations(self) -> int:
        """Events ferry sent beyond the credit granted (a protocol violation)."""
        return self._core.credit_violations
