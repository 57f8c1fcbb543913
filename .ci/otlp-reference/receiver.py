"""An OTLP/HTTP trace receiver that decodes with OpenTelemetry's own
protobuf definitions (the opentelemetry-proto package): protobuf bodies as
ExportTraceServiceRequest, OTLP/JSON bodies by the OTLP JSON rules (hex ids,
then protobuf's JSON mapping), strictly: a body that does not decode is
answered 400 and recorded as an error. Each span is written as one JSON
line to the output file.

usage: receiver.py PORT_FILE OUTPUT_FILE
"""
import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

port_file, output_file = sys.argv[1], sys.argv[2]
lock = threading.Lock()


def hex_ids_to_base64(value):
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping reads bytes as base64."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str):
                out[key] = base64.b64encode(bytes.fromhex(item)).decode() if item else ""
            else:
                out[key] = hex_ids_to_base64(item)
        return out
    if isinstance(value, list):
        return [hex_ids_to_base64(item) for item in value]
    return value


def attributes(key_values):
    result = {}
    for kv in key_values:
        which = kv.value.WhichOneof("value")
        result[kv.key] = getattr(kv.value, which) if which else None
    return result


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        content_type = self.headers.get("Content-Type", "")
        request = ExportTraceServiceRequest()
        try:
            if content_type == "application/x-protobuf":
                request.ParseFromString(body)
                protocol = "protobuf"
            elif content_type == "application/json":
                json_format.Parse(json.dumps(hex_ids_to_base64(json.loads(body))), request)
                protocol = "json"
            else:
                raise ValueError(f"unexpected Content-Type {content_type!r}")
        except Exception as error:  # recorded, and refused
            with lock, open(output_file, "a", encoding="utf-8") as out:
                out.write(json.dumps({"error": str(error), "path": self.path}) + "\n")
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        lines = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append({
                        "protocol": protocol,
                        "path": self.path,
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                        "traceId": span.trace_id.hex(),
                        "spanId": span.span_id.hex(),
                        "parentSpanId": span.parent_span_id.hex(),
                        "traceState": span.trace_state,
                        "name": span.name,
                        "kind": span.kind,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "attributes": attributes(span.attributes),
                        "links": [{"traceId": link.trace_id.hex(), "spanId": link.span_id.hex()} for link in span.links],
                        "status": span.status.code,
                        "flags": span.flags,
                    })
        with lock, open(output_file, "a", encoding="utf-8") as out:
            for line in lines:
                out.write(json.dumps(line) + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file, "w", encoding="utf-8") as out:
    out.write(str(server.server_address[1]))
server.serve_forever()
