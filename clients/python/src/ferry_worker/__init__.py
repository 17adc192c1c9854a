"""ferry worker SDK: write a Kafka event processor as a plain Python function.

ferry (the Kafka consumer service) dials your worker and opens
``ferry.v1.Processor/Process`` streams to it. This package implements the
worker side of that protocol: it announces Ready{max_in_flight}, runs your
handler for every Event, batches the results, returns credit, honours Cancel
and stops gracefully.

    import ferry_worker

    def handle(event):                      # event: ferry.v1.Event
        if not event.payload:
            return ferry_worker.fail("empty payload")
        return ferry_worker.ok()                   # or ferry_worker.retry("busy", after_seconds=5)

    worker = ferry_worker.Worker(handle, max_in_flight=64, concurrency=8, name="billing")
    worker.serve("0.0.0.0:50051")           # until SIGTERM/SIGINT, then a graceful stop

``Worker(handle_batch, batch=True)`` takes ``handle_batch(events) -> results``
(one Result per event, in order) instead: the fast form, one handler call per
received message (see ``_batch.py`` for how runs are split into waves).
``ferry_worker.aio.Worker`` is the asyncio form (``async def handle(event)``).
"""

import logging

from ferry_worker._batch import BatchContext
from ferry_worker._context import Context
from ferry_worker._result import Result, Status, fail, ok, retry
from ferry_worker.v1.processor_pb2 import Event, Header
from ferry_worker.worker import Worker
from ferry_worker import aio  # noqa: E402  (after Worker: aio imports the same core)

__all__ = [
    "BatchContext",
    "Context",
    "Event",
    "Header",
    "Result",
    "Status",
    "Worker",
    "aio",
    "fail",
    "ok",
    "retry",
]

logging.getLogger("ferry_worker").addHandler(logging.NullHandler())
