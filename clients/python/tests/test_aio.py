"""ferry_worker.aio.Worker (asyncio form) against a real grpc.aio client stream."""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc import aio

import ferry_worker
from ferry_worker.v1 import processor_pb2 as pb
from ferry_worker.v1 import processor_pb2_grpc as pb_grpc

from conftest import events_request

OK, RETRY, FAIL = pb.Result.OK, pb.Result.RETRY, pb.Result.FAIL
TIMEOUT = 10


class AioClient:
    def __init__(self, port: int):
        self.channel = aio.insecure_channel(f"127.0.0.1:{port}")
        self.call = pb_grpc.ProcessorStub(self.channel).Process()
        self.results = {}
        self.credit_total = 0

    async def read(self):
        msg = await asyncio.wait_for(self.call.read(), TIMEOUT)
        assert msg is not aio.EOF, "stream ended"
        return msg

    async def read_ready(self):
        msg = await self.read()
        assert msg.WhichOneof("kind") == "ready", msg
        return msg.ready

    async def read_credit(self, want: int):
        got = 0
        while got < want:
            msg = await self.read()
            if msg.WhichOneof("kind") == "credit":
                got += msg.credit.n
                self.credit_total += msg.credit.n
            else:
                for r in msg.results.results:
                    assert r.id not in self.results
                    self.results[r.id] = r

    async def read_end(self):
        try:
            msg = await asyncio.wait_for(self.call.read(), TIMEOUT)
            assert msg is aio.EOF, msg
        except aio.AioRpcError:
            pass
        return await self.call.code()

    async def close(self):
        self.call.cancel()
        await self.channel.close()


async def connected(handle, **options):
    """An aio worker running ``handle`` and one stream to it, past Ready."""
    w = ferry_worker.aio.Worker(handle, **options)
    c = AioClient(await w.start("127.0.0.1:0"))
    await c.read_ready()
    return w, c


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 60))


def test_async_results_retry_fail_and_exceptions():
    async def handle(e):
        await asyncio.sleep(0)
        if e.payload == b"retry":
            return ferry_worker.retry("busy", after_seconds=2)
        if e.payload == b"fail":
            return ferry_worker.fail("bad")
        if e.payload == b"raise":
            raise RuntimeError("boom")
        return ferry_worker.ok()

    async def main():
        w = ferry_worker.aio.Worker(handle, max_in_flight=8, name="aio")
        port = await w.start("127.0.0.1:0")
        c = AioClient(port)
        ready = await c.read_ready()
        assert (ready.max_in_flight, ready.worker_name) == (8, "aio")
        await c.call.write(events_request([1, 2, 3, 4], [b"ok", b"retry", b"fail", b"raise"]))
        await c.read_credit(4)
        r = c.results
        assert r[1].status == OK
        assert (r[2].status, r[2].message, r[2].retry_after_ms) == (RETRY, "busy", 2000)
        assert (r[3].status, r[3].message) == (FAIL, "bad")
        assert (r[4].status, r[4].message) == (FAIL, "boom")
        await c.call.write(events_request([5]))  # the stream survived the exception
        await c.read_credit(1)
        assert r[5].status == OK
        assert w.events_received == 5 and w.credit_violations == 0
        await c.close()
        await w.stop(1)
        await w.wait()

    run(main())


def test_async_cancel_cancels_the_task():
    async def main():
        started = asyncio.Event()
        seen = {}

        async def handle(e):
            if e.id == 1:
                started.set()
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    seen["cancelled"] = w.is_cancelled(1)
                    raise
            return ferry_worker.ok()

        w, c = await connected(handle, max_in_flight=4)
        await c.call.write(events_request([1]))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        await c.call.write(pb.ProcessRequest(cancel=pb.Cancel(ids=[1])))
        await c.call.write(events_request([2]))
        await c.read_credit(2)
        assert c.credit_total == 2
        assert set(c.results) == {2}
        assert seen == {"cancelled": True}
        assert not w.is_cancelled(1)
        await c.close()
        await w.stop(1)

    run(main())


def test_async_concurrency_limit():
    async def main():
        running = peak = 0

        async def handle(e):
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.02)
            running -= 1
            return ferry_worker.ok()

        w, c = await connected(handle, max_in_flight=16, concurrency=3)
        await c.call.write(events_request(list(range(1, 13))))
        await c.read_credit(12)
        assert len(c.results) == 12 and peak == 3
        await c.close()
        await w.stop(1)

    run(main())


def test_async_graceful_stop_and_stream_end_cancels():
    async def main():
        started = asyncio.Event()

        async def handle(e):
            started.set()
            while not w.stopping:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.05)
            return ferry_worker.ok()

        w, c = await connected(handle, max_in_flight=4)
        await c.call.write(events_request([7]))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        t0 = time.monotonic()
        stop = asyncio.ensure_future(w.stop(5))
        msg = await c.read()
        assert [(r.id, r.status) for r in msg.results.results] == [(7, OK)]
        assert await c.read_end() == grpc.StatusCode.UNAVAILABLE
        await stop
        assert time.monotonic() - t0 < 5
        await w.wait()
        late = AioClient(w.port)
        try:
            await asyncio.wait_for(late.call.read(), TIMEOUT)
        except aio.AioRpcError:
            pass
        assert await late.call.code() != grpc.StatusCode.OK
        await c.close()
        await late.close()

    run(main())


def test_async_stream_end_cancels_running_handlers():
    async def main():
        started = asyncio.Event()
        cancelled = asyncio.Event()

        async def handle(e, ctx):
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                assert ctx.cancelled()
                cancelled.set()
                raise
            return ferry_worker.ok()

        w, c = await connected(handle, max_in_flight=4)
        await c.call.write(events_request([1]))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        await c.call.done_writing()
        assert await c.read_end() == grpc.StatusCode.OK
        await asyncio.wait_for(cancelled.wait(), TIMEOUT)
        await c.close()
        await w.stop(1)

    run(main())
