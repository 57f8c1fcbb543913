#!/usr/bin/env python3
"""Part 3 of bench/abuse: every attack of issue 28's items 1-4 and 7 at
once, against one gateway with an admin listener and the shared tier, beside
normal traffic (wrk runs on its own, from the script).

Kept connections, opened before any abuser (so each holds a slot under the
connection cap):

- the normal batch client: small batches (--batch-calls calls of the hot
  identifiers) one after the other; each must be answered by its deadline
  (--deadline-ms, the gateway's GATEWAY_REQUEST_TIMEOUT_MS);
- --pipeliners pipelining clients (item 7): 64 KiB of pipelined hot calls,
  then every answer read, again and again;
- the poisoned-miss client (item 4): every --poison-every seconds it writes
  --entry-mib MiB values on the shared-tier keys of two new identifiers, then
  asks the gateway for them (a memory miss that reads those keys).

Abusers, from --start-after on:

- --flooders batch flooders (item 1): connect, send the maximum batch
  (--flood-body), and either close at once (even ones) or read the status
  line, then reset (odd ones; a 503 from the full queue is read whole and the
  batch sent again on the same connection); reconnect after --flood-pause-ms;
- --slow-readers (item 2): a small receive buffer, --slow-batches maximum
  batches pipelined, nothing ever read; the time from the answer's first byte
  to the gateway giving up (the socket leaves ESTABLISHED) is measured;
- --idlers idle sockets (item 3), as in parts 1 and 2 (abuse_clients.py);
- Redis (item 4): --entry-mib MiB values on the hot identifiers' entry keys
  at the start, and a --publish-mib MiB PUBLISH on the outcomes channel every
  --publish-every seconds.

Meanwhile a prober asks /healthz, /readyz and /metrics on the admin listener
every --probe-every seconds (a new connection each time, 2 s timeout) and
samples the gateway's RSS. Prints one JSON object. Standard library only.
"""
import argparse
import asyncio
import json
import os
import random
import re
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abuse_clients import Abuse, parse_metrics, raise_nofile  # noqa: E402

HOT_IDS = ["premium_monthly", "premium_yearly", "coins_100", "coins_1200", "remove_ads"]
TCP_ESTABLISHED = 1


def now():
    return time.monotonic()


STARTED = now()


def count(table, key, n=1):
    table[key] = table.get(key, 0) + n


def call(k, ids):
    return {"jsonrpc": "2.0", "id": k, "method": "products.fetch",
            "params": {"productIdentifiers": ids, "countryCode": "DE"}}


def post(host, port, body):
    return (f"POST /rpc HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def read_answer(reader, timeout, body=True):
    """(status, head, body) of one answer; body None when not read."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    status = int(head.split(b" ", 2)[1])
    match = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    data = None
    if body:
        data = await asyncio.wait_for(reader.readexactly(int(match.group(1)) if match else 0), timeout)
    return status, head, data


def kind_503(head, data):
    retry = b"\r\nretry-after: 1" in head.lower()
    text = data or b""
    if b"batches are already waiting" in text:
        return "503 queue full" + ("" if retry else " (no Retry-After)")
    if b"too many connections" in text:
        return "503 cap"
    if b"closed while the batch waited" in text:
        return "503 left queue"
    return "503 other"


class Kept:
    """One kept-alive connection, reopened when the gateway closed it."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.reader = self.writer = None
        self.reopens = 0

    async def open(self):
        self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port, limit=1 << 20), 5)

    async def exchange(self, request, timeout):
        if self.writer is None or self.writer.is_closing():
            self.reopens += 1
            await self.open()
        try:
            self.writer.write(request)
            status, head, data = await read_answer(self.reader, timeout)
            if re.search(rb"(?i)\r\nconnection:\s*close", head):
                self.drop()
            return status, head, data
        except BaseException:
            self.drop()
            raise

    def drop(self):
        if self.writer is not None:
            self.writer.transport.abort()
        self.writer = None


