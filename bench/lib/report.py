#!/usr/bin/env python3
"""Turns the raw measurements of bench/run into the table and the JSON file.

Usage: report.py RAW_JSONL META_JSON OUT_JSON
Prints the table and writes OUT_JSON, plus the table beside it (.txt).
"""
import json
import os
import statistics
import sys

LABELS = {
    "nginx_return": "nginx return 200 (the limit)",
    "evhttp_return": "evhttp in C, fixed answer",
    "nginx_proxy_cache": "nginx proxy_cache + lock (hits)",
    "nginx_proxy_pass": "nginx proxy_pass, no cache",
    "upstream_direct": "wrk -> TLS upstream (direct)",
    "gateway_hot": "gateway hot (cache hit)",
    "gateway_cold": "gateway cold (new ids)",
    "gateway_redis_hit": "gateway shared-tier hit (Redis)",
    "gateway_redis_cold": "gateway cold, shared tier on",
    "gateway_cold_overlap": "gateway cold overlap (shared id)",
    "gateway_redis_cold_overlap": "gateway cold overlap, shared tier",
    "gateway_hot_1000": "gateway hot",
}
ORDER = list(LABELS)

# (name, numerator, denominator, metric, connections, comparison, target)
RATIOS = [
    ("hot req/s / nginx proxy_cache req/s", "gateway_hot", "nginx_proxy_cache", "rps", "many", ">=", 0.8),
    ("hot p50 @1 conn / nginx return p50 @1 conn", "gateway_hot", "nginx_return", "p50_us", "one", "<=", 1.5),
    # Issue 27: concurrent misses share upstream calls, so a cold call no
    # longer costs a whole upstream exchange.
    ("cold req/s / nginx proxy_pass req/s", "gateway_cold", "nginx_proxy_pass", "rps", "many", ">=", 1.0),
    ("cold p50 @1 conn / nginx proxy_pass p50 @1 conn", "gateway_cold", "nginx_proxy_pass", "p50_us", "one", "<=", 2.0),
    # No target: where the evhttp front itself stands, and how much of it the
    # gateway's own work leaves.
    ("evhttp front req/s / nginx proxy_cache req/s", "evhttp_return", "nginx_proxy_cache", "rps", "many", None, None),
    ("hot req/s / evhttp front req/s", "gateway_hot", "evhttp_return", "rps", "many", None, None),
    # The shared tier (issue 11): a Redis hit costs one Redis round trip
    # over a memory hit, and keeps at least half its throughput.
    # Per core: requests per CPU-second of the server itself, so that wrk
    # and Redis sharing the client CPU do not decide the figure.
    ("redis-hit req/s / hot req/s", "gateway_redis_hit", "gateway_hot", "rps", "many", None, None),
    ("redis-hit per core / hot per core", "gateway_redis_hit", "gateway_hot", "rps_per_core", "many", ">=", 0.5),
    ("hot per core / nginx proxy_cache per core", "gateway_hot", "nginx_proxy_cache", "rps_per_core", "many", None, None),
    ("cold per core / nginx proxy_pass per core", "gateway_cold", "nginx_proxy_pass", "rps_per_core", "many", None, None),
    ("redis-hit p50 @1 conn / hot p50 @1 conn", "gateway_redis_hit", "gateway_hot", "p50_us", "one", None, None),
    # A miss with the shared tier on: one Redis round trip (lookup and
    # lease in one script) before the upstream, the rest pipelined.
    ("cold, shared tier on / cold req/s", "gateway_redis_cold", "gateway_cold", "rps", "many", ">=", 0.8),
    ("cold, shared tier on / cold per core", "gateway_redis_cold", "gateway_cold", "rps_per_core", "many", None, None),
    # Cold calls that overlap: every call's first identifier is one they
    # all share (uncacheable), so each overlaps a fetch of it by another
    # call. With the shared tier on, such a call must wait for that fetch,
    # not for the waiters' poll (250 ms).
    ("cold overlap, shared tier on / cold overlap", "gateway_redis_cold_overlap", "gateway_cold_overlap", "rps", "many", ">=", 0.6),
    ("cold overlap, tier on / cold overlap per core", "gateway_redis_cold_overlap", "gateway_cold_overlap", "rps_per_core", "many", None, None),
]


