"""Tests for codemode.sandbox.interpreter: outcomes, logs, tracebacks, tools, sessions, cancellation."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.sandbox.errors import ToolCallFailure
from codemode.sandbox.interpreter import (
    ProgramCompileError,
    ProgramOutcome,
    compile_program,
    run_program,
)

ERROR_KINDS = {"exception", "invalid-output", "memory-limit"}


class Host:
    """A recording call_tool handler."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.active = 0
        self.peak = 0

    async def __call__(self, name: str, args: Any) -> Any:
        self.calls.append((name, args))
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await anyio.sleep(0.02)
            if name == "fail":
                raise ToolCallFailure("it broke", "BROKEN")
            return {"tool": name, "args": args}
        finally:
            self.active -= 1


async def run(source: str, *, host: Host | None = None, log: Callable[[str], None] | None = None,
              globals_: dict[str, Any] | None = None, **kwargs: Any) -> ProgramOutcome:
    logs: list[str] = []
    with anyio.fail_after(5):
        return await run_program(compile_program(textwrap.dedent(source)),
                                 tool_names=("search", "fail", "odd-name"),
                                 call_tool=host or Host(), log=log or logs.append, globals_=globals_,
                                 **kwargs)


@pytest.mark.anyio
@pytest.mark.parametrize(("source", "has_value", "value"), [
    ("return 1 + 1", True, 2),
    ("return None", True, None),
    ("return", False, None),
    ("x = 1", False, None),
    ("return {'a': [1, 2.5, 'x', True, None]}", True, {"a": [1, 2.5, "x", True, None]}),
])
async def test_values(source: str, has_value: bool, value: object) -> None:
    """It reports the returned value; falling off the end or a bare return means no value."""
    outcome = await run(source)
    assert (outcome.error_kind, outcome.has_value, outcome.value) == (None, has_value, value)


@pytest.mark.anyio
@pytest.mark.parametrize("source", ["return {1, 2}", "return float('nan')", "return object()",
                                    "return {(1, 2): 3}", "return {1: 2, '1': 3}", "return b'x'"])
async def test_non_lossless_results_are_invalid_output(source: str) -> None:
    """It reports invalid-output for a value outside the lossless JSON domain."""
    outcome = await run(source)
    assert outcome.error_kind == "invalid-output"
    assert "lossless JSON" in (outcome.error_message or "")


@pytest.mark.anyio
async def test_print_streams_lines_to_log() -> None:
    """It forwards one entry per completed line group and flushes the rest at the end."""
    logs: list[str] = []
    await run("print('a', 1)\nprint('b', end='')\nprint('c')\nprint('d\\ne')\nprint('tail', end='')",
              log=logs.append)
    assert logs == ["a 1", "bc", "d\ne", "tail"]


@pytest.mark.anyio
async def test_print_in_functions_and_printed() -> None:
    """It captures prints from nested and async functions; printed reads the text so far."""
    logs: list[str] = []
    outcome = await run("""
        def f():
            print('in f')
        async def g():
            print('in g', sep='-')
        f()
        await g()
        return printed
    """, log=logs.append)
    assert logs == ["in f", "in g"]
    assert outcome.value == "in f\nin g\n"


@pytest.mark.anyio
async def test_print_refuses_files() -> None:
    """It refuses print(file=...)."""
    outcome = await run("class W:\n    def write(self, s):\n        pass\nprint('x', file=W())")
    assert outcome.error_kind == "exception"
    assert "file=" in (outcome.error_message or "")


@pytest.mark.anyio
async def test_log_capture_is_capped() -> None:
    """It stops forwarding once the in-process cap is spent."""
    logs: list[str] = []
    await run("for i in range(1000):\n    print('x' * 100)", log=logs.append, log_cap_bytes=1000)
    assert 9 <= len(logs) <= 11


@pytest.mark.anyio
async def test_exceptions_show_program_frames_only() -> None:
    """It reports the type, the message and the program's own lines, never host frames or paths."""
    outcome = await run("""
        import json
        def parse(text):
            return json.loads(text)
        parse('{')
    """)
    assert outcome.error_kind == "exception"
    message = outcome.error_message or ""
    assert message.startswith("Traceback (most recent call last):\n  line 5, in <program>\n    parse('{')")
    assert "  line 4, in parse\n    return json.loads(text)" in message
    assert message.splitlines()[-1].startswith("JSONDecodeError: ")
    for leak in (".py", "site-packages", "/work", "sandbox"):
        assert leak not in message


