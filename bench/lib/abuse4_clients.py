#!/usr/bin/env python3
"""Part 4 of bench/abuse: the new attacks of issue 36, all at once, against
one gateway with an admin listener and the shared tier, beside normal
traffic (wrk runs on its own, from the script). Built on part 3's clients
(abuse3_clients.py): its normal batch client, slow readers and prober.

1. Big entries: every --big-every seconds, --big-entries entries of ~1 MiB
   each (well-formed "OGW1" header, a product far over 64 KiB) on the entry
   keys of the ids big0.. in a new country; then each of --big-clients
   connections (4 KiB receive buffer, never read) sends a call for all of
   them, and a reading monitor asks the same call: its answer must not carry
   them (small, no padding).
2. Forged leases: a writer SETs "OGC1" + token with PX 1000 every 400 ms on
   the entry keys of --lease-ids ids (lease0..) in --lease-countries
   countries; --lease-callers kept connections ask --lease-per-call of them
   at a time, each (country, ids) once (a second time would be a memory
   hit), spread over the window: every call must be answered, none with
   -32005.
3. Admin flood: --admin-silent connections sending nothing and
   --admin-half sending half a request to the admin port, reconnecting
   whenever closed; part 3's prober asks /healthz, /readyz, /metrics there
   every --probe-every seconds.
4. Slow readers: part 3's --slow-readers (maximum batches, never read)
   beside part 3's normal batch client (deadline --deadline-ms).
5. Schema-breaking entries: every --schema-every seconds, entries in the
   gateway's own format for the ids schema0.. (known to the upstream) whose
   product has a lower-case currencyCode, in a new country, plus one
   well-formed control entry (schemaok, not known to the upstream,
   localizedTitle "from-redis"); then a call for all: the schema ids must come from the
   upstream (currencyCode upper case), the control from Redis (proving the
   entries' format is read).

Prints one JSON object. Standard library only.
"""
import argparse
import asyncio
import copy
import json
import os
import resource
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abuse3_clients import HOT_IDS, Kept, Part3, count, now, post, summary  # noqa: E402
from abuse_clients import raise_nofile  # noqa: E402

# Real ISO 3166 codes (the wrk hot call and part 3 use DE).
COUNTRIES = ("FR US GB IT ES NL AT BE CH SE NO DK FI PL CZ PT IE GR HU RO BG HR SK SI LT LV EE LU MT CY "
             "CA MX BR AR CL JP KR AU NZ SG IN ZA TR IL AE").split()
STARTED = now()


def rpc(k, ids, country):
    return {"jsonrpc": "2.0", "id": k, "method": "products.fetch",
            "params": {"productIdentifiers": ids, "countryCode": country}}


