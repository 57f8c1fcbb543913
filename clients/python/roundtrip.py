"""The Python client generated from openapi/openapi.yaml, against live gateways.

`.ci/clients` generates the client with openapi-python-client (into
`.build/clients/python`, never committed), starts two gateways on the
embedded catalog and runs this file:

    PYTHONPATH=.build/clients/python GATEWAY_URL=http://127.0.0.1:18281 \
    GATEWAY_KEYED_URL=http://127.0.0.1:18282 GATEWAY_API_KEY=... \
        python clients/python/roundtrip.py

Every documented example of `POST /rpc` is sent (or, for answers the
embedded catalog never gives, decoded), and every answer must parse into the
generated models with the exact values the description documents.
"""

import os
import pathlib
import unittest

import httpx
import yaml

from onside_products_client import AuthenticatedClient, Client
from onside_products_client.api.operations import healthz, metrics, openapi, readyz
from onside_products_client.api.rpc import rpc
from onside_products_client.models import (
    AppNotRegisteredError,
    CancelledError,
    ConnectionError_,
    ErrorResponse,
    HttpError,
    InvalidParamsError,
    InvalidProductIdentifierError,
    JsonRpcVersion,
    NotReady,
    NotReadyStatus,
    Offer,
    OpenRpcMethodParamStructure,
    PeriodUnit,
    ProductsFetchParams,
    ProductsFetchRequest,
    ProductsFetchRequestMethod,
    ProductsFetchSuccess,
    RegionSource,
    RpcDiscoverRequest,
    RpcDiscoverSuccess,
    ServiceUnavailableError,
    StandardError,
    SubscriptionPeriod,
    UpstreamInternalError,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
OPENAPI_FILE = ROOT / "openapi" / "openapi.yaml"
DOCUMENT = yaml.safe_load(OPENAPI_FILE.read_text(encoding="utf-8"))
RPC = DOCUMENT["paths"]["/rpc"]["post"]
REQUESTS = {name: e["value"] for name, e in RPC["requestBody"]["content"]["application/json"]["examples"].items()}
ANSWERS = {name: e["value"] for name, e in RPC["responses"]["200"]["content"]["application/json"]["examples"].items()}

# The request id the documented error examples carry: sent as X-Request-Id,
# it makes the live answers equal to the examples.
EXAMPLE_REQUEST_ID = "5f0e3c9a1b2d4e6f8a7b9c0d1e2f3a4b"

LIVE_REQUESTS = {"explicitCountry", "defaultAssumption", "noRegion", "batch", "discover", "notification"}
LIVE_ANSWERS = {
    "success", "batch", "parseError", "invalidRequest", "emptyBatch", "batchTooLarge",
    "methodNotFound", "invalidParams", "regionUnresolved",
}
# Upstream failures and gateway faults: the embedded catalog never answers them.
DECODED_ONLY_ANSWERS = {
    "internalError": (StandardError, -32603),
    "connectionError": (ConnectionError_, -32001),
    "serviceUnavailable": (ServiceUnavailableError, -32002),
    "appNotRegistered": (AppNotRegisteredError, -32003),
    "invalidProductIdentifier": (InvalidProductIdentifierError, -32004),
    "cancelled": (CancelledError, -32005),
    "upstreamInternalError": (UpstreamInternalError, -32006),
}


def setting(name):
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"{name} is not set: run `bash .ci/clients` from the repository root, which starts the gateways")
    return value


def rewrite(method=None, content_type=None, body=None):
    """An httpx request hook changing what the generated client sends.

    How the tests reach answers to requests that break the HTTP or JSON-RPC
    rules, which the generated models cannot express; the answers still go
    through the generated parsing."""

    def hook(request: httpx.Request):
        if method is not None:
            request.method = method
            if method == "GET":
                request.stream = httpx.ByteStream(b"")
                request.headers.pop("Content-Length", None)
        if content_type is not None:
            request.headers["Content-Type"] = content_type
        if body is not None:
            data = body.encode()
            request.stream = httpx.ByteStream(data)
            request.headers["Content-Length"] = str(len(data))

    return hook


def client(hook=None, url=None, token=None):
    args = {"event_hooks": {"request": [hook]}} if hook else {}
    base_url = url or setting("GATEWAY_URL")
    # /rpc takes an API key when the gateway has keys configured; the
    # generated functions take an AuthenticatedClient for it, and a plain
    # Client works for a gateway without keys.
    if token:
        return AuthenticatedClient(base_url=base_url, token=token, httpx_args=args)
    return Client(base_url=base_url, httpx_args=args)


