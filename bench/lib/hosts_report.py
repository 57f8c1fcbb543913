#!/usr/bin/env python3
"""Turns the raw measurements of bench/hosts into the table and the JSON file.

Usage: hosts_report.py RAW_JSONL META_JSON OUT_JSON
Prints the table and writes OUT_JSON, plus the table beside it (.txt).
Exits 1 when the partition target fails.
"""
import json
import os
import sys

LABELS = {
    "hit_tier": "hit: shared tier (memory keeps 0)",
    "hit_plain": "hit's load, no Redis (upstream)",
    "memory_hit": "memory hit, no Redis (reference)",
    "cold_tier": "miss: cold, shared tier on",
    "cold_plain": "miss's load, cold, no Redis",
    "partitioned": "cold, Redis partitioned",
}
ORDER = list(LABELS)


# The table's number formats and medians are bench/run's own.
from report import latency, median, rate  # noqa: E402


def main():
    raw_path, meta_text, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    meta = json.loads(meta_text)
    records = [json.loads(line) for line in open(raw_path) if line.strip()]
    knobs = meta["knobs"]
    many = knobs["connections"]

    scenarios = {}
    for r in records:
        if r["kind"] != "wrk":
            continue
        s = scenarios.setdefault(r["scenario"], {"label": LABELS.get(r["scenario"], r["scenario"]), "by_connections": {}})
        s["by_connections"].setdefault(str(r["conns"]), {"runs": []})["runs"].append(r["result"])
    for s in scenarios.values():
        for c in s["by_connections"].values():
            good = [x for x in c["runs"] if x]
            c["median"] = {
                "rps": median([x["rps"] for x in good]),
                "rps_per_core": median([x["requests"] / x["server_cpu_s"] for x in good if x.get("server_cpu_s")]),
                "p50_us": median([x["p50_us"] for x in good]),
                "p99_us": median([x["p99_us"] for x in good]),
            }
            for k in ("p50_us", "p99_us"):
                if c["median"][k] is not None:
                    c["median"][k] = int(c["median"][k])
            # Share of a core the gateway and the far side (nginx, Redis,
            # the proxies: CPU 0, with wrk) used over the run.
            c["median"]["server_cpu_share"] = median([x["server_cpu_s"] * 1e6 / x["duration_us"] for x in good if x.get("duration_us")])
            c["median"]["far_cpu_share"] = median([x["far_cpu_s"] * 1e6 / x["duration_us"] for x in good if x.get("duration_us") and "far_cpu_s" in x])
            c["errors"] = sum(sum(x["errors"].values()) for x in good) + (len(c["runs"]) - len(good))
            c["requests"] = sum(x["requests"] for x in good)
    gateways = {r["scenario"]: r for r in records if r["kind"] == "gateway"}
    proxies = next((r for r in records if r["kind"] == "proxies"), None)
    partition = next((r for r in records if r["kind"] == "partition"), None)

    def figure(name, conns, metric):
        try:
            return scenarios[name]["by_connections"][str(conns)]["median"][metric]
        except KeyError:
            return None

    # (name, numerator, denominator, metric, connections, comparison, target)
    comparisons = [
        ("hit p50 @1: tier / no Redis", "hit_tier", "hit_plain", "p50_us", 1, None, None),
        ("hit p50 @1: tier / memory hit", "hit_tier", "memory_hit", "p50_us", 1, None, None),
        (f"hit req/s @{many}: tier / no Redis", "hit_tier", "hit_plain", "rps", many, None, None),
        (f"hit req/s @{many}: tier / memory hit", "hit_tier", "memory_hit", "rps", many, None, None),
        ("miss p50 @1: tier / no Redis", "cold_tier", "cold_plain", "p50_us", 1, None, None),
        ("miss p99 @1: tier / no Redis", "cold_tier", "cold_plain", "p99_us", 1, None, None),
        (f"miss p50 @{many}: tier / no Redis", "cold_tier", "cold_plain", "p50_us", many, None, None),
        (f"miss req/s @{many}: tier / no Redis", "cold_tier", "cold_plain", "rps", many, None, None),
        (f"partitioned req/s @{many} / cold no Redis", "partitioned", "cold_plain", "rps", many, ">=", knobs["partition_target"]),
        ("partitioned p50 @1 / cold no Redis", "partitioned", "cold_plain", "p50_us", 1, None, None),
    ]
    ratios = []
    for name, num, den, metric, conns, op, target in comparisons:
        a, b = figure(num, conns, metric), figure(den, conns, metric)
        if num not in scenarios or den not in scenarios:
            continue
        value = a / b if a is not None and b else None
        passed = None
        if value is not None and target is not None:
            passed = value >= target if op == ">=" else value <= target
        ratios.append({"name": name, "value": None if value is None else round(value, 3),
                       "target": "-" if target is None else f"{op} {target}", "pass": passed})
    # The added latency in absolute terms: what a hop to Redis costs a call.
    deltas = []
    for name, num, den, conns, metric in (
        ("miss p50 @1: tier - no Redis", "cold_tier", "cold_plain", 1, "p50_us"),
        ("hit p50 @1: tier - memory hit", "hit_tier", "memory_hit", 1, "p50_us"),
        ("partitioned p50 @1 - cold no Redis", "partitioned", "cold_plain", 1, "p50_us"),
    ):
        a, b = figure(num, conns, metric), figure(den, conns, metric)
        if a is not None and b is not None:
            deltas.append({"name": name, "us": a - b})

    lines = []
    out = lines.append
    out(f"Onside products gateway, shared tier between hosts ({meta['mode']}: median of {knobs['runs']} run(s) x "
        f"{knobs['duration_s']} s per figure)")
    timeout = knobs.get("gateway_redis_timeout_ms")
    out(f"Redis {knobs['redis_latency_us'] / 1000:g} ms away each way, the TLS upstream {knobs['upstream_latency_us'] / 1000:g} ms "
        f"(fault-proxy); GATEWAY_REDIS_TIMEOUT_MS {timeout if timeout is not None else 'default'}")
    far_cpus = knobs["client_cpus"] if knobs["client_cpus"] == knobs["upstream_cpus"] else f"{knobs['client_cpus']} (wrk) and {knobs['upstream_cpus']}"
    out(f"gateway on CPU {knobs['server_cpus']} ({knobs['gateway_workers']} worker); wrk -t{knobs['wrk_threads']}, Redis, "
        f"the upstream and the proxies on CPU {far_cpus}; commit {meta['commit']}"
        f"{' (dirty)' if meta['dirty'] else ''}; load {meta['loadavg_start']} -> {' '.join(meta['loadavg_end'])}")
    if proxies:
        ping, get = proxies.get("redis_ping"), proxies.get("upstream_get")
        out("measured through the proxies: Redis PING "
            + (f"p50 {latency(ping['p50_us'])} (min {latency(ping['min_us'])}, p99 {latency(ping['p99_us'])})" if ping else "-")
            + "; upstream GET on a made connection "
            + (f"{latency(get['request_us'])} (TLS handshake {latency(get['tls_handshake_us'])})" if get else "-"))
    out("")
    head = f"{'scenario':<36}| {many:>4} conns: req/s      p50      p99  per core |  1 conn: req/s      p50      p99 | errors"
    out(head)
    out("-" * len(head))
    empty = {"median": {"rps": None, "rps_per_core": None, "p50_us": None, "p99_us": None}, "errors": 0}
    for name in ORDER:
        if name not in scenarios:
            continue
        s = scenarios[name]
        cm = s["by_connections"].get(str(many), empty)
        c1 = s["by_connections"].get("1", empty)
        left = f"{rate(cm['median']['rps']):>17} {latency(cm['median']['p50_us']):>8} {latency(cm['median']['p99_us']):>8} {rate(cm['median'].get('rps_per_core')):>9}"
        right = f"{rate(c1['median']['rps']):>13} {latency(c1['median']['p50_us']):>8} {latency(c1['median']['p99_us']):>8}"
        errors = f"{cm['errors'] + c1['errors']}"
        g = gateways.get(name)
        if g:
            bad = g["rpc_total"] - g["rpc_ok"]
            kinds = ",".join(k for k in sorted(g.get("rpc_outcomes") or {}) if k != "ok")
            errors += f" +{bad} rpc {kinds}" if bad else ""
        out(f"{s['label']:<36}|{left} |{right} | {errors}")
    out("")
    out(f"{'comparison':<46}{'value':>8}  {'target':<8} result")
    for r in ratios:
        value = "-" if r["value"] is None else f"{r['value']:.2f}"
        result = "n/a" if r["pass"] is None else ("PASS" if r["pass"] else "FAIL")
        out(f"{r['name']:<46}{value:>8}  {r['target']:<8} {result}")
    for d in deltas:
        out(f"{d['name']:<46}{latency(d['us']) if d['us'] >= 0 else '-' + latency(-d['us']):>8}")
    out("")
    def share(value):
        return "-" if value is None else f"{value * 100:.0f}%"

    if gateways:
        out(f"{'gateway (/metrics at the end)':<36}{'calls ok/total':>16}{'upstream calls':>16}{'shared hits':>13}{'Redis errors':>14}"
            f"{f'CPU @{many}: gw':>14}{'far side':>10}")
        for name in ORDER:
            g = gateways.get(name)
            if not g:
                continue
            m = scenarios.get(name, {}).get("by_connections", {}).get(str(many), {}).get("median", {})
            out(f"  {LABELS[name]:<34}{str(g['rpc_ok']) + '/' + str(g['rpc_total']):>16}{g['upstream_requests']:>16}"
                f"{g['shared_hits']:>13}{g['shared_errors']:>14}{share(m.get('server_cpu_share')):>14}{share(m.get('far_cpu_share')):>10}")
        out("(CPU: share of one core over the runs at "
            f"{many} connections, of the gateway and of the far side: nginx, Redis and the proxies, beside wrk)")
        out("")
    if partition:
        def state(s):
            if not s:
                return "-"
            up = "unknown (no gateway_shared_tier_up)" if s["up"] is None else str(s["up"])
            return f"up {up}, connections {s['connections']}, Redis errors {s['errors']}"
        out("Redis partitioned (fault-proxy SIGUSR1 once the gateway was connected; SIGUSR2 after the runs):")
        out(f"  before:            {state(partition['tier_before'])}")
        out(f"  after the warm-up: {state(partition['tier_after_warmup'])}")
        out(f"  after the runs:    {state(partition['tier_during'])}")
        during = partition.get("tier_during") or {}
        if during.get("up") is None:
            out("  (without gateway_shared_tier_up the tier's state is unknown: with no AUTH or SELECT to answer, a")
            out("  connection counts as ready once TCP is up, and the proxy accepts TCP during a partition, so the")
            out("  connections gauge does not tell whether Redis answers)")
        rec = partition["recovered_after_s"]
        if rec is not None:
            back = f"connections ready after {rec:.2f} s"
        else:
            back = "connections NOT back within 30 s"
        out(f"  after the heal:    {state(partition['tier_after_heal'])}; {back}; "
            f"a call after it {'ok' if partition['call_after_heal_ok'] else 'FAILED'}")
    table = "\n".join(lines)
    print(table)

    result = {"meta": meta, "proxies": proxies, "scenarios": scenarios, "ratios": ratios, "deltas_us": deltas,
              "gateways": gateways, "partition": partition}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(os.path.splitext(out_path)[0] + ".txt", "w") as f:
        f.write(table + "\n")
    print(f"\nwrote {out_path}", file=sys.stderr)
    return 1 if any(r["pass"] is False for r in ratios) else 0


if __name__ == "__main__":
    sys.exit(main())
