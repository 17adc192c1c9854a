"""Test helpers: a client stream to a worker, as ferry opens it."""

from __future__ import annotations

import queue
import threading
from typing import Dict, Iterable, Optional, Sequence

import grpc
import pytest

from ferry_worker.v1 import processor_pb2 as pb
from ferry_worker.v1 import processor_pb2_grpc as pb_grpc

TIMEOUT = 10.0


class StreamEnded(Exception):
    def __init__(self, code, details):
        super().__init__(f"stream ended: {code} {details}")
        self.code = code
        self.details = details


def events_request(
    ids: Sequence[int], payloads: Sequence[bytes] = (), run_ids: Sequence[int] = ()
) -> pb.ProcessRequest:
    """One Events message; ``run_ids[i]`` (if given) is event i's Event.run_id."""
    req = pb.ProcessRequest()
    for i, event_id in enumerate(ids):
        e = req.events.events.add()
        e.id = event_id
        e.key = f"k{event_id}".encode()
        e.payload = payloads[i] if i < len(payloads) else b"p"
        e.attempt = 1
        if i < len(run_ids):
            e.run_id = run_ids[i]
    return req


class Client:
    """A Process stream to a worker; a thread reads responses into a queue.

    ``results_credit``: send ``ferry-results-credit: 1``, as ferry does, so the
    worker may carry credit inside Results.
    """

    def __init__(self, port: int, results_credit: bool = False):
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self._requests: "queue.Queue[Optional[pb.ProcessRequest]]" = queue.Queue()
        self._responses: "queue.Queue" = queue.Queue()
        self.results_credit = results_credit
        metadata = (("ferry-results-credit", "1"),) if results_credit else ()
        self.call = pb_grpc.ProcessorStub(self.channel).Process(
            self._request_iter(), metadata=metadata
        )
        self.results: Dict[int, pb.Result] = {}
        self.credit_total = 0
        self.credit_messages = 0
        self.results_messages = 0
        self.end: Optional[StreamEnded] = None
        threading.Thread(target=self._read, daemon=True).start()

    def _request_iter(self):
        while True:
            item = self._requests.get()
            if item is None:
                return
            yield item

    def _read(self):
        try:
            for msg in self.call:
                self._responses.put(msg)
            self._responses.put(StreamEnded(grpc.StatusCode.OK, ""))
        except grpc.RpcError as exc:
            self._responses.put(StreamEnded(exc.code(), exc.details()))

    def read(self, timeout: float = TIMEOUT) -> pb.ProcessResponse:
        """The next message; raises StreamEnded at the end of the stream."""
        item = self._responses.get(timeout=timeout)
        if isinstance(item, StreamEnded):
            self.end = item
            self._responses.put(item)  # stays ended
            raise item
        return item

    def read_end(self, timeout: float = TIMEOUT) -> StreamEnded:
        """Reads to the end of the stream; fails on any message."""
        try:
            msg = self.read(timeout)
        except StreamEnded as end:
            return end
        raise AssertionError(f"expected the stream to end, got {msg}")

    def read_ready(self) -> pb.Ready:
        msg = self.read()
        assert msg.WhichOneof("kind") == "ready", msg
        return msg.ready

    def send(self, req: pb.ProcessRequest) -> None:
        self._requests.put(req)

    def send_events(
        self, ids: Sequence[int], payloads: Sequence[bytes] = (), run_ids: Sequence[int] = ()
    ) -> None:
        self.send(events_request(ids, payloads, run_ids))

    def send_cancel(self, ids: Iterable[int]) -> None:
        self.send(pb.ProcessRequest(cancel=pb.Cancel(ids=list(ids))))

    def writes_done(self) -> None:
        self._requests.put(None)

    def read_credit(self, want: int) -> None:
        """Reads until ``want`` more units of credit arrived; collects results."""
        got = 0
        while got < want:
            msg = self.read()
            kind = msg.WhichOneof("kind")
            if kind == "credit":
                got += msg.credit.n
                self.credit_total += msg.credit.n
                self.credit_messages += 1
            elif kind == "results":
                self.results_messages += 1
                # Only a client that sent the header may get credit here: an
                # older ferry would ignore it and starve.
                if not self.results_credit:
                    assert msg.results.credit == 0, f"credit inside Results: {msg}"
                got += msg.results.credit
                self.credit_total += msg.results.credit
                for r in msg.results.results:
                    assert r.id not in self.results, f"duplicate result for {r.id}"
                    self.results[r.id] = r
            else:
                raise AssertionError(f"unexpected message {msg}")

    def close(self) -> None:
        self.call.cancel()
        self._requests.put(None)
        self.channel.close()


@pytest.fixture
def clients():
    made = []

    def make(port: int, **kwargs) -> Client:
        c = Client(port, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def workers():
    """Starts ferry_worker.Worker instances on 127.0.0.1:0 and stops them after the test."""
    import ferry_worker

    made = []

    def make(handler, **kwargs):
        kwargs.setdefault("name", "test-worker")
        w = ferry_worker.Worker(handler, **kwargs)
        port = w.start("127.0.0.1:0")
        assert port > 0
        made.append(w)
        return w

    yield make
    for w in made:
        w.stop(0)
