"""What a handler decides about one event: ferry_worker.ok(), ferry_worker.retry(), ferry_worker.fail()."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass
from typing import Union

from ferry_worker.v1 import processor_pb2 as pb

_MAX_U32 = 2**32 - 1


class Status(enum.IntEnum):
    """Result status; the values are those of ferry.v1.Result.Status."""

    OK = pb.Result.OK
    RETRY = pb.Result.RETRY
    FAIL = pb.Result.FAIL
    # Set by the SDK only: a run member not handed to the handler because an
    # earlier member of its run did not end OK (see "Runs" in processor.proto).
    NOT_ATTEMPTED = pb.Result.NOT_ATTEMPTED


@dataclass(frozen=True)
class Result:
    """The outcome of one event. Build it with ok(), retry() or fail()."""

    status: Status
    message: str = ""
    # RETRY only: the earliest retry, in seconds from now (0 = ferry's backoff).
    retry_after: float = 0.0

    @property
    def retry_after_ms(self) -> int:
        """retry_after rounded up to whole milliseconds (as sent on the wire)."""
        if self.retry_after <= 0:
            return 0
        micros = round(self.retry_after * 1_000_000)
        return min(-(-micros // 1000), _MAX_U32) if micros > 0 else 1

    def to_proto(self, event_id: int) -> pb.Result:
        r = pb.Result()
        self.fill(r, event_id)
        return r

    def fill(self, r: pb.Result, event_id: int) -> None:
        """Sets ``r`` (e.g. a fresh ``Results.results.add()``) to this result
        for ``event_id``: no intermediate message on the per-event path."""
        r.id = event_id
        r.status = self.status
        if self.message:
            r.message = self.message
        if self.status == Status.RETRY:
            r.retry_after_ms = self.retry_after_ms


_OK = Result(Status.OK)

Seconds = Union[int, float, datetime.timedelta]


def _seconds(value: Seconds) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return float(value)


def ok() -> Result:
    """Processed: ferry may commit the offset."""
    return _OK


def retry(message: str = "", after_seconds: Seconds = 0) -> Result:
    """Try again later. after_seconds > 0 asks ferry to wait at least that long
    (rounded up to whole milliseconds); 0 means ferry's own backoff."""
    after = _seconds(after_seconds)
    if after < 0:
        raise ValueError("after_seconds must be >= 0")
    return Result(Status.RETRY, str(message), after)


def fail(message: str) -> Result:
    """Terminal failure: ferry dead-letters (or skips) the event and moves on."""
    return Result(Status.FAIL, str(message))
