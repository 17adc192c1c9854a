"""The runnable examples, as processes: flags, port file, record/stats files, SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import grpc

from conftest import Client

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _wait_for_file(path: str, proc: subprocess.Popen, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                return f.read()
        assert proc.poll() is None, f"worker exited early: {proc.communicate()}"
        time.sleep(0.02)
    raise AssertionError(f"{path} not written in {timeout}s")


def test_example_worker_flags_record_stats_and_sigterm(tmp_path):
    port_file, record, stats = tmp_path / "port", tmp_path / "record.tsv", tmp_path / "stats"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferry_worker.examples.worker", "--listen", "127.0.0.1:0",
         "--max_in_flight=5", "--name", "ex-1", "--port_file", str(port_file),
         "--record", str(record), "--stats", str(stats), "--work_us", "100",
         "--handler_threads", "2"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        port = int(_wait_for_file(str(port_file), proc))
        line = proc.stdout.readline()
        assert line == f"example_worker listening on 127.0.0.1:{port} (max_in_flight=5)\n"
        c = Client(port)
        ready = c.read_ready()
        assert (ready.max_in_flight, ready.worker_name) == (5, "ex-1")
        before = time.monotonic_ns()
        c.send_events([1, 2, 3], [b"a\tb", b"plain", b"x\\y\nz"])
        c.read_credit(3)
        assert set(c.results) == {1, 2, 3}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert c.read_end().code == grpc.StatusCode.UNAVAILABLE
        c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    counters = dict(ln.split("=") for ln in stats.read_text().splitlines())
    assert list(counters) == ["events_received", "max_held", "credit_violations", "cancelled"]
    assert counters["events_received"] == "3" and counters["credit_violations"] == "0"
    assert counters["cancelled"] == "0"
    assert 1 <= int(counters["max_held"]) <= 3
    lines = sorted(record.read_bytes().splitlines())
    assert len(lines) == 3
    rows = {}
    for ln in lines:
        key, payload, ns, partition, offset, answer = ln.split(b"\t")
        rows[key] = payload
        assert int(ns) >= before
        assert (partition, offset, answer) == (b"0", b"0", b"OK")
    assert rows == {b"k1": b"a\\tb", b"k2": b"plain", b"k3": b"x\\\\y\\nz"}


def test_example_worker_bad_listen_address_exits_1():
    proc = subprocess.run(
        [sys.executable, "-m", "ferry_worker.examples.worker", "--listen", "256.1.1.1:99999"],
        env=_env(), capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 1, proc
    assert "example_worker:" in proc.stderr


def test_hello_serves_and_stops_on_sigterm():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferry_worker.examples.hello", f"127.0.0.1:{port}"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.05)
        c = Client(port)
        assert c.read_ready().worker_name == "hello"
        c.send_events([1, 2], [b"hi", b""])
        c.read_credit(2)
        assert c.results[1].status == 1
        assert (c.results[2].status, c.results[2].message) == (3, "empty payload")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        c.close()
        assert ": b'hi'" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_hello_is_short():
    import ferry_worker.examples.hello as hello

    with open(hello.__file__) as f:
        assert len(f.read().splitlines()) <= 20


def _start_example(tmp_path, *flags):
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferry_worker.examples.worker", "--listen", "127.0.0.1:0",
         "--port_file", str(port_file), *flags],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return proc, int(_wait_for_file(str(port_file), proc))


def test_example_worker_batch_throw_every_fails_exactly_those_events(tmp_path):
    record = tmp_path / "record.tsv"
    proc, port = _start_example(tmp_path, "--throw_every=3", "--max_run=8", "--max_in_flight=16",
                                "--record", str(record))
    try:
        c = Client(port)
        assert c.read_ready().max_run == 8
        c.send_events([1, 2, 3, 4, 5, 6], [b"0", b"1", b"2", b"3", b"4", b"5"])
        c.read_credit(6)
        status = {i: r.status for i, r in c.results.items()}
        assert status == {1: 1, 2: 1, 3: 3, 4: 1, 5: 1, 6: 3}  # payloads 2 and 5 threw
        assert c.results[3].message == "injected: throw every 3"
        # A run: the thrown member ends it; the next member is not attempted.
        c.send_events([7, 8, 9, 10], [b"0", b"1", b"2", b"3"], [4, 4, 4, 4])
        c.read_credit(4)
        assert [c.results[i].status for i in (7, 8, 9, 10)] == [1, 1, 3, 4]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    answers = [ln.split(b"\t")[5] for ln in record.read_bytes().splitlines()]
    assert sorted(answers) == [b"FAIL"] * 3 + [b"OK"] * 6  # event 10 never reached the handler


def test_example_worker_per_event_form(tmp_path):
    proc, port = _start_example(tmp_path, "--per_event", "--fail_every=2", "--max_run=0")
    try:
        c = Client(port)
        assert c.read_ready().max_run == 0
        c.send_events([1, 2], [b"0", b"1"])
        c.read_credit(2)
        assert (c.results[1].status, c.results[2].status) == (1, 3)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
