import sys

from onside_products_client import Client
from onside_products_client.api.rpc import rpc
from onside_products_client.models import ProductsFetchRequest, ProductsFetchSuccess

# Fetch two products for Germany from a gateway (the first argument, or a local one).
call = ProductsFetchRequest.from_dict({"jsonrpc": "2.0", "method": "products.fetch", "id": 1,
    "params": {"productIdentifiers": ["premium_monthly", "retired_pack"], "countryCode": "DE"}})
with Client(base_url=sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080") as gateway:
    answer = rpc.sync(client=gateway, body=call)
if isinstance(answer, ProductsFetchSuccess):
    for product in answer.result.products:
        print(product.localized_title, product.price.value, product.price.currency_code)
    print("unknown:", answer.result.invalid_product_identifiers)
else:
    print("not a success:", answer)