@pytest.mark.anyio
@pytest.mark.parametrize("source", ["raise SystemExit(3)", "raise KeyboardInterrupt", "raise GeneratorExit",
                                    "import asyncio\nraise asyncio.CancelledError()"])
async def test_base_exceptions_are_program_failures(source: str) -> None:
    """It reports exit, interrupt and self-raised cancellation as exceptions."""
    outcome = await run(source)
    assert outcome.error_kind == "exception"


@pytest.mark.anyio
@pytest.mark.parametrize("body", ["raise SystemExit", "return 1 / 0", "return 42"])
async def test_a_failing_exception_str_still_reports_the_error(body: str) -> None:
    """It reports an exception whose __str__ raises or returns a non-string as unprintable."""
    outcome = await run(f"""
        class Odd(Exception):
            def __str__(self):
                {body}
        raise Odd()
    """)
    assert outcome.error_kind == "exception"
    assert (outcome.error_message or "").endswith("Odd: <unprintable message>")


@pytest.mark.anyio
async def test_memory_error_is_a_memory_limit() -> None:
    """It reports a MemoryError that reaches the top as memory-limit."""
    outcome = await run("raise MemoryError('big')")
    assert outcome.error_kind == "memory-limit"


@pytest.mark.anyio
async def test_tool_calls() -> None:
    """It sends dict or keyword arguments, by attribute or item, and returns the tool's value."""
    host = Host()
    outcome = await run("""
        a = await tools.search({'q': 1})
        b = await tools.search(q=2)
        c = await tools['odd-name']()
        return [a, b, c]
    """, host=host)
    assert outcome.value == [{"tool": "search", "args": {"q": 1}}, {"tool": "search", "args": {"q": 2}},
                             {"tool": "odd-name", "args": {}}]
    assert [name for name, _ in host.calls] == ["search", "search", "odd-name"]


@pytest.mark.anyio
async def test_tool_failures_become_tool_call_errors() -> None:
    """It raises ToolCallError with tool_name, code and the message, catchable by the program."""
    outcome = await run("""
        try:
            await tools.fail(x=1)
        except ToolCallError as e:
            return [e.tool_name, e.code, str(e), isinstance(e, Exception)]
    """)
    assert outcome.value == ["fail", "BROKEN", "it broke", True]


@pytest.mark.anyio
@pytest.mark.parametrize(("source", "needle"), [
    ("await tools.missing()", "declared tools: fail, odd-name, search"),
    ("await tools['missing']()", "declared tools"),
    ("await tools.search({'a': 1}, b=2)", "not both"),
    ("await tools.search([1])", "expects a dict"),
    ("await tools.search(q={1, 2})", "lossless JSON"),
    ("tools.x = 1", "only modify objects it created"),
])
async def test_bad_tool_use_fails_clearly(source: str, needle: str) -> None:
    """It names the problem: unknown tool, bad arguments, writes to the proxy."""
    outcome = await run(source)
    assert outcome.error_kind == "exception"
    assert needle in (outcome.error_message or "")


@pytest.mark.anyio
async def test_gather_overlaps_tool_calls() -> None:
    """It runs gathered tool calls concurrently."""
    host = Host()
    outcome = await run("""
        import asyncio
        return await asyncio.gather(*[tools.search(i=i) for i in range(5)])
    """, host=host)
    assert outcome.error_kind is None
    assert host.peak == 5


@pytest.mark.anyio
async def test_session_globals_persist() -> None:
    """It keeps top-level names in a reused globals dict (notebook semantics)."""
    namespace: dict[str, Any] = {}
    await run("import json\nx = 41\ndef f():\n    return x + 1\nclass C:\n    pass", globals_=namespace)
    outcome = await run("c = C()\nc.y = 1\nreturn [f(), json.dumps(c.y)]", globals_=namespace)
    assert outcome.value == [42, "1"]


@pytest.mark.anyio
async def test_real_cancellation_propagates_and_stops_helper_tasks() -> None:
    """It lets the caller's cancellation through and cancels the tasks the program started."""
    host = Host()
    with anyio.move_on_after(0.1) as scope:
        await run("""
            import asyncio
            asyncio.gather(tools.search(a=1), asyncio.sleep(10))
            await asyncio.sleep(10)
        """, host=host)
    assert scope.cancelled_caught
    await anyio.sleep(0.05)
    assert host.active == 0