def rate(value):
    if value is None:
        return "-"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def latency(us):
    if us is None:
        return "-"
    return f"{us}µs" if us < 1000 else f"{us / 1000:.2f}ms"


def megabytes(kb):
    return "-" if not kb else f"{kb / 1024:.1f} MB"


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# Cold calls: upstream calls per gateway call at the many-connection load
# (issue 27: misses merged), at most this.
COLD_UPSTREAM_PER_CALL_TARGET = 0.25


def merging_figures(c):
    """Median over the runs of upstream calls per gateway call and of
    identifiers per upstream call, from the gateway's own counts around
    each run (cold scenarios only)."""
    counted = [x for x in c["runs"] if x and x.get("rpc_calls", 0) > 0 and "upstream_calls" in x]
    per_call = median([x["upstream_calls"] / x["rpc_calls"] for x in counted])
    per_upstream = median([x["upstream_identifiers"] / x["upstream_calls"] for x in counted if x["upstream_calls"] > 0])
    return {"upstream_calls_per_call": None if per_call is None else round(per_call, 3),
            "identifiers_per_upstream_call": None if per_upstream is None else round(per_upstream, 1)}


def main():
    raw_path, meta_text, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    meta = json.loads(meta_text)
    records = [json.loads(line) for line in open(raw_path) if line.strip()]
    knobs = meta["knobs"]
    many = knobs["connections"]

    # Scenarios: every run, and the median of each figure over the runs.
    scenarios = {}
    for r in records:
        if r["kind"] != "wrk":
            continue
        s = scenarios.setdefault(r["scenario"], {"label": LABELS.get(r["scenario"], r["scenario"]), "by_connections": {}})
        c = s["by_connections"].setdefault(str(r["conns"]), {"runs": []})
        c["runs"].append(r["result"])
    for s in scenarios.values():
        for c in s["by_connections"].values():
            good = [x for x in c["runs"] if x]
            c["median"] = {
                "rps": median([x["rps"] for x in good]),
                "rps_per_core": median([x["requests"] / x["server_cpu_s"] for x in good if x.get("server_cpu_s")]),
                "p50_us": median([x["p50_us"] for x in good]),
                "p99_us": median([x["p99_us"] for x in good]),
            }
            if c["median"]["p50_us"] is not None:
                c["median"]["p50_us"] = int(c["median"]["p50_us"])
                c["median"]["p99_us"] = int(c["median"]["p99_us"])
            c["median"].update(merging_figures(c))
            c["errors"] = sum(sum(x["errors"].values()) for x in good) + (len(c["runs"]) - len(good))
            c["requests"] = sum(x["requests"] for x in good)

    def figure(name, conns, metric):
        try:
            return scenarios[name]["by_connections"][str(conns)]["median"][metric]
        except KeyError:
            return None

    gateways = {r["instance"]: r for r in records if r["kind"] == "gateway"}
    # instance -> connections (as text) -> counts and per-call figures
    allocs = {}
    for r in records:
        if r["kind"] != "alloc":
            continue
        r["allocs_per_call"] = round(r["allocs"] / r["calls"], 1) if r["calls"] > 0 else None
        r["bytes_per_call"] = round(r["bytes"] / r["calls"]) if r["calls"] > 0 else None
        allocs.setdefault(r["instance"], {})[str(r["conns"])] = r
    herd = next((r for r in records if r["kind"] == "herd"), None)
    herd_replicas = next((r for r in records if r["kind"] == "herd_replicas"), None)
    batch = next((r for r in records if r["kind"] == "batch"), None)

    ratios = []
    for name, num, den, metric, which, op, target in RATIOS:
        conns = many if which == "many" else 1
        a, b = figure(num, conns, metric), figure(den, conns, metric)
        value = a / b if a is not None and b else None
        if value is None or target is None:
            passed = None
        else:
            passed = value >= target if op == ">=" else value <= target
        ratios.append({"name": name, "value": None if value is None else round(value, 3),
                       "target": "-" if target is None else f"{op} {target}", "pass": passed})

    lines = []
    out = lines.append
    mode = meta["mode"]
    out(f"Onside products gateway bench ({mode}: median of {knobs['runs']} run(s) x {knobs['duration_s']} s per figure)")
    sizes = meta["sizes"]
    out(f"server under test on CPU {knobs['server_cpus']} ({knobs['gateway_workers']} gateway worker, "
        f"{knobs['nginx_workers']} nginx worker); wrk -t{knobs['wrk_threads']} on CPU {knobs['client_cpus']}; "
        f"TLS upstream on CPU {knobs['upstream_cpus']}")
    out(f"call {sizes['request_bytes']} B, gateway answer {sizes['gateway_answer_bytes']} B; commit {meta['commit']}"
        f"{' (dirty)' if meta['dirty'] else ''}; load {meta['loadavg_start']} -> {' '.join(meta['loadavg_end'])}")
    out("")
    head = f"{'scenario':<34}| {many:>4} conns: req/s      p50      p99  per core |  1 conn: req/s      p50      p99 | errors"
    out(head)
    out("-" * len(head))
    for name in ORDER:
        if name not in scenarios:
            continue
        s = scenarios[name]
        if name == "gateway_hot_1000":
            conns = next(iter(s["by_connections"]))
            label = f"{s['label']}, {conns} conns"
            c = s["by_connections"][conns]
            left = f"{rate(c['median']['rps']):>17} {latency(c['median']['p50_us']):>8} {latency(c['median']['p99_us']):>8} {rate(c['median'].get('rps_per_core')):>9}"
            right = f"{'':>13} {'':>8} {'':>8}"
            errors = c["errors"]
        else:
            label = s["label"]
            cm = s["by_connections"].get(str(many), {"median": {"rps": None, "rps_per_core": None, "p50_us": None, "p99_us": None}, "errors": 0})
            c1 = s["by_connections"].get("1", {"median": {"rps": None, "p50_us": None, "p99_us": None}, "errors": 0})
            left = f"{rate(cm['median']['rps']):>17} {latency(cm['median']['p50_us']):>8} {latency(cm['median']['p99_us']):>8} {rate(cm['median'].get('rps_per_core')):>9}"
            right = f"{rate(c1['median']['rps']):>13} {latency(c1['median']['p50_us']):>8} {latency(c1['median']['p99_us']):>8}"
            errors = cm["errors"] + c1["errors"]
        instance = {"gateway_hot": "hot", "gateway_cold": "cold", "gateway_hot_1000": "hot_1000", "gateway_redis_hit": "redis",
                    "gateway_redis_cold": "redis_cold", "gateway_cold_overlap": "cold_overlap",
                    "gateway_redis_cold_overlap": "redis_cold_overlap"}.get(name)
        if instance in gateways:
            g = gateways[instance]
            bad = g["rpc_total"] - g["rpc_ok"]
            kinds = ",".join(k for k in sorted(g.get("rpc_outcomes") or {}) if k != "ok")
            errors = f"{errors}" + (f" +{bad} rpc {kinds}" if bad else "")
        out(f"{label:<34}|{left} |{right} | {errors}")
    out("")

    merged = []
    for name in ("gateway_cold", "gateway_redis_cold", "gateway_cold_overlap", "gateway_redis_cold_overlap"):
        if name not in scenarios:
            continue
        by = scenarios[name]["by_connections"]
        m = by.get(str(many), {}).get("median", {})
        one = by.get("1", {}).get("median", {})
        if m.get("upstream_calls_per_call") is None and one.get("upstream_calls_per_call") is None:
            continue
        def pair(figures):
            calls, ids = figures.get("upstream_calls_per_call"), figures.get("identifiers_per_upstream_call")
            return f"{'-' if calls is None else f'{calls:.2f}'} upstream calls per call, {'-' if ids is None else f'{ids:.1f}'} ids per upstream call"
        verdict = ""
        if name == "gateway_cold":
            value = m.get("upstream_calls_per_call")
            passed = None if value is None else value <= COLD_UPSTREAM_PER_CALL_TARGET
            ratios.append({"name": "cold upstream calls per gateway call", "value": value,
                           "target": f"<= {COLD_UPSTREAM_PER_CALL_TARGET}", "pass": passed})
            verdict = f" -> {'n/a' if passed is None else ('PASS' if passed else 'FAIL')} (target at {many} conns: <= {COLD_UPSTREAM_PER_CALL_TARGET})"
        merged.append(f"{scenarios[name]['label']}: {many} conns {pair(m)}; 1 conn {pair(one)}{verdict}")
    out(f"{'ratio':<50}{'value':>8}  {'target':<8} result")
    for r in ratios:
        value = "-" if r["value"] is None else f"{r['value']:.2f}"
        result = "n/a" if r["pass"] is None else ("PASS" if r["pass"] else "FAIL")
        out(f"{r['name']:<50}{value:>8}  {r['target']:<8} {result}")
    out("")

    if merged:
        out("merged misses (gateway /metrics around each run, median):")
        for line in merged:
            out(f"  {line}")
        out("")

    # How the shared tier's waits ended, over each shared-tier cold
    # gateway's life (warm-up and every run): a wait ends by the fetch's
    # outcome message, by the entry, by a takeover, alone or at the deadline.
    waits = []
    for key, name in (("redis_cold", "gateway_redis_cold"), ("redis_cold_overlap", "gateway_redis_cold_overlap")):
        g = gateways.get(key)
        if g is None or "shared_waits" not in g:
            continue
        ended = g["shared_waits"] or {}
        text = ", ".join(f"{k} {ended.get(k, 0)}" for k in ("outcome", "entry", "takeover", "alone", "deadline"))
        waits.append(f"{LABELS[name]}: {text} (of {g['rpc_total']} calls)")
    if waits:
        out("shared-tier waits for another fetch, by how they ended (gateway /metrics, whole life):")
        for line in waits:
            out(f"  {line}")
        out("")

    def per_call(alloc_key, conns, field):
        a = (allocs.get(alloc_key) or {}).get(str(conns)) if alloc_key else None
        if not a or a[field] is None:
            return "-"
        return f"{a[field]:.1f}" if field == "allocs_per_call" else f"{a[field]}"

    if gateways or allocs:
        out(f"{'gateway instance':<34}{'peak RSS':>10}{'RSS end':>10}{'mallocs/call':>17}{'bytes/call':>18}"
            f"{'calls ok/total':>18}{'upstream calls':>16}")
        out(f"{'':<34}{'':>10}{'':>10}{f'{many} / 1 conn':>17}{f'{many} / 1 conn':>18}")
        rows = [("hot", f"hot ({many} + 1 conns)", "hot"), ("cold", f"cold ({many} + 1 conns)", "cold"),
                ("hot_1000", f"hot ({knobs['high_connections']} conns)", None),
                ("redis", f"redis hit ({many} + 1 conns)", None),
                ("redis_cold", f"redis cold ({many} + 1 conns)", "redis_cold"),
                ("cold_overlap", f"cold overlap ({many} + 1 conns)", None),
                ("redis_cold_overlap", f"redis cold overlap ({many} + 1 conns)", None)]
        for key, label, alloc_key in rows:
            g = gateways.get(key)
            if not g and not (alloc_key and alloc_key in allocs):
                continue
            mallocs = f"{per_call(alloc_key, many, 'allocs_per_call')} / {per_call(alloc_key, 1, 'allocs_per_call')}"
            nbytes = f"{per_call(alloc_key, many, 'bytes_per_call')} / {per_call(alloc_key, 1, 'bytes_per_call')}"
            if mallocs == "- / -":
                mallocs = nbytes = "-"
            calls = f"{g['rpc_ok']}/{g['rpc_total']}" if g else "-"
            upstream = f"{g['upstream_requests']}" if g else "-"
            out(f"{label:<34}{megabytes(g and g['vmhwm_kb']):>10}{megabytes(g and g['vmrss_kb']):>10}"
                f"{mallocs:>17}{nbytes:>18}{calls:>18}{upstream:>16}")
        if allocs:
            counted = {c: a["calls"] for per in allocs.values() for c, a in per.items()}
            out(f"(mallocs/call: malloc, calloc, realloc, memalign-family calls counted by an LD_PRELOAD counter in a "
                f"separate gateway process, over {counted.get(str(many), '?')} calls at {many} connections and "
                f"{counted.get('1', '?')} at 1)")
        out("")

    if herd:
        client = herd["client"] or {}
        served = herd["upstream_calls_served"]
        via_metrics = herd["upstream_calls_metrics"]
        herd["pass"] = bool(client) and client.get("failed") == 0 and via_metrics == 1 and served in (1, None)
        out(f"herd: {client.get('calls', '?')} identical concurrent calls, upstream answering {herd['delay_ms']} ms late: "
            f"{client.get('ok', '?')} ok, {client.get('failed', '?')} failed, last answer after {client.get('last_answer_ms', '?')} ms")
        out(f"      upstream calls: {via_metrics} (gateway /metrics), {served if served is not None else '?'} "
            f"(upstream's own count); coalesced identifiers {herd['coalesced_identifiers']}; "
            f"peak RSS {megabytes(herd['vmhwm_kb'])} -> {'PASS' if herd['pass'] else 'FAIL'} (target: 1 upstream call)")
    if herd_replicas:
        clients = [c or {} for c in herd_replicas["clients"]]
        calls = sum(c.get("calls", 0) for c in clients)
        ok = sum(c.get("ok", 0) for c in clients)
        failed = sum(c.get("failed", 0) for c in clients)
        served = herd_replicas["upstream_calls_served"]
        via_metrics = herd_replicas["upstream_calls_metrics"]
        herd_replicas["pass"] = failed == 0 and calls > 0 and via_metrics == 1 and served in (1, None)
        out(f"herd over {herd_replicas['replicas']} replicas sharing Redis: {calls} identical concurrent calls, upstream "
            f"answering {herd_replicas['delay_ms']} ms late: {ok} ok, {failed} failed, last answer after "
            f"{max((c.get('last_answer_ms') or 0) for c in clients)} ms")
        out(f"      upstream calls: {via_metrics} (replicas' /metrics), {served if served is not None else '?'} "
            f"(upstream's own count) -> {'PASS' if herd_replicas['pass'] else 'FAIL'} (target: 1 upstream call)")
    if batch:
        good = [r for r in batch["runs"] if r]
        errors = sum(sum(r["errors"].values()) for r in good) + (len(batch["runs"]) - len(good))
        rps = median([r["rps"] for r in good]) if good else None
        p99 = median([r["p99_us"] for r in good]) if good else None
        limit = batch["limit_kb"]
        batch["errors"] = errors
        batch["pass"] = bool(good) and errors == 0 and 0 < batch["vmhwm_kb"] <= limit
        out(f"batch: {batch['conns']} connections, each sending {batch['request_bytes']}-byte batches of "
            f"{batch['calls_per_batch']} calls x {batch['ids_per_call']} known ids ({batch['answer_bytes']}-byte answers, from memory): "
            f"{rate(rps)} batches/s, p99 {latency(p99)}, {errors} errors")
        out(f"      peak RSS {megabytes(batch['vmhwm_kb'])}, at the end {megabytes(batch['vmrss_kb'])} -> "
            f"{'PASS' if batch['pass'] else 'FAIL'} (target: under the manifest's limit, {megabytes(limit)}, with no error)")
    table = "\n".join(lines)
    print(table)

    result = {"meta": meta, "scenarios": scenarios, "ratios": ratios, "gateway_instances": gateways,
              "allocations": allocs, "herd": herd, "herd_replicas": herd_replicas, "batch": batch}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(os.path.splitext(out_path)[0] + ".txt", "w") as f:
        f.write(table + "\n")
    print(f"\nwrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
