#!/usr/bin/env python3
"""Turns bench/soak's measurements into the table and the JSON file.

Usage: soak_report.py META_JSON SAMPLES_TSV WRK_JSON GATEWAY_JSON OUT_JSON
SAMPLES_TSV: seconds, VmRSS kB, VmHWM kB, calls, connections open, open fds,
cache bytes.
Prints the table and writes OUT_JSON, plus the table beside it (.txt).
"""
import json
import os
import sys

LABELS = {
    "hot": "hits (max-age=30)",
    "cold": "misses (new ids)",
    "fail503": "upstream 503",
    "slow": "upstream slow",
}


def rate(value):
    if value is None:
        return "-"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def latency(us):
    if us is None:
        return "-"
    return f"{us}µs" if us < 1000 else f"{us / 1000:.2f}ms"


def mib(kb):
    return "-" if not kb else f"{kb / 1024:.1f} MiB"


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def main():
    meta = json.loads(sys.argv[1])
    samples = []
    for line in open(sys.argv[2]):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 6:
            continue
        t, rss, hwm, calls, open_conns, fds = (number(f) for f in fields[:6])
        cache = number(fields[6]) if len(fields) > 6 else None
        if t is None or not rss:
            continue
        samples.append({"t_s": t, "vmrss_kb": int(rss), "vmhwm_kb": int(hwm or 0),
                        "calls": None if calls is None else int(calls),
                        "connections_open": None if open_conns is None else int(open_conns),
                        "open_fds": None if fds is None else int(fds),
                        "cache_bytes": None if cache is None else int(cache)})
    wrk = json.loads(sys.argv[3])
    gateway = json.loads(sys.argv[4])
    out_path = sys.argv[5]
    knobs = meta["knobs"]
    limit = meta["targets"]["growth_limit_percent"]

    rows = []

    def row(label, value, target="", ok=None):
        rows.append({"check": label, "value": value, "target": target,
                     "result": None if ok is None else ("PASS" if ok else "FAIL")})

    reference = min(samples, key=lambda s: abs(s["t_s"] - knobs["reference_s"])) if samples else None
    end = samples[-1] if samples else None
    after = [s for s in samples if reference and s["t_s"] >= reference["t_s"]]
    peak_after = max((s["vmrss_kb"] for s in after), default=None)
    growth = None if not reference or not end else 100.0 * (end["vmrss_kb"] - reference["vmrss_kb"]) / reference["vmrss_kb"]
    peak_growth = None if not reference or peak_after is None else 100.0 * (peak_after - reference["vmrss_kb"]) / reference["vmrss_kb"]

    row("gateway alive to the end", "yes" if gateway["alive"] else "NO", "yes", gateway["alive"])
    row(f"RSS at {reference['t_s']:.0f}s (reference)" if reference else "RSS at the reference", mib(reference and reference["vmrss_kb"]))
    row("RSS peak (VmHWM)", mib(gateway["vmhwm_kb"] or (end and end["vmhwm_kb"])))
    row(f"RSS at the end ({end['t_s']:.0f}s)" if end else "RSS at the end", mib(end and end["vmrss_kb"]))
    row("RSS growth after the reference", "-" if growth is None else f"{growth:+.1f} %", f"<= {limit} %",
        growth is not None and growth <= limit)
    row("highest RSS after the reference", "-" if peak_growth is None else f"{mib(peak_after)} ({peak_growth:+.1f} %)")
    per_minute = []
    for minute in range(1, knobs["minutes"] + 1):
        near = min(samples, key=lambda s: abs(s["t_s"] - 60 * minute), default=None)
        if near and abs(near["t_s"] - 60 * minute) <= knobs["sample_s"]:
            per_minute.append(near)
    row("RSS each minute", " ".join(f"{s['vmrss_kb'] / 1024:.0f}" for s in per_minute) + " MiB" if per_minute else "-")
    fds = [s["open_fds"] for s in samples if s["open_fds"]]
    if fds:
        row("open fds (first, max, last)", f"{fds[0]}, {max(fds)}, {fds[-1]}")
    caches = [s for s in samples if s.get("cache_bytes")]
    if caches:
        top = max(s["cache_bytes"] for s in caches)
        full = next(s for s in caches if s["cache_bytes"] >= 0.98 * top)
        row("cache bytes (most, reached at)", f"{top / 1048576:.1f} MiB at {full['t_s']:.0f}s")
    open_after = gateway.get("connections_open_after")
    row("connections open after the load", "-" if open_after is None or open_after < 0 else str(open_after), "1 (the scrape)", open_after == 1)
    outcomes = gateway.get("rpc_outcomes") or {}
    total = sum(outcomes.values())
    row("calls (outcome: count)", " ".join(f"{k}:{v}" for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1])) or "-")
    row("upstream requests / cache hits", f"{gateway['upstream_requests']} / {gateway['cache_hits']}")
    row("gateway log lines under load", str(gateway["log_lines_during"]))

    load = []
    for name, result in wrk.items():
        errors = None if not result else sum(result["errors"].values())
        load.append({"stream": name, "label": LABELS.get(name, name), "result": result})
        if result:
            detail = ", ".join(f"{k} {v}" for k, v in result["errors"].items() if v)
            text = f"{rate(result['rps'])} req/s  p50 {latency(result['p50_us'])}  p99 {latency(result['p99_us'])}  errors {errors}" + (f" ({detail})" if detail else "")
        else:
            text = "no result"
        # Hits and misses must not fail; the fault streams answer errors on purpose.
        must_pass = name in ("hot", "cold")
        row(f"wrk {LABELS.get(name, name)}", text, "0 errors" if must_pass else "",
            (result is not None and errors == 0) if must_pass else None)

    lines = [f"bench/soak ({meta['mode']}, {knobs['minutes']} min, commit {meta['commit']}{'+' if meta['dirty'] else ''}, "
             f"{knobs['gateway_workers']} workers, load {meta['loadavg_start']} -> {meta['loadavg_end']})"]
    width = max(len(r["check"]) for r in rows) + 2
    vwidth = min(max(len(r["value"]) for r in rows) + 2, 80)
    twidth = max(len(r["target"]) for r in rows) + 2
    lines.append(f"  {'check':<{width}}{'value':<{vwidth}}{'target':<{twidth}}result")
    for r in rows:
        lines.append(f"  {r['check']:<{width}}{r['value']:<{vwidth}}{r['target']:<{twidth}}{r['result'] or ''}".rstrip())
    failed = [r for r in rows if r["result"] == "FAIL"]
    lines.append(f"{len([r for r in rows if r['result'] == 'PASS'])} passed, {len(failed)} failed"
                 + (": " + "; ".join(r["check"] for r in failed) if failed else ""))
    table = "\n".join(lines)
    print(table)

    with open(out_path, "w") as out:
        json.dump({"meta": meta, "checks": rows, "rss": {
            "reference_s": reference and reference["t_s"], "reference_kb": reference and reference["vmrss_kb"],
            "peak_kb": gateway["vmhwm_kb"], "end_kb": end and end["vmrss_kb"],
            "growth_percent": None if growth is None else round(growth, 2),
            "peak_after_reference_kb": peak_after,
        }, "calls_total": total, "gateway": gateway, "load": load, "samples": samples}, out, indent=1)
        out.write("\n")
    with open(os.path.splitext(out_path)[0] + ".txt", "w") as out:
        out.write(table + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