def request_body(value):
    """A documented request example as the generated models."""
    if isinstance(value, list):
        return [request_body(element) for element in value]
    if value["method"] == "rpc.discover":
        return RpcDiscoverRequest.from_dict(value)
    return ProductsFetchRequest.from_dict(value)


def to_plain(parsed):
    if isinstance(parsed, list):
        return [to_plain(element) for element in parsed]
    return parsed.to_dict()


class ExamplesAreCovered(unittest.TestCase):
    def test_every_example_is_covered(self):
        self.assertEqual(set(REQUESTS), LIVE_REQUESTS)
        self.assertEqual(set(ANSWERS), LIVE_ANSWERS | set(DECODED_ONLY_ANSWERS))

    def test_request_examples_round_trip(self):
        for name, value in REQUESTS.items():
            with self.subTest(name):
                body = request_body(value)
                self.assertEqual(to_plain(body), value)

    def test_error_examples_decode(self):
        for name, (model, code) in DECODED_ONLY_ANSWERS.items():
            with self.subTest(name):
                answer = ErrorResponse.from_dict(ANSWERS[name])
                self.assertIsInstance(answer.error, model)
                self.assertEqual(answer.jsonrpc, JsonRpcVersion.VALUE_0)
                self.assertEqual(int(answer.error.code), code)
                self.assertEqual(answer.to_dict(), ANSWERS[name])
                if model is not StandardError:
                    self.assertEqual(answer.error.data.request_id, EXAMPLE_REQUEST_ID)
                    self.assertEqual(answer.error.data.reason.value, ANSWERS[name]["error"]["data"]["reason"])
                    self.assertIs(answer.error.data.retryable, code in (-32001, -32002, -32005))
        unavailable = ErrorResponse.from_dict(ANSWERS["serviceUnavailable"]).error
        self.assertEqual((unavailable.data.upstream_status, unavailable.data.retry_after_seconds), (503, 5))

    def test_readiness_examples_decode(self):
        examples = DOCUMENT["paths"]["/readyz"]["get"]["responses"]["503"]["content"]["application/json"]["examples"]
        self.assertEqual(NotReady.from_dict(examples["starting"]["value"]).status, NotReadyStatus.STARTING)
        self.assertEqual(NotReady.from_dict(examples["draining"]["value"]).status, NotReadyStatus.DRAINING)


