"""The benchmark workloads: one program text per workload, run unchanged (bar its wrapper) by every peer.

A workload's ``body`` is written the way a model writes a ``run_code`` program: the body of an async
function that calls tools as ``await tools.NAME(key=value)`` and ends with ``return``. Peers that have
no ``async`` (RestrictedPython refuses ``async def``, smolagents' interpreter has no ``await``) run
``sync_body`` instead: the same program with plain calls, or ``None`` when the workload only means
something with concurrency (then the peer reports "n/a" with the reason). Each peer wraps the body in
its own function (see :mod:`bench.peers`); nothing else about the program changes.

Host tools are deterministic and in-memory, so a workload measures the executor and its host-call path,
never the tools: ``add`` and ``sleep`` (both ways: coroutine and plain function) and the three tools of
the realistic program. Every workload states its expected value, and every peer's answer is checked
against it, so a fast wrong answer never counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = (
    "ASYNC_TOOLS",
    "COMPUTE",
    "SYNC_TOOLS",
    "TOOL_NAMES",
    "WORKLOADS",
    "Workload",
    "by_name",
)

Kind = Literal["trivial", "compute", "host-calls", "parallel", "realistic"]


@dataclass(frozen=True)
class Workload:
    """One program: ``body`` (async form), ``sync_body`` (or None: needs concurrency), ``expected``."""

    name: str
    kind: Kind
    body: str
    sync_body: str | None
    expected: Any
    summary: str
    #: Host calls the program makes (for per-call figures).
    calls: int = 0


def _sync(body: str) -> str:
    return body.replace("await ", "")


def _fib(n: int) -> int:
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def _compute(name: str, body: str, expected: Any, summary: str) -> Workload:
    return Workload(name, "compute", body, body, expected, summary)


_LOOP = """\
total = 0
for i in range(100000):
    total += i * i % 7
return total
"""

_RECURSION = """\
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
return fib(19)
"""

_SORT = """\
xs = [(i * 7919) % 10007 for i in range(30000)]
ascending = sorted(xs)
by_key = sorted(xs, key=lambda v: -v)
return [ascending[100], by_key[100], len(ascending)]
"""

_STRINGS = """\
parts = []
for i in range(30000):
    parts.append(f"{i}:{i % 13}")
text = ",".join(parts)
return [len(text), text[:20]]
"""

_DICTS = """\
counts = {}
for i in range(40000):
    key = "k" + str(i % 1000)
    counts[key] = counts.get(key, 0) + i
return [len(counts), counts["k7"], sum(counts.values())]
"""

_SEQUENTIAL = """\
total = 0
for i in range(1000):
    reply = await tools.add(a=i, b=1)
    total += reply["sum"]
return total
"""

_PARALLEL = """\
import asyncio
replies = await asyncio.gather(*[tools.sleep(ms=50) for _ in range(100)])
return sum(reply["slept_ms"] for reply in replies)
"""

_REALISTIC = """\
import asyncio
orders = (await tools.list_orders(status="open"))["orders"]
ids = sorted({order["customer_id"] for order in orders})
customers = await asyncio.gather(*[tools.get_customer(id=cid) for cid in ids])
regions = {customer["id"]: customer["region"] for customer in customers}
totals = {}
for order in orders:
    region = regions[order["customer_id"]]
    totals[region] = totals.get(region, 0) + order["amount"]
for region in sorted(totals):
    print(f"{region}: {totals[region]}")
