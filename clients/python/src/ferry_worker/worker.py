"""ferry_worker.Worker: the blocking (thread-based) form of the worker SDK."""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Callable, Iterable, Optional

from ferry_worker._base import _WorkerBase


class Worker(_WorkerBase):
    """Serves ferry's Processor streams and runs ``handler`` for every event.

    ``handler(event) -> ferry_worker.Result`` (or ``handler(event, ctx)`` to get a
    :class:`ferry_worker.Context`) runs on a pool of ``concurrency`` threads, so it must
    be thread-safe; several events (also of one stream message) run at once.
    An ``async def`` handler works too: it runs on the worker's event loop,
    at most ``concurrency`` at a time.

    * ``max_in_flight``: the credit per stream (Ready.max_in_flight): the most
      events ferry may have outstanding on one stream.
    * ``name``: sent in Ready.worker_name (default: the host name).
    * ``max_results_batch``: the most results put in one Results message.
    * ``batch``: True for the batch form, ``handler(events) -> [Result, ...]``
      (or ``handler(events, ctx)`` with a :class:`ferry_worker.BatchContext`):
      one call per received message (per wave of runs; see ``_batch.py``),
      no thread hand-off per event.
    * ``max_run``: Ready.max_run, the most events of one run (default 64; 0 or
      1: no runs). A run's events are handled one at a time, in order; after
      one that did not end OK the rest are answered NOT_ATTEMPTED unhandled.
    * ``logger``: where the SDK logs (default ``logging.getLogger("ferry_worker")``;
      nothing is logged per event at INFO).

    A handler that raises is reported as FAIL with the exception's message;
    the stream goes on. Returning something other than a Result is a FAIL too.
    The gRPC server runs on a private event-loop thread; all methods are
    thread-safe. ``stop()`` must not be called from inside a handler.
    """

    def __init__(self, handler: Callable, **options):
        super().__init__(handler, **options)
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._stop_started = False
        self._stopped = threading.Event()

    # ---- lifecycle ----

    def start(self, address: str = "127.0.0.1:0") -> int:
        """Binds ``address`` ("0.0.0.0:50051", "127.0.0.1:0", "unix:/path";
        insecure) and starts serving. Returns the bound TCP port (0 for unix:).
        Raises OSError if the address cannot be bound. Call once."""
        with self._lock:
            if self._stop_started:
                raise RuntimeError("worker is stopped")
            if self._loop is not None:
                raise RuntimeError("worker already started")
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=self._run_loop, args=(loop,), name="ferry-worker", daemon=True
            )
            thread.start()
            try:
                port = asyncio.run_coroutine_threadsafe(self._core.start(address), loop).result()
            except BaseException:
                self._close_loop(loop, thread)
                raise
            self._loop, self._thread = loop, thread
            return port

    def stop(self, grace: float = 5.0) -> None:
        """Graceful stop; idempotent (a concurrent second call waits for the first).

        New streams are refused (UNAVAILABLE), no more credit is granted and
        events arriving from now on are not started (ferry redelivers them).
        Handlers already running finish for up to ``grace`` seconds and their
        results are sent; then every stream ends with UNAVAILABLE and the
        server stops. A sync handler still running past the grace keeps its
        thread until it returns; its result is dropped.
        """
        with self._lock:
            first = not self._stop_started
            self._stop_started = True
            loop, thread = self._loop, self._thread
        if not first:
            self._stopped.wait()
            return
        try:
            if loop is not None:
                asyncio.run_coroutine_threadsafe(self._core.stop(grace), loop).result()
                self._close_loop(loop, thread)
            elif self._core.executor is not None:
                self._core.stopping = self._core.draining = True
                self._core.executor.shutdown(wait=False)
        finally:
            self._stopped.set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until stop() has completed (or ``timeout`` seconds); True if stopped."""
        return self._stopped.wait(timeout)

    def serve(
        self,
        address: str = "127.0.0.1:50051",
        *,
        grace: float = 5.0,
        signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
    ) -> int:
        """start(address), block until one of ``signals`` arrives, stop(grace).

        Call from the main thread (Python delivers signals there). Returns the
        signal number that stopped it."""
        got: list[int] = []
        wake = threading.Event()

        def on_signal(signum, _frame):
            got.append(signum)
            wake.set()

        previous = {s: signal.signal(s, on_signal) for s in signals}
        try:
            self.start(address)
            while not wake.wait(1.0):
                if self._stopped.is_set():
                    break
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
        self._core.log.info("ferry worker: signal %s, stopping", got[0] if got else None)
        self.stop(grace)
        return got[0] if got else 0

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.stop(0)

    # ---- the loop thread ----

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    @staticmethod
    def _close_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        async def cancel_rest():
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_rest(), loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - best effort
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
