"""ferry_worker.aio.Worker: the asyncio form of the worker SDK (grpc.aio).

    async def handle(event):
        await do_something(event.payload)
        return ferry_worker.ok()

    async def main():
        worker = ferry_worker.aio.Worker(handle, max_in_flight=64, concurrency=32)
        port = await worker.start("0.0.0.0:50051")
        await worker.wait()          # until someone awaits worker.stop(grace)

Handlers run as tasks on the caller's event loop, at most ``concurrency`` at
a time. ferry's Cancel{ids} cancels the handler's task (CancelledError at its
next await), and so does the end of its stream; no result is sent for it. A
plain ``def`` handler is accepted too and runs on a thread pool of
``concurrency`` threads.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

from ferry_worker._core import _Core


class Worker:
    """Same options and semantics as :class:`ferry_worker.Worker`, with awaitable methods."""

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
        self._core = _Core(
            handler,
            max_in_flight=max_in_flight,
            concurrency=concurrency,
            name=name,
            max_results_batch=max_results_batch,
            logger=logger,
        )

    async def start(self, address: str = "127.0.0.1:0") -> int:
        """Binds ``address`` and starts serving on the running loop; returns the port."""
        return await self._core.start(address)

    async def stop(self, grace: float = 5.0) -> None:
        """Graceful stop (see ferry_worker.Worker.stop); idempotent."""
        await self._core.stop(grace)

    async def wait(self) -> None:
        """Returns once stop() has completed."""
        if self._core.stopped is None:
            raise RuntimeError("worker not started")
        await self._core.stopped.wait()

    async def __aenter__(self) -> "Worker":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop(0)

    @property
    def port(self) -> int:
        return self._core.port

    @property
    def stopping(self) -> bool:
        return self._core.stopping

    def is_cancelled(self, event_id: int) -> bool:
        return self._core.is_cancelled(event_id)

    @property
    def events_received(self) -> int:
        return self._core.events_received

    @property
    def max_held(self) -> int:
        return self._core.max_held

    @property
    def credit_violations(self) -> int:
        return self._core.credit_violations