REALISTIC = [
    ("""
        from dataclasses import dataclass, field
        @dataclass(frozen=True)
        class Item:
            name: str
            tags: list = field(default_factory=list)
        return Item('a', ['x']).tags
    """, ["x"]),
    ("""
        import enum
        class Color(enum.Enum):
            RED = 1
            BLUE = 2
        return [c.name for c in Color]
    """, ["RED", "BLUE"]),
    ("""
        from collections import Counter, defaultdict
        c = Counter('abca')
        d = defaultdict(list)
        d['k'].append(1)
        c['z'] += 2
        return [list(c.most_common(1)[0]), dict(d), c['z']]
    """, [["a", 2], {"k": [1]}, 2]),
    ("""
        class Acc:
            def __init__(self):
                self.total = 0
                self.items = {}
            def add(self, k, v):
                self.total += v
                self.items[k] = self.items.get(k, 0) + v
        a = Acc()
        for k, v in [('a', 1), ('b', 2), ('a', 3)]:
            a.add(k, v)
        return [a.total, a.items]
    """, [6, {"a": 4, "b": 2}]),
    ("""
        import re, json, math, statistics, itertools, functools, heapq, bisect, base64, hashlib
        words = re.findall(r'\\w+', 'b a c a')
        return [sorted(set(words)), json.loads('[1]'), math.floor(2.5), statistics.mean([1, 2, 3]),
                list(itertools.islice(itertools.count(), 3)), functools.reduce(lambda a, b: a + b, [1, 2]),
                heapq.nsmallest(1, [3, 1]), bisect.bisect([1, 3], 2),
                base64.b64encode(b'hi').decode(), hashlib.sha256(b'').hexdigest()[:8]]
    """, [["a", "b", "c"], [1], 2, 2, [0, 1, 2], 3, [1], 1, "aGk=", "e3b0c442"]),
    ("""
        import functools
        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        def deco(f):
            @functools.wraps(f)
            def inner(*a, **k):
                return f(*a, **k)
            return inner
        @deco
        def g(x):
            return x * 2
        return [fib(30), g(2)]
    """, [832040, 4]),
    ("""
        x: int = 3
        total = 0
        for i in range(x):
            total += i
        s = f"{total:>4}|{'ab'!r}"
        return [total, s, type(total) is int, isinstance(int, type)]
    """, [3, "   3|'ab'", True, True]),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("source", "expected"), REALISTIC)
async def test_realistic_programs_work(source: str, expected: object) -> None:
    """It runs the kind of code models write (dataclasses, enums, counters, classes, stdlib helpers)."""
    outcome = await run(source)
    assert outcome.error_message is None
    assert outcome.value == expected


REALISTIC += [
    ("""
        class Base:
            def __init__(self, n):
                self.n = n
            def describe(self):
                return 'base'
        class Child(Base):
            kind = 'child'
            def __init__(self, n):
                super().__init__(n * 2)
            def describe(self):
                return super().describe() + '+' + self.kind
        Child.kind = 'changed'
        c = Child(2)
        return [c.n, c.describe(), isinstance(c, Base)]
    """, [4, "base+changed", True]),
    ("""
        counter = 0
        def bump():
            global counter
            counter += 1
        for _ in range(3):
            bump()
        class Boom(ValueError):
            pass
        try:
            raise Boom('x')
        except ValueError as e:
            caught = type(e) is Boom
        return [counter, caught]
    """, [3, True]),
    ("""
        import asyncio
        async def fetch(i):
            r = await tools.search(i=i)
            return r['args']['i']
        done = []
        for f in asyncio.as_completed([fetch(i) for i in range(3)]):
            done.append(await f)
        slow = await asyncio.wait_for(fetch(9), 5)
        return [sorted(done), slow]
    """, [[0, 1, 2], 9]),
]

REALISTIC += [
    ("""
        from dataclasses import dataclass
        @dataclass
        class Box:
            w: int
            h: int
            def __post_init__(self):
                self.area = self.w * self.h
            def __repr__(self):
                return f"Box({self.w}x{self.h})"
        class Named(Exception):
            def __str__(self):
                return 'named!'
        return [Box(2, 3).area, repr(Box(1, 1)), str(Named())]
    """, [6, "Box(1x1)", "named!"]),
]

