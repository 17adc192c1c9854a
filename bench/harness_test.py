#!/usr/bin/env python3
"""Unit tests of the benchmark harness's pure parts (bench/README.md): variant
parsing, the flags that reach ferry's config and the consumers, and the
headline fields of results.json. Hermetic: no broker, no process. bench/smoke
runs them first; `python3 bench/harness_test.py` alone works too."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import harness_procs  # noqa: E402
from harness_phases import cpu_window, parse_variant, set_headline_rate  # noqa: E402
from harness_procs import HarnessError  # noqa: E402
from harness_report import headline, summarize  # noqa: E402

HEADLINE_FIELDS = ["ferry_key_cpp_eps", "baseline_a_eps", "baseline_b_eps", "transport_floor_eps",
                   "ferry_unordered_cpp_eps", "ferry_key_python_eps", "ferry_cpu_us_per_event",
                   "worker_cpu_us_per_event", "latency_p99_ms_half_live_peak", "peak_rss_mib"]


def full_result() -> dict:
    return {
        "config": {"events": 1000},
        "baseline_a": {"rate": 800000.0},
        "baseline_b": {"rate": 40000.0},
        "floor": {"rate": 400000.0, "cpu_s_per_m_forward": 1.5, "cpu_s_per_m_sink": 1.0},
        "ferry": [
            {"name": "key-cpp", "rate": 200000.0, "cpu_s_per_m_ferry": 3.1,
             "cpu_s_per_m_worker": 1.2},
            {"name": "key-cpp-lanes64", "rate": 1.0, "cpu_s_per_m_ferry": 99.0},
            {"name": "unordered-cpp", "rate": 250000.0},
            {"name": "key-python", "rate": 60000.4},
        ],
        "live": {"rate": 150000.0},
        "latency": {"rate": 100000, "ferry": {"p50_us": 900, "p99_us": 99000}},
        "latency_half_live": {"rate": 75000, "ferry": {"p50_us": 800, "p99_us": 4250}},
        "memory": {"backlog": 10, "ferry_peak_rss_mib": 140.5},
        "errors": [],
    }


class CpuWindowTest(unittest.TestCase):
    IDLE = (0.0, 0.1, 0.1, 0)

    def test_progress_window_when_it_holds_events(self):
        first, done = (1.0, 0.5, 0.2, 100), (2.0, 1.5, 0.6, 1000)
        self.assertEqual(cpu_window(self.IDLE, first, done), (first, done))

    def test_falls_back_to_idle_when_one_line_acked_everything(self):
        # bench/smoke's 20,000 events can be acked within one progress interval.
        first = done = (1.0, 0.5, 0.2, 20000)
        self.assertEqual(cpu_window(self.IDLE, first, done), (self.IDLE, done))

    def test_none_without_events(self):
        self.assertIsNone(cpu_window(self.IDLE, None, None))
        self.assertIsNone(cpu_window(self.IDLE, None, (1.0, 0.5, 0.2, 0)))


class HeadlineRateTest(unittest.TestCase):
    STATS = {"events": 1001, "first_wall_us": 0, "last_wall_us": 2_000_000}

    def test_events_per_message_from_the_worker_stats(self):
        result: dict = {}
        stats = dict(self.STATS, events_messages=100, results_messages=400)
        set_headline_rate(result, stats, 1.0, {"method": "progress"}, timed_out=False)
        self.assertEqual(result["rate"], 500.0)
        self.assertEqual(result["events_per_events_message"], 10.01)
        self.assertEqual(result["events_per_results_message"], 2.5)

    def test_no_message_counts_no_fields(self):
        # The Python worker's stats and an older bench_worker have none.
        result: dict = {}
        set_headline_rate(result, dict(self.STATS), 1.0, {"method": "progress"}, timed_out=False)
        self.assertNotIn("events_per_events_message", result)
        self.assertNotIn("events_per_results_message", result)


class ParseVariantTest(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(parse_variant("key-cpp"), ("key", "cpp", "", False))

    def test_unix_and_lanes(self):
        ordering, worker, extra, unix = parse_variant("key-cpp+lanes64+unix")
        self.assertEqual((ordering, worker, unix), ("key", "cpp", True))
        self.assertEqual(extra, "lanes:\n  count: 64\n")

    def test_unknown_tweak(self):
        with self.assertRaises(HarnessError):
            parse_variant("key-cpp+tcp")


class HeadlineTest(unittest.TestCase):
    def test_fields_from_their_phases(self):
        h = headline(full_result())
        self.assertEqual(list(h), HEADLINE_FIELDS)
        self.assertEqual(h["ferry_key_cpp_eps"], 200000.0)  # key-cpp, not key-cpp-lanes64
        self.assertEqual(h["baseline_a_eps"], 800000.0)
        self.assertEqual(h["baseline_b_eps"], 40000.0)
        self.assertEqual(h["transport_floor_eps"], 400000.0)
        self.assertEqual(h["ferry_unordered_cpp_eps"], 250000.0)
        self.assertEqual(h["ferry_key_python_eps"], 60000)  # rounded
        self.assertEqual(h["ferry_cpu_us_per_event"], 3.1)
        self.assertEqual(h["worker_cpu_us_per_event"], 1.2)
        # From the half-live-peak run, not the backlog one; microseconds -> ms.
        self.assertEqual(h["latency_p99_ms_half_live_peak"], 4.25)
        self.assertEqual(h["peak_rss_mib"], 140.5)

    def test_null_when_a_phase_did_not_run_or_failed(self):
        res = {"config": {"events": 1000}, "ferry": [], "baseline_a": None, "errors": []}
        self.assertEqual(headline(res), {k: None for k in HEADLINE_FIELDS})
        summarize(res)  # the summary copes too

    def test_a_niced_latency_run_says_so(self):
        res = full_result()
        res["latency_half_live"]["nice"] = -10
        self.assertEqual(headline(res)["latency_nice"], -10)
        self.assertNotIn("latency_nice", headline(full_result()))
        lines = "\n".join(summarize(res))
        self.assertIn("at half the live peak (broker append -> handler) at", lines)
        self.assertIn("(ferry and worker at nice -10)", lines)

    def test_summary_shows_ferry_over_floor(self):
        lines = "\n".join(summarize(full_result()))
        self.assertIn("ferry/floor 0.500", lines)  # key-cpp 200k / floor 400k
        self.assertIn("ferry/A 0.250", lines)
        self.assertIn("at half the live peak", lines)


class ProcTest(unittest.TestCase):
    def test_nice_reaches_the_process(self):
        # --latency_nice starts ferry and its worker this way; a positive
        # value needs no privilege.
        with tempfile.TemporaryDirectory() as d:
            proc = harness_procs.Proc("n", [sys.executable, "-c", "import os; print(os.nice(0))"],
                                      Path(d), nice=7)
            self.assertEqual(proc.popen.wait(30), 0)
            proc.stop()
            # os.nice adds to the harness's own value (the caller may run niced).
            self.assertEqual(int(proc.log_path.read_text()), min(os.nice(0) + 7, 19))

    def test_proc_nice_reads_a_process_nice_value(self):
        # How the latency phase checks that --latency_nice took effect.
        self.assertEqual(harness_procs.proc_nice(os.getpid()), os.nice(0))
        self.assertIsNone(harness_procs.proc_nice(-1))


class FlagsTest(unittest.TestCase):
    def setUp(self):
        self.saved = dict(harness_procs.SETTINGS)
        self.metrics = mock.patch.object(harness_procs, "_METRICS_LISTEN", False)
        self.metrics.start()

    def tearDown(self):
        harness_procs.SETTINGS.clear()
        harness_procs.SETTINGS.update(self.saved)
        self.metrics.stop()

    def parse(self, *argv):
        with mock.patch.object(sys, "argv", ["harness.py", *argv]):
            return harness.parse_args()

    def test_kafka_flags_reach_ferry_and_the_consumers(self):
        args = self.parse("--floor_kafka", "fetch.queue.backoff.ms=10", "--floor_kafka", "a=b",
                          "--ferry_kafka", "fetch.queue.backoff.ms=10", "--events", "500")
        harness.apply_settings(args)
        self.assertEqual(harness_procs.SETTINGS["floor_kafka"], "fetch.queue.backoff.ms=10,a=b")
        config = harness_procs.ferry_config("n", "127.0.0.1:9092", "g", "t", "key", "unix:/s")
        kafka_section = config.split("kafka:\n", 1)[1].split("topics:", 1)[0]
        self.assertIn('  fetch.queue.backoff.ms: "10"\n', kafka_section)
        self.assertIn("    target: unix:/s\n", config)
        self.assertEqual(args.live_events, 500)  # defaults to --events

    def test_defaults(self):
        args = self.parse()
        self.assertIn("key-cpp+unix", args.variants.split(","))
        self.assertEqual((args.floor_credit, args.floor_batch), (256, 64))
        harness.apply_settings(args)
        self.assertEqual(harness_procs.SETTINGS["floor_kafka"], "")
        config = harness_procs.ferry_config("n", "b:1", "g", "t", "key", "ipv4:127.0.0.1:1")
        self.assertIn("  group.id: g\ntopics:\n", config)  # nothing added to kafka:

    def test_bad_kafka_property(self):
        for bad in (["--floor_kafka", "novalue"], ["--ferry_kafka", "=x"],
                    ["--floor_kafka", "a=1,b=2"]):
            with self.subTest(bad=bad), self.assertRaises(SystemExit), \
                    contextlib.redirect_stderr(io.StringIO()):
                self.parse(*bad)


if __name__ == "__main__":
    unittest.main()
