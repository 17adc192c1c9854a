"""ferry_worker.Worker (sync form) against a real gRPC client stream, as ferry drives it."""

from __future__ import annotations

import datetime
import threading
import time

import grpc
import pytest

import ferry_worker
from ferry_worker.v1 import processor_pb2 as pb

OK, RETRY, FAIL = pb.Result.OK, pb.Result.RETRY, pb.Result.FAIL


def connected(workers, clients, handle, **options):
    """A worker running ``handle`` (``workers`` options) and one stream to it, past Ready."""
    w = workers(handle, **options)
    c = clients(w.port)
    c.read_ready()
    return w, c


def started_on_event_1(workers, clients, handle, started):
    """connected() with credit 4, then event 1 sent and ``handle`` running it
    (it sets ``started``)."""
    w, c = connected(workers, clients, handle, max_in_flight=4)
    c.send_events([1])
    assert started.wait(10)
    return w, c

def test_bad_options_are_rejected():
    def h(e):
        return ferry_worker.ok()

    with pytest.raises(ValueError):
        ferry_worker.Worker(h, max_in_flight=0)
    with pytest.raises(ValueError):
        ferry_worker.Worker(h, concurrency=0)
    with pytest.raises(ValueError):
        ferry_worker.Worker(h, max_results_batch=0)
    with pytest.raises(TypeError):
        ferry_worker.Worker("not callable")
    with pytest.raises(ValueError):
        ferry_worker.retry("x", after_seconds=-1)


def test_result_helpers():
    assert ferry_worker.ok().status == ferry_worker.Status.OK
    r = ferry_worker.retry("later", after_seconds=1.5)
    assert (r.status, r.message, r.retry_after_ms) == (ferry_worker.Status.RETRY, "later", 1500)
    assert ferry_worker.retry("x", after_seconds=datetime.timedelta(seconds=2)).retry_after_ms == 2000
    assert ferry_worker.retry("x", after_seconds=1e-6).retry_after_ms == 1  # rounded up
    assert ferry_worker.retry("x", after_seconds=0.3).retry_after_ms == 300
    assert ferry_worker.retry("x", after_seconds=10**9).retry_after_ms == 2**32 - 1  # clamped
    f = ferry_worker.fail("bad")
    assert (f.status, f.message) == (ferry_worker.Status.FAIL, "bad")


def test_ready_then_results_and_credit(workers, clients):
    w = workers(lambda e: ferry_worker.ok(), max_in_flight=8, name="w-1")
    c = clients(w.port)
    ready = c.read_ready()
    assert ready.max_in_flight == 8
    assert ready.worker_name == "w-1"

    c.send_events([1, 2, 3])
    c.read_credit(3)
    assert c.credit_total == 3
    assert set(c.results) == {1, 2, 3}
    assert all(r.status == OK for r in c.results.values())
    assert w.events_received == 3
    assert w.credit_violations == 0
    assert 1 <= w.max_held <= 3


def test_credit_rides_in_results_when_ferry_asks(workers, clients):
    w = workers(lambda e: ferry_worker.ok(), max_in_flight=8)
    c = clients(w.port, results_credit=True)
    c.read_ready()
    for first in range(1, 21, 4):
        c.send_events(list(range(first, first + 4)))
        c.read_credit(4)
    assert c.credit_total == 20
    assert c.credit_messages == 0  # all of it inside Results
    assert set(c.results) == set(range(1, 21))
    assert w.credit_violations == 0


def test_without_the_header_credit_is_its_own_message(workers, clients):
    w, c = connected(workers, clients, lambda e: ferry_worker.ok(), max_in_flight=8)
    c.send_events([1, 2, 3, 4])
    c.read_credit(4)  # fails on credit inside Results
    assert c.credit_total == 4
    assert c.credit_messages >= 1
    assert set(c.results) == {1, 2, 3, 4}


