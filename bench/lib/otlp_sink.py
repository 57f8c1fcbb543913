"""An OTLP/HTTP receiver that reads each export and answers 200, keeping
nothing: the collector on loopback of bench/ab's export-on comparison
(bench/README.md). It prints how many exports and bytes it took on exit.

usage: otlp_sink.py PORT
"""
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

totals = {"exports": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        totals["exports"] += 1
        totals["bytes"] += length
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def stop(*_):
    print(f"otlp_sink: {totals['exports']} exports, {totals['bytes']} bytes", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