_ATOMS = st.sampled_from(["1", "x", "'s'", "[1, 2]", "{'k': 1}", "None", "tools", "json", "(lambda: 0)",
                          "ToolCallError", "print", "len", "().__class__", "x.y", "await x"])
_EXPRS = st.recursive(_ATOMS, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from(["+", "*", "-", "[0]", ".append", ".format", "(", "**"]), inner).map(
        lambda t: f"({t[0]}){t[1]}({t[2]})" if t[1] != "(" else f"{t[0]}({t[2]})"),
    inner.map(lambda e: f"[{e} for x in [1]]"),
    inner.map(lambda e: f"await tools.search(q={e})"),
), max_leaves=6)
_STATEMENTS = st.one_of(
    _EXPRS.map(lambda e: f"x = {e}"),
    _EXPRS.map(lambda e: f"return {e}"),
    _EXPRS.map(lambda e: f"print({e})"),
    _EXPRS.map(lambda e: f"if {e}:\n    x = 1"),
    _EXPRS.map(lambda e: f"for x in {e}:\n    pass"),
    st.sampled_from(["import json", "import os", "def f(a, /):\n    return a", "raise ValueError(1)",
                     "x = [1]\nx[0] += 1", "x = {}\nx['a'] = 1",
                     "try:\n    1/0\nexcept Exception as e:\n    x = e"]),
)


@pytest.mark.anyio
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_STATEMENTS, min_size=1, max_size=5))
async def test_random_programs_end_in_documented_kinds(statements: list[str]) -> None:
    """It compiles-or-rejects and runs random programs to a documented outcome, never a crash."""
    source = "import json\nx = 1\n" + "\n".join(statements)
    try:
        compiled = compile_program(source)
    except ProgramCompileError as exc:
        assert exc.kind in ("syntax", "policy")
        return
    with anyio.fail_after(5):
        outcome = await run_program(compiled, tool_names=("search",), call_tool=Host(), log=lambda s: None)
    assert outcome.error_kind is None or outcome.error_kind in ERROR_KINDS


@pytest.mark.anyio
async def test_common_introspection_idioms_work() -> None:
    """``type(err).__name__``, the namedtuple API and probing with hasattr/getattr behave as in CPython."""
    outcome = await run("""
        try:
            int("x")
        except ValueError as err:
            message = f"{type(err).__name__}: {err}"
        import collections
        Pair = collections.namedtuple("Pair", "a b")
        pair = Pair(1, 2)
        return [message, pair._asdict(), list(pair._replace(a=9)), list(Pair._fields),
                list(Pair._make([3, 4])), hasattr(pair, "_secret"), getattr(pair, "__dict__", "none"),
                Pair.__qualname__]
    """)
    assert outcome.error_kind is None, outcome.error_message
    assert outcome.value == ["ValueError: invalid literal for int() with base 10: 'x'", {"a": 1, "b": 2},
                             [9, 2], ["a", "b"], [3, 4], False, "none", "Pair"]


_INLINED_FORMS = """\
class P:
    def __init__(self):
        self.n = 0
log = []
def item(i):
    log.append(i)
    return ps[i]
ps = [P(), P()]
def stores():
    item(0).n = 1
    item(1).n += 2
    item(0).tags = {}
    item(0).tags["a"] = [1]
    item(0).tags["a"][0] += 5
    for item(1).k in range(3):
        pass
    del item(0).tags
    counted = [item(1).n for item(0).n in range(2)]
    return counted
class K:
    item(1).in_class = 7
def typed(type):
    return type(3)
def kinds():
    out = [type(1).__name__, type(P) is type, type(P()) is P, type(type) is type, typed(str)]
    renamed = type
    out.append(renamed("x") is str)
    return out
result = [stores(), ps[0].n, ps[1].n, ps[1].k, ps[1].in_class, hasattr(ps[0], "tags"), log, kinds()]
"""


@pytest.mark.anyio
async def test_inlined_stores_and_type_match_cpython() -> None:
    """Non-name store targets (through a temporary) and ``type(x)`` (a table) behave as CPython's.

    Each object expression is evaluated once and in order (``log``), augmented stores read and write
    the same object, class bodies and comprehension targets keep the call, and a rebound ``type`` is
    called as written.
    """
    source = _INLINED_FORMS
    namespace: dict[str, Any] = {}
    exec(compile(source, "<cpython>", "exec"), namespace)
    outcome = await run(source + "return result\n")
    assert outcome.error_kind is None, outcome.error_message
    assert outcome.value == namespace["result"]
