#!/usr/bin/env python3
"""Turns bench/abuse's measurements into the table and the JSON file.

Usage: abuse_report.py META_JSON PART1_FILE PART2_FILE [PART3_FILE [PART4_FILE]] OUT_JSON
(a part file holding null is left out)
Prints the table and writes OUT_JSON, plus the table beside it (.txt).
"""
import json
import math
import os
import sys


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


def wrk_errors(wrk):
    if not wrk:
        return None
    return sum(wrk["errors"].values())


def gauge_agreement(abusers):
    """(text, ok): the gauge against the sockets the gateway holds in the kernel,
    for every sample taken under load. ok is None when nothing was sampled."""
    if not abusers:
        return "no samples", None
    pairs, ok = [], True
    for sample in abusers["samples"]:
        if sample["label"] not in ("load", "end of load"):
            continue
        gauge = sample.get("connections_open")
        held = [h for h in sample["kernel_held_by_gateway"] if h is not None]
        if gauge is None or not held:
            continue
        gauge = int(gauge)
        near = min(held, key=lambda h: abs(h - gauge))
        # The reads are not atomic: under the reconnect storm a slot freed
        # (a dripper's 408) is taken again within milliseconds, so the
        # gauge may be a burst of closes away from both kernel reads.
        if abs(gauge - near) > 2 + 0.05 * near:
            ok = False
        pairs.append(f"{gauge}/{near}" + ("*" if sample.get("disagreed_first") else ""))
    if not pairs:
        return "no scrape answered", None
    return " ".join(pairs), ok


def fd_metric(abusers):
    """process_open_fds from the scrape against /proc/PID/fd read beside it."""
    pairs = []
    for sample in (abusers or {}).get("samples", []):
        if sample["label"] in ("load", "end of load") and sample.get("process_open_fds") is not None:
            pairs.append(f"{int(sample['process_open_fds'])}/{sample.get('gateway_fds')}")
    return " ".join(pairs) or "-"


def miss(abusers):
    """The monitor's cache miss at the end of the load: "ok", or the error."""
    result = (abusers or {}).get("miss_under_load")
    if not result:
        return "-", None
    text = f"{result['outcome']} in {result['seconds']}s"
    if result.get("message"):
        text += f" ({result['message'].split(': ')[-1][:40]})"
    return text, result["outcome"] == "ok"


def settled(abusers):
    if not abusers:
        return "-", None
    after = [s for s in abusers["samples"] if s["label"] == "after close"]
    last = after[-1] if after else None
    if last is None or last.get("connections_open") is None:
        return "no scrape", None
    text = f"{int(last['connections_open'])}/{last['kernel_held_by_gateway'][1]}"
    if abusers["gauge_settled_after_s"] is not None:
        note = "" if int(last["connections_open"]) == 1 else " (not 1: still held)"
        return f"{text} after {abusers['gauge_settled_after_s']}s{note}", True
    return f"{text} (not equal)", False


def statuses(tally):
    if not tally:
        return "-"
    answers = " ".join(f"{k}:{v}" for k, v in tally["answers"].items()) or "no answer"
    extra = []
    if tally["closed_without_answer"]:
        extra.append(f"closed:{tally['closed_without_answer']}")
    if tally["resets"]:
        extra.append(f"reset:{tally['resets']}")
    if tally["connect_errors"]:
        extra.append(f"connect-err:{tally['connect_errors']}")
    return " ".join([answers] + extra)


