#!/usr/bin/env python3
"""Abusive clients for bench/abuse, and a monitor of the gateway under them.

Two kinds of sockets, each reconnecting (after --reconnect-delay-ms, with
jitter) whenever the gateway closes it:

- drippers: send a request (head, then body) one byte every --drip-interval
  seconds and wait for whatever the gateway answers (a 408 once its read
  timeout has passed since the first byte);
- idlers: connect and send nothing (the gateway closes them after its idle
  timeout, or at once with a 503 when it is full).

The monitor opens one keep-alive connection for /metrics before any abuser
connects (so it holds a slot under the connection cap) and, every
--sample-every seconds, reads in one go: the kernel's view of the gateway's
port (ESTABLISHED sockets with that source port, and those among them held
by the gateway process, from `ss -tanp`), the scrape (gateway_connections_open,
gateway_connections_rejected_total), the gateway's socket descriptors
(/proc/PID/fd) and RSS. It also measures the gateway's CPU time over the
abuse window (/proc/PID/stat utime + stime).

After --duration seconds every abuser closes; the monitor then waits (at
most --settle seconds) for the gateway's gauge to come back to what the
kernel shows, and scrapes once more.

Prints one JSON object on stdout. Standard library only.

Usage: abuse_clients.py --host H --port P --pid GATEWAY_PID [options]
"""
import argparse
import asyncio
import json
import os
import random
import re
import resource
import signal
import socket
import sys
import time

REQUEST_BODY = (
    b'{"jsonrpc":"2.0","id":1,"method":"products.fetch","params":{"productIdentifiers":'
    b'["premium_monthly","premium_yearly","coins_100","coins_1200","remove_ads"],"countryCode":"DE"}}'
)


def now():
    return time.monotonic()


STARTED = now()


class Tally:
    """What one kind of abuser saw."""

    def __init__(self):
        self.connects = 0
        self.connect_errors = 0
        self.statuses = {}  # "408" -> count
        self.closed_silently = 0  # EOF with no answer (idle timeout, drain)
        self.resets = 0  # reset or broken pipe
        self.bytes_sent = 0
        self.open_now = 0
        self.open_peak = 0
        self.errors = {}  # connect error name -> count

    def opened(self):
        self.connects += 1
        self.open_now += 1
        self.open_peak = max(self.open_peak, self.open_now)

    def closed(self):
        self.open_now -= 1

    def answered(self, data):
        match = re.match(rb"HTTP/1\.[01] (\d{3})", data)
        key = match.group(1).decode() if match else "garbage"
        self.statuses[key] = self.statuses.get(key, 0) + 1

    def as_json(self):
        return {
            "connects": self.connects,
            "connect_errors": self.connect_errors,
            "connect_error_kinds": self.errors,
            "answers": dict(sorted(self.statuses.items())),
            "closed_without_answer": self.closed_silently,
            "resets": self.resets,
            "bytes_sent": self.bytes_sent,
            "open_at_end": self.open_now,
            "open_peak": self.open_peak,
        }