class SkippingProtocol(asyncio.Protocol):
    """Answers on one connection, keeping each head (and up to 4 KiB of a
    body) and counting the rest of the body away."""

    def __init__(self):
        self.buffer = b""
        self.left = None  # body bytes still to come, None while in a head
        self.head = None
        self.body = b""
        self.waiter = None
        self.done = []

    def data_received(self, data):
        while data:
            if self.left is None:
                self.buffer += data
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                self.head = self.buffer[:end + 4]
                data = self.buffer[end + 4:]
                self.buffer = b""
                match = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", self.head)
                self.left = int(match.group(1)) if match else 0
                self.body = b""
            take = min(self.left, len(data))
            if len(self.body) < 4096:
                self.body += data[:min(take, 4096 - len(self.body))]
            self.left -= take
            data = data[take:]
            if self.left == 0:
                self.done.append((int(self.head.split(b" ", 2)[1]), self.head, self.body))
                self.left = None
                if self.waiter is not None and not self.waiter.done():
                    self.waiter.set_result(None)

    def connection_lost(self, exc):
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionResetError("closed"))

    async def answer(self):
        while not self.done:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        return self.done.pop(0)


class Part3:
    def __init__(self, args):
        self.args = args
        self.stop = asyncio.Event()
        self.abuse = Abuse(args)  # the idlers, as in parts 1 and 2
        self.abuse.stop = self.stop
        self.flood_body = open(args.flood_body, "rb").read()
        self.flood_request = post(args.host, args.port, self.flood_body)
        # Normal batch client.
        ids = HOT_IDS
        calls = [call(k + 1, ids[k::args.batch_calls]) for k in range(args.batch_calls)]
        self.batch_request = post(args.host, args.port, json.dumps(calls, separators=(",", ":")).encode())
        self.batch = {"sent": 0, "outcomes": {}, "late": 0, "latencies_ms": [], "max_ms": 0.0, "errors": {}, "reopens": 0}
        # Flooders.
        self.flood = {"connects": 0, "connect_errors": {}, "sent": 0, "closed_at_once": 0, "answers": {},
                      "max_wait_ms": 0.0, "resent_on_503": 0, "errors": {}}
        # Slow readers.
        self.slow = {"connects": 0, "connect_errors": {}, "batches_sent": 0, "ended": {}, "held_s": [],
                     "no_answer_byte": 0}
        # Pipeliners.
        self.pipe = {"rounds": 0, "calls_answered": 0, "answers": {}, "errors": {}, "round_max_ms": 0.0, "reopens": 0}
        # Poisoned misses and Redis.
        self.redis = {"publishes": [], "hot_entries_set": 0, "errors": {}}
        self.poisoned = {"calls": 0, "outcomes": {}, "max_ms": 0.0, "max_answer_bytes": 0}
        # Probes.
        self.probes = {p: {"ok": 0, "failed": {}, "max_ms": 0.0} for p in ("/healthz", "/readyz", "/metrics")}
        self.samples = []
        self.rss_max_kb = 0

    # -- normal batch client ------------------------------------------------
    async def batch_client(self, kept):
        args = self.args
        limit = args.deadline_ms / 1000.0
        while not self.stop.is_set():
            started = now()
            self.batch["sent"] += 1
            try:
                status, head, data = await kept.exchange(self.batch_request, limit + 10)
                if status == 200:
                    replies = json.loads(data)
                    codes = [str(r["error"]["code"]) for r in replies if "error" in r]
                    outcome = "200 ok" if not codes and len(replies) == args.batch_calls else "200 errors " + ",".join(sorted(set(codes)))
                elif status == 503:
                    outcome = kind_503(head, data)
                else:
                    outcome = f"HTTP {status}"
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, KeyError) as error:
                outcome = "no answer"
                count(self.batch["errors"], type(error).__name__)
            took = now() - started
            count(self.batch["outcomes"], outcome)
            self.batch["latencies_ms"].append(round(took * 1000, 1))
            self.batch["max_ms"] = max(self.batch["max_ms"], round(took * 1000, 1))
            if took > limit:
                self.batch["late"] += 1
            await asyncio.sleep(args.batch_pause_ms / 1000.0)
        self.batch["reopens"] = kept.reopens

    # -- item 1: batch floods ---------------------------------------------
    async def connect(self, tally, rcvbuf=None):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (self.args.host, self.args.port)), 5)
        except (OSError, asyncio.TimeoutError) as error:
            sock.close()
            count(tally["connect_errors"], "timeout" if isinstance(error, asyncio.TimeoutError) else type(error).__name__)
            return None
        tally["connects"] += 1
        return sock

    async def pause(self, ms):
        try:
            await asyncio.wait_for(self.stop.wait(), ms / 1000.0 * random.uniform(0.5, 1.5))
        except asyncio.TimeoutError:
            pass

    async def flooder(self):
        """Connect, send the maximum batch, close at once; again."""
        tally = self.flood
        while not self.stop.is_set():
            sock = await self.connect(tally)
            if sock is None:
                await self.pause(self.args.flood_pause_ms)
                continue
            reader, writer = await asyncio.open_connection(sock=sock)
            try:
                writer.write(self.flood_request)
                tally["sent"] += 1
                await asyncio.wait_for(writer.drain(), 5)
                tally["closed_at_once"] += 1
            except (OSError, asyncio.TimeoutError) as error:
                count(tally["errors"], type(error).__name__)
            finally:
                writer.close()
            await self.pause(self.args.flood_pause_ms)

    async def flood_waiter(self, kept):
        """On a kept connection: the maximum batch, its answer skipped as it
        comes (a protocol that keeps only heads: reading 1.7 MB answers
        through a stream reader would make this client the bottleneck), at
        once again; after a 503 from the full queue, again after
        --flood-pause-ms. Reconnects when the gateway closes the connection."""
        tally = self.flood
        loop = asyncio.get_running_loop()
        sock = kept.sock
        while not self.stop.is_set():
            try:
                if sock is None:
                    kept.reopens += 1
                    sock = await self.connect(tally)
                    if sock is None:
                        await self.pause(self.args.flood_pause_ms)
                        continue
                transport, protocol = await loop.create_connection(SkippingProtocol, sock=sock)
                while not self.stop.is_set():
                    transport.write(self.flood_request)
                    tally["sent"] += 1
                    started = now()
                    status, head, body = await asyncio.wait_for(protocol.answer(), self.args.deadline_ms / 1000.0 + 5)
                    tally["max_wait_ms"] = max(tally["max_wait_ms"], round((now() - started) * 1000, 1))
                    count(tally["answers"], kind_503(head, body) if status == 503 else str(status))
                    if re.search(rb"(?i)\r\nconnection:\s*close", head):
                        break
                    if status == 503:
                        tally["resent_on_503"] += 1
                        await self.pause(self.args.flood_pause_ms)
                transport.abort()
            except (OSError, asyncio.TimeoutError, ValueError) as error:
                count(tally["errors"], type(error).__name__)
                await self.pause(self.args.flood_pause_ms)
            sock = None
            try:
                transport.abort()
            except Exception:  # noqa: BLE001 - best effort
                pass

    # -- item 2: slow readers ---------------------------------------------
    async def slow_reader(self):
        tally = self.slow
        payload = self.flood_request * self.args.slow_batches
        loop = asyncio.get_running_loop()
        while not self.stop.is_set():
            sock = await self.connect(tally, rcvbuf=4096)
            if sock is None:
                await self.pause(self.args.reconnect_delay_ms)
                continue
            sending = asyncio.ensure_future(loop.sock_sendall(sock, payload))
            first_byte = None
            first_status = None
            ended = "still open at the end"
            started = now()
            while not self.stop.is_set():
                await asyncio.sleep(0.05)
                if first_byte is None:
                    try:
                        peeked = sock.recv(12, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                        if peeked:
                            first_byte = now()
                            first_status = peeked[9:12].decode("ascii", "replace")
                    except BlockingIOError:
                        pass
                    except OSError:
                        pass
                state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
                if state != TCP_ESTABLISHED:
                    ended = {7: "reset", 8: "closed (FIN)"}.get(state, f"state {state}")
                    break
                if now() - started > 120:
                    ended = "held 120 s"
                    break
            if not sending.done():
                sending.cancel()
            else:
                if not sending.cancelled() and sending.exception() is None:
                    tally["batches_sent"] += self.args.slow_batches
            count(tally["ended"], ended if first_status in (None, "200") else f"{ended} after {first_status}")
            if ended != "still open at the end" and first_status in (None, "200"):
                if first_byte is None:
                    tally["no_answer_byte"] += 1
                else:
                    tally["held_s"].append(round(now() - first_byte, 2))
            sock.close()
            await self.pause(self.args.reconnect_delay_ms)

    # -- item 7: pipelining -----------------------------------------------
    async def pipeliner(self, kept):
        args = self.args
        one = post(args.host, args.port, json.dumps(call(1, HOT_IDS), separators=(",", ":")).encode())
        n = max(1, (64 * 1024) // len(one))
        chunk = one * n
        tally = self.pipe
        while not self.stop.is_set():
            started = now()
            try:
                if kept.writer is None or kept.writer.is_closing():
                    tally["reopens"] += 1
                    await kept.open()
                kept.writer.write(chunk)
                got = 0
                while got < n:
                    status, head, _ = await read_answer(kept.reader, 10)
                    got += 1
                    count(tally["answers"], str(status))
                    if re.search(rb"(?i)\r\nconnection:\s*close", head):
                        raise ConnectionResetError("closed by the gateway")
                tally["rounds"] += 1
                tally["calls_answered"] += got
                tally["round_max_ms"] = max(tally["round_max_ms"], round((now() - started) * 1000, 1))
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
                count(tally["errors"], type(error).__name__)
                kept.drop()
                await self.pause(200)

    # -- item 4: Redis ----------------------------------------------------
    def key(self, identifier):
        return f"{self.args.redis_prefix}v1:p:{self.args.app}:DE:-:{identifier}"

    async def redis_command(self, conn, *parts):
        reader, writer = conn
        out = [b"*%d\r\n" % len(parts)]
        for part in parts:
            part = part if isinstance(part, bytes) else str(part).encode()
            out.append(b"$%d\r\n" % len(part))
            out.append(part)
            out.append(b"\r\n")
        writer.write(b"".join(out))
        await writer.drain()
        return await self.redis_reply(reader)

    async def redis_reply(self, reader):
        line = await asyncio.wait_for(reader.readline(), 10)
        kind, rest = line[:1], line[1:-2]
        if kind in (b"+", b":"):
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else (await reader.readexactly(n + 2))[:-2]
        if kind == b"*":
            return [await self.redis_reply(reader) for _ in range(int(rest))]
        raise RuntimeError(f"bad reply {line[:40]!r}")

    def entry_value(self):
        return b'{"v":1,"product":"' + b"x" * (self.args.entry_mib * 1024 * 1024) + b'"}'

    async def redis_abuser(self, t0):
        args = self.args
        try:
            conn = await asyncio.open_connection("127.0.0.1", args.redis_port)
        except OSError as error:
            count(self.redis["errors"], type(error).__name__)
            return
        value = self.entry_value()
        keep_ms = int((args.duration + 60) * 1000)
        try:
            for identifier in HOT_IDS:
                await self.redis_command(conn, "SET", self.key(identifier), value, "PX", keep_ms)
                self.redis["hot_entries_set"] += 1
            message = b'{"v":1,"app":"' + args.app.encode() + b'","ids":["' + b"a" * (args.publish_mib * 1024 * 1024) + b'"]}'
            channel = f"{args.redis_prefix}v1:outcomes"
            next_publish = now() + 1.0
            while not self.stop.is_set():
                wait = next_publish - now()
                if wait > 0:
                    try:
                        await asyncio.wait_for(self.stop.wait(), wait)
                        break
                    except asyncio.TimeoutError:
                        pass
                started = now()
                receivers = await self.redis_command(conn, "PUBLISH", channel, message)
                self.redis["publishes"].append({"t_s": round(started - t0, 2), "receivers": int(receivers),
                                                "ms": round((now() - started) * 1000, 1)})
                next_publish += args.publish_every
        except (OSError, RuntimeError, asyncio.TimeoutError, asyncio.IncompleteReadError) as error:
            count(self.redis["errors"], f"{type(error).__name__}: {str(error)[:60]}")
        finally:
            conn[1].close()

    async def poisoned_misses(self, kept):
        args = self.args
        try:
            conn = await asyncio.open_connection("127.0.0.1", args.redis_port)
        except OSError as error:
            count(self.redis["errors"], type(error).__name__)
            return
        value = self.entry_value()
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                ids = [f"poison{int(time.time() * 1000) % 10**9:x}x{n}x{k}" for k in range(2)]
                for identifier in ids:
                    await self.redis_command(conn, "SET", self.key(identifier), value, "PX", 30000)
                request = post(args.host, args.port, json.dumps(call(1, ids), separators=(",", ":")).encode())
                started = now()
                self.poisoned["calls"] += 1
                try:
                    status, _, data = await kept.exchange(request, args.deadline_ms / 1000.0 + 5)
                    reply = json.loads(data)
                    if status != 200:
                        outcome = f"HTTP {status}"
                    elif "error" in reply:
                        outcome = "error " + str((reply["error"].get("data") or {}).get("reason") or reply["error"]["code"])
                    else:
                        outcome = "ok"
                    self.poisoned["max_answer_bytes"] = max(self.poisoned["max_answer_bytes"], len(data))
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
                    outcome = f"no answer ({type(error).__name__})"
                took = round((now() - started) * 1000, 1)
                self.poisoned["max_ms"] = max(self.poisoned["max_ms"], took)
                count(self.poisoned["outcomes"], outcome)
                await self.redis_command(conn, "DEL", *[self.key(i) for i in ids])
                try:
                    await asyncio.wait_for(self.stop.wait(), args.poison_every)
                except asyncio.TimeoutError:
                    pass
        except (OSError, RuntimeError, asyncio.TimeoutError, asyncio.IncompleteReadError) as error:
            count(self.redis["errors"], f"{type(error).__name__}: {str(error)[:60]}")
        finally:
            conn[1].close()

    # -- item 3: probes on the admin listener ---------------------------------
    def status_kb(self, field):
        try:
            with open(f"/proc/{self.args.pid}/status") as status:
                for line in status:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    async def probe(self, path):
        tally = self.probes[path]
        started = now()
        writer = None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.args.host, self.args.admin_port), 2)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.args.host}\r\nConnection: close\r\n\r\n".encode())
            status, _, data = await read_answer(reader, 2 - (now() - started))
            took = round((now() - started) * 1000, 1)
            tally["max_ms"] = max(tally["max_ms"], took)
            if status == 200:
                tally["ok"] += 1
            else:
                count(tally["failed"], str(status))
            return data if status == 200 else None
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
            count(tally["failed"], "timeout" if isinstance(error, asyncio.TimeoutError) else type(error).__name__)
            return None
        finally:
            if writer is not None:
                writer.transport.abort()

    async def prober(self, t0, stop):
        tick = now()
        while not stop.is_set():
            rss = self.status_kb("VmRSS")
            if rss:
                self.rss_max_kb = max(self.rss_max_kb, rss)
            results = await asyncio.gather(*(self.probe(p) for p in self.probes))
            metrics = results[2]
            if metrics is not None:
                values = parse_metrics(metrics.decode("utf-8", "replace"))
                self.samples.append({"t_s": round(now() - t0, 2), "vmrss_kb": rss,
                                     **{k: values.get(k) for k in ("gateway_batches_waiting", "gateway_connections_open",
                                                                   "gateway_connections_rejected_total",
                                                                   "gateway_shared_tier_connections")}})
            tick += self.args.probe_every
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, tick - now()))
            except asyncio.TimeoutError:
                pass