def test_credit_of_cancelled_events_rides_in_an_empty_results(workers, clients):
    started, release = threading.Event(), threading.Event()

    def handle(e, ctx):
        started.set()
        ctx.wait(10)
        release.wait(10)
        return ferry_worker.ok()

    w = workers(handle, max_in_flight=4)
    c = clients(w.port, results_credit=True)
    c.read_ready()
    c.send_events([1])
    assert started.wait(10)
    c.send_cancel([1])
    release.set()
    msg = c.read()
    assert msg.WhichOneof("kind") == "results", msg
    assert list(msg.results.results) == []
    assert msg.results.credit == 1


def test_default_name_is_the_host_name(workers, clients):
    import socket

    w = workers(lambda e: ferry_worker.ok(), name=None)
    assert clients(w.port).read_ready().worker_name == socket.gethostname()


def test_outcomes_map_to_statuses(workers, clients):
    def handle(e):
        p = e.payload
        if p == b"retry":
            return ferry_worker.retry("later", after_seconds=1.5)
        if p == b"retry-default":
            return ferry_worker.retry("again")
        if p == b"retry-1us":
            return ferry_worker.retry("soon", after_seconds=0.000001)
        if p == b"fail":
            return ferry_worker.fail("bad record")
        if p == b"raise":
            raise RuntimeError("boom")
        if p == b"raise-empty":
            raise KeyError()
        if p == b"none":
            return None
        return ferry_worker.ok()

    w, c = connected(workers, clients, handle, max_in_flight=16)
    payloads = [b"retry", b"retry-default", b"retry-1us", b"fail", b"raise", b"raise-empty",
                b"none", b"ok"]
    c.send_events(list(range(1, 9)), payloads)
    c.read_credit(8)
    r = c.results
    assert len(r) == 8
    assert (r[1].status, r[1].message, r[1].retry_after_ms) == (RETRY, "later", 1500)
    assert (r[2].status, r[2].retry_after_ms) == (RETRY, 0)
    assert (r[3].status, r[3].retry_after_ms) == (RETRY, 1)
    assert (r[4].status, r[4].message) == (FAIL, "bad record")
    assert (r[5].status, r[5].message) == (FAIL, "boom")
    assert r[6].status == FAIL and r[6].message  # the exception type when str() is empty
    assert r[7].status == FAIL and "ferry_worker.Result" in r[7].message
    assert r[8].status == OK and r[8].message == ""

    # Raising handlers did not kill the stream.
    c.send_events([9])
    c.read_credit(1)
    assert c.results[9].status == OK


def test_events_of_one_message_run_concurrently(workers, clients):
    barrier = threading.Barrier(3, timeout=10)

    def handle(e):
        barrier.wait()  # breaks (FAIL) unless all three run at the same time
        return ferry_worker.ok()

    w, c = connected(workers, clients, handle, max_in_flight=8, concurrency=3)
    c.send_events([1, 2, 3])
    c.read_credit(3)
    assert [c.results[i].status for i in (1, 2, 3)] == [OK, OK, OK]


def test_concurrency_bounds_running_handlers(workers, clients):
    lock = threading.Lock()
    running = peak = 0

    def handle(e):
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return ferry_worker.ok()

    w, c = connected(workers, clients, handle, max_in_flight=20, concurrency=2)
    c.send_events(list(range(1, 11)))
    c.read_credit(10)
    assert len(c.results) == 10
    assert peak == 2


def test_cancel_suppresses_result_but_returns_credit(workers, clients):
    started, release = threading.Event(), threading.Event()
    seen = {}

    def handle(e, ctx):
        if e.id == 1:
            started.set()
            seen["ctx_cancelled"] = ctx.wait(10)  # returns early when cancelled
            seen["worker_says"] = w.is_cancelled(1)
            release.wait(10)
        else:
            # The stream handles messages in order, so Cancel{1} was applied already.
            seen["other_ctx"] = ctx.cancelled()
            release.set()
        return ferry_worker.ok()

    w, c = started_on_event_1(workers, clients, handle, started)
    c.send_cancel([1, 99])  # 99 is unknown: ignored
    c.send_events([2])
    c.read_credit(2)
    assert c.credit_total == 2
    assert set(c.results) == {2}
    assert seen == {"ctx_cancelled": True, "worker_says": True, "other_ctx": False}
    assert not w.is_cancelled(1)  # forgotten once finished


