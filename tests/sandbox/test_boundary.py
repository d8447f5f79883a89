"""Values leaving a program follow json.dumps (tuples, non-str keys), or fail with their path and a fix."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.sandbox.boundary import json_ready
from codemode.sandbox.lossless import LosslessJsonError

_keys = st.one_of(st.text(max_size=5), st.integers(-1000, 1000), st.booleans(), st.none(),
                  st.floats(allow_nan=False, allow_infinity=False, width=32))
_leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=5),
                    st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
    st.dictionaries(_keys, inner, max_size=4)), max_leaves=20)


def _distinct_keys(value: Any) -> bool:
    """json.dumps writes duplicate keys for {1: .., "1": ..}; json_ready refuses them instead."""
    if isinstance(value, dict):
        texts = [json.dumps({k: 0})[1:-4] for k in value]
        return len(set(texts)) == len(texts) and all(_distinct_keys(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_distinct_keys(v) for v in value)
    return True


@given(_values)
def test_json_ready_is_what_json_dumps_writes(value: Any) -> None:
    """For every value json.dumps accepts (with distinct key texts), the result is its round trip."""
    if not _distinct_keys(value):
        with pytest.raises(LosslessJsonError, match="become the JSON key"):
            json_ready(value)
        return
    assert json_ready(value) == json.loads(json.dumps(value))


def test_subclasses_become_plain_values() -> None:
    """IntEnum/StrEnum members, namedtuples and container subclasses are written as json.dumps does."""
    class Size(enum.IntEnum):
        S = 1

    class Color(enum.StrEnum):
        RED = "red"

    point = collections.namedtuple("point", "x y")
    value = {"s": Size.S, "c": Color.RED, "p": point(1, 2), "o": collections.OrderedDict(a=(1,)),
             Size.S: "key"}
    ready = json_ready(value)
    assert ready == json.loads(json.dumps(value))
    assert type(ready["s"]) is int and type(ready["c"]) is str


@dataclasses.dataclass
class _Point:
    x: int


@pytest.mark.parametrize(("value", "path", "fix"), [
    ({"a": [1, {2}]}, "result.a[1]", "sorted(...)"),
    ({"when": datetime.date(2020, 1, 1)}, "result.when", ".isoformat()"),
    ({"d": datetime.timedelta(1)}, "result.d", ".total_seconds()"),
    ([b"x"], "result[0]", ".decode()"),
    ({"n": decimal.Decimal(1)}, "result.n", "str(...)"),
    ({"p": _Point(1)}, "result.p", "dataclasses.asdict(...)"),
    ({"o": object()}, "result.o", "convert it to a dict"),
    ({(1, 2): 3}, "result", "str(key)"),
    ({1: "a", "1": "b"}, "result", "keep one of them"),
    ({"key with space": {1j}}, "result['key with space']", "sorted(...)"),
])
def test_refusals_name_the_path_and_the_fix(value: Any, path: str, fix: str) -> None:
    """Each value json.dumps refuses is refused with where it is and how to convert it."""
    with pytest.raises(LosslessJsonError) as refused:
        json_ready(value, "result")
    assert refused.value.path == path
    assert fix in refused.value.reason


def test_cycles_are_refused() -> None:
    """A container that contains itself is an error, not a hang."""
    loop: list[Any] = []
    loop.append((loop,))
    with pytest.raises(LosslessJsonError, match="cycle"):
        json_ready(loop)


def test_deep_values_do_not_exhaust_the_stack() -> None:
    """The walk is iterative."""
    deep: Any = 1
    for _ in range(20_000):
        deep = (deep,)
    ready = json_ready(deep)
    for _ in range(20_000):
        ready = ready[0]
    assert ready == 1


def test_a_list_subclass_hook_is_not_called() -> None:
    """A subclass's __iter__ is program code: the walk reads the items as json.dumps does."""
    class Loud(list[int]):
        def __iter__(self) -> Any:
            raise AssertionError("called")

    assert json_ready((Loud([1, 2]),)) == [[1, 2]]
