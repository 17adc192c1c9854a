"""The report of ferry's benchmark harness (bench/README.md): the summary it
prints, the headline fields of results.json (issue 17) and results.png."""

from __future__ import annotations

from pathlib import Path

from harness_procs import KEYS, PARTITIONS, TARGETS, VALUE_BYTES, fmt_cores


def fmt_rate(rate) -> str:
    return "n/a" if rate is None else f"{rate:,.0f}"


def _variant(res: dict, name: str) -> dict:
    return next((v for v in res.get("ferry") or [] if v.get("name") == name), {})


def _rate(res: dict, key: str):
    return (res.get(key) or {}).get("rate")


def headline(res: dict) -> dict:
    """The headline figures of issue 17, as top-level fields of results.json
    (None when their phase did not run or failed). CPU s per million events
    is CPU µs per event."""
    key_cpp = _variant(res, "key-cpp")
    half_live = (res.get("latency_half_live") or {}).get("ferry") or {}
    p99 = half_live.get("p99_us")

    def eps(rate):  # whole events per second: the rest is noise
        return None if rate is None else round(rate)

    fields = {
        "ferry_key_cpp_eps": eps(key_cpp.get("rate")),
        "baseline_a_eps": eps(_rate(res, "baseline_a")),
        "baseline_b_eps": eps(_rate(res, "baseline_b")),
        "transport_floor_eps": eps(_rate(res, "floor")),
        "ferry_unordered_cpp_eps": eps(_variant(res, "unordered-cpp").get("rate")),
        "ferry_key_python_eps": eps(_variant(res, "key-python").get("rate")),
        "ferry_cpu_us_per_event": key_cpp.get("cpu_s_per_m_ferry"),
        "worker_cpu_us_per_event": key_cpp.get("cpu_s_per_m_worker"),
        "latency_p99_ms_half_live_peak": None if p99 is None else round(p99 / 1000, 3),
        "peak_rss_mib": (res.get("memory") or {}).get("ferry_peak_rss_mib"),
    }
    if (res.get("latency_half_live") or {}).get("nice"):
        # --latency_nice: that p99 is a diagnostic, not the target's setting.
        fields["latency_nice"] = res["latency_half_live"]["nice"]
    return fields


def _ratio(x, y, digits: int) -> str:
    return f"{x / y:.{digits}f}" if x and y else "n/a"


def _throughput_lines(res: dict) -> list[str]:
    a, b, fl = _rate(res, "baseline_a"), _rate(res, "baseline_b"), _rate(res, "floor")
    lines = [f"baseline A (librdkafka, no-op):       {fmt_rate(a)} ev/s",
             f"baseline B (Parallel Consumer, KEY):  {fmt_rate(b)} ev/s"]
    floor = res.get("floor") or {}
    lines.append(f"transport floor (1 gRPC stream):      {fmt_rate(fl)} ev/s  floor/A "
                 f"{_ratio(fl, a, 3)}  CPU s/M forward {floor.get('cpu_s_per_m_forward')} sink "
                 f"{floor.get('cpu_s_per_m_sink')}")
    for v in res.get("ferry") or []:
        extra = " (partial run)" if v.get("partial") else ""
        r = v.get("rate")
        lines.append(f"ferry {v['name']:<16} {fmt_rate(r):>10} ev/s  ferry/floor "
                     f"{_ratio(r, fl, 3)}  ferry/A {_ratio(r, a, 3)}  ferry/B {_ratio(r, b, 2)}  "
                     f"CPU s/M ferry {v.get('cpu_s_per_m_ferry')} worker "
                     f"{v.get('cpu_s_per_m_worker')}  RSS {v.get('ferry_peak_rss_mib')} MiB{extra}")
    live = res.get("live") or {}
    if live.get("rate"):
        lines.append(f"live peak (producer + ferry key-cpp together): {fmt_rate(live['rate'])} ev/s, "
                     f"CPU s/M ferry {live.get('cpu_s_per_m_ferry')} worker "
                     f"{live.get('cpu_s_per_m_worker')}")
        if live.get("cpu_cores"):
            lines.append(f"  {fmt_cores(live['cpu_cores'])}")
    return lines


def nice_label(lat: dict) -> str:
    """" (ferry and worker at nice N)" for a --latency_nice run, else ""."""
    return f" (ferry and worker at nice {lat['nice']})" if lat.get("nice") else ""