def part4_rows(part4, knobs, targets, row):
    """Part 4: issue 36's attacks, one PASS/FAIL row each."""
    p4 = knobs.get("part4", {})
    ab = part4["abusers"] or {}
    gw = part4["gateway"]
    wrk = part4["wrk"]
    s4 = (f"part 4: wrk {knobs['wrk_connections']} conns {knobs['wrk_seconds']}s + all at once: {p4.get('big_clients')} non-readers of "
          f"{p4.get('big_entries')} 1 MiB entries, forged leases on {p4.get('lease_ids')} ids, {p4.get('admin_silent')}+{p4.get('admin_half')} "
          f"admin squatters, {p4.get('slow_readers')} slow readers, schema-breaking entries; cap {p4.get('max_connections')}")
    row(s4, "wrk req/s", rate(wrk["rps"]) if wrk else "no result", "", None if wrk else False)
    p99 = wrk["p99_us"] if wrk else None
    row(s4, "wrk p50 / p99", f"{latency(wrk['p50_us']) if wrk else '-'} / {latency(p99)}", f"p99 < {targets['p99_ms']} ms",
        p99 is not None and p99 < targets["p99_ms"] * 1000)
    errors = wrk_errors(wrk)
    detail = "" if not errors else " (" + ", ".join(f"{k} {v}" for k, v in wrk["errors"].items() if v) + ")"
    row(s4, "wrk errors", "-" if errors is None else f"{errors}{detail}", "0", errors == 0)
    # 1. Big entries.
    limit_kb = targets.get("manifest_memory_limit_kb") or targets["rss_limit_mb"] * 1024
    hwm = gw["vmhwm_kb"]
    big = ab.get("big_entries") or {}
    cache_errors = gw.get("shared_cache_errors_during")
    monitor = " ".join(f"{k}:{v}" for k, v in sorted(big.get("monitor", {}).items())) or "none"
    row(s4, "1. non-readers: connected, calls, rounds", f"{big.get('connects', 0)}, {big.get('calls_sent', 0)}, {big.get('rounds', 0)}")
    row(s4, "1. 1 MiB entries: peak RSS (VmHWM)", f"{mib(hwm)} (sampled max {mib(ab.get('rss_max_kb'))})", f"< {limit_kb // 1024} MiB (manifest)",
        bool(hwm) and hwm < limit_kb)
    carried = big.get("monitor_max_bytes", 0) >= 65536 or any("over 64 KiB" in k or not k.startswith("answered") for k in big.get("monitor", {}))
    row(s4, "1. entries refused, not answered", f"cache errors +{cache_errors}; {monitor}, <= {big.get('monitor_max_bytes', 0)} B",
        "errors > 0, answers small",
        bool(big.get("rounds")) and bool(cache_errors) and cache_errors > 0 and not carried and bool(big.get("monitor")))
    # 2. Forged leases.
    lease = ab.get("leases") or {}
    lat = lease.get("latency_ms") or {}
    bound = p4.get("upstream_timeout_ms", 2000) + 1000
    outcomes = " ".join(f"{k}:{v}" for k, v in sorted(lease.get("outcomes", {}).items())) or "none"
    row(s4, "2. lease writer: rounds, slowest round", f"{lease.get('set_rounds', 0)} of 400 ms, slowest {lease.get('set_round_max_ms', 0):.0f} ms; "
        f"{lease.get('waited_500ms_or_more', 0)} calls took >= 500 ms")
    row(s4, "2. forged leases: calls answered", f"{lease.get('calls', 0)} calls ({outcomes})",
        "all, no -32005", bool(lease.get("calls")) and outcomes == f"answered:{lease['calls']}")
    row(s4, "2. forged leases: p50 / p99 / max", f"{lat.get('p50')} / {lat.get('p99')} / {lat.get('max')} ms ({lease.get('late', 0)} past the deadline)",
        f"p99 < {bound} ms", bool(lat) and lat["p99"] < bound and lease.get("late", 0) == 0)
    # 3. Admin flood.
    admin = ab.get("admin_flood") or {}
    probes = ab.get("probes") or {}
    health = probes.get("/healthz") or {"ok": 0, "failed": {}, "max_ms": 0}
    asked = health["ok"] + sum(health["failed"].values())
    others = " ".join(f"{p[1:]} {v['ok']}/{v['ok'] + sum(v['failed'].values())}" for p, v in probes.items() if p != "/healthz")
    row(s4, "3. admin squatters: connects, closed", f"{admin.get('connects', 0)}, {admin.get('closed_by_gateway', 0)} by the gateway")
    row(s4, "3. admin flood: /healthz 200 / asked", f"{health['ok']}/{asked}, slowest {health['max_ms']:.0f} ms ({others})", "all 200",
        asked > 0 and health["ok"] == asked)
    # 4. Slow readers beside a normal batch client.
    batch = ab.get("batch_client") or {}
    slow = ab.get("slow_readers") or {}
    blat = batch.get("latency_ms") or {}
    outcomes = " ".join(f"{k}:{v}" for k, v in sorted(batch.get("outcomes", {}).items())) or "none"
    ended = " ".join(f"{k}:{v}" for k, v in sorted(slow.get("ended", {}).items()))
    row(s4, "4. slow readers: how they ended", ended or "-")
    row(s4, "4. normal batches: p50 / p99 / max", f"{blat.get('p50')} / {blat.get('p99')} / {blat.get('max')} ms")
    row(s4, "4. normal batches: answers, late", f"{batch.get('sent', 0)} sent ({outcomes}), {batch.get('late', 0)} late",
        f"all 200 ok, <= {p4.get('request_timeout_ms')} ms",
        bool(batch.get("sent")) and outcomes == f"200 ok:{batch['sent']}" and batch.get("late", 0) == 0)
    # 5. Schema-breaking entries.
    schema = ab.get("schema_entries") or {}
    outcomes = " ".join(f"{k}:{v}" for k, v in sorted(schema.get("outcomes", {}).items())) or "none"
    control = " ".join(f"{k}:{v}" for k, v in sorted(schema.get("control", {}).items())) or "none"
    alone = schema.get("control_alone", {}).get("from Redis", 0) > 0
    good = schema.get("outcomes", {}).get("upstream product", 0)
    row(s4, "5. control entry alone, under load", f"{'from Redis' if alone else 'NOT from Redis'}; {control}",
        "from Redis alone", alone)
    row(s4, "5. schema-breaking entries", f"{schema.get('rounds', 0)} rounds: {outcomes}",
        "upstream products, cache errors > 0", good > 0 and outcomes == f"upstream product:{good}" and bool(cache_errors) and cache_errors > 0
        and alone)
    busy = ab.get("redis_error_replies") or {}
    row(s4, "Redis: error replies to the writers", " ".join(f"{k}: {v}" for k, v in busy.items())[:70] or "none")
    row(s4, "Redis: writers' commands unanswered 10 s", str(ab.get("redis_stalls_10s", 0)))
    row(s4, "Redis: slow scripts logged", gw.get("redis_slow_scripts") or "none")
    if ab.get("errors"):
        row(s4, "client errors", json.dumps(ab["errors"])[:70], "none", False)
    row(s4, "CPU: gateway, abuse client", f"{gw.get('cpu_percent_wrk_window', '-')} %, {ab.get('client_cpu_percent', '-')} % (of one core)")
    row(s4, "gateway log lines under load", str(gw["log_lines_during"]))
    row(s4, "gateway alive, serves after", f"{'yes' if gw['alive'] else 'NO'}, /readyz {gw['readyz_after']}, "
        f"call {'ok' if gw['hot_call_after'] else 'FAILED'}", "yes, 200, ok",
        gw["alive"] and gw["readyz_after"] == "200" and gw["hot_call_after"])