def test_cancelled_before_start_is_skipped(workers, clients):
    started, release = threading.Event(), threading.Event()
    ran = []

    def handle(e):
        ran.append(e.id)
        if e.id == 1:
            started.set()
            release.wait(10)
        return ferry_worker.ok()

    w = workers(handle, max_in_flight=4, concurrency=1)  # event 2 queues behind event 1
    c = clients(w.port)
    c.read_ready()
    c.send_events([1, 2])
    assert started.wait(10)
    c.send_cancel([2])
    time.sleep(0.2)  # let the Cancel arrive before event 1 frees the only thread
    release.set()
    c.read_credit(2)
    assert set(c.results) == {1}
    assert ran == [1]


def test_max_held_never_exceeds_credit_when_client_respects_it(workers, clients):
    credit_limit, total = 4, 300
    w = workers(
        lambda e: ferry_worker.retry("r") if e.id % 7 == 0 else ferry_worker.ok(),
        max_in_flight=credit_limit,
        concurrency=3,
        max_results_batch=3,
    )
    c = clients(w.port)
    credit = c.read_ready().max_in_flight
    next_id = 1
    results = {}
    while len(results) < total:
        batch = []
        while credit > 0 and next_id <= total:
            batch.append(next_id)
            next_id += 1
            credit -= 1
        if batch:
            c.send_events(batch)
        msg = c.read()
        if msg.WhichOneof("kind") == "credit":
            credit += msg.credit.n
        elif msg.WhichOneof("kind") == "results":
            assert len(msg.results.results) <= 3
            for r in msg.results.results:
                results[r.id] = r
    assert len(results) == total
    assert all(r.status == (RETRY if i % 7 == 0 else OK) for i, r in results.items())
    assert w.events_received == total
    assert w.credit_violations == 0
    assert 1 <= w.max_held <= credit_limit


def test_credit_violation_is_counted_and_still_processed(workers, clients):
    started, release = threading.Event(), threading.Event()

    def handle(e):
        started.set()
        release.wait(10)
        return ferry_worker.ok()

    w, c = connected(workers, clients, handle, max_in_flight=2)
    c.send_events([1, 2, 3, 4, 5])
    assert started.wait(10)  # the whole message was accepted by now
    assert w.credit_violations == 3
    assert w.max_held == 5
    release.set()
    c.read_credit(5)
    assert set(c.results) == {1, 2, 3, 4, 5}


def test_stream_closed_by_ferry_drops_results_safely(workers, clients):
    started, release = threading.Event(), threading.Event()
    finished = []
    contexts = {}

    def handle(e, ctx):
        contexts[e.id] = ctx
        if e.id < 10:
            started.set()
            release.wait(10)
        finished.append(e.id)
        return ferry_worker.ok()

    w = workers(handle, max_in_flight=4, concurrency=4)
    # ferry half-closes: the worker ends the stream (OK) without waiting.
    c1 = clients(w.port)
    c1.read_ready()
    c1.send_events([1])
    assert started.wait(10)
    c1.writes_done()
    assert c1.read_end().code == grpc.StatusCode.OK
    assert contexts[1].cancelled()  # the stream is gone: its handlers' contexts are cancelled

    # A cancelled stream with work in flight.
    started.clear()
    c2 = clients(w.port)
    c2.read_ready()
    c2.send_events([3])
    assert started.wait(10)
    c2.call.cancel()
    assert c2.read_end().code == grpc.StatusCode.CANCELLED

    # The worker keeps serving new streams.
    c3 = clients(w.port)
    c3.read_ready()
    c3.send_events([10])
    c3.read_credit(1)
    assert set(c3.results) == {10}
    release.set()
    w.stop(5)
    assert sorted(finished) == [1, 3, 10]


