"""plain_worker.py as ferry sees it: Ready first, a result per event, credit back."""

import os
import queue
import signal
import subprocess
import sys

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import processor_pb2 as pb  # noqa: E402
import processor_pb2_grpc as pb_grpc  # noqa: E402


def _start(*flags):
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "plain_worker.py"), "--listen", "127.0.0.1:0", *flags],
        cwd=HERE, stdout=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    assert line.startswith("plain_worker listening on 127.0.0.1:"), line
    return proc, int(line.rsplit(":", 1)[1])


def _results(call, want):
    """Reads messages until `want` results arrived; returns {id: status} in arrival order."""
    got = {}
    while len(got) < want:
        msg = next(call)
        if msg.WhichOneof("kind") == "results":
            for r in msg.results.results:
                assert r.id not in got, f"second result for {r.id}"
                got[r.id] = r.status
    return got


def test_plain_worker_runs_stop_at_the_first_member_not_ok():
    # --fail_every 3: the event with payload "2" fails; the run's later members
    # are NOT_ATTEMPTED, an event outside the run is unaffected.
    proc, port = _start("--max_in_flight", "16", "--max_run", "8", "--fail_every", "3",
                        "--handler_threads", "4")
    try:
        requests = queue.Queue()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        call = pb_grpc.ProcessorStub(channel).Process(iter(requests.get, None), timeout=20)
        ready = next(call)
        assert ready.ready.max_run == 8
        run = [pb.Event(id=i + 1, payload=str(i).encode(), run_id=7) for i in range(5)]
        alone = pb.Event(id=100, payload=b"5", run_id=0)
        second = [pb.Event(id=200 + i, payload=b"0", run_id=8) for i in range(2)]
        requests.put(pb.ProcessRequest(events=pb.Events(events=run + [alone] + second)))
        got = _results(call, 8)
        NA, OK, FAIL = pb.Result.NOT_ATTEMPTED, pb.Result.OK, pb.Result.FAIL
        assert [got[i] for i in range(1, 6)] == [OK, OK, FAIL, NA, NA]
        assert got[100] == FAIL  # (5 + 1) % 3 == 0, alone: nothing follows it
        assert (got[200], got[201]) == (OK, OK)
        # A run's members are answered in order (each after the one before it).
        order = [i for i in got if 1 <= i <= 5]
        assert order == [1, 2, 3, 4, 5], order
        requests.put(None)
        list(call)
        channel.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_plain_worker_without_max_run_says_none():
    proc, port = _start("--max_in_flight", "2")
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        requests = queue.Queue()
        call = pb_grpc.ProcessorStub(channel).Process(iter(requests.get, None), timeout=20)
        assert next(call).ready.max_run == 0
        requests.put(None)
        list(call)
        channel.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_plain_worker_acks_and_returns_credit():
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "plain_worker.py"), "--listen", "127.0.0.1:0",
         "--max_in_flight", "3", "--name", "plain"],
        cwd=HERE, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("plain_worker listening on 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        requests = queue.Queue()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        call = pb_grpc.ProcessorStub(channel).Process(iter(requests.get, None), timeout=20)

        ready = next(call)
        assert ready.WhichOneof("kind") == "ready"
        assert (ready.ready.max_in_flight, ready.ready.worker_name) == (3, "plain")

        credit, acked, next_id = 3, set(), 1
        while len(acked) < 10:  # 10 events through 3 units of credit
            batch = []
            while credit > 0 and next_id <= 10:
                batch.append(pb.Event(id=next_id, payload=b"x"))
                next_id, credit = next_id + 1, credit - 1
            if batch:
                requests.put(pb.ProcessRequest(events=pb.Events(events=batch)))
            msg = next(call)
            if msg.WhichOneof("kind") == "credit":
                credit += msg.credit.n
            else:
                assert msg.WhichOneof("kind") == "results"
                for r in msg.results.results:
                    assert r.status == pb.Result.OK and r.id not in acked
                    acked.add(r.id)
        assert acked == set(range(1, 11))
        requests.put(None)  # half-close: the worker ends the stream
        rest = list(call)  # at most the credit for the last results
        assert all(m.WhichOneof("kind") == "credit" for m in rest), rest
        assert credit + sum(m.credit.n for m in rest) == 3  # all credit came back
        channel.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
