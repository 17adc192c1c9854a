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