class Part4(Part3):
    def __init__(self, args, template):
        super().__init__(args)
        self.template = template  # one product as the gateway answers it (a dict)
        self.big = {"rounds": 0, "entries_set": 0, "calls_sent": 0, "send_errors": {}, "connects": 0,
                    "connect_errors": {}, "monitor": {}, "monitor_max_bytes": 0, "monitor_max_ms": 0.0}
        self.lease = {"sets": 0, "set_rounds": 0, "set_round_max_ms": 0.0, "calls": 0, "outcomes": {}, "latencies_ms": [], "late": 0,
                      "waited_500ms_or_more": 0}
        self.admin = {"connects": 0, "connect_errors": {}, "closed_by_gateway": 0, "answers": {}}
        self.schema = {"rounds": 0, "outcomes": {}, "control_alone": {}, "control": {}}
        self.schema_countries = iter(reversed(COUNTRIES))
        self.errors = {}
        self.redis_error_replies = {}
        self.redis_stalls = 0

    # -- helpers ----------------------------------------------------------
    def product(self, identifier, **changes):
        product = copy.deepcopy(self.template)
        product["productIdentifier"] = identifier
        for key, value in changes.items():
            if key == "currencyCode":
                product["price"]["currencyCode"] = value
            else:
                assert key in product, key
                product[key] = value
        data = json.dumps(product, separators=(",", ":"), ensure_ascii=False).encode()
        assert data.startswith(b'{"productIdentifier":"'), data[:40]
        return data

    @staticmethod
    def entry(product, fresh_s=60):
        return b"OGW1" + struct.pack(">qii", int(time.time() * 1000) + fresh_s * 1000, 0, 0) + b"P" + product

    def key_in(self, country, identifier):
        return f"{self.args.redis_prefix}v1:p:{self.args.app}:{country}:-:{identifier}"

    async def pipeline(self, conn, commands):
        """Writes every command, then reads every reply (an error reply is
        counted in redis_error_replies, e.g. BUSY while a script runs).
        conn is a one-element list: when Redis says nothing for 10 s, the
        stall is counted, the connection reopened and the commands dropped."""
        try:
            await self.pipeline_on(conn[0], commands)
        except asyncio.TimeoutError:
            self.redis_stalls += 1
            conn[0][1].transport.abort()
            conn[0] = await asyncio.open_connection("127.0.0.1", self.args.redis_port, limit=1 << 20)

    async def pipeline_on(self, conn, commands):
        reader, writer = conn
        out = []
        for parts in commands:
            out.append(b"*%d\r\n" % len(parts))
            for part in parts:
                part = part if isinstance(part, bytes) else str(part).encode()
                out += [b"$%d\r\n" % len(part), part, b"\r\n"]
        writer.write(b"".join(out))
        await asyncio.wait_for(writer.drain(), 10)
        for _ in commands:
            try:
                await self.redis_reply(reader)
            except RuntimeError as error:  # an error reply, read whole
                if str(error).startswith("bad reply"):
                    raise
                count(self.redis_error_replies, str(error)[:48])

    async def sleep(self, seconds):
        try:
            await asyncio.wait_for(self.stop.wait(), max(0.0, seconds))
        except asyncio.TimeoutError:
            pass

    async def call(self, kept, ids, country, timeout):
        """(outcome, reply list or None, bytes, ms) of one call on a kept connection."""
        request = post(self.args.host, self.args.port, json.dumps(rpc(1, ids, country), separators=(",", ":")).encode())
        started = now()
        try:
            status, _, data = await kept.exchange(request, timeout)
            took = round((now() - started) * 1000, 1)
            if status != 200:
                return f"HTTP {status}", None, len(data), took
            reply = json.loads(data)
            if "error" in reply:
                return f"error {reply['error']['code']}", None, len(data), took
            return "answered", reply["result"]["products"], len(data), took
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, KeyError) as error:
            return f"no answer ({type(error).__name__})", None, 0, round((now() - started) * 1000, 1)

    # -- 1: big entries, 1000 connections that never read ----------------
    async def big_connect(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (self.args.host, self.args.port)), 10)
            self.big["connects"] += 1
            return sock
        except (OSError, asyncio.TimeoutError) as error:
            sock.close()
            count(self.big["connect_errors"], type(error).__name__)
            return None

    async def big_entries(self, conn, socks, monitor):
        args = self.args
        ids = [f"big{k}" for k in range(args.big_entries)]
        pad = (1 << 20) - 4096  # the entry stays under the 1 MiB read cap
        countries = iter(COUNTRIES)
        while not self.stop.is_set():
            started = now()
            country = next(countries, None)
            if country is None:
                break
            try:
                await self.pipeline(conn, [("SET", self.key_in(country, i), self.entry(self.product(i, localizedDescription="x" * pad)), "PX", 60000)
                                           for i in ids])
            except (OSError, RuntimeError, asyncio.TimeoutError, asyncio.IncompleteReadError) as error:
                count(self.errors, f"big: {type(error).__name__}: {str(error)[:60]}")
                break
            self.big["rounds"] += 1
            self.big["entries_set"] += len(ids)
            request = post(args.host, args.port, json.dumps(rpc(1, ids, country), separators=(",", ":")).encode())
            for k, sock in enumerate(socks):
                if sock is None:
                    continue
                try:
                    sock.send(request)  # a few hundred bytes: into the socket buffer at once
                    self.big["calls_sent"] += 1
                except OSError as error:
                    count(self.big["send_errors"], type(error).__name__)
                    sock.close()
                    socks[k] = None
                if k % 100 == 99:
                    await asyncio.sleep(0)
            outcome, products, size, took = await self.call(monitor, ids, country, args.deadline_ms / 1000.0 + 5)
            if products is not None:
                padded = sum(1 for p in products if len(json.dumps(p)) > 65536)
                outcome = f"answered, {len(products)} products" + (f", {padded} over 64 KiB" if padded else "")
            count(self.big["monitor"], outcome)
            self.big["monitor_max_bytes"] = max(self.big["monitor_max_bytes"], size)
            self.big["monitor_max_ms"] = max(self.big["monitor_max_ms"], took)
            await self.sleep(args.big_every - (now() - started))
        for sock in socks:
            if sock is not None:
                sock.close()

    # -- 2: forged leases -------------------------------------------------
    async def lease_writer(self, conn):
        args = self.args
        countries = COUNTRIES[:args.lease_countries]
        value = b"OGC1" + os.urandom(16).hex().encode()
        commands = [("SET", self.key_in(c, f"lease{k}"), value, "PX", 1000) for c in countries for k in range(args.lease_ids)]
        while not self.stop.is_set():
            started = now()
            try:
                await self.pipeline(conn, commands)
            except (OSError, RuntimeError, asyncio.TimeoutError, asyncio.IncompleteReadError) as error:
                count(self.errors, f"lease: {type(error).__name__}: {str(error)[:60]}")
                return
            self.lease["sets"] += len(commands)
            self.lease["set_rounds"] += 1
            self.lease["set_round_max_ms"] = max(self.lease["set_round_max_ms"], round((now() - started) * 1000, 1))
            await self.sleep(0.4 - (now() - started))

    async def lease_caller(self, kept, work, pace):
        """Calls spread over the window: one every `pace` seconds."""
        args = self.args
        while not self.stop.is_set() and work:
            started = now()
            country, ids = work.pop(0)
            outcome, products, _, took = await self.call(kept, ids, country, args.deadline_ms / 1000.0 + 5)
            if self.stop.is_set() and outcome.startswith("no answer"):
                break  # cut by the end of the window
            self.lease["calls"] += 1
            count(self.lease["outcomes"], outcome)
            self.lease["latencies_ms"].append(took)
            if took >= 500:
                self.lease["waited_500ms_or_more"] += 1
            if took > args.deadline_ms:
                self.lease["late"] += 1
            await self.sleep(pace - (now() - started))

    # -- 3: admin flood ---------------------------------------------------
    async def admin_squatter(self, half):
        args = self.args
        text = f"GET /healthz HTTP/1.1\r\nHost: {args.host}\r\n".encode()  # no blank line: never complete
        while not self.stop.is_set():
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(args.host, args.admin_port), 5)
            except (OSError, asyncio.TimeoutError) as error:
                count(self.admin["connect_errors"], "timeout" if isinstance(error, asyncio.TimeoutError) else type(error).__name__)
                await self.pause(200)
                continue
            self.admin["connects"] += 1
            if half:
                writer.write(text)
            reading = asyncio.ensure_future(reader.read(256))
            stopped = asyncio.ensure_future(self.stop.wait())
            await asyncio.wait({reading, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                self.admin["closed_by_gateway"] += 1
                try:
                    data = reading.result()
                    count(self.admin["answers"], data[9:12].decode("ascii", "replace") if data else "closed")
                except OSError as error:
                    count(self.admin["answers"], type(error).__name__)
            else:
                reading.cancel()
            stopped.cancel()
            writer.transport.abort()
            await self.pause(100)

    # -- 5: schema-breaking entries --------------------------------------
    async def schema_entries(self, conn, kept, rounds=None):
        args = self.args
        ids = [f"schema{k}" for k in range(args.schema_ids)]
        countries = self.schema_countries
        while not self.stop.is_set() and rounds != 0:
            rounds = None if rounds is None else rounds - 1
            started = now()
            country = next(countries, None)
            if country is None:
                break
            commands = [("SET", self.key_in(country, i), self.entry(self.product(i, currencyCode="eur")), "PX", 60000) for i in ids]
            commands.append(("SET", self.key_in(country, "schemaok"), self.entry(self.product("schemaok", localizedTitle="from-redis")), "PX", 60000))
            try:
                await self.pipeline(conn, commands)
            except (OSError, RuntimeError, asyncio.TimeoutError, asyncio.IncompleteReadError) as error:
                count(self.errors, f"schema: {type(error).__name__}: {str(error)[:60]}")
                return
            self.schema["rounds"] += 1
            outcome, products, _, _ = await self.call(kept, ids + ["schemaok"], country, args.deadline_ms / 1000.0 + 5)
            if products is None:
                count(self.schema["outcomes"], outcome)
            else:
                by_id = {p.get("productIdentifier"): p for p in products}
                for i in ids:
                    price = (by_id.get(i) or {}).get("price") or {}
                    code = price.get("currencyCode")
                    count(self.schema["outcomes"], "missing" if i not in by_id else
                          "upstream product" if code == "EUR" else f"currencyCode {code}")
                control = by_id.get("schemaok")
                count(self.schema["control" if self.schema["rounds"] > 1 else "control_alone"], "missing" if control is None else
                      "from Redis" if control.get("localizedTitle") == "from-redis" else "other")
            await self.sleep(args.schema_every - (now() - started))


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--admin-port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--redis-port", type=int, required=True)
    parser.add_argument("--redis-prefix", default="onside-gw:")
    parser.add_argument("--app", default="bench")
    parser.add_argument("--flood-body", required=True, help="the maximum batch (batch.py's batch-request.json)")
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--start-after", type=float, default=0.5)
    parser.add_argument("--deadline-ms", type=float, default=5000)
    parser.add_argument("--batch-calls", type=int, default=2)
    parser.add_argument("--batch-pause-ms", type=float, default=50)
    parser.add_argument("--slow-readers", type=int, default=16)
    parser.add_argument("--slow-batches", type=int, default=4)
    parser.add_argument("--reconnect-delay-ms", type=float, default=1000)
    parser.add_argument("--big-clients", type=int, default=1000)
    parser.add_argument("--big-entries", type=int, default=24)
    parser.add_argument("--big-every", type=float, default=3)
    parser.add_argument("--lease-ids", type=int, default=100)
    parser.add_argument("--lease-countries", type=int, default=4)
    parser.add_argument("--lease-callers", type=int, default=4)
    parser.add_argument("--lease-per-call", type=int, default=5)
    parser.add_argument("--admin-silent", type=int, default=100)
    parser.add_argument("--admin-half", type=int, default=40)
    parser.add_argument("--schema-ids", type=int, default=5)
    parser.add_argument("--schema-every", type=float, default=1)
    parser.add_argument("--probe-every", type=float, default=0.5)
    args = parser.parse_args()
    args.flood_pause_ms, args.idlers, args.drippers, args.entry_mib = 100, 0, 0, 1

    sockets = args.big_clients + args.slow_readers + args.admin_silent + args.admin_half + args.lease_callers + 64
    limit = raise_nofile(sockets + 256)
    if limit < sockets:
        print(f"abuse4_clients: open-file limit {limit} is too low for {sockets} sockets", file=sys.stderr)
        return 2

    # One product as the gateway answers it: the template of every entry.
    first = Kept(args.host, args.port)
    await first.open()
    status, _, data = await first.exchange(post(args.host, args.port, json.dumps(rpc(1, HOT_IDS[:1], "DE")).encode()), 10)
    first.drop()
    template = json.loads(data)["result"]["products"][0]
    part = Part4(args, template)
    t0 = now()
    batch_conn, monitor, schema_conn = (Kept(args.host, args.port) for _ in range(3))
    callers = [Kept(args.host, args.port) for _ in range(args.lease_callers)]
    for kept in [batch_conn, monitor, schema_conn] + callers:
        await kept.open()
    redis = [[await asyncio.open_connection("127.0.0.1", args.redis_port, limit=1 << 20)] for _ in range(3)]
    probe_stop = asyncio.Event()
    prober = asyncio.ensure_future(part.prober(t0, probe_stop))
    normal = [asyncio.ensure_future(part.batch_client(batch_conn))]
    socks = []
    for start in range(0, args.big_clients, 100):
        socks += await asyncio.gather(*(part.big_connect() for _ in range(start, min(args.big_clients, start + 100))))
    # One schema round alone first: its control entry must be served from
    # Redis, or the entries' format is not the gateway's.
    await part.schema_entries(redis[2], schema_conn, rounds=1)
    await asyncio.sleep(args.start_after)

    ids = [f"lease{k}" for k in range(args.lease_ids)]
    work = [(c, ids[k:k + args.lease_per_call]) for c in COUNTRIES[:args.lease_countries]
            for k in range(0, args.lease_ids, args.lease_per_call)]
    tasks = [asyncio.ensure_future(part.lease_writer(redis[0]))]
    await asyncio.sleep(0.1)  # the first leases are in place before any call
    pace = args.duration * args.lease_callers / len(work)
    tasks += [asyncio.ensure_future(part.lease_caller(k, work, pace)) for k in callers]
    tasks.append(asyncio.ensure_future(part.big_entries(redis[1], socks, monitor)))
    tasks.append(asyncio.ensure_future(part.schema_entries(redis[2], schema_conn)))
    tasks += [asyncio.ensure_future(part.slow_reader()) for _ in range(args.slow_readers)]
    tasks += [asyncio.ensure_future(part.admin_squatter(k < args.admin_half)) for k in range(args.admin_silent + args.admin_half)]
    window_start = now()
    await part.sleep(args.duration)
    window = now() - window_start
    part.stop.set()
    await asyncio.gather(*tasks, *normal, return_exceptions=True)
    probe_stop.set()
    await prober
    for kept in [batch_conn, monitor, schema_conn] + callers:
        kept.drop()
    for conn in redis:
        conn[0][1].close()

    batch = part.batch
    batch["latency_ms"] = summary(batch.pop("latencies_ms"))
    slow = part.slow
    slow["held_s"] = summary(slow["held_s"])
    lease = part.lease
    lease["latency_ms"] = summary(lease.pop("latencies_ms"))
    lease["calls_left_unasked"] = len(work)
    print(json.dumps({
        "duration_s": round(window, 2),
        "knobs": {k: v for k, v in vars(args).items() if k not in ("host",)},
        "big_entries": part.big,
        "leases": lease,
        "admin_flood": part.admin,
        "probes": part.probes,
        "batch_client": batch,
        "slow_readers": slow,
        "schema_entries": part.schema,
        "errors": part.errors,
        "redis_error_replies": part.redis_error_replies,
        "redis_stalls_10s": part.redis_stalls,
        "rss_max_kb": part.rss_max_kb,
        "samples": part.samples,
        "client_cpu_percent": round(100 * sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) / (now() - STARTED), 1),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
