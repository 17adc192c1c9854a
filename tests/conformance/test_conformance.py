"""Worker conformance: the same scenarios, through a real ferry and a mock
Kafka cluster, against every worker implementation (`scenario` is
parametrised over cpp, python, go and plain; see conftest.py and README.md).

Every scenario has its own cluster, topic and group; kafka_tool produce
writes `count` records over `keys` keys (key-i on partition i % partitions,
payload = the key's sequence number), so (key, payload) names a record.
"""

from __future__ import annotations

import signal
import time
from collections import Counter

from conftest import (
    by_key_in_start_order,
    count_lines,
    expected_records,
    ferry_config,
    processor_yaml,
    progress,
)

GROUP = "conformance"


def _target(*workers) -> str:
    return "ipv4:" + ",".join(f"127.0.0.1:{w.port}" for w in workers)


def _wait_lines(s, path, n: int, proc, timeout: float = 60) -> int:
    """Polls a --record_flush file until it has `n` lines; returns the count."""
    deadline = time.monotonic() + timeout
    while True:
        lines = count_lines(path)
        if lines >= n:
            return lines
        assert proc.alive(), f"{proc.name} exited early\n{s.tails()}"
        assert time.monotonic() < deadline, f"{path}: {lines} < {n} lines\n{s.tails()}"
        time.sleep(0.005)  # polling the record file


def _stop(s, proc, timeout: float = 30) -> None:
    code = proc.terminate(timeout)
    assert code == 0, f"{proc.name}: SIGTERM gave exit {code}\n{s.tails()}"


def _single_worker_run(s, topic, *, partitions, count, keys, max_in_flight, flags, streams=2,
                       **processor):
    """Cluster, one worker, ferry with one processor and a DLQ; produce, wait
    until all committed, SIGTERM ferry then the worker (both exit 0)."""
    dlq = f"{topic}-dlq"
    s.start_cluster([topic, dlq], partitions)
    w = s.start_worker("w", max_in_flight, flags)
    ferry = s.start_ferry(ferry_config(
        s.bootstrap, GROUP, [topic],
        [processor_yaml("default", _target(w), streams=streams, **processor)],
        dead_letter_topic=dlq))
    s.produce(topic, count, keys, partitions)
    committed_ns = s.wait_committed(topic, GROUP, ferry)
    _stop(s, ferry)
    _stop(s, w.proc)
    return w, ferry.text(), committed_ns


def _assert_order(keyed, expect_per_key):
    """Each key's handler runs, in start order, are exactly expect_per_key(n_seqs)."""
    for key, runs in keyed.items():
        got = [(r.seq, r.answer) for r in runs]
        n = len({r.seq for r in runs})
        assert got == expect_per_key(n), f"{key}: handler runs in start order {got}"


# 1. Ordering per key: each key's handler runs start in produce order, once each.
def test_ordering_per_key(scenario):
    count, keys, partitions = 1000, 50, 4
    w, log, _ = _single_worker_run(
        scenario, "ordering", partitions=partitions, count=count, keys=keys, max_in_flight=32,
        flags=["--handler_threads=8", "--work_us=200"])
    runs = w.runs()
    assert len(runs) == count
    assert {(r.key, r.seq) for r in runs} == expected_records(count, keys)
    keyed = by_key_in_start_order(runs)
    _assert_order(keyed, lambda n: [(i, "OK") for i in range(n)])
    for key, rs in keyed.items():
        assert {r.partition for r in rs} == {int(key.split("-")[1]) % partitions}, key
        assert [r.offset for r in rs] == sorted(r.offset for r in rs), key
    stats = w.stats()
    assert stats["events_received"] == count and stats["credit_violations"] == 0, stats
    assert 1 <= stats["max_held"] <= 32, stats
    assert (progress(log, "acked"), progress(log, "failed"), progress(log, "redelivered")) == (
        count, 0, 0)