def test_graceful_stop_delivers_in_flight_result_within_grace(workers, clients):
    started = threading.Event()
    holder = {}

    def handle(e):
        started.set()
        while not holder["w"].stopping:  # still working when stop() begins
            time.sleep(0.001)
        time.sleep(0.1)
        return ferry_worker.ok()

    w = holder["w"] = workers(handle, max_in_flight=4)
    c = clients(w.port)
    c.read_ready()
    c.send_events([7])
    assert started.wait(10)

    took = {}

    def stopper():
        t0 = time.monotonic()
        w.stop(5)
        took["s"] = time.monotonic() - t0

    t = threading.Thread(target=stopper)
    t.start()
    msg = c.read()
    assert msg.WhichOneof("kind") == "results", msg
    assert [(r.id, r.status) for r in msg.results.results] == [(7, OK)]
    # Draining: no more credit; the stream ends with UNAVAILABLE.
    assert c.read_end().code == grpc.StatusCode.UNAVAILABLE
    t.join(10)
    assert took["s"] < 5
    assert w.wait(0)
    w.stop(5)  # idempotent

    # New streams are refused.
    late = clients(w.port)
    assert late.read_end().code != grpc.StatusCode.OK


def test_stop_refuses_new_streams_and_events_while_draining(workers, clients):
    started, release = threading.Event(), threading.Event()
    ran = []

    def handle(e):
        ran.append(e.id)
        started.set()
        release.wait(10)
        return ferry_worker.ok()

    w, c = started_on_event_1(workers, clients, handle, started)
    t = threading.Thread(target=w.stop, args=(10,))
    t.start()
    deadline = time.monotonic() + 10
    while not w.stopping and time.monotonic() < deadline:
        time.sleep(0.001)
    late = clients(w.port)
    assert late.read_end().code == grpc.StatusCode.UNAVAILABLE
    c.send_events([2])  # arrives while draining: not started, no result, no credit
    time.sleep(0.2)
    release.set()
    msg = c.read()
    assert [r.id for r in msg.results.results] == [1]
    assert c.read_end().code == grpc.StatusCode.UNAVAILABLE
    t.join(10)
    assert ran == [1]
    assert w.events_received == 2


def test_stop_grace_expiry_ends_streams(workers, clients):
    started, release = threading.Event(), threading.Event()

    def handle(e, ctx):
        started.set()
        release.wait(10)
        return ferry_worker.ok()

    w, c = started_on_event_1(workers, clients, handle, started)
    t0 = time.monotonic()
    w.stop(0.3)
    took = time.monotonic() - t0
    assert 0.25 <= took < 3
    assert c.read_end().code == grpc.StatusCode.UNAVAILABLE  # no result: grace expired
    release.set()


def test_stop_without_start():
    w = ferry_worker.Worker(lambda e: ferry_worker.ok())
    w.stop(0)
    assert w.wait(0)
    with pytest.raises(RuntimeError):
        w.start("127.0.0.1:0")


def test_start_twice_and_taken_port(workers):
    w = workers(lambda e: ferry_worker.ok())
    with pytest.raises(RuntimeError):
        w.start("127.0.0.1:0")
    other = ferry_worker.Worker(lambda e: ferry_worker.ok())
    with pytest.raises(OSError):
        other.start(f"127.0.0.1:{w.port}")
    other.stop(0)


def test_async_handler_on_the_sync_worker(workers, clients):
    import asyncio

    async def handle(e):
        await asyncio.sleep(0.01)
        if e.payload == b"raise":
            raise ValueError("async boom")
        return ferry_worker.retry("later", after_seconds=2)

    w, c = connected(workers, clients, handle, max_in_flight=4)
    c.send_events([1, 2], [b"x", b"raise"])
    c.read_credit(2)
    assert (c.results[1].status, c.results[1].retry_after_ms) == (RETRY, 2000)
    assert (c.results[2].status, c.results[2].message) == (FAIL, "async boom")
