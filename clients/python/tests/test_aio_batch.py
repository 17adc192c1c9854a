"""The asyncio worker's batch form and runs (ferry_worker.aio.Worker)."""

from __future__ import annotations

import asyncio

import grpc

import ferry_worker
from ferry_worker.v1 import processor_pb2 as pb

from conftest import events_request
from test_aio import TIMEOUT, AioClient, connected, run

OK, RETRY, FAIL = pb.Result.OK, pb.Result.RETRY, pb.Result.FAIL
NOT_ATTEMPTED = pb.Result.NOT_ATTEMPTED


def test_async_batch_waves_runs_and_raise():
    async def main():
        calls = []

        async def handle(events):
            calls.append([e.id for e in events])
            await asyncio.sleep(0)
            if any(e.payload == b"raise" for e in events):
                raise RuntimeError("thrown")
            return [ferry_worker.retry("r") if e.payload == b"retry" else ferry_worker.ok()
                    for e in events]

        w, c = await connected(handle, batch=True, max_in_flight=16, max_run=4)
        await c.call.write(events_request([1, 2, 3, 4], [b"ok", b"ok", b"ok", b"retry"]))
        await c.read_credit(4)
        assert calls == [[1, 2, 3, 4]]
        assert [c.results[i].status for i in (1, 2, 3, 4)] == [OK, OK, OK, RETRY]
        calls.clear()
        # run 1: 5,6,7 (6 retries); run 2: 8,9 (9 raises); 10 alone.
        await c.call.write(events_request(
            [5, 8, 6, 9, 7, 10], [b"ok", b"ok", b"retry", b"raise", b"ok", b"ok"],
            [1, 2, 1, 2, 1, 0]))
        await c.read_credit(6)
        assert calls == [[5, 8, 10], [6, 9]]
        status = {i: c.results[i].status for i in range(5, 11)}
        assert status == {5: OK, 6: FAIL, 7: NOT_ATTEMPTED, 8: OK, 9: FAIL, 10: OK}
        assert c.results[6].message == "thrown"  # the whole wave failed
        await c.close()
        await w.stop(1)

    run(main())


def test_async_per_event_runs_sequential_and_cancel_of_one_member():
    async def main():
        started = asyncio.Event()
        handled = []

        async def handle(e):
            handled.append(e.id)
            if e.id == 2:
                started.set()
                await asyncio.sleep(30)  # until cancelled
            return ferry_worker.ok()

        w, c = await connected(handle, max_in_flight=16, concurrency=8)
        await c.call.write(events_request([1, 2, 3], run_ids=[9, 9, 9]))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        assert handled == [1, 2]  # 3 waits for 2
        await c.call.write(pb.ProcessRequest(cancel=pb.Cancel(ids=[2])))
        await c.read_credit(3)
        assert {i: r.status for i, r in c.results.items()} == {1: OK, 3: NOT_ATTEMPTED}
        assert handled == [1, 2]
        await c.close()
        await w.stop(1)

    run(main())


def test_async_batch_stream_end_cancels_the_call():
    async def main():
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def handle(events):
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return [ferry_worker.ok()] * len(events)

        w, c = await connected(handle, batch=True, max_in_flight=4)
        await c.call.write(events_request([1, 2], run_ids=[3, 3]))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        await c.call.done_writing()
        assert await c.read_end() == grpc.StatusCode.OK
        await asyncio.wait_for(cancelled.wait(), TIMEOUT)
        await c.close()
        await w.stop(1)
        assert w._core.running == 0  # every event accounted for

    run(main())