# 2. Credits never exceeded: two workers granting 1 and 4 events of credit per
# stream (each serving its own topic, so both get work); ferry never has more
# outstanding on a stream than granted, and it uses all of it.
def test_credits_never_exceeded(scenario):
    s = scenario
    count, keys, partitions = 300, 30, 3
    s.start_cluster(["narrow", "wide", "credit-dlq"], partitions)
    narrow = s.start_worker("narrow", 1, ["--handler_threads=4", "--work_us=2000"])
    wide = s.start_worker("wide", 4, ["--handler_threads=4", "--work_us=2000"])
    ferry = s.start_ferry(ferry_config(
        s.bootstrap, GROUP, ["narrow", "wide"],
        [processor_yaml("narrow", _target(narrow), streams=2, event_types=["narrow"]),
         processor_yaml("wide", _target(wide), streams=2, event_types=["wide"])],
        dead_letter_topic="credit-dlq"))
    s.produce("narrow", count, keys, partitions)
    s.produce("wide", count, keys, partitions)
    s.wait_committed("narrow", GROUP, ferry)
    s.wait_committed("wide", GROUP, ferry)
    _stop(s, ferry)
    for w, credit in ((narrow, 1), (wide, 4)):
        _stop(s, w.proc)
        stats = w.stats()
        assert stats["credit_violations"] == 0, (w.name, stats)
        assert stats["max_held"] == credit, (w.name, stats)  # never more, and saturated
        assert stats["events_received"] == count, (w.name, stats)
        runs = w.runs()
        assert {(r.key, r.seq) for r in runs} == expected_records(count, keys), w.name
        assert all(r.answer == "OK" for r in runs), w.name
    assert progress(ferry.text(), "acked") == 2 * count


