"""Escape family C10: a red-team round on the wider language (formatter, operator callers, match,
private names, eval/exec, asyncio wrappers, the new module facades, boundary values).

Every attack reads the secret (a file) or reaches a real host object under plain CPython, and fails in
the sandbox, in process and in the isolated worker. ``test_reaches_nothing`` also checks, for payloads
whose last step would fail anyway in the sandbox (``open`` is not a builtin there), that the host
object the payload is after never reaches the program: the run must stop *before* it.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from codemode.sandbox.interpreter import compile_program, run_program

from .conftest import TOOL_NAMES, Attack, EscapeHarness, fake_call_tool

ATTACKS = [
    # -- a program subclass of ``super`` was a "plain program class", so its ``_x`` reads were allowed:
    #    but a super proxy resolves them in a host object's classes (a facade's ``_real`` slot, pathlib's
    #    ``_flavour`` whose ``pathmod.os`` is the real os module)
    Attack("super-subclass-private-slot", """
        import asyncio
        class S(super):
            pass
        class Q(asyncio.Queue):
            pass
        q = Q()
        real = S(Q, q)._real
        loop = S(type(real), real)._get_loop()
        return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """, mode="facades"),
    Attack("super-subclass-pathlib-flavour-os", """
        import pathlib
        class S(super):
            pass
        class P(pathlib.PurePosixPath):
            pass
        os = S(P, P("x"))._flavour.pathmod.os
        fd = os.open(SECRET_PATH, os.O_RDONLY)
        return os.read(fd, 100).decode()
    """),
    # -- ``case C(x)`` reads the names in ``C.__match_args__`` in C: a program dataclass's field that the
    #    instance does not hold resolves in the classes (a host base's private state, the real str.format)
    Attack("match-positional-private-field-of-host-base", """
        import dataclasses, pathlib
        @dataclasses.dataclass(init=False, repr=False, eq=False)
        class D(pathlib.PurePosixPath):
            _flavour: object
        match D("x"):
            case D(flavour):
                os = flavour.pathmod.os
                return os.read(os.open(SECRET_PATH, os.O_RDONLY), 100).decode()
    """),
    Attack("match-positional-inherited-private-field", """
        import dataclasses, pathlib
        @dataclasses.dataclass(init=False)
        class Base:
            _flavour: object
        class E(Base, pathlib.PurePosixPath):
            pass
        match E("x"):
            case E(flavour):
                os = flavour.pathmod.os
                return os.read(os.open(SECRET_PATH, os.O_RDONLY), 100).decode()
    """),
    # ... and dataclasses.asdict/astuple/replace read every field with getattr (match_args=False too)
    Attack("dataclass-astuple-private-field-of-host-base", """
        import dataclasses, pathlib
        @dataclasses.dataclass(init=False, repr=False, eq=False, match_args=False)
        class D(pathlib.PurePosixPath):
            _flavour: object
        os = dataclasses.astuple(D("x"))[0].pathmod.os
        return os.read(os.open(SECRET_PATH, os.O_RDONLY), 100).decode()
    """),
    Attack("dataclass-asdict-inherited-private-field", """
        import dataclasses, pathlib
        @dataclasses.dataclass(init=False, match_args=False)
        class Base:
            _flavour: object
        class E(Base, pathlib.PurePosixPath):
            pass
        os = dataclasses.asdict(E("x"))["_flavour"].pathmod.os
        return os.read(os.open(SECRET_PATH, os.O_RDONLY), 100).decode()
    """),
    Attack("dataclass-asdict-format-field-of-str", """
        import dataclasses, random
        @dataclasses.dataclass(init=False, repr=False, eq=False, match_args=False)
        class D(str):
            format: object
        return dataclasses.asdict(D("{0.__globals__[_os].environ}"))["format"](random.seed)
    """),
    Attack("match-positional-format-field-of-str", """
        import dataclasses, random
        @dataclasses.dataclass(init=False, repr=False, eq=False)
        class D(str):
            format: object
        match D("{0.__globals__[_os].environ}"):
            case D(render):
                return render(random.seed)
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)


