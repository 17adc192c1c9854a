"""The batch form (Worker(handler, batch=True)) and runs (Ready.max_run,
Event.run_id, NOT_ATTEMPTED) in both handler forms, against a real client stream."""

from __future__ import annotations

import threading

import pytest

import ferry_worker
from ferry_worker.v1 import processor_pb2 as pb

OK, RETRY, FAIL = pb.Result.OK, pb.Result.RETRY, pb.Result.FAIL
NOT_ATTEMPTED = pb.Result.NOT_ATTEMPTED


def connected(workers, clients, handle, **options):
    w = workers(handle, **options)
    c = clients(w.port)
    c.read_ready()
    return w, c


def by_payload(events):
    """A batch handler's answer: payload "retry"/"fail"/"raise"/"bad" decide."""
    out = []
    for e in events:
        if e.payload == b"retry":
            out.append(ferry_worker.retry("later", after_seconds=1))
        elif e.payload == b"fail":
            out.append(ferry_worker.fail("bad event"))
        else:
            out.append(ferry_worker.ok())
    return out


class Calls:
    """Records what each handler call got (event ids), thread-safely."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []

    def add(self, events):
        with self.lock:
            self.calls.append([e.id for e in events])

    def handled(self):
        with self.lock:
            return [i for call in self.calls for i in call]


def test_max_run_is_announced_in_ready(workers, clients):
    w = workers(by_payload, batch=True)
    assert clients(w.port).read_ready().max_run == 64  # the default
    w = workers(by_payload, batch=True, max_run=8)
    assert clients(w.port).read_ready().max_run == 8
    w = workers(lambda e: ferry_worker.ok(), max_run=0)
    assert clients(w.port).read_ready().max_run == 0
    with pytest.raises(ValueError):
        ferry_worker.Worker(by_payload, max_run=-1)


def test_batch_one_call_per_message_with_each_events_result(workers, clients):
    calls = Calls()

    def handle(events):
        calls.add(events)
        return by_payload(events)

    w, c = connected(workers, clients, handle, batch=True, max_in_flight=16)
    c.send_events([1, 2, 3, 4], [b"ok", b"retry", b"fail", b"ok"])
    c.read_credit(4)
    assert calls.calls == [[1, 2, 3, 4]]  # one call, the message's order
    assert {i: r.status for i, r in c.results.items()} == {1: OK, 2: RETRY, 3: FAIL, 4: OK}
    assert c.results[2].retry_after_ms == 1000
    assert c.results[3].message == "bad event"
    assert w.events_received == 4 and w.credit_violations == 0


def test_batch_handler_that_raises_fails_its_call_only(workers, clients):
    def handle(events):
        if any(e.payload == b"raise" for e in events):
            raise ValueError("boom")
        return by_payload(events)

    w, c = connected(workers, clients, handle, batch=True, max_in_flight=16)
    c.send_events([1, 2], [b"raise", b"ok"])
    c.read_credit(2)
    assert [(c.results[i].status, c.results[i].message) for i in (1, 2)] == [(FAIL, "boom")] * 2
    c.send_events([3])  # the stream goes on
    c.read_credit(1)
    assert c.results[3].status == OK


@pytest.mark.parametrize(
    "answer, message",
    [
        (lambda events: [ferry_worker.ok()], "1 results for 2 events"),
        (lambda events: None, "NoneType"),
        (lambda events: [ferry_worker.ok(), "yes"], "str, not a ferry_worker.Result"),
    ],
)
def test_batch_handler_returning_the_wrong_thing_is_a_fail(workers, clients, answer, message):
    w, c = connected(workers, clients, answer, batch=True, max_in_flight=4)
    c.send_events([1, 2])
    c.read_credit(2)
    assert c.results[2].status == FAIL and message in c.results[2].message
    if message.startswith("str"):
        assert c.results[1].status == OK  # only the bad element fails
    else:
        assert c.results[1].status == FAIL


def test_batch_runs_in_waves_and_not_attempted_after_a_failure(workers, clients):
    calls = Calls()

    def handle(events):
        calls.add(events)
        return by_payload(events)

    w, c = connected(workers, clients, handle, batch=True, max_in_flight=16)
    # run 7: 1,2,3 (2 fails); run 9: 4,5,6 (all OK); 10 is alone; run 11: 11,12 (11 RETRY).
    c.send_events(
        [1, 4, 10, 2, 5, 11, 3, 6, 12],
        [b"ok", b"ok", b"ok", b"fail", b"ok", b"retry", b"ok", b"ok", b"ok"],
        [7, 9, 0, 7, 9, 11, 7, 9, 11],
    )
    c.read_credit(9)
    # Never two members of one run in a call, each member after the previous OK.
    assert calls.calls == [[1, 4, 10, 11], [2, 5], [6]]
    status = {i: r.status for i, r in c.results.items()}
    assert status == {1: OK, 2: FAIL, 3: NOT_ATTEMPTED, 4: OK, 5: OK, 6: OK, 10: OK,
                      11: RETRY, 12: NOT_ATTEMPTED}
    assert 3 not in calls.handled() and 12 not in calls.handled()


def test_batch_raise_mid_run_answers_the_rest_not_attempted(workers, clients):
    calls = Calls()

    def handle(events):
        calls.add(events)
        if any(e.payload == b"raise" for e in events):
            raise RuntimeError("injected")
        return by_payload(events)

    w, c = connected(workers, clients, handle, batch=True, max_in_flight=16)
    c.send_events([1, 2, 3], [b"ok", b"raise", b"ok"], [5, 5, 5])
    c.read_credit(3)
    assert calls.calls == [[1], [2]]
    assert [c.results[i].status for i in (1, 2, 3)] == [OK, FAIL, NOT_ATTEMPTED]
    assert c.results[2].message == "injected"


def test_batch_cancel_before_start_and_while_running(workers, clients):
    started, release = threading.Event(), threading.Event()
    calls = Calls()

    def handle(events, ctx):
        calls.add(events)
        if events[0].id == 1:
            started.set()
            assert ctx.wait(1, 10)  # wakes on the Cancel of event 1
            assert ctx.cancelled(1) and not ctx.cancelled(2)
            release.wait(10)
        return [ferry_worker.ok()] * len(events)

    w, c = connected(workers, clients, handle, batch=True, max_in_flight=16, concurrency=1)
    c.send_events([1, 2, 3], run_ids=[4, 4, 4])
    assert started.wait(10)
    c.send_cancel([1])
    release.set()
    c.read_credit(3)  # credit for all three
    # 1: cancelled while running, no result; its run ends: 2 and 3 not attempted.
    assert {i: r.status for i, r in c.results.items()} == {2: NOT_ATTEMPTED, 3: NOT_ATTEMPTED}
    assert calls.calls == [[1]]
    assert not w.is_cancelled(1)  # forgotten once answered

    # A whole run cancelled while its first member runs: no result at all.
    started.clear()
    release.clear()
    c.send_events([1, 5, 6], run_ids=[8, 8, 8])  # id 1 again: a duplicate, as ferry never does
    assert started.wait(10)
    c.send_cancel([1, 5, 6])
    release.set()
    c.read_credit(3)
    assert set(c.results) == {2, 3}


def test_per_event_runs_are_sequential_and_stop_at_the_first_non_ok(workers, clients):
    order, lock = [], threading.Lock()
    running = [0, 0]  # now, most at once

    def handle(e):
        with lock:
            running[0] += 1
            running[1] = max(running)
            order.append(e.id)
        threading.Event().wait(0.01)  # give a second member the chance to overlap
        with lock:
            running[0] -= 1
        if e.payload == b"raise":
            raise RuntimeError("thrown")
        return by_payload([e])[0]

    w, c = connected(workers, clients, handle, max_in_flight=16, concurrency=8)
    c.send_events([1, 2, 3, 4], [b"ok"] * 4, [6, 6, 6, 6])
    c.read_credit(4)
    assert order == [1, 2, 3, 4] and running[1] == 1  # one at a time, in order
    order.clear()
    c.send_events([5, 6, 7, 8, 9], [b"ok", b"retry", b"ok", b"raise", b"ok"], [1, 1, 1, 2, 2])
    c.read_credit(5)
    assert sorted(order) == [5, 6, 8]
    status = {i: c.results[i].status for i in (5, 6, 7, 8, 9)}
    assert status == {5: OK, 6: RETRY, 7: NOT_ATTEMPTED, 8: FAIL, 9: NOT_ATTEMPTED}
    assert c.results[8].message == "thrown"


def test_per_event_run_cancelled_member_gets_no_result_and_ends_the_run(workers, clients):
    started, release = threading.Event(), threading.Event()
    handled = []

    def handle(e, ctx):
        handled.append(e.id)
        if e.id == 1:
            started.set()
            ctx.wait(10)
            release.wait(10)
        return ferry_worker.ok()

    w, c = connected(workers, clients, handle, max_in_flight=16)
    c.send_events([1, 2, 3], run_ids=[3, 3, 3])
    assert started.wait(10)
    c.send_cancel([1, 3])
    release.set()
    c.read_credit(3)
    assert {i: r.status for i, r in c.results.items()} == {2: NOT_ATTEMPTED}
    assert handled == [1]


@pytest.mark.parametrize("batch", [False, True])
def test_graceful_stop_mid_run_answers_the_rest_not_attempted(workers, clients, batch):
    started, release = threading.Event(), threading.Event()

    def one(e):
        if e.id == 1:
            started.set()
            release.wait(10)
        return ferry_worker.ok()

    handle = (lambda events: [one(e) for e in events]) if batch else one
    w, c = connected(workers, clients, handle, batch=batch, max_in_flight=16)
    c.send_events([1, 2, 3], run_ids=[4, 4, 4])
    assert started.wait(10)
    stopper = threading.Thread(target=w.stop, args=(10,))
    stopper.start()
    while not w.stopping:
        threading.Event().wait(0.001)
    release.set()
    stopper.join(20)
    statuses = {}
    while True:
        try:
            msg = c.read()
        except Exception:  # noqa: BLE001 - StreamEnded
            break
        if msg.WhichOneof("kind") == "results":
            statuses.update({r.id: r.status for r in msg.results.results})
    assert statuses == {1: OK, 2: NOT_ATTEMPTED, 3: NOT_ATTEMPTED}


def test_batch_without_runs_in_the_message_runs_messages_concurrently(workers, clients):
    gate = threading.Barrier(2, timeout=10)

    def handle(events):
        gate.wait()  # two messages' calls must be inside at once
        return [ferry_worker.ok()] * len(events)

    w, c = connected(workers, clients, handle, batch=True, max_in_flight=16, concurrency=2)
    c.send_events([1, 2])
    c.send_events([3])
    c.read_credit(3)
    assert {r.status for r in c.results.values()} == {OK}


def test_batch_waves_of_one_message_take_one_thread_hand_off(workers, clients):
    calls = Calls()

    def handle(events):
        calls.add(events)
        return [ferry_worker.ok()] * len(events)

    w, c = connected(workers, clients, handle, batch=True, max_in_flight=64)
    submits = []
    executor = w._core.executor
    real_submit = executor.submit
    executor.submit = lambda *a, **k: submits.append(a[0]) or real_submit(*a, **k)
    c.send_events(list(range(1, 33)), run_ids=[5] * 32)  # one run of 32: 32 waves
    c.read_credit(32)
    assert calls.calls == [[i] for i in range(1, 33)]
    assert {r.status for r in c.results.values()} == {OK} and len(c.results) == 32
    assert len(submits) == 1  # the whole message on one pool thread, not one hand-off per wave