# 3. RETRY then OK: every event answers RETRY on attempt 1 and OK on attempt
# 2; the retry keeps its key's place (nothing of the key overtakes it).
def test_retry_then_ok(scenario):
    count, keys = 400, 20
    w, log, _ = _single_worker_run(
        scenario, "retry", partitions=4, count=count, keys=keys, max_in_flight=16,
        flags=["--handler_threads=8", "--retry_attempts=2"], max_attempts=3,
        retry_backoff="10ms")
    runs = w.runs()
    assert len(runs) == 2 * count
    keyed = by_key_in_start_order(runs)
    assert len(keyed) == keys
    _assert_order(keyed, lambda n: [(i // 2, "RETRY" if i % 2 == 0 else "OK")
                                    for i in range(2 * n)])
    assert {(r.key, r.seq) for r in runs} == expected_records(count, keys)
    assert (progress(log, "acked"), progress(log, "retried"), progress(log, "failed")) == (
        count, count, 0)
    assert scenario.end_offsets_total("retry-dlq") == 0


# 4. Attempts exhausted -> DLQ: a worker that always answers RETRY gets each
# event max_attempts (3) times, in key order; then every event is
# dead-lettered and its offset committed.
def test_attempts_exhausted_dead_letters(scenario):
    count, keys = 200, 20
    w, log, _ = _single_worker_run(
        scenario, "exhaust", partitions=4, count=count, keys=keys, max_in_flight=16,
        flags=["--handler_threads=8", "--retry_attempts=99"], max_attempts=3,
        retry_backoff="10ms")
    runs = w.runs()
    assert len(runs) == 3 * count
    _assert_order(by_key_in_start_order(runs), lambda n: [(i // 3, "RETRY")
                                                          for i in range(3 * n)])
    assert Counter((r.key, r.seq) for r in runs) == Counter(
        {rec: 3 for rec in expected_records(count, keys)})
    assert scenario.end_offsets_total("exhaust-dlq") == count
    assert (progress(log, "acked"), progress(log, "failed"), progress(log, "retried")) == (
        0, count, 2 * count)


# 5. Handler error -> FAIL: a handler that raises / throws / panics for every
# 5th sequence is a FAIL for that event only: those are dead-lettered, the
# rest acked, and the stream survives (nothing redelivered, nothing handled
# twice). A worker that takes runs (the SDKs do by default) answers the
# members after the FAIL in its run NOT_ATTEMPTED, and ferry sends those
# again: it receives each event once plus once per NOT_ATTEMPTED.
def test_handler_error_is_fail(scenario):
    count, keys = 500, 25
    w, log, _ = _single_worker_run(
        scenario, "throws", partitions=4, count=count, keys=keys, max_in_flight=16,
        flags=["--handler_threads=8", "--throw_every=5"])
    runs = w.runs()
    assert len(runs) == count
    assert {(r.key, r.seq) for r in runs} == expected_records(count, keys)
    for r in runs:
        assert r.answer == ("FAIL" if (r.seq + 1) % 5 == 0 else "OK"), r
    _assert_order(by_key_in_start_order(runs),
                  lambda n: [(i, "FAIL" if (i + 1) % 5 == 0 else "OK") for i in range(n)])
    assert scenario.end_offsets_total("throws-dlq") == count // 5
    assert (progress(log, "acked"), progress(log, "failed"), progress(log, "redelivered")) == (
        count - count // 5, count // 5, 0)
    stats = w.stats()
    assert stats["events_received"] == count + progress(log, "not_attempted"), stats
    assert stats["credit_violations"] == 0, stats


# 6. Timeout -> Cancel delivered: every handler stalls 5 s, the processor's
# timeout is 300ms. ferry cancels each event, the worker sees the Cancel (its
# stall ends early) and returns the credit without a result, every event is
# dead-lettered and the partitions are committed long before any stall would
# have ended. Credit 4 for 12 events: later events need the credit of
# cancelled ones.
def test_timeout_delivers_cancel(scenario):
    count = 12
    stall_ms = 5000
    w, log, committed_ns = _single_worker_run(
        scenario, "slow", partitions=2, count=count, keys=count, max_in_flight=4, streams=1,
        flags=["--handler_threads=16", "--stall_rate=1", f"--stall_ms={stall_ms}"],
        timeout="300ms")
    runs = w.runs()
    assert len(runs) == count
    assert {(r.key, r.seq) for r in runs} == expected_records(count, count)
    # The stall ended on the Cancel (it answers FAIL then), not after 5 s.
    assert all(r.answer == "FAIL" for r in runs), runs
    first_start = min(r.start_ns for r in runs)
    assert committed_ns < first_start + stall_ms * 1_000_000, (
        f"committed {(committed_ns - first_start) / 1e9:.1f}s after the first handler started")
    stats = w.stats()
    assert stats["cancelled"] == count, stats
    assert stats["events_received"] == count and stats["credit_violations"] == 0, stats
    assert stats["max_held"] == 4, stats
    assert scenario.end_offsets_total("slow-dlq") == count
    assert (progress(log, "failed"), progress(log, "acked")) == (count, 0)


def _kill_and_restart(s, topic, count, keys, partitions, credit, flags):
    """Kills the worker (-9) a quarter of the way through and starts it again
    on the same port; checks nothing was lost, each key's first handler runs
    started in produce order and each record was acked once. Returns ferry's
    log."""
    s.start_cluster([topic, f"{topic}-dlq"], partitions)
    first = s.start_worker("first", credit, flags)
    ferry = s.start_ferry(ferry_config(
        s.bootstrap, GROUP, [topic],
        [processor_yaml("default", _target(first), streams=2)], dead_letter_topic=f"{topic}-dlq"))
    s.produce(topic, count, keys, partitions)
    _wait_lines(s, first.record, count // 4, first.proc)
    first.proc.signal(signal.SIGKILL)
    assert first.proc.wait(10) == -signal.SIGKILL
    second = s.start_worker("second", credit, flags, port=first.port)
    s.wait_committed(topic, GROUP, ferry)
    _stop(s, ferry)
    _stop(s, second.proc)

    runs1, runs2 = first.runs(), second.runs()
    assert runs1 and runs2, (len(runs1), len(runs2))
    assert len(runs1) < count, "the first worker was killed mid-stream"
    acked = {(r.key, r.seq) for r in runs1 + runs2 if r.answer == "OK"}
    assert acked == expected_records(count, keys), "nothing lost"
    first_start = {}
    for r in runs1 + runs2:
        first_start[(r.key, r.seq)] = min(first_start.get((r.key, r.seq), r.start_ns), r.start_ns)
    for key in {k for k, _ in first_start}:
        seqs = sorted(q for k, q in first_start if k == key)
        starts = [first_start[(key, q)] for q in seqs]
        assert starts == sorted(starts), f"{key}: first runs out of produce order"
    # Redelivered (not lost): the second worker's runs of a key are in order too.
    for key, rs in by_key_in_start_order(runs2).items():
        assert [r.seq for r in rs] == sorted(r.seq for r in rs), key
    log = ferry.text()
    assert progress(log, "redelivered") > 0
    assert (progress(log, "acked"), progress(log, "failed")) == (count, 0)  # each applied once
    assert s.end_offsets_total(f"{topic}-dlq") == 0
    return log


# 7. Worker restart -> redelivery: kill -9 the worker mid-stream, start it
# again on the same port: ferry redelivers what was in flight on the dead
# streams, every record is handled (at least once) and all is committed; each
# key's first handler runs still start in produce order.
def test_worker_restart_redelivers(scenario):
    _kill_and_restart(scenario, "restart", count=600, keys=30, partitions=3, credit=8,
                      flags=["--handler_threads=8", "--work_us=30000", "--record_flush"])


# 8. Graceful stop: SIGTERM the worker while events are in flight. It finishes
# and answers what it was running (their results reach ferry: nothing it
# answered is handled again), starts nothing new, exits 0; ferry redelivers
# what the worker received and never started to a new worker on the same
# port, and every record is handled exactly once.
def test_graceful_stop(scenario):
    s = scenario
    count, keys, partitions = 300, 30, 3
    flags = ["--handler_threads=8", "--work_us=100000", "--record_flush"]
    s.start_cluster(["graceful", "graceful-dlq"], partitions)
    first = s.start_worker("first", 8, flags)
    ferry = s.start_ferry(ferry_config(
        s.bootstrap, GROUP, ["graceful"],
        [processor_yaml("default", _target(first), streams=2)],
        dead_letter_topic="graceful-dlq"))
    s.produce("graceful", count, keys, partitions)
    at_sigterm = _wait_lines(s, first.record, 40, first.proc)
    stopping = time.monotonic()
    _stop(s, first.proc, timeout=20)
    stop_seconds = time.monotonic() - stopping
    second = s.start_worker("second", 8, ["--handler_threads=8", "--record_flush"],
                            port=first.port)
    s.wait_committed("graceful", GROUP, ferry)
    _stop(s, ferry)
    _stop(s, second.proc)

    runs1, runs2 = first.runs(), second.runs()
    assert len(runs1) > at_sigterm, "events in flight at SIGTERM were finished"
    assert len(runs1) < count and runs2, (len(runs1), len(runs2))
    assert stop_seconds < 5, f"graceful stop took {stop_seconds:.1f}s"
    assert all(r.answer == "OK" for r in runs1 + runs2)
    handled = Counter((r.key, r.seq) for r in runs1 + runs2)
    assert set(handled) == expected_records(count, keys), "nothing lost"
    twice = sorted(rec for rec, n in handled.items() if n > 1)
    assert not twice, f"answered by the stopping worker, yet redelivered: {twice[:10]}"
    stats1 = first.stats()
    assert stats1["credit_violations"] == 0, stats1
    log = ferry.text()
    # What the stopping worker received and never started comes back (plus, at
    # most, events still on the wire when its streams ended): redelivered when
    # its streams end, or, for a run's members after the one it finished,
    # answered NOT_ATTEMPTED (a worker that takes runs does that on a stop).
    back = progress(log, "redelivered") + progress(log, "not_attempted")
    assert back >= stats1["events_received"] - len(runs1), (stats1, len(runs1))
    assert (progress(log, "acked"), progress(log, "failed")) == (count, 0)


# 9. Keepalive: ferry pings each worker connection every keepalive.interval
# (1 s here, the least it accepts) so it notices a vanished host, also while
# the streams carry nothing (here the worker holds every event 8 s). The
# worker's gRPC server must permit that: with gRPC's default (5 min) it
# answers GOAWAY too_many_pings after a few pings, the streams end and the
# held events are redelivered. Nothing may end: each event is handled once.
def test_keepalive_pings_on_idle_streams_are_permitted(scenario):
    s, count, topic = scenario, 8, "idle"
    s.start_cluster([topic, f"{topic}-dlq"], 2)
    w = s.start_worker("w", 4, ["--handler_threads=16", "--stall_rate=1", "--stall_ms=8000"])
    processor = (processor_yaml("default", _target(w), streams=2)
                 + "    keepalive:\n      interval: 1s\n      timeout: 1s\n")
    ferry = s.start_ferry(ferry_config(s.bootstrap, GROUP, [topic], [processor],
                                       dead_letter_topic=f"{topic}-dlq"))
    s.produce(topic, count, count, 2)
    s.wait_committed(topic, GROUP, ferry)
    log_before_stop = ferry.text()
    _stop(s, ferry)
    _stop(s, w.proc)

    ended = [ln for ln in log_before_stop.splitlines() if ": stream ended" in ln]
    assert not ended, ended[:4]
    runs = w.runs()
    assert sorted((r.key, r.seq) for r in runs) == sorted(expected_records(count, count))
    assert all(r.answer == "OK" for r in runs), runs
    log = ferry.text()
    assert (progress(log, "acked"), progress(log, "redelivered")) == (count, 0)


# ---- Runs (--max_run=8; the "Runs" comment of proto/ferry/v1/processor.proto)
RUNS = "--max_run=8"


# 10. Ordering per key with runs: a key's consecutive events reach the worker
# in runs (ferry counts run_events), each record is handled once and each
# key's handler runs start in produce order.
def test_runs_keep_order_per_key(scenario):
    count, keys, partitions = 1000, 10, 2
    w, log, _ = _single_worker_run(
        scenario, "runs", partitions=partitions, count=count, keys=keys, max_in_flight=32,
        flags=["--handler_threads=8", "--work_us=200", RUNS])
    runs = w.runs()
    assert len(runs) == count
    assert {(r.key, r.seq) for r in runs} == expected_records(count, keys)
    keyed = by_key_in_start_order(runs)
    _assert_order(keyed, lambda n: [(i, "OK") for i in range(n)])
    for key, rs in keyed.items():
        assert [r.offset for r in rs] == sorted(r.offset for r in rs), key
    stats = w.stats()
    assert stats["events_received"] == count and stats["credit_violations"] == 0, stats
    assert progress(log, "run_events") > 0, "no runs were sent"
    assert (progress(log, "acked"), progress(log, "not_attempted"),
            progress(log, "redelivered")) == (count, 0, 0)


# 11. RETRY mid-run: every event answers RETRY on attempt 1, OK on attempt 2
# (max_attempts 2). The members after a RETRY come back NOT_ATTEMPTED and are
# sent again without an attempt counted: were one counted, a member would come
# back as attempt 2 and go OK without its RETRY, or be dead-lettered.
def test_runs_retry_mid_run_redelivers_not_attempted(scenario):
    count, keys = 200, 4
    w, log, _ = _single_worker_run(
        scenario, "runretry", partitions=2, count=count, keys=keys, max_in_flight=32,
        flags=["--handler_threads=8", "--retry_attempts=2", RUNS], max_attempts=2,
        retry_backoff="10ms")
    runs = w.runs()
    assert len(runs) == 2 * count
    _assert_order(by_key_in_start_order(runs),
                  lambda n: [(i // 2, "RETRY" if i % 2 == 0 else "OK") for i in range(2 * n)])
    assert (progress(log, "acked"), progress(log, "retried"), progress(log, "failed")) == (
        count, count, 0)
    assert progress(log, "not_attempted") > 0, "no run was cut short"
    assert scenario.end_offsets_total("runretry-dlq") == 0


# 12. FAIL mid-run: every 5th sequence FAILs (dead-lettered); the members
# after it in its run come back NOT_ATTEMPTED and are handled once, in order.
def test_runs_fail_mid_run_keeps_order(scenario):
    count, keys = 300, 3
    w, log, _ = _single_worker_run(
        scenario, "runfail", partitions=3, count=count, keys=keys, max_in_flight=32,
        flags=["--handler_threads=8", "--fail_every=5", RUNS])
    runs = w.runs()
    assert len(runs) == count, "each event handled once"
    _assert_order(by_key_in_start_order(runs),
                  lambda n: [(i, "FAIL" if (i + 1) % 5 == 0 else "OK") for i in range(n)])
    assert scenario.end_offsets_total("runfail-dlq") == count // 5
    assert (progress(log, "acked"), progress(log, "failed")) == (count - count // 5, count // 5)
    not_attempted = progress(log, "not_attempted")
    assert not_attempted > 0, "no run was cut short"
    assert w.stats()["events_received"] == count + not_attempted


# 13. Timeout mid-run: every handler stalls 5 s, the timeout is 300ms. The
# first member of a run times out; ferry cancels it and every later member
# (they never start), dead-letters it and sends the rest again. Each event
# runs once (as the first member of some run), all are dead-lettered well
# before a stall would have ended.
def test_runs_timeout_cancels_later_members(scenario):
    count, keys, stall_ms = 12, 2, 5000
    w, log, committed_ns = _single_worker_run(
        scenario, "runslow", partitions=2, count=count, keys=keys, max_in_flight=8, streams=1,
        flags=["--handler_threads=16", "--stall_rate=1", f"--stall_ms={stall_ms}", RUNS],
        timeout="300ms")
    runs = w.runs()
    assert sorted((r.key, r.seq) for r in runs) == sorted(expected_records(count, keys))
    assert all(r.answer == "FAIL" for r in runs), runs  # each stall ended on its Cancel
    first_start = min(r.start_ns for r in runs)
    assert committed_ns < first_start + stall_ms * 1_000_000
    assert scenario.end_offsets_total("runslow-dlq") == count
    assert (progress(log, "failed"), progress(log, "acked")) == (count, 0)
    assert progress(log, "not_attempted") > 0, "no later member was cancelled"
    stats = w.stats()
    assert stats["credit_violations"] == 0, stats
    assert stats["events_received"] == count + progress(log, "not_attempted"), stats


# 14. kill -9 of the worker mid-run: the unanswered members of its runs are
# redelivered to the restarted worker; nothing is lost, each key's first
# handler runs start in produce order and each record is acked once.
def test_runs_worker_killed_mid_run_redelivers(scenario):
    log = _kill_and_restart(scenario, "runkill", count=400, keys=8, partitions=2, credit=16,
                            flags=["--handler_threads=8", "--work_us=20000", "--record_flush", RUNS])
    assert progress(log, "run_events") > 0
