"""The lossless JSON domain: exactly what round-trips through JSON text, nothing else."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.sandbox.lossless import (
    FrozenDict,
    FrozenList,
    LosslessJsonError,
    _full_snapshot,
    canonical_dumps,
    dumps,
    is_lossless,
    is_plain,
    loads,
    snapshot,
)
from tests.sandbox._support import typed_equal


def repr_short(value: Any) -> str:
    return type(value).__name__


finite = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (f == 0.0 and math.copysign(1.0, f) < 0)
)
scalars = st.none() | st.booleans() | st.integers() | finite | st.text()
lossless_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=30,
)


@given(lossless_values)
def test_lossless_values_round_trip_exactly(value: Any) -> None:
    """It decodes what it encodes, with the same types."""
    assert is_lossless(value)
    assert typed_equal(loads(dumps(value)), value)
    assert typed_equal(snapshot(value, freeze=True), value)


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, -0.0, {1: "a"}, (1, 2), {1, 2}, b"x", bytearray(b"x"), object(),
     [1, (2,)], {"a": {"b": [math.nan]}}, 1j, 2**20000],
    ids=repr_short,
)
def test_values_outside_the_domain_are_rejected(value: Any) -> None:
    """It refuses every lossy value, however deep."""
    assert not is_lossless(value)
    with pytest.raises(LosslessJsonError):
        snapshot(value)


def test_cycles_are_rejected_and_dags_are_copied() -> None:
    """It refuses a container that contains itself but accepts shared children."""
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(LosslessJsonError, match="cycle"):
        snapshot(cyclic)
    shared = {"k": 1}
    copied = snapshot([shared, shared])
    assert copied == [shared, shared] and copied[0] is not shared


def test_frozen_snapshots_refuse_mutation() -> None:
    """It returns containers that raise on every mutator."""
    frozen = snapshot({"a": [1]}, freeze=True)
    with pytest.raises(TypeError):
        frozen["b"] = 2
    with pytest.raises(TypeError):
        frozen["a"].append(2)
    assert json.loads(dumps(frozen)) == {"a": [1]}


def test_deep_values_need_no_recursion() -> None:
    """It snapshots and encodes a 5,000-deep value."""
    deep: list[Any] = []
    cursor = deep
    for _ in range(5000):
        cursor.append([])
        cursor = cursor[0]
    assert dumps(snapshot(deep)).count("[") == 5001


@pytest.mark.parametrize(
    "text",
    ["[NaN]", "Infinity", "[-Infinity]", '{"a":1,"a":2}', "-0.0", "1e400", "[1,", "\"\\ud800", "9" * 5000],
)
def test_strict_decoder_rejects_lossy_or_malformed_text(text: str) -> None:
    """It refuses text a lossless value could not have produced."""
    with pytest.raises(LosslessJsonError):
        loads(text)


def test_decoder_enforces_its_byte_cap() -> None:
    """It refuses oversized text before parsing it."""
    with pytest.raises(LosslessJsonError, match="exceeds"):
        loads(b"[" + b"1," * 100 + b"1]", max_bytes=50)


@given(st.dictionaries(st.text(max_size=4), st.integers(), max_size=6))
def test_canonical_text_ignores_key_order(mapping: dict[str, int]) -> None:
    """It gives the same text for the same mapping in any insertion order."""
    reversed_mapping = dict(reversed(list(mapping.items())))
    assert canonical_dumps(mapping) == canonical_dumps(reversed_mapping)


@given(st.binary(max_size=200))
def test_decoder_is_total_on_random_bytes(data: bytes) -> None:
    """It either decodes or raises LosslessJsonError, never anything else."""
    with contextlib.suppress(LosslessJsonError):
        loads(data)


def _exact_types(a: Any, b: Any) -> bool:
    """Equality that also compares container classes (dict vs FrozenDict)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_exact_types(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_exact_types(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


unusual = (st.sampled_from([math.nan, -0.0, (1,), b"x", 1 << 2000, 1 << 14001])
           | st.builds(lambda: {1: "a"}) | st.builds(lambda: FrozenDict({"a": 1})))
mixed_values = st.recursive(
    scalars | unusual,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@given(mixed_values, st.booleans())
@settings(max_examples=300)
def test_the_fast_copy_agrees_with_the_full_walk(value: Any, freeze: bool) -> None:
    """It returns the same copy (container classes included) or raises the same error either way."""
    dict_type = FrozenDict if freeze else dict
    list_type = FrozenList if freeze else list
    try:
        expected = _full_snapshot(value, dict_type, list_type, "value")
    except LosslessJsonError as exc:
        with pytest.raises(LosslessJsonError) as raised:
            snapshot(value, freeze=freeze)
        assert str(raised.value) == str(exc)
        assert not is_plain(value)
        return
    assert _exact_types(snapshot(value, freeze=freeze), expected)


@given(mixed_values)
@settings(max_examples=300)
def test_a_plain_value_is_one_the_full_walk_accepts(value: Any) -> None:
    """``is_plain`` is sound (a plain value always snapshots) and copies nothing; frozen values are plain."""
    before = repr(value)
    if is_plain(value):
        _full_snapshot(value, dict, list, "value")  # raises if is_plain lied
    assert repr(value) == before
    with contextlib.suppress(LosslessJsonError):
        frozen = snapshot(value, freeze=True)
        if isinstance(frozen, FrozenDict | FrozenList):  # (checked when built: no walk needed)
            assert is_plain(frozen)


@given(st.recursive(scalars.filter(lambda v: not (isinstance(v, float) and v == 0)
                                  and not (type(v) is int and abs(v) >= 1 << 1000)),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                 max_size=3),
                    max_leaves=12))
@settings(max_examples=200)
def test_a_small_tree_of_ordinary_scalars_is_plain(value: Any) -> None:
    """Exact dicts and lists of ordinary scalars, a few levels deep, need no full walk."""
    assert is_plain(value)


def test_a_deep_value_takes_the_full_walk() -> None:
    """It copies values deeper than the fast path's bound through the full walk, unchanged."""
    deep: Any = 1
    for _ in range(100):
        deep = {"x": [deep]}
    assert not is_plain(deep)
    assert snapshot(deep, freeze=True) == deep


def test_constructing_a_frozen_value_checks_and_freezes_its_contents() -> None:
    """It refuses non-lossless contents and freezes nested containers, so a frozen value is trusted."""
    with pytest.raises(LosslessJsonError, match="not a JSON value"):
        FrozenDict({"a": object()})
    with pytest.raises(LosslessJsonError, match="non-finite"):
        FrozenList([1, math.nan])
    frozen = FrozenDict({"a": {"b": [1]}}, c="d")
    assert type(frozen["a"]) is FrozenDict and type(frozen["a"]["b"]) is FrozenList
    assert frozen == {"a": {"b": [1]}, "c": "d"}
    assert snapshot(frozen, freeze=True) is frozen  # nothing to copy
    thawed = snapshot(frozen)
    assert type(thawed) is dict and type(thawed["a"]) is dict and thawed == frozen