class Abuse:
    def __init__(self, args):
        self.args = args
        self.stop = asyncio.Event()
        self.drippers = Tally()
        self.idlers = Tally()
        self.head = (
            f"POST /rpc HTTP/1.1\r\nHost: {args.host}:{args.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(REQUEST_BODY)}\r\n\r\n"
        ).encode() + REQUEST_BODY

    async def pause(self):
        delay = self.args.reconnect_delay_ms / 1000.0
        if delay > 0:
            try:
                await asyncio.wait_for(self.stop.wait(), delay * random.uniform(0.5, 1.5))
            except asyncio.TimeoutError:
                pass

    async def connect(self, tally):
        # The socket is ours, so a connect that times out is closed for sure
        # (a wait_for around open_connection can lose a connection that
        # completes just as the timeout fires, and leave it open).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        connecting = asyncio.ensure_future(asyncio.get_running_loop().sock_connect(sock, (self.args.host, self.args.port)))
        stopped = asyncio.ensure_future(self.stop.wait())
        try:
            # At most 10 s (a full accept queue drops SYNs), and no longer
            # than the run.
            await asyncio.wait({connecting, stopped}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if not connecting.done():
                connecting.cancel()
                sock.close()
                if self.stop.is_set():
                    return None
                raise asyncio.TimeoutError()
            connecting.result()
            reader, writer = await asyncio.open_connection(sock=sock)
        except (OSError, asyncio.TimeoutError) as error:
            sock.close()
            tally.connect_errors += 1
            name = "timeout" if isinstance(error, asyncio.TimeoutError) or not error.errno else os.strerror(error.errno)
            tally.errors[name] = tally.errors.get(name, 0) + 1
            return None
        tally.opened()
        return reader, writer

    @staticmethod
    def close(writer):
        try:
            writer.transport.abort() if writer.transport.is_closing() else writer.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass

    async def dripper(self):
        tally = self.drippers
        while not self.stop.is_set():
            pair = await self.connect(tally)
            if pair is None:
                await self.pause()
                continue
            reader, writer = pair
            read = asyncio.ensure_future(reader.read(4096))
            stopped = asyncio.ensure_future(self.stop.wait())
            sent = 0
            try:
                while True:
                    if sent < len(self.head):
                        writer.write(self.head[sent:sent + 1])
                        sent += 1
                        tally.bytes_sent += 1
                    done, _ = await asyncio.wait({read, stopped}, timeout=self.args.drip_interval,
                                                 return_when=asyncio.FIRST_COMPLETED)
                    if stopped in done:
                        break
                    if read in done:
                        data = read.result()
                        if data:
                            tally.answered(data)
                        else:
                            tally.closed_silently += 1
                        break
            except (ConnectionError, OSError):
                tally.resets += 1
            finally:
                for future in (read, stopped):
                    if not future.done():
                        future.cancel()
                    elif not future.cancelled():
                        future.exception()  # retrieved, so asyncio does not warn
                self.close(writer)
                tally.closed()
            await self.pause()

    async def idler(self):
        tally = self.idlers
        while not self.stop.is_set():
            pair = await self.connect(tally)
            if pair is None:
                await self.pause()
                continue
            reader, writer = pair
            read = asyncio.ensure_future(reader.read(4096))
            stopped = asyncio.ensure_future(self.stop.wait())
            try:
                done, _ = await asyncio.wait({read, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if read in done:
                    try:
                        data = read.result()
                    except (ConnectionError, OSError):
                        tally.resets += 1
                    else:
                        if data:
                            tally.answered(data)
                        else:
                            tally.closed_silently += 1
            finally:
                for future in (read, stopped):
                    if not future.done():
                        future.cancel()
                    elif not future.cancelled():
                        future.exception()
                self.close(writer)
                tally.closed()
            await self.pause()


class Monitor:
    """One keep-alive connection for /metrics, and the kernel's and /proc's views."""

    def __init__(self, args):
        self.args = args
        self.reader = None
        self.writer = None
        self.samples = []
        self.scrape_failures = 0
        self.reconnects = 0
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.lock = asyncio.Lock()

    async def open(self):
        self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(self.args.host, self.args.port), 5)

    async def get(self, path, body=None):
        """(status, body) of one GET (a POST with `body`) on the kept
        connection; reopened (once) when the gateway closed it. None when that
        fails too: a new connection may wait in a full accept queue."""
        async with self.lock:
            for attempt in range(2):
                try:
                    if self.writer is None or self.writer.is_closing():
                        if self.writer is not None or attempt > 0:
                            self.reconnects += 1
                        await self.open()
                    if body is None:
                        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.args.host}\r\n\r\n".encode())
                    else:
                        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.args.host}\r\nContent-Type: application/json\r\n"
                                          f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                    head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 5)
                    length = int(re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head).group(1))
                    body = await asyncio.wait_for(self.reader.readexactly(length), 5)
                    if re.search(rb"(?i)\r\nconnection:\s*close", head):
                        self.writer.close()
                        self.writer = None
                    return int(head.split(b" ", 2)[1]), body
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, AttributeError, ValueError):
                    if self.writer is not None:
                        self.writer.transport.abort()
                    self.writer = None
            return None

    async def keep_alive(self, stop):
        """A request every second, so the gateway's idle timeout never closes
        the monitor's connection (a new one would queue behind the abusers)."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                await self.get("/healthz")

    async def miss(self):
        """One products.fetch of 5 new identifiers (a cache miss: the gateway
        must reach the upstream) on the kept connection: "ok", or the error."""
        stamp = f"abuse{int(time.time() * 1000):x}{random.randrange(1 << 16):x}"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "products.fetch", "params": {
            "productIdentifiers": [f"{stamp}_{k}" for k in range(5)], "countryCode": "DE"}}).encode()
        started = now()
        answer = await self.get("/rpc", body)
        took = round(now() - started, 3)
        if answer is None:
            return {"outcome": "no answer", "seconds": took}
        try:
            reply = json.loads(answer[1])
        except ValueError:
            return {"outcome": f"HTTP {answer[0]}", "seconds": took}
        if "error" in reply:
            error = reply["error"]
            return {"outcome": (error.get("data") or {}).get("reason") or str(error.get("code")),
                    "message": error.get("message"), "seconds": took}
        return {"outcome": "ok", "seconds": took}

    async def scrape(self):
        """gateway_* values from /metrics on the kept connection."""
        answer = await self.get("/metrics")
        if answer is None or answer[0] != 200:
            self.scrape_failures += 1
            return None
        return parse_metrics(answer[1].decode("utf-8", "replace"))

    async def kernel(self):
        """(ESTABLISHED sockets with the gateway's port as source, those held by the gateway)."""
        try:
            process = await asyncio.create_subprocess_exec(
                "ss", "-H", "-tanp", "state", "established", f"( sport = :{self.args.port} )",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
            out, _ = await process.communicate()
        except OSError:
            return None, None
        lines = [line for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
        held = sum(1 for line in lines if f"pid={self.args.pid}," in line)
        return len(lines), held

    def fds(self):
        """(descriptors, sockets among them) of the gateway, from /proc/PID/fd."""
        try:
            names = os.listdir(f"/proc/{self.args.pid}/fd")
        except OSError:
            return None, None
        sockets = 0
        for name in names:
            try:
                if os.readlink(f"/proc/{self.args.pid}/fd/{name}").startswith("socket:"):
                    sockets += 1
            except OSError:
                pass
        return len(names), sockets

    def status_kb(self, field):
        try:
            with open(f"/proc/{self.args.pid}/status") as status:
                for line in status:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def cpu_seconds(self):
        try:
            with open(f"/proc/{self.args.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / self.ticks  # utime, stime
        except (OSError, IndexError, ValueError):
            return None

    async def sample(self, t0, label, attempts=3):
        """One sample; taken again (up to `attempts` in all, 0.2 s apart) while
        the gauge and the kernel disagree: a burst of closes (the drippers'
        408s all fall due together) and the refill behind it can land between
        the reads. A gauge that is really off stays off."""
        earlier = []
        for attempt in range(1, attempts + 1):
            sample = await self.read_once(t0, label)
            if agrees(sample) is not False or attempt == attempts:
                break
            earlier.append({k: sample.get(k) for k in ("t_s", "connections_open", "kernel_held_by_gateway", "process_open_fds", "gateway_fds")})
            await asyncio.sleep(0.2)
        if earlier:
            sample["disagreed_first"] = earlier
        self.samples.append(sample)
        return sample

    async def read_once(self, t0, label):
        established_before, held_before = await self.kernel()
        metrics = await self.scrape() if self.args.scrape else None
        established_after, held_after = await self.kernel()
        fds, sockets = self.fds()
        sample = {
            "label": label,
            "t_s": round(now() - t0, 2),
            "kernel_established": [established_before, established_after],
            "kernel_held_by_gateway": [held_before, held_after],
            "gateway_fds": fds,
            "gateway_fd_sockets": sockets,
            "vmrss_kb": self.status_kb("VmRSS"),
        }
        if metrics is not None:
            sample["connections_open"] = metrics.get("gateway_connections_open")
            sample["connections_rejected_total"] = metrics.get("gateway_connections_rejected_total")
            sample["process_open_fds"] = metrics.get("process_open_fds")
        return sample


def agrees(sample, margin=0.05):
    """None when there is nothing to compare; else whether the gauge is
    within 2 + margin of one of the two kernel reads around the scrape."""
    gauge = sample.get("connections_open")
    held = [h for h in sample["kernel_held_by_gateway"] if h is not None]
    if gauge is None or not held:
        return None
    return min(abs(gauge - h) for h in held) <= 2 + margin * min(held)


def parse_metrics(text):
    values = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        name = parts[0].split("{", 1)[0]
        try:
            values[name] = values.get(name, 0) + float(parts[-1])
        except ValueError:
            pass
    return values


def raise_nofile(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the gateway's process id")
    parser.add_argument("--drippers", type=int, default=500)
    parser.add_argument("--idlers", type=int, default=2000)
    parser.add_argument("--duration", type=float, default=30, help="seconds of abuse, after the ramp")
    parser.add_argument("--start-after", type=float, default=0, help="seconds to wait before the first abuser connects")
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds over which the abusers connect")
    parser.add_argument("--drip-interval", type=float, default=1.0, help="seconds between two dripped bytes")
    parser.add_argument("--reconnect-delay-ms", type=float, default=1000, help="mean pause before reconnecting (jitter 0.5x-1.5x)")
    parser.add_argument("--sample-every", type=float, default=5)
    parser.add_argument("--settle", type=float, default=10, help="most seconds to wait for the gauge once the abusers closed")
    parser.add_argument("--no-scrape", dest="scrape", action="store_false", help="never ask /metrics (the gateway may be out of descriptors)")
    args = parser.parse_args()

    limit = raise_nofile(args.drippers + args.idlers + 256)
    if limit < args.drippers + args.idlers + 32:
        print(f"abuse_clients: open-file limit {limit} is too low for {args.drippers + args.idlers} sockets", file=sys.stderr)
        return 2

    monitor = Monitor(args)
    if args.scrape:
        try:
            await monitor.open()
        except OSError as error:
            print(f"abuse_clients: cannot connect to the gateway: {error}", file=sys.stderr)
            return 1
    t0 = now()
    await monitor.sample(t0, "before")
    monitor_stop = asyncio.Event()
    keeper = asyncio.ensure_future(monitor.keep_alive(monitor_stop)) if args.scrape else None

    loop = asyncio.get_running_loop()
    abuse = Abuse(args)
    interrupted = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda: (interrupted.append(True), abuse.stop.set()))

    if args.start_after > 0:
        await asyncio.sleep(args.start_after)

    tasks = []
    kinds = [abuse.dripper] * args.drippers + [abuse.idler] * args.idlers
    random.shuffle(kinds)
    waves = max(1, int(args.ramp / 0.05))
    per_wave = -(-len(kinds) // waves)
    ramp_started = now()
    for start in range(0, len(kinds), per_wave):
        tasks.extend(asyncio.ensure_future(kind()) for kind in kinds[start:start + per_wave])
        await asyncio.sleep(0.05)
    window_start = now()
    cpu_start = monitor.cpu_seconds()

    deadline = window_start + args.duration
    next_sample = window_start + min(args.sample_every, args.duration / 2)
    while not abuse.stop.is_set() and now() < deadline:
        wait = min(deadline, next_sample) - now()
        if wait > 0:
            try:
                await asyncio.wait_for(abuse.stop.wait(), wait)
            except asyncio.TimeoutError:
                pass
        if now() >= next_sample and now() < deadline - 0.5:
            await monitor.sample(t0, "load")
            next_sample += args.sample_every
    cpu_end = monitor.cpu_seconds()
    window = now() - window_start
    await monitor.sample(t0, "end of load")
    miss = await monitor.miss() if args.scrape else None

    abuse.stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    closed_at = now()

    # Once every abuser closed, the gauge should come back to what the
    # kernel shows (the monitor's own connection, and whatever else is open).
    # Connections the abusers left in the accept queue are accepted, read to
    # their end and closed only now, so wait until the gauge and both kernel
    # reads say 1 (the monitor's own connection); failing that, until the
    # settle time is up, and call it settled when the last three samples
    # agreed on one value.
    settled = None
    if args.scrape and not interrupted:
        agreed = []
        while True:
            sample = await monitor.sample(t0, "after close", attempts=1)
            held = sample["kernel_held_by_gateway"]
            current = sample.get("connections_open")
            if current is not None and held[0] is not None and held[0] == held[1] == current:
                agreed.append(current)
            else:
                agreed = []
            if agreed and agreed[-1] == 1:
                settled = round(now() - closed_at, 2)
                break
            if now() - closed_at > args.settle:
                if len(agreed) >= 3 and len(set(agreed[-3:])) == 1:
                    settled = round(now() - closed_at, 2)
                break
            await asyncio.sleep(0.5)
    elif not interrupted:
        await asyncio.sleep(min(2.0, args.settle))
        await monitor.sample(t0, "after close")

    monitor_stop.set()
    if keeper is not None:
        await keeper
    print(json.dumps({
        "drippers": args.drippers,
        "idlers": args.idlers,
        "duration_s": round(window, 2),
        "ramp_s": round(window_start - ramp_started, 2),
        "reconnect_delay_ms": args.reconnect_delay_ms,
        "drip_interval_s": args.drip_interval,
        "nofile": limit,
        "gateway_cpu_s": None if cpu_start is None or cpu_end is None else round(cpu_end - cpu_start, 3),
        "gateway_cpu_percent": None if cpu_start is None or cpu_end is None or window <= 0
        else round(100.0 * (cpu_end - cpu_start) / window, 1),
        "dripper": abuse.drippers.as_json(),
        "idler": abuse.idlers.as_json(),
        "samples": monitor.samples,
        "scrape_failures": monitor.scrape_failures,
        "monitor_reconnects": monitor.reconnects,
        "miss_under_load": miss,
        "client_cpu_percent": round(100 * sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) / (now() - STARTED), 1),
        "gauge_settled_after_s": settled,
    }))
    if monitor.writer is not None:
        monitor.writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
