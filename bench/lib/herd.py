#!/usr/bin/env python3
"""The herd: N identical products.fetch calls in flight at once.

Opens N keep-alive connections first, waits until every one is connected,
then writes the same request on all of them at once and reads every answer.
Prints one JSON object: how many were sent, answered 200 with all products,
failed, and the time from the first write to the last answer.

Usage: herd.py HOST PORT BODY_FILE [CALLS] [EXPECTED_PRODUCTS]
Standard library only (asyncio, raw HTTP/1.1), so it runs anywhere python3 does.
"""
import asyncio
import json
import sys
import time


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return status, body


async def main():
    host, port, body_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    calls = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    expected = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    body = open(body_file, "rb").read()
    request = (
        f"POST /rpc HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body

    # Connect everyone first (in waves, so the listen backlog never overflows).
    connections = []
    wave = 200
    for start in range(0, calls, wave):
        batch = await asyncio.gather(
            *(asyncio.open_connection(host, port) for _ in range(start, min(calls, start + wave))),
            return_exceptions=True,
        )
        connections.extend(batch)
    connected = [c for c in connections if not isinstance(c, BaseException)]
    if len(connected) < calls:
        print(json.dumps({"calls": calls, "connected": len(connected), "error": "could not open every connection"}))
        return 1

    go = asyncio.Event()
    finished = []

    async def one(reader, writer):
        await go.wait()
        writer.write(request)
        try:
            await writer.drain()
            status, answer = await asyncio.wait_for(read_response(reader), 30)
        except Exception as error:  # noqa: BLE001 - counted as a failure
            finished.append((time.perf_counter(), False, repr(error)))
            return
        ok = False
        detail = ""
        try:
            result = json.loads(answer)["result"]
            ok = status == 200 and len(result["products"]) == expected
        except Exception:  # noqa: BLE001
            detail = answer[:200].decode("utf-8", "replace")
        finished.append((time.perf_counter(), ok, detail))
        writer.close()

    tasks = [asyncio.create_task(one(r, w)) for r, w in connected]
    await asyncio.sleep(0.2)  # every task is parked on the event
    started = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    times = sorted(t - started for t, _, _ in finished)
    failures = [d for _, ok, d in finished if not ok]
    print(json.dumps({
        "calls": calls,
        "connected": len(connected),
        "ok": calls - len(failures),
        "failed": len(failures),
        "first_failure": failures[0] if failures else None,
        "first_answer_ms": round(times[0] * 1000, 1),
        "median_answer_ms": round(times[len(times) // 2] * 1000, 1),
        "last_answer_ms": round(times[-1] * 1000, 1),
    }))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
