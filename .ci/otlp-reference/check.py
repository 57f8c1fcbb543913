"""Checks the spans the reference receiver decoded against the contract's
tracing rules, for the calls .ci/otlp made.

usage: check.py SPANS_FILE CALLS_JSON
"""
import json
import sys

spans_file, calls = sys.argv[1], json.loads(sys.argv[2])
records = [json.loads(line) for line in open(spans_file, encoding="utf-8")]
errors = [r for r in records if "error" in r]
spans = [r for r in records if "error" not in r]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


check(not errors, f"bodies the reference decoder refused: {errors}")
check(all(s["path"] == "/v1/traces" for s in spans), "an export not sent to /v1/traces")
check(all(s["resource"].get("service.name") == "products-gateway" for s in spans), "service.name")
check(all(s["resource"].get("service.version") for s in spans), "service.version")
check(all(len(s["resource"].get("service.instance.id", "")) == 32 for s in spans), "service.instance.id")

SERVER, CLIENT = 2, 3
by_trace = {}
for span in spans:
    by_trace.setdefault(span["traceId"], []).append(span)

# A continued trace: SERVER under the caller's span, CLIENT under the SERVER.
for protocol in ("protobuf", "json"):
    trace, parent = calls[f"continued_{protocol}"]
    found = [s for s in by_trace.get(trace, []) if s["protocol"] == protocol]
    servers = [s for s in found if s["kind"] == SERVER]
    clients = [s for s in found if s["kind"] == CLIENT]
    check(len(servers) == 1, f"{protocol}: one SERVER span for the continued trace, got {len(servers)}")
    check(len(clients) == 1, f"{protocol}: one CLIENT span for the continued trace, got {len(clients)}")
    if servers and clients:
        server, client = servers[0], clients[0]
        check(server["parentSpanId"] == parent, f"{protocol}: SERVER parent {server['parentSpanId']} != caller's {parent}")
        check(server["name"] == "products.fetch", f"{protocol}: SERVER name {server['name']}")
        check(server["attributes"].get("rpc.system") == "jsonrpc", f"{protocol}: rpc.system")
        check(server["attributes"].get("rpc.method") == "products.fetch", f"{protocol}: rpc.method")
        check(server["attributes"].get("rpc.jsonrpc.version") == "2.0", f"{protocol}: rpc.jsonrpc.version")
        check(server["attributes"].get("rpc.jsonrpc.request_id") == "7", f"{protocol}: rpc.jsonrpc.request_id")
        check(server["traceState"] == "congo=t61rcWkgMzE", f"{protocol}: trace state {server['traceState']!r}")
        check(client["parentSpanId"] == server["spanId"], f"{protocol}: CLIENT parent is not the SERVER span")
        check(client["attributes"].get("http.request.method") == "GET", f"{protocol}: http.request.method")
        check(client["attributes"].get("http.response.status_code") == 200, f"{protocol}: status code {client['attributes']}")
        check(client["attributes"].get("server.address") == "localhost", f"{protocol}: server.address")
        check(str(client["attributes"].get("url.full", "")).startswith("https://localhost:"), f"{protocol}: url.full")
        check(server["start"] <= client["start"] <= client["end"] <= server["end"], f"{protocol}: span times out of order")

# A sampled-out call exports nothing.
check(calls["sampled_out"] not in by_trace, "the sampled-out call was exported")

# An invalid traceparent starts a new trace: not the caller's, no parent.
check(calls["invalid"] not in by_trace, "an invalid (upper-case) traceparent was continued")
fresh = [s for s in spans if s["kind"] == SERVER and s["parentSpanId"] == "" and s["attributes"].get("rpc.jsonrpc.request_id") == "9"]
check(len(fresh) == 1, f"one new root trace for the invalid traceparent's call, got {len(fresh)}")

# A herd: one CLIENT span in all the herd's traces, one SERVER span per
# caller, and every other caller's span links to the one whose trace the
# upstream request carried.
herd = calls["herd"]
herd_servers = [s for t in herd for s in by_trace.get(t, []) if s["kind"] == SERVER]
herd_clients = [s for t in herd for s in by_trace.get(t, []) if s["kind"] == CLIENT]
check(len(herd_servers) == len(herd), f"one SERVER span per herd caller: {len(herd_servers)} of {len(herd)}")
check(len(herd_clients) == 1, f"one upstream attempt for the herd, got {len(herd_clients)}")
if len(herd_clients) == 1:
    starter = [s for s in herd_servers if s["spanId"] == herd_clients[0]["parentSpanId"]]
    check(len(starter) == 1, "the herd's CLIENT span is not under a caller's SERVER span")
    if starter:
        for server in herd_servers:
            if server is starter[0]:
                continue
            check({"traceId": starter[0]["traceId"], "spanId": starter[0]["spanId"]} in server["links"],
                  f"herd caller {server['traceId']} has no link to the fetch's call")

if failures:
    print("OTLP reference check FAILED:")
    for failure in failures:
        print("  -", failure)
    sys.exit(1)
print(f"OTLP reference check: {len(spans)} spans decoded by opentelemetry-proto, every rule held")