def main():
    meta = json.loads(sys.argv[1])
    part1 = json.load(open(sys.argv[2]))
    part2 = json.load(open(sys.argv[3]))
    part3 = json.load(open(sys.argv[4])) if len(sys.argv) > 5 else None
    part4 = json.load(open(sys.argv[5])) if len(sys.argv) > 6 else None
    out_path = sys.argv[-1]
    targets = meta["targets"]
    knobs = meta["knobs"]

    rows = []  # (section, label, value, target, ok) ; ok None = information only

    def row(section, label, value, target="", ok=None):
        rows.append({"section": section, "check": label, "value": value, "target": target,
                     "result": None if ok is None else ("PASS" if ok else "FAIL")})

    if part1:
        # Part 1.
        s1 = (f"part 1: wrk {knobs['wrk_connections']} conns {knobs['wrk_seconds']}s + "
              f"{knobs['drippers']} drippers + {knobs['idlers']} idle sockets, cap {knobs['max_connections']}, "
              f"{knobs['gateway_workers']} worker")
        wrk = part1["wrk"]
        ab1 = part1["abusers"]
        gw1 = part1["gateway"]
        base = part1.get("wrk_baseline")
        row(s1, "wrk alone first: req/s p50 p99",
            f"{rate(base['rps'])}  {latency(base['p50_us'])}  {latency(base['p99_us'])}" if base else "no result")
        row(s1, "wrk req/s", rate(wrk["rps"]) if wrk else "no result", "", None if wrk else False)
        row(s1, "wrk p50", latency(wrk["p50_us"]) if wrk else "-")
        p99 = wrk["p99_us"] if wrk else None
        row(s1, "wrk p99", latency(p99), f"< {targets['p99_ms']} ms", p99 is not None and p99 < targets["p99_ms"] * 1000)
        errors = wrk_errors(wrk)
        detail = "" if not errors else " (" + ", ".join(f"{k} {v}" for k, v in wrk["errors"].items() if v) + ")"
        row(s1, "wrk errors", "-" if errors is None else f"{errors}{detail}", "0", errors == 0)
        hwm = gw1["vmhwm_kb"]
        row(s1, "gateway peak RSS (VmHWM)", mib(hwm), f"< {targets['rss_limit_mb']} MiB",
            bool(hwm) and hwm < targets["rss_limit_mb"] * 1024)
        text, ok = gauge_agreement(ab1)
        row(s1, "connections_open / held in kernel", text, "equal (±5 %)", ok if ok is not None else False)
        established = [max(h for h in s["kernel_established"] if h is not None) for s in (ab1 or {}).get("samples", [])
                       if s["label"] in ("load", "end of load") and any(h is not None for h in s["kernel_established"])]
        row(s1, "kernel ESTABLISHED on the port", " ".join(map(str, established)) or "-", "(incl. accept queue)")
        text, ok = settled(ab1)
        row(s1, "after the abusers closed", text, "gauge = kernel", ok if ok is not None else False)
        row(s1, "connections rejected (503)", "-" if gw1["rejected_during"] is None else str(int(gw1["rejected_during"])))
        drip = ab1["dripper"] if ab1 else None
        got408 = drip["answers"].get("408", 0) if drip else 0
        row(s1, "drippers: answers seen", statuses(drip), "408s > 0, no 200", bool(drip) and got408 > 0 and not drip["answers"].get("200"))
        row(s1, "idle sockets: answers seen", statuses(ab1["idler"] if ab1 else None))
        row(s1, "process_open_fds / fds in /proc", fd_metric(ab1))
        row(s1, "CPU: gateway, abuse client", f"{gw1['cpu_percent']} %, {ab1['client_cpu_percent'] if ab1 else '-'} % (of one core)")
        text, ok = miss(ab1)
        row(s1, "a cache miss under the load", text, "ok", ok if ok is not None else False)
        row(s1, "gateway log lines under load", str(gw1["log_lines_during"]), "<= 10", gw1["log_lines_during"] <= 10)
        row(s1, "gateway alive, /readyz after", f"{'yes' if gw1['alive'] else 'NO'}, {gw1['readyz_after']}", "yes, 200",
            gw1["alive"] and gw1["readyz_after"] == "200")

    if part2:
        # Part 2.
        ab2 = part2["abusers"]
        gw2 = part2["gateway"]
        window = ab2["duration_s"] if ab2 else knobs["abuse_seconds"]
        s2 = (f"part 2: open files {gw2['nofile']} (soft/hard), {knobs['drippers']} drippers + "
              f"{knobs['idlers']} idle sockets, no wrk, {window:.0f}s")
        cpu = ab2["gateway_cpu_percent"] if ab2 else None
        row(s2, "gateway CPU (of one core)", "-" if cpu is None else f"{cpu} %", f"< {targets['cpu_limit_percent']} %",
            cpu is not None and cpu < targets["cpu_limit_percent"])
        # Counted from the abusers' start to their exit (settling included).
        lines_window = gw2.get("log_window_s") or window
        allowed = math.ceil(lines_window / 10) + 5
        row(s2, "gateway log lines under load", f"{gw2['log_lines_during']} in {lines_window:.0f}s ({gw2['accept_warnings']} 'cannot accept')",
            f"<= {allowed}", gw2["log_lines_during"] <= allowed)
        text, ok = gauge_agreement(ab2)
        row(s2, "connections_open / held in kernel", text, "equal (±5 %)", ok)
        established = [max(h for h in s["kernel_established"] if h is not None) for s in (ab2 or {}).get("samples", [])
                       if s["label"] in ("load", "end of load") and any(h is not None for h in s["kernel_established"])]
        row(s2, "kernel ESTABLISHED on the port", " ".join(map(str, established)) or "-", "(incl. accept queue)")
        text, ok = settled(ab2)
        row(s2, "after the abusers closed", text, "gauge = kernel", ok)
        row(s2, "process_open_fds / fds in /proc", fd_metric(ab2))
        text, _ = miss(ab2)
        row(s2, "a cache miss under the load", text, "(no target)")
        row(s2, "drippers: answers seen", statuses(ab2["dripper"] if ab2 else None))
        row(s2, "idle sockets: answers seen", statuses(ab2["idler"] if ab2 else None))
        row(s2, "gateway alive, serves after", f"{'yes' if gw2['alive'] else 'NO'}, /readyz {gw2['readyz_after']}, "
            f"call {'ok' if gw2['hot_call_after'] else 'FAILED'}", "yes, 200, ok",
            gw2["alive"] and gw2["readyz_after"] == "200" and gw2["hot_call_after"])

    # Part 3.
    if part3:
        p3 = knobs.get("part3", {})
        ab3 = part3["abusers"] or {}
        gw3 = part3["gateway"]
        wrk3 = part3["wrk"]
        s3 = (f"part 3: wrk {knobs['wrk_connections']} conns {knobs['wrk_seconds']}s + all at once: {p3.get('flooders')}+{p3.get('flood_waiters')} batch flooders, "
              f"{p3.get('slow_readers')} slow readers, {p3.get('idlers')} idle sockets (cap {knobs['max_connections']}), "
              f"{p3.get('pipeliners')} pipeliners, Redis abuse; read timeout {p3.get('read_timeout_ms')} ms")
        row(s3, "wrk req/s", rate(wrk3["rps"]) if wrk3 else "no result", "", None if wrk3 else False)
        row(s3, "wrk p50", latency(wrk3["p50_us"]) if wrk3 else "-")
        p99 = wrk3["p99_us"] if wrk3 else None
        row(s3, "wrk p99", latency(p99), f"< {targets['p99_ms']} ms", p99 is not None and p99 < targets["p99_ms"] * 1000)
        errors = wrk_errors(wrk3)
        detail = "" if not errors else " (" + ", ".join(f"{k} {v}" for k, v in wrk3["errors"].items() if v) + ")"
        row(s3, "wrk errors", "-" if errors is None else f"{errors}{detail}", "0", errors == 0)
        batch = ab3.get("batch_client")
        deadline = p3.get("request_timeout_ms", 5000)
        if batch:
            lat = batch.get("latency_ms") or {}
            outcomes = " ".join(f"{k}:{v}" for k, v in sorted(batch["outcomes"].items()))
            row(s3, f"normal {ab3['knobs']['batch_calls']}-call batches: answers", f"{batch['sent']} sent, {outcomes}",
                "all answered", bool(batch["sent"]) and not batch["outcomes"].get("no answer"))
            row(s3, "normal batches: p50 p99 max", f"{lat.get('p50')} / {lat.get('p99')} / {lat.get('max')} ms")
            row(s3, "normal batches: later than deadline", f"{batch['late']} (max {batch['max_ms']:.0f} ms)",
                f"0 (<= {deadline} ms)", batch["late"] == 0)
        else:
            row(s3, "normal batches", "no result", "all answered by the deadline", False)
        flood = ab3.get("flood")
        if flood:
            answers = " ".join(f"{k}:{v}" for k, v in sorted(flood["answers"].items())) or "none"
            queue_full = sum(v for k, v in flood["answers"].items() if k == "503 queue full")
            row(s3, "batch flood: sent, closed at once", f"{flood['sent']}, {flood['closed_at_once']}, max wait {flood['max_wait_ms']:.0f} ms")
            row(s3, "batch flood: answers read", answers + (f" errors:{sum(flood['errors'].values())}" if flood["errors"] else ""),
                "503 + Retry-After", queue_full > 0 and not any("no Retry-After" in k for k in flood["answers"]))
            waiting = ab3.get("batches_waiting_max")
            cap = 4 * p3.get("batch_concurrency", 16)
            row(s3, "gateway_batches_waiting, peak", "-" if waiting is None else f"{waiting:.0f}", f"<= {cap}",
                waiting is not None and waiting <= cap)
        slow = ab3.get("slow_readers")
        if slow:
            held = slow.get("held_s") or {}
            ended = " ".join(f"{k}:{v}" for k, v in sorted(slow["ended"].items()))
            limit_s = p3.get("read_timeout_ms", 3000) / 1000 + 1
            row(s3, "slow readers: how they ended", ended + (f", {slow['no_answer_byte']} before an answer byte" if slow["no_answer_byte"] else ""))
            row(s3, "slow readers: held after 1st byte", f"p50 {held.get('p50')} s, max {held.get('max')} s ({held.get('count', 0)})",
                f"<= {limit_s:g} s", bool(held) and held["max"] <= limit_s)
        idle = ab3.get("idlers")
        row(s3, "idle sockets: answers seen", statuses(idle))
        probes = ab3.get("probes")
        if probes:
            text = " ".join(f"{p[1:]} {v['ok']}/{v['ok'] + sum(v['failed'].values())}" for p, v in probes.items())
            text += f", slowest {max(v['max_ms'] for v in probes.values()):.0f} ms"
            failed = sum(sum(v["failed"].values()) for v in probes.values())
            row(s3, "admin probes: 200 / asked", text, "all 200", failed == 0 and all(v["ok"] > 0 for v in probes.values()))
        pipe = ab3.get("pipeliners")
        if pipe:
            answers = " ".join(f"{k}:{v}" for k, v in sorted(pipe["answers"].items()))
            row(s3, "pipeliners: calls answered", f"{pipe['calls_answered']} in {pipe['rounds']} rounds of 64 KiB ({answers}), "
                f"round max {pipe['round_max_ms']:.0f} ms" + (f", errors {pipe['errors']}" if pipe["errors"] else ""),
                "no errors", not pipe["errors"] and pipe["rounds"] > 0)
        redis = ab3.get("redis")
        if redis:
            pubs = redis["publishes"]
            row(s3, f"Redis: {p3.get('publish_mib')} MiB PUBLISH (receivers)",
                f"{len(pubs)}x ({' '.join(str(p['receivers']) for p in pubs)})" + (f", errors {redis['errors']}" if redis["errors"] else ""),
                ">= 2, delivered", len(pubs) >= 2 and all(p["receivers"] >= 1 for p in pubs[:1]))
            poisoned = ab3.get("poisoned_misses") or {}
            outcomes = " ".join(f"{k}:{v}" for k, v in sorted(poisoned.get("outcomes", {}).items()))
            row(s3, f"Redis: misses over {p3.get('entry_mib')} MiB entries", f"{outcomes or 'none'}, max {poisoned.get('max_ms', 0):.0f} ms, "
                f"answer <= {poisoned.get('max_answer_bytes', 0)} B (+{redis['hot_entries_set']} hot keys)",
                "ok, small", bool(poisoned.get("calls")) and outcomes == f"ok:{poisoned['calls']}" and poisoned["max_answer_bytes"] < 65536)
        hwm = gw3["vmhwm_kb"]
        row(s3, "gateway peak RSS (VmHWM)", f"{mib(hwm)} (sampled max {mib(ab3.get('rss_max_kb'))})", f"< {targets['rss_limit_mb']} MiB",
            bool(hwm) and hwm < targets["rss_limit_mb"] * 1024)
        row(s3, "CPU: gateway, abuse client", f"{gw3.get('cpu_percent_wrk_window', '-')} %, {ab3.get('client_cpu_percent', '-')} % (of one core)")
        row(s3, "gateway log lines under load", str(gw3["log_lines_during"]))
        row(s3, "gateway alive, serves after", f"{'yes' if gw3['alive'] else 'NO'}, /readyz {gw3['readyz_after']}, "
            f"call {'ok' if gw3['hot_call_after'] else 'FAILED'}", "yes, 200, ok",
            gw3["alive"] and gw3["readyz_after"] == "200" and gw3["hot_call_after"])
    if part4:
        part4_rows(part4, knobs, targets, row)
    lines = [f"bench/abuse ({meta['mode']}, commit {meta['commit']}{'+' if meta['dirty'] else ''}, "
             f"load {meta['loadavg_start']} -> {meta['loadavg_end']})"]
    width = max(len(r["check"]) for r in rows) + 2
    vwidth = min(max(len(r["value"]) for r in rows) + 2, 72)
    twidth = max(len(r["target"]) for r in rows) + 2
    section = None
    for r in rows:
        if r["section"] != section:
            section = r["section"]
            lines.append("")
            lines.append(section)
            lines.append(f"  {'check':<{width}}{'value':<{vwidth}}{'target':<{twidth}}result")
        lines.append(f"  {r['check']:<{width}}{r['value']:<{vwidth}}{r['target']:<{twidth}}{r['result'] or ''}".rstrip())
    failed = [r for r in rows if r["result"] == "FAIL"]
    if any("*" in r["value"] for r in rows if r["check"].startswith("connections_open")):
        lines.append("")
        lines.append("  * sampled again: the first reads disagreed (a burst of closes between them); see disagreed_first in the JSON")
    lines.append("")
    lines.append(f"{len([r for r in rows if r['result'] == 'PASS'])} passed, {len(failed)} failed"
                 + (": " + "; ".join(f"{r['check']} ({r['section'].split(':')[0]})" for r in failed) if failed else ""))
    table = "\n".join(lines)
    print(table)

    with open(out_path, "w") as out:
        json.dump({"meta": meta, "checks": rows, "part1": part1, "part2": part2, "part3": part3, "part4": part4}, out, indent=1)
        out.write("\n")
    with open(os.path.splitext(out_path)[0] + ".txt", "w") as out:
        out.write(table + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
