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
``concurrency`` threads. ``batch=True`` takes ``async def handle(events)``
returning one Result per event (one task per received message, not per event).
"""

from __future__ import annotations

from ferry_worker._base import _WorkerBase


class Worker(_WorkerBase):
    """Same options and semantics as :class:`ferry_worker.Worker`, with awaitable methods."""

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
