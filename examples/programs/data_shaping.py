# Shape data with comprehensions and the standard library; only the answer goes back to the model.
import collections
import json
import statistics
from typing import Any

orders: list[dict[str, Any]] = [
    {"customer": "ada", "item": "keyboard", "price": 49.5},
    {"customer": "bob", "item": "mouse", "price": 19.0},
    {"customer": "ada", "item": "monitor", "price": 189.0},
    {"customer": "cy", "item": "mouse", "price": 19.0},
    {"customer": "bob", "item": "cable", "price": 5.5},
]
by_customer = collections.defaultdict(list)
for order in orders:
    by_customer[order["customer"]].append(order["price"])
totals = {name: round(sum(prices), 2) for name, prices in sorted(by_customer.items())}
popular = collections.Counter(order["item"] for order in orders).most_common(1)[0]
print(json.dumps(totals, sort_keys=True))
print("most popular:", popular[0], "x", popular[1])
print("median price:", statistics.median(order["price"] for order in orders))
return {"totals": totals, "top_customer": max(totals, key=lambda name: totals[name])}