#: Payloads that return the host object they reach (its repr names it): the run must fail before.
REACHES = [
    ("super-subclass-real-queue", """
        import asyncio
        class S(super):
            pass
        class Q(asyncio.Queue):
            pass
        q = Q()
        return repr(S(Q, q)._real)
    """, "maxsize"),
    ("super-subclass-loop", """
        import asyncio
        class S(super):
            pass
        class Q(asyncio.Queue):
            pass
        q = Q()
        real = S(Q, q)._real
        return repr(S(type(real), real)._get_loop())
    """, "EventLoop"),
    ("super-proxy-private-of-facade-subclass", """
        import asyncio
        class Q(asyncio.Queue):
            def peek(self):
                return repr(super()._real)
        return Q().peek()
    """, "maxsize"),
    # anext(agen, default) is a third awaitable over an async generator: its send() drives it by hand
    # and hands out the event loop's futures (and the real Task behind an awaited create_task)
    ("anext-default-driven-by-hand", """
        import asyncio
        async def ticks():
            await asyncio.create_task(asyncio.sleep(0.01))
            yield 1
        return repr(anext(ticks(), None).send(None))
    """, "Task"),
    ("anext-default-throw-method", """
        async def ticks():
            yield 1
        return repr(getattr(anext(ticks(), None), "throw"))
    """, "anext_awaitable"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("program", "marker"), [(p, m) for _, p, m in REACHES],
                         ids=[i for i, _, _ in REACHES])
async def test_reaches_nothing(program: str, marker: str) -> None:
    """The run fails and the host object's repr is nowhere in what it produced."""
    logs: list[str] = []
    outcome = await run_program(compile_program(textwrap.dedent(program)), tool_names=TOOL_NAMES,
                                call_tool=fake_call_tool, log=logs.append)
    assert outcome.error_kind is not None, outcome
    assert marker not in repr(outcome) + "".join(logs)


# -- a mappingproxy compares its mapping: ``proxy == x`` hands the real dict to ``x.__eq__``. Programs
#    reach proxies over host dicts (an enum's ``__members__`` is its ``_member_map_``; dataclasses'
#    shared ``_EMPTY_METADATA``), so they could write host state that every later run of the process sees.
PLANTS = [
    ("enum-members-of-host-enum", """
        import re
        got = []
        class Grab:
            def __eq__(self, other):
                got.append(other)
                return False
        re.RegexFlag.__members__ == Grab()
        got[0]["PLANTED"] = "by the program"
        return "PLANTED" in re.RegexFlag.__members__
    """, lambda: "PLANTED" in __import__("re").RegexFlag.__members__),
    ("dataclasses-empty-metadata", """
        import dataclasses
        got = []
        class Grab:
            def __eq__(self, other):
                got.append(other)
                return False
        @dataclasses.dataclass
        class A:
            x: int = 0
        dataclasses.fields(A)[0].metadata == Grab()
        got[0]["PLANTED"] = "by the program"
        return dict(dataclasses.fields(A)[0].metadata)
    """, lambda: "PLANTED" in __import__("dataclasses")._EMPTY_METADATA),
    ("re-cached-pattern-groupindex", """
        import re
        got = []
        class Grab:
            def __eq__(self, other):
                got.append(other)
                return False
        re.compile("(?P<first>a)(b)").groupindex == Grab()
        got[0]["PLANTED"] = 2
        return re.compile("(?P<first>a)(b)").match("ab").group("PLANTED")
    """, lambda: "PLANTED" in __import__("re").compile("(?P<first>a)(b)").groupindex),
    # a virtual subclass of a program ABC is one of every ABC above it: a program subclass of a host ABC
    # registering a host type changed that ABC's answer for the whole process
    # the facade's "immutable copy" of TextWrapper's class-level table was a proxy over a dict (and
    # ``proxy | x`` hands it to ``x.__ror__`` as ``==`` does to ``x.__eq__``)
    ("textwrap-class-table-via-ror", """
        import textwrap
        got = []
        class Grab:
            def __ror__(self, other):
                got.append(other)
                return {}
        textwrap.TextWrapper.unicode_whitespace_trans | Grab()
        got[0][ord("a")] = "Z"
        return textwrap.TextWrapper(width=40).fill("banana")
    """, lambda: _text_wrapper_table().get(ord("a")) is not None),
    # staticmethod/classmethod copy the wrapped function's attributes into their own __dict__, its real
    # __annotations__ dict included: a program subclass of one was "plain", so vars() handed that out
    ("staticmethod-subclass-vars-host-annotations", """
        import json
        class SM(staticmethod):
            pass
        vars(SM(json.dumps))["__annotations__"]["planted"] = "by the program"
        return "planted"
    """, lambda: "planted" in _facade_json_dumps().__annotations__),
    ("classmethod-subclass-vars-host-annotations", """
        import json
        class CM(classmethod):
            pass
        vars(CM(json.dumps))["__annotations__"]["planted"] = "by the program"
        return "planted"
    """, lambda: "planted" in _facade_json_dumps().__annotations__),
    # a hashable str subclass with the program's __eq__, stored as a key in a process-wide cache, answers
    # every later lookup with an equal hash (the host's too): struct's format cache, _strptime's, typing's
    ("struct-cache-poisoned-by-str-subclass", """
        import struct
        class Fmt(str):
            def __hash__(self):
                return hash("<i")
            def __eq__(self, other):
                return True
        struct.pack(Fmt(">q"), 1)
        return "planted"
    """, lambda: __import__("struct").calcsize("<i") != 4),
    ("strptime-cache-poisoned-by-str-subclass", """
        import time
        class Fmt(str):
            def __hash__(self):
                return hash("%Y")
            def __eq__(self, other):
                return True
        time.strptime("12", Fmt("%m"))
        return "planted"
    """, lambda: _strptime_is_poisoned()),
    ("typing-cache-poisoned-by-str-subclass", """
        import typing
        class Name(str):
            def __hash__(self):
                return hash("int")
            def __eq__(self, other):
                return True
        typing.List[Name("float")]
        return "planted"
    """, lambda: "float" in repr(__import__("typing").List["int"])),
    ("typing-cache-poisoned-by-program-callable", """
        import typing
        class Arg:
            def __call__(self):
                return None
            def __hash__(self):
                return hash(int)
            def __eq__(self, other):
                return True
            def __repr__(self):
                return "PLANTED"
        typing.List[Arg()]
        return "planted"
    """, lambda: "PLANTED" in repr(__import__("typing").List[int])),
    # abc.abstractmethod sets __isabstractmethod__ on what it is given: a host function is the process's
    ("abc-abstractmethod-on-host-function", """
        import abc, os
        abc.abstractmethod(os.path.join)
        return "marked"
    """, lambda: getattr(__import__("posixpath").join, "__isabstractmethod__", False)),
    ("abc-register-through-program-subclass", """
        import numbers
        class P(numbers.Integral):
            pass
        P.register(float)
        return isinstance(1.5, numbers.Integral)
    """, lambda: isinstance(1.5, __import__("numbers").Integral)),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("program", "planted"), [(p, c) for _, p, c in PLANTS],
                         ids=[i for i, _, _ in PLANTS])
async def test_host_mapping_stays_unwritten(program: str, planted: Any) -> None:
    """The program cannot write a host dict through the proxy it can read."""
    try:
        await run_program(compile_program(textwrap.dedent(program)), tool_names=TOOL_NAMES,
                          call_tool=fake_call_tool, log=lambda line: None)
        assert not planted()
    finally:
        _undo_plants()


def _text_wrapper_table() -> Any:
    from codemode.sandbox.facades import FACADES

    return FACADES["textwrap"].TextWrapper.unicode_whitespace_trans


def _strptime_is_poisoned() -> bool:
    import time

    try:
        time.strptime("2024", "%Y")
    except ValueError:
        return True
    return False


def _facade_json_dumps() -> Any:
    from codemode.sandbox.facades import FACADES

    return FACADES["json"].dumps


def _undo_plants() -> None:
    import _strptime
    import dataclasses
    import gc
    import numbers
    import posixpath
    import re
    import struct
    import typing

    re.RegexFlag._member_map_.pop("PLANTED", None)
    re.purge()
    struct._clearcache()
    _strptime._regex_cache.clear()
    for cleanup in typing._cleanups:  # type: ignore[attr-defined]
        cleanup()
    _facade_json_dumps().__annotations__.pop("planted", None)
    vars(posixpath.join).pop("__isabstractmethod__", None)
    numbers.Integral._abc_caches_clear()  # type: ignore[attr-defined]
    for referent in gc.get_referents(dataclasses._EMPTY_METADATA):  # type: ignore[attr-defined]
        if type(referent) is dict:
            referent.pop("PLANTED", None)
    for referent in gc.get_referents(_text_wrapper_table()):
        if type(referent) is dict:
            referent.pop(ord("a"), None)


@pytest.mark.anyio
async def test_super_reads_private_names_of_the_programs_own_hierarchy() -> None:
    """``super()._helper()`` works where every class is the program's (same answer as CPython)."""
    program = """
        class A:
            def _helper(self):
                return "A"
        class B(A):
            def _helper(self):
                return "B+" + super()._helper()
        class S(super):
            pass
        return [B()._helper(), S(B, B())._helper()]
    """
    outcome = await run_program(compile_program(textwrap.dedent(program)), tool_names=TOOL_NAMES,
                                call_tool=fake_call_tool, log=lambda line: None)
    assert outcome.value == ["B+A", "A"], outcome


@pytest.mark.anyio
async def test_checked_field_names_stay_usable_where_the_program_owns_them() -> None:
    """Field names the guard checks (``obj``, ``metadata``) work on the program's dataclasses and on
    subclasses of its namedtuples, in match patterns too (same answer as CPython)."""
    program = """
        import collections, dataclasses
        Row = collections.namedtuple("Row", "name metadata")
        class R(Row):
            pass
        @dataclasses.dataclass
        class E:
            obj: str
            metadata: dict
        class F(E):
            pass
        match R("a", {"k": 1}):
            case R(n, m):
                pass
        match F("x", {}):
            case F(o, md):
                pass
        return [n, m, o, md, dataclasses.asdict(F("y", {"z": 2}))]
    """
    outcome = await run_program(compile_program(textwrap.dedent(program)), tool_names=TOOL_NAMES,
                                call_tool=fake_call_tool, log=lambda line: None)
    assert outcome.value == ["a", {"k": 1}, "x", {}, {"obj": "y", "metadata": {"z": 2}}], outcome


_OUTLIVER = """
    import asyncio
    async def ticks():
        try:
            yield 1
        finally:
            await asyncio.sleep(0.2)
            print("late print")
            await tools.search({"q": "after the run"})
    agen = ticks()
    await anext(agen)
    del agen
    return "done"
"""


@pytest.mark.anyio
async def test_an_abandoned_async_generator_does_not_outlive_the_run() -> None:
    """Its ``finally`` ran in a task the event loop's finalizer started, outside the run's registry: after
    the run, printing into it and calling its tools (in a session: during the next run, with that run's
    tools). It is one of the run's tasks now, cancelled at the end."""
    import anyio

    calls: list[object] = []
    logs: list[str] = []

    async def call_tool(name: str, args: Any) -> Any:
        calls.append(args)
        return {}

    outcome = await run_program(compile_program(textwrap.dedent(_OUTLIVER)), tool_names=TOOL_NAMES,
                                call_tool=call_tool, log=logs.append)
    assert outcome.value == "done", outcome
    await anyio.sleep(0.5)
    assert calls == [] and logs == []


@pytest.mark.anyio
async def test_a_session_run_gets_nothing_from_the_previous_one(worker_sandbox: Any) -> None:
    """Through the isolated worker: the next run of the session sees no late print and no late call."""
    calls: list[object] = []

    async def call_tool(name: str, args: Any) -> Any:
        calls.append(args)
        return {"ok": True}

    async with worker_sandbox.open_session() as session:
        first = await worker_sandbox.run(textwrap.dedent(_OUTLIVER), tool_names=TOOL_NAMES,
                                         call_tool=call_tool, session=session)
        second = await worker_sandbox.run("import asyncio\nawait asyncio.sleep(0.6)\nreturn 'second'",
                                          tool_names=TOOL_NAMES, call_tool=call_tool, session=session)
    assert (first.value, second.value) == ("done", "second"), (first, second)
    assert calls == [] and second.logs == ()


@pytest.mark.anyio
async def test_pprint_positional_none_stream_prints_into_the_run(capfd: pytest.CaptureFixture[str]) -> None:
    """``PrettyPrinter(1, 80, None, None)`` wrote to the process's standard output (the host's, in process),
    not the run's log."""
    logs: list[str] = []
    program = "import pprint\npprint.PrettyPrinter(1, 80, None, None).pprint({'k': 'v'})\nreturn 1"
    await run_program(compile_program(program), tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                      log=logs.append)
    assert "{'k': 'v'}" in "".join(logs)
    assert "{'k': 'v'}" not in capfd.readouterr().out


@pytest.mark.anyio
async def test_text_calendar_prints_into_the_run(capfd: pytest.CaptureFixture[str]) -> None:
    """``TextCalendar().prmonth/pryear/prweek`` print as CPython's do, into the run's log."""
    import calendar

    logs: list[str] = []
    program = ("import calendar\ncal = calendar.TextCalendar()\ncal.prmonth(2024, 2)\ncal.pryear(2023)\n"
               "cal.prweek(cal.monthdays2calendar(2024, 2)[0], 3)\nreturn 1")
    await run_program(compile_program(program), tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                      log=logs.append)
    real = calendar.TextCalendar()
    expected = (real.formatmonth(2024, 2) + real.formatyear(2023)
                + real.formatweek(real.monthdays2calendar(2024, 2)[0], 3))
    assert "".join(logs).replace("\n", "") == expected.replace("\n", "")
    assert "February 2024" not in capfd.readouterr().out


_GARBAGE_WITH_A_FINALLY = """
    import asyncio
    async def late():
        await tools.search({"q": "made by the first run's code"})
    def ticks():
        try:
            yield 1
        finally:
            asyncio.create_task(late())
    class Cycle:
        pass
    cycle = Cycle()
    cycle.me = cycle
    cycle.gen = ticks()
    next(cycle.gen)
    del cycle
    return "done"
"""


@pytest.mark.anyio
async def test_a_session_run_gets_no_task_from_the_previous_ones_garbage(worker_sandbox: Any) -> None:
    """A generator kept in a reference cycle runs its ``finally`` when the collector finds it, in whatever
    run is in progress then: the task it starts is that run's, and so are its tool calls."""
    calls: list[object] = []

    async def call_tool(name: str, args: Any) -> Any:
        calls.append(args)
        return {"ok": True}

    churn = "import asyncio\njunk = [[i] for i in range(20000)]\nawait asyncio.sleep(0.3)\nreturn 'second'"
    async with worker_sandbox.open_session() as session:
        first = await worker_sandbox.run(textwrap.dedent(_GARBAGE_WITH_A_FINALLY), tool_names=TOOL_NAMES,
                                         call_tool=call_tool, session=session)
        second = await worker_sandbox.run(churn, tool_names=TOOL_NAMES, call_tool=call_tool, session=session)
    assert (first.value, second.value) == ("done", "second"), (first, second)
    assert calls == []