def summary(values):
    if not values:
        return None
    values = sorted(values)
    return {"count": len(values), "p50": values[len(values) // 2], "p99": values[min(len(values) - 1, int(len(values) * 0.99))],
            "max": values[-1]}


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
    parser.add_argument("--ramp", type=float, default=0.5)
    parser.add_argument("--deadline-ms", type=float, default=5000)
    parser.add_argument("--batch-calls", type=int, default=2)
    parser.add_argument("--batch-pause-ms", type=float, default=50)
    parser.add_argument("--flooders", type=int, default=100, help="batch flooders that close at once")
    parser.add_argument("--flood-waiters", type=int, default=100, help="batch flooders on kept connections that read their answers")
    parser.add_argument("--flood-pause-ms", type=float, default=100)
    parser.add_argument("--slow-readers", type=int, default=16)
    parser.add_argument("--slow-batches", type=int, default=4)
    parser.add_argument("--idlers", type=int, default=2000)
    parser.add_argument("--drippers", type=int, default=0)
    parser.add_argument("--reconnect-delay-ms", type=float, default=1000)
    parser.add_argument("--pipeliners", type=int, default=2)
    parser.add_argument("--publish-mib", type=int, default=20)
    parser.add_argument("--publish-every", type=float, default=5)
    parser.add_argument("--entry-mib", type=int, default=16)
    parser.add_argument("--poison-every", type=float, default=2)
    parser.add_argument("--probe-every", type=float, default=0.5)
    args = parser.parse_args()

    sockets = args.flooders + args.flood_waiters + args.slow_readers + args.idlers + args.pipeliners + 64
    limit = raise_nofile(sockets + 256)
    if limit < sockets:
        print(f"abuse3_clients: open-file limit {limit} is too low for {sockets} sockets", file=sys.stderr)
        return 2

    part = Part3(args)
    t0 = now()
    # The kept connections first.
    batch_conn, miss_conn = Kept(args.host, args.port), Kept(args.host, args.port)
    pipes = [Kept(args.host, args.port) for _ in range(args.pipeliners)]
    for kept in [batch_conn, miss_conn] + pipes:
        await kept.open()
    waiters = []
    for _ in range(args.flood_waiters):
        waiter = Kept(args.host, args.port)
        waiter.sock = await part.connect({"connects": 0, "connect_errors": {}})
        waiters.append(waiter)
    probe_stop = asyncio.Event()
    prober = asyncio.ensure_future(part.prober(t0, probe_stop))
    normal = [asyncio.ensure_future(part.batch_client(batch_conn))]
    await asyncio.sleep(args.start_after)

    tasks = [asyncio.ensure_future(part.redis_abuser(t0)), asyncio.ensure_future(part.poisoned_misses(miss_conn))]
    tasks += [asyncio.ensure_future(part.pipeliner(k)) for k in pipes]
    tasks += [asyncio.ensure_future(part.flood_waiter(k)) for k in waiters]
    kinds = ([part.flooder] * args.flooders + [part.slow_reader] * args.slow_readers + [part.abuse.idler] * args.idlers)
    random.shuffle(kinds)
    waves = max(1, int(args.ramp / 0.05))
    per_wave = max(1, -(-len(kinds) // waves))
    for start in range(0, len(kinds), per_wave):
        tasks.extend(asyncio.ensure_future(kind()) for kind in kinds[start:start + per_wave])
        await asyncio.sleep(0.05)
    window_start = now()
    try:
        await asyncio.wait_for(part.stop.wait(), args.duration)
    except asyncio.TimeoutError:
        pass
    window = now() - window_start
    part.stop.set()
    await asyncio.gather(*tasks, *normal, return_exceptions=True)
    probe_stop.set()
    await prober
    for kept in [batch_conn, miss_conn] + pipes:
        kept.drop()

    batch = part.batch
    latencies = batch.pop("latencies_ms")
    batch["latency_ms"] = summary(latencies)
    slow = part.slow
    slow["held_s"] = summary(slow["held_s"])
    waiting = [s["gateway_batches_waiting"] for s in part.samples if s.get("gateway_batches_waiting") is not None]
    print(json.dumps({
        "duration_s": round(window, 2),
        "knobs": {k: v for k, v in vars(args).items() if k not in ("host",)},
        "batch_client": batch,
        "flood": part.flood,
        "slow_readers": slow,
        "pipeliners": part.pipe,
        "idlers": part.abuse.idlers.as_json(),
        "redis": part.redis,
        "poisoned_misses": part.poisoned,
        "probes": part.probes,
        "batches_waiting_max": max(waiting) if waiting else None,
        "rss_max_kb": part.rss_max_kb,
        "samples": part.samples,
        "client_cpu_percent": round(100 * sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) / (now() - STARTED), 1),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