await tools.save_report(title="open orders by region", rows=[[r, totals[r]] for r in sorted(totals)])
return {"regions": len(totals), "orders": len(orders), "customers": len(ids)}
"""

_REALISTIC_SYNC = _REALISTIC.replace("import asyncio\n", "").replace(
    "await asyncio.gather(*[tools.get_customer(id=cid) for cid in ids])",
    "[tools.get_customer(id=cid) for cid in ids]").replace("await ", "")


def _loop_expected() -> int:
    return sum(i * i % 7 for i in range(100000))


def _sort_expected() -> list[int]:
    xs = [(i * 7919) % 10007 for i in range(30000)]
    return [sorted(xs)[100], sorted(xs, key=lambda v: -v)[100], len(xs)]


def _strings_expected() -> list[Any]:
    text = ",".join(f"{i}:{i % 13}" for i in range(30000))
    return [len(text), text[:20]]


def _dicts_expected() -> list[int]:
    counts: dict[str, int] = {}
    for i in range(40000):
        key = "k" + str(i % 1000)
        counts[key] = counts.get(key, 0) + i
    return [len(counts), counts["k7"], sum(counts.values())]


_ORDERS: Final = tuple({"id": i, "customer_id": (i * 7) % 20, "amount": 10 + (i * 37) % 90,
                        "status": "open" if i % 4 else "closed"} for i in range(80))
_REGIONS: Final = ("north", "south", "east", "west")


def _customer(cid: int) -> dict[str, Any]:
    return {"id": cid, "name": f"customer {cid}", "region": _REGIONS[cid % 4]}


def _realistic_expected() -> dict[str, int]:
    orders = [o for o in _ORDERS if o["status"] == "open"]
    ids = {o["customer_id"] for o in orders}
    regions = {_customer(cid)["region"] for cid in ids}
    return {"regions": len(regions), "orders": len(orders), "customers": len(ids)}


COMPUTE: Final = (
    _compute("loop", _LOOP, _loop_expected(), "100k iterations of integer arithmetic"),
    _compute("recursion", _RECURSION, _fib(19), "naive fib(19): 13.5k Python calls"),
    _compute("sort", _SORT, _sort_expected(), "build 30k ints, sort twice (once with a key lambda)"),
    _compute("strings", _STRINGS, _strings_expected(), "30k f-strings appended, then joined"),
    _compute("dicts", _DICTS, _dicts_expected(), "40k get/set on a 1,000-key dict"),
)

WORKLOADS: Final = (
    Workload("trivial", "trivial", "return 1\n", "return 1\n", 1, "return 1"),
    *COMPUTE,
    Workload("sequential-calls", "host-calls", _SEQUENTIAL, _sync(_SEQUENTIAL),
             sum(i + 1 for i in range(1000)), "1,000 sequential tools.add calls", calls=1000),
    Workload("parallel-50ms", "parallel", _PARALLEL, None, 5000,
             "100 x tools.sleep(ms=50) under asyncio.gather", calls=100),
    Workload("realistic", "realistic", _REALISTIC, _REALISTIC_SYNC, _realistic_expected(),
             "list orders, fetch 20 customers (gathered), aggregate, print, save a report", calls=22),
)

TOOL_NAMES: Final = ("add", "sleep", "list_orders", "get_customer", "save_report")


def by_name(name: str) -> Workload:
    """The workload called ``name`` (KeyError naming the known ones otherwise)."""
    for workload in WORKLOADS:
        if workload.name == name:
            return workload
    raise KeyError(f"unknown workload {name!r}; known: {[w.name for w in WORKLOADS]}")


# --- host tools: the same behaviour as plain functions and as coroutines ---------------------------

def _add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


def _sleep_sync(ms: int) -> dict[str, int]:
    time.sleep(ms / 1000)
    return {"slept_ms": ms}


def _list_orders(status: str) -> dict[str, Any]:
    return {"orders": [dict(o) for o in _ORDERS if o["status"] == status]}


def _get_customer(id: int) -> dict[str, Any]:
    return _customer(id)


def _save_report(title: str, rows: list[Any]) -> dict[str, Any]:
    return {"saved": True, "title": title, "rows": len(rows)}


SYNC_TOOLS: Final[Mapping[str, Callable[..., Any]]] = {
    "add": _add, "sleep": _sleep_sync, "list_orders": _list_orders, "get_customer": _get_customer,
    "save_report": _save_report,
}


def _as_async(function: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    async def call(**kwargs: Any) -> Any:
        return function(**kwargs)

    return call


async def _sleep_async(ms: int) -> dict[str, int]:
    await asyncio.sleep(ms / 1000)
    return {"slept_ms": ms}


ASYNC_TOOLS: Final[Mapping[str, Callable[..., Awaitable[Any]]]] = {
    **{name: _as_async(fn) for name, fn in SYNC_TOOLS.items() if name != "sleep"},
    "sleep": _sleep_async,
}