def _latency_lines(lat: dict | None, label: str) -> list[str]:
    if not lat or "ferry" not in lat:
        return []
    f = lat["ferry"]
    line = (f"latency{label} (broker append -> handler) at {fmt_rate(lat['rate'])} ev/s"
            f"{nice_label(lat)}: ferry "
            f"p50 {f['p50_us'] / 1000:.2f} ms p99 {f['p99_us'] / 1000:.2f} ms")
    if "baseline_a" in lat:
        fa = lat["baseline_a"]
        line += (f"; floor (A) p50 {fa.get('p50_us', -1) / 1000:.2f} ms p99 "
                 f"{fa.get('p99_us', -1) / 1000:.2f} ms")
    lines = [line]
    if lat.get("cpu_cores_while_producing"):
        lines.append(f"  ferry's {fmt_cores(lat['cpu_cores_while_producing'])}")
    if lat.get("baseline_a_cpu_cores_while_producing"):
        lines.append(f"  the floor's {fmt_cores(lat['baseline_a_cpu_cores_while_producing'])}")
    return lines


def summarize(res: dict) -> list[str]:
    lines = [f"events per run: {res['config']['events']:,} x {VALUE_BYTES} B, {KEYS} keys, "
             f"{PARTITIONS} partitions"]
    busy = res.get("machine", {}).get("busy_before_start")
    if busy is not None:
        lines.append(f"machine: {busy:.0%} CPU busy before the start (other users of the machine)")
    lines += _throughput_lines(res)
    lines += _latency_lines(res.get("latency"), " at half the backlog peak")
    lines += _latency_lines(res.get("latency_half_live"), " at half the live peak")
    for sw in res.get("latency_sweep") or []:
        lines += _latency_lines(sw, "")
    mem = res.get("memory")
    if mem and "ferry_peak_rss_mib" in mem:
        lines.append(f"memory: backlog {mem['backlog']:,}, slow worker: ferry peak RSS "
                     f"{mem['ferry_peak_rss_mib']} MiB (target <= {TARGETS['rss_mib']} MiB)")
    lines.append("headline: " + ", ".join(f"{k} {v}" for k, v in headline(res).items()))
    for err in res.get("errors", []):
        lines.append(f"ERROR: {err.splitlines()[0]}")
    return lines


def plot(res: dict, path: Path) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not available (bench/.venv); no plot"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names, rates, colors = [], [], []
    if (res.get("baseline_a") or {}).get("rate"):
        names.append("A\nlibrdkafka"); rates.append(res["baseline_a"]["rate"]); colors.append("#888")
    if (res.get("baseline_b") or {}).get("rate"):
        names.append("B\nParallel C."); rates.append(res["baseline_b"]["rate"]); colors.append("#c84")
    if (res.get("floor") or {}).get("rate"):
        names.append("transport\nfloor"); rates.append(res["floor"]["rate"]); colors.append("#6a6")
    for v in res.get("ferry") or []:
        if v.get("rate"):
            names.append("ferry\n" + v["name"].replace("-", "\n"))
            rates.append(v["rate"]); colors.append("#48c")
    ax1.bar(range(len(rates)), [r / 1000 for r in rates], color=colors)
    for i, r in enumerate(rates):
        ax1.text(i, r / 1000 * 1.08, f"{r / 1000:.0f}k", ha="center", fontsize=7)
    ax1.set_xticks(range(len(rates)))
    ax1.set_xticklabels(names, fontsize=7)
    ax1.set_yscale("log")
    ax1.set_ylabel("thousand events/s (log)")
    ax1.set_title(f"throughput, {res['config']['events']:,} events x 200 B", fontsize=10)
    points = []
    for lat in [res.get("latency"), res.get("latency_half_live")] + list(res.get("latency_sweep") or []):
        if lat and "ferry" in lat:
            points.append(lat)
    points.sort(key=lambda l: l["rate"])
    if points:
        xs = [p["rate"] / 1000 for p in points]
        for q, style, label in (("p50_us", "o-", "ferry p50"), ("p99_us", "s-", "ferry p99")):
            ax2.plot(xs, [max(p["ferry"][q], 1) / 1000 for p in points], style, label=label)
        floor = [p for p in points if "baseline_a" in p]
        if floor:
            ax2.plot([p["rate"] / 1000 for p in floor], [p["baseline_a"]["p50_us"] / 1000 for p in floor],
                     "k^", label="A p50 (floor)")
            ax2.plot([p["rate"] / 1000 for p in floor], [p["baseline_a"]["p99_us"] / 1000 for p in floor],
                     "kv", label="A p99 (floor)")
        ax2.axhline(TARGETS["p99_ms"], color="r", ls="--", lw=1, label="p99 target 5 ms")
        ax2.set_yscale("log")
        ax2.set_xlabel("produce rate, thousand events/s (incl. half of the backlog and live peaks)")
        ax2.set_ylabel("ms, broker append -> handler (log)")
        ax2.set_title("latency, ferry KEY + C++ no-op worker", fontsize=10)
        ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return None