class LiveAnswers(unittest.TestCase):
    def send(self, body, hook=None, request_id=None, **kwargs):
        with client(hook, **kwargs) as c:
            args = {"x_request_id": request_id} if request_id else {}
            return rpc.sync_detailed(client=c, body=body, **args)

    def test_documented_requests_get_the_documented_answers(self):
        for request, answer in [("explicitCountry", "success"), ("noRegion", "regionUnresolved"), ("batch", "batch")]:
            with self.subTest(request):
                response = self.send(request_body(REQUESTS[request]), request_id=EXAMPLE_REQUEST_ID)
                self.assertEqual(response.status_code, 200)
                self.assertEqual(response.headers["X-Request-Id"], EXAMPLE_REQUEST_ID)
                self.assertEqual(to_plain(response.parsed), ANSWERS[answer])

    def test_success_has_the_contract_values(self):
        answer = self.send(request_body(REQUESTS["explicitCountry"])).parsed
        self.assertIsInstance(answer, ProductsFetchSuccess)
        self.assertEqual(answer.id, 1)
        (product,) = answer.result.products
        self.assertEqual(product.product_identifier, "premium_monthly")
        self.assertEqual(product.localized_title, "Premium")
        self.assertEqual(product.localized_description, "All features, billed monthly")
        self.assertEqual(product.icon_url, "https://cdn.example.com/premium.png")
        self.assertEqual((product.price.value, product.price.currency_code), (4.99, "EUR"))
        self.assertIsInstance(product.subscription_period, SubscriptionPeriod)
        self.assertEqual((product.subscription_period.unit, product.subscription_period.number_of_units), (PeriodUnit.MONTH, 1))
        self.assertEqual(product.subscription_group_identifier, "premium")
        self.assertIsInstance(product.introductory_price, Offer)
        self.assertEqual((product.introductory_price.price.value, product.introductory_price.price.currency_code), (0.0, "EUR"))
        self.assertEqual((product.introductory_price.period.unit, product.introductory_price.period.number_of_units), (PeriodUnit.WEEK, 1))
        self.assertIsNone(product.discounted_price)
        self.assertEqual(answer.result.invalid_product_identifiers, ["retired_pack"])
        self.assertEqual((answer.result.region.country_code, answer.result.region.source), ("DE", RegionSource.EXPLICIT))

    def test_string_id_assumed_region_and_language(self):
        body = request_body(REQUESTS["defaultAssumption"])
        body.params.product_identifiers.append("coins_1200")
        answer = self.send(body).parsed
        self.assertIsInstance(answer, ProductsFetchSuccess)
        self.assertEqual(answer.id, "req-2")
        self.assertEqual((answer.result.region.country_code, answer.result.region.source), ("DE", RegionSource.DEFAULTASSUMPTION))
        self.assertEqual([p.localized_title for p in answer.result.products], ["Premium", "1200 Münzen"])
        self.assertEqual(
            [p.localized_description for p in answer.result.products],
            ["Alle Funktionen, monatlich abgerechnet", "Eine Truhe Münzen, 20 % extra"],
        )
        coins = answer.result.products[1]
        self.assertEqual((coins.price.value, coins.price.currency_code), (9.99, "EUR"))
        self.assertEqual(
            (coins.subscription_period, coins.subscription_group_identifier, coins.introductory_price, coins.discounted_price),
            (None, None, None, None),
        )
        self.assertEqual(answer.result.invalid_product_identifiers, [])

    def test_ids_come_back_as_sent(self):
        for id_ in ["1", 1, 1.5]:
            with self.subTest(id_):
                body = ProductsFetchRequest(
                    jsonrpc=JsonRpcVersion.VALUE_0,
                    method=ProductsFetchRequestMethod.PRODUCTS_FETCH,
                    params=ProductsFetchParams(product_identifiers=["coins_100"], country_code="de"),
                    id=id_,
                )
                answer = self.send(body).parsed
                self.assertIsInstance(answer, ProductsFetchSuccess)
                self.assertEqual((answer.id, type(answer.id)), (id_, type(id_)))

    def test_notification_answers_no_content(self):
        response = self.send(request_body(REQUESTS["notification"]), request_id="client-notification")
        self.assertEqual((response.status_code, response.content, response.parsed), (204, b"", None))
        self.assertEqual(response.headers["X-Request-Id"], "client-notification")

    def test_discover_answers_the_openrpc_document(self):
        answer = self.send(request_body(REQUESTS["discover"])).parsed
        self.assertIsInstance(answer, RpcDiscoverSuccess)
        self.assertEqual(answer.id, 13)
        document = answer.result
        self.assertEqual(document.openrpc, "1.3.2")
        self.assertEqual((document.info.title, document.info.version), ("Onside products gateway", "0.1.0"))
        self.assertEqual([m.name for m in document.methods], ["products.fetch", "rpc.discover"])
        fetch, discover = document.methods
        self.assertEqual(fetch.param_structure, OpenRpcMethodParamStructure.BY_NAME)
        self.assertEqual(
            [(p.name, p.required) for p in fetch.params],
            [("productIdentifiers", True), ("countryCode", False), ("defaultCountryCodeAssumption", False), ("language", False)],
        )
        self.assertEqual(fetch.result.name, "ProductsFetchResult")
        self.assertEqual([e.code for e in fetch.errors], [-32602, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006])
        self.assertEqual(
            [(e.data["reason"], e.data["retryable"]) for e in fetch.errors if e.code <= -32001 and e.code >= -32006],
            [("connectionError", True), ("serviceUnavailable", True), ("appNotRegistered", False),
             ("invalidProductIdentifier", False), ("cancelled", True), ("internalError", False)],
        )
        self.assertEqual((discover.params, discover.result.name), ([], "OpenRpcDocument"))
        # The schemas are the OpenAPI description's own.
        schemas = document.components.schemas.additional_properties
        for name, schema in schemas.items():
            self.assertEqual(schema, DOCUMENT["components"]["schemas"][name], name)

    def test_broken_bodies_get_the_documented_errors(self):
        for answer, body in [
            ("parseError", '{"jsonrpc":"2.0","method":"products.fetch"'),
            ("invalidRequest", '{"jsonrpc":"1.0","method":"products.fetch","id":null}'),
            ("methodNotFound", '{"jsonrpc":"2.0","method":"products.list","params":{"productIdentifiers":["premium_monthly"]},"id":4}'),
        ]:
            with self.subTest(answer):
                response = self.send(request_body(REQUESTS["explicitCountry"]), hook=rewrite(body=body))
                self.assertIsInstance(response.parsed, ErrorResponse)
                self.assertEqual(response.parsed.to_dict(), ANSWERS[answer])

    def test_batch_errors(self):
        empty = self.send([]).parsed
        self.assertIsInstance(empty, ErrorResponse)
        self.assertEqual(empty.to_dict(), ANSWERS["emptyBatch"])
        too_large = self.send([request_body(REQUESTS["explicitCountry"])] * 51).parsed
        self.assertIsInstance(too_large, ErrorResponse)
        self.assertEqual(too_large.to_dict(), ANSWERS["batchTooLarge"])

    def test_unassigned_country_is_the_documented_invalid_params(self):
        body = ProductsFetchRequest(
            jsonrpc=JsonRpcVersion.VALUE_0,
            method=ProductsFetchRequestMethod.PRODUCTS_FETCH,
            params=ProductsFetchParams(product_identifiers=["premium_monthly"], country_code="XX"),
            id=5,
        )
        answer = self.send(body, request_id=EXAMPLE_REQUEST_ID).parsed
        self.assertIsInstance(answer, ErrorResponse)
        self.assertIsInstance(answer.error, InvalidParamsError)
        self.assertEqual(answer.error.data.param, "countryCode")
        self.assertEqual(answer.to_dict(), ANSWERS["invalidParams"])

    def http_example(self, status):
        return RPC["responses"][status]["content"]["application/json"]["example"]

    def test_missing_api_key_is_the_documented_401(self):
        keyed = setting("GATEWAY_KEYED_URL")
        response = self.send(request_body(REQUESTS["explicitCountry"]), url=keyed)
        self.assertEqual(response.status_code, 401)
        self.assertIsInstance(response.parsed, HttpError)
        self.assertEqual(response.parsed.to_dict(), self.http_example("401"))
        self.assertEqual(response.headers["WWW-Authenticate"], 'Bearer realm="products-gateway"')
        with_key = self.send(request_body(REQUESTS["explicitCountry"]), url=keyed, token=setting("GATEWAY_API_KEY"))
        self.assertIsInstance(with_key.parsed, ProductsFetchSuccess)

    def test_http_refusals_are_the_documented_ones(self):
        identifiers = [f"product_identifier_{n}" for n in range(3000)]
        big = ProductsFetchRequest(
            jsonrpc=JsonRpcVersion.VALUE_0,
            method=ProductsFetchRequestMethod.PRODUCTS_FETCH,
            params=ProductsFetchParams(product_identifiers=identifiers, country_code="DE"),
            id=1,
        )
        example = request_body(REQUESTS["explicitCountry"])
        for status, body, hook in [
            ("405", example, rewrite(method="GET")),
            ("413", big, None),
            ("415", example, rewrite(content_type="text/plain")),
        ]:
            with self.subTest(status):
                response = self.send(body, hook=hook)
                self.assertEqual(response.status_code, int(status))
                self.assertIsInstance(response.parsed, HttpError)
                self.assertEqual(response.parsed.to_dict(), self.http_example(status))
                if status == "405":
                    self.assertEqual(response.headers["Allow"], "POST")

    def test_operations_endpoints(self):
        self.assertIsInstance(self.send(request_body(REQUESTS["explicitCountry"])).parsed, ProductsFetchSuccess)
        with client() as c:
            health = healthz.sync_detailed(client=c)
            ready = readyz.sync_detailed(client=c)
            text = metrics.sync_detailed(client=c)
            document = openapi.sync_detailed(client=c)
        self.assertEqual(health.parsed.to_dict(), {"status": "ok"})
        self.assertEqual(ready.parsed.to_dict(), {"status": "ready"})
        self.assertRegex(text.parsed, r'(?m)^gateway_rpc_requests_total\{method="products\.fetch",outcome="ok"\} [1-9][0-9]*$')
        # application/yaml is read as text: the file, byte for byte.
        self.assertEqual(document.parsed, OPENAPI_FILE.read_text(encoding="utf-8"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
