#!/usr/bin/env python3
"""Writes the bodies of bench/run's batch scenario into a directory.

usage: batch.py DIR MAX_BATCH MAX_IDS MAX_BODY_BYTES

- DIR/batch-upstream.json: an upstream answer (the contract's upstream
  shape) that knows MAX_IDS products, whatever the request asks;
- DIR/batch-request.json: a JSON-RPC batch of MAX_BATCH `products.fetch`
  calls, each asking all MAX_IDS of them. Identifiers are as short as the
  contract allows for that many distinct ones, so the body is far under
  MAX_BODY_BYTES while the answer is the largest the limits allow
  (MAX_BATCH x MAX_IDS products): the worst case of the memory formula.

Prints the two sizes in bytes.
"""
import json
import os
import string
import sys

ALPHABET = string.ascii_letters + string.digits  # 62 one-character ids, then two


def identifiers(count):
    ids = []
    width = 1
    while len(ids) < count:
        for index in range(len(ALPHABET) ** width):
            if len(ids) == count:
                break
            name, rest = "", index
            for _ in range(width):
                name = ALPHABET[rest % len(ALPHABET)] + name
                rest //= len(ALPHABET)
            ids.append(name)
        width += 1
    return ids


def main():
    directory, max_batch, max_ids, max_body = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    ids = identifiers(max_ids)
    items = []
    for index, product in enumerate(ids):
        # Titles and descriptions of a usual store listing's length; every
        # other one a subscription, as in the fixed 5-product body.
        subscription = None
        if index % 2 == 0:
            subscription = {"period": "P1M", "group_id": "premium", "introductory_offer": None, "discount_offer": None}
        items.append({
            "id": product,
            "title": f"Bench product {index}",
            "description": f"Product {index} of the batch scenario, with a description of a usual length",
            "icon_url": None,
            "price": {"amount": f"{index % 50}.99", "currency": "EUR"},
            "subscription": subscription,
        })
    upstream = json.dumps({"country": "DE", "items": items, "not_found": []}, separators=(",", ":"))
    calls = [{"jsonrpc": "2.0", "id": k, "method": "products.fetch",
              "params": {"productIdentifiers": ids, "countryCode": "DE"}} for k in range(1, max_batch + 1)]
    request = json.dumps(calls, separators=(",", ":"))
    if len(request) > max_body:
        sys.exit(f"batch.py: the batch body is {len(request)} bytes, over the {max_body}-byte limit")
    with open(os.path.join(directory, "batch-upstream.json"), "w", encoding="utf-8") as out:
        out.write(upstream)
    with open(os.path.join(directory, "batch-request.json"), "w", encoding="utf-8") as out:
        out.write(request)
    print(len(upstream), len(request))


if __name__ == "__main__":
    main()
