"""Red-team findings: a program that makes its own worker (or an in-process host) misbehave.

Each attack is proven real first (what it does under plain CPython, or to the code it targets), then
run in process (``run_program``, which must return an outcome whatever the program does) and through
a real worker, where the run must end with the program's own, specific error and a persistent
session must keep its worker.

* A program class's ``__repr__`` (or a wide int) as a key of the result: the result check used to
  ``repr`` the key for its message, so program code ran after the program ended, outside every handler:
  an exception there (or an int too wide for ``repr``) escaped ``run_program`` and ended the worker.
* A class the enum API named with a program's ``str`` subclass (``enum.Enum(S("Boom"), "A")``), or an
  exception whose ``__str__`` returns one: formatting the name or message for the run's error ran
  the subclass's ``__str__``/``__repr__`` (``SystemExit`` there ended the worker).
* A suspended generator whose ``finally`` changes the result: the collector finalises it while the
  result is copied (allocation-driven, so no call of the program is needed), the copy's walk raised
  ``RuntimeError`` (a dict changed size during iteration) out of ``run_program`` and ended the worker.
* A session's ``tools`` kept from an earlier run (``keep = tools``): its calls went out under that run's
  ids and their replies to the run in progress, so the call never ended (the session's worker was
  killed at the wall-clock budget) or took another call's reply.
* A task started by program code that runs after the run's tasks were cancelled (a generator's
  ``finally`` run by the collector while the result is checked) lived on into the next run of the
  session.
* ``SystemExit``/``KeyboardInterrupt`` raised inside a task the asyncio facade started: asyncio
  re-raises those two out of the event loop, past every ``try`` of the program, ending the worker (and
  an in-process host's loop).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator

import anyio
import pytest

from codemode.sandbox import Sandbox, SandboxLimits, SandboxSession
from codemode.sandbox.interpreter import ProgramCompileError, compile_program, run_program
from codemode.sandbox.lossless import LosslessJsonError, snapshot
from tests.sandbox.escapes.conftest import TOOL_NAMES, fake_call_tool

pytestmark = pytest.mark.anyio

_RAISING_KEY = """
class K:
    def __repr__(self):
        raise ValueError("raised by the program after it ended")
return {K(): 1}
"""
_EXITING_KEY = """
class K:
    def __repr__(self):
        raise SystemExit(0)
return {K(): 1}
"""
_WIDE_KEY = "return {10 ** 5000: 1}"
_FINALISER = """
result = {}
for i in range(20000):
    result["a" + str(i)] = [i]
def g():
    try:
        yield 1
    finally:
        result["late" + str(len(result))] = 1
def arm():
    it = g()
    next(it)
    box = [it]
    box.append(box)
arm()
return result
"""

_ARMED_NAME = """
import enum
armed = []
class S(str):
    def __str__(self):
        if armed:
            raise SystemExit("str")
        return "Boom"
    def __repr__(self):
        if armed:
            raise SystemExit("repr")
        return "'Boom'"
E = enum.Enum(S("Boom"), "A"{mixin})
armed.append(1)
"""

#: (program, what the run's error must say)
RESULT_KEYS = {
    "repr-raises": (_RAISING_KEY, "a dict key of type 'K' cannot be a JSON object key"),
    "repr-exits": (_EXITING_KEY, "a dict key of type 'K' cannot be a JSON object key"),
    "wide-int": (_WIDE_KEY, "an int dict key too wide to write as text"),
    "str-subclass-type-name": (_ARMED_NAME.format(mixin="") + "return E.A", "Boom is not a JSON value"),
    "str-subclass-key-type-name": (_ARMED_NAME.format(mixin="") + "return {E.A: 1}",
                                   "a dict key of type 'Boom' cannot be a JSON object key"),
}

#: Exceptions whose name or message is a program's str subclass: (program, how the run's error ends)
ODD_EXCEPTIONS = {
    "str-subclass-name": (_ARMED_NAME.format(mixin=", type=ValueError") + "raise E.A",
                          "Boom: <unprintable message>"),
    "str-subclass-message": ("class S(str):\n    def __str__(self):\n        raise SystemExit('str')\n"
                             "class E(Exception):\n    def __str__(self):\n        return S('message')\n"
                             "raise E()", "E: message"),
}

_TASK_EXIT = """
import asyncio
async def leave():
    raise {exc}
try:
    await {how}
except BaseException as exc:
    return "caught " + type(exc).__name__
return "not raised"
"""
TASK_EXITS = {
    f"{how}-{exc}": _TASK_EXIT.format(exc=exc, how=expr)
    for exc in ("SystemExit", "KeyboardInterrupt")
    for how, expr in (("gather", "asyncio.gather(leave())"),
                      ("wait_for", "asyncio.wait_for(leave(), 5)"),
                      ("as_completed", "list(asyncio.as_completed([leave()]))[0]"),
                      ("create_task", "asyncio.create_task(leave())"),
                      ("task-result", "_result(leave)"),
                      ("taskgroup", "_group(leave)"))
}
_HELPERS = """
async def _group(leave):
    async with asyncio.TaskGroup() as tg:
        tg.create_task(leave())
async def _result(leave):
    done, pending = await asyncio.wait([asyncio.create_task(leave())])
    return done.pop().result()
"""
TASK_EXITS = {case: program.replace("async def leave():", _HELPERS.strip() + "\nasync def leave():")
              for case, program in TASK_EXITS.items()}


async def _in_process(program: str) -> tuple[object, str | None, str | None]:
    logs: list[str] = []
    with anyio.fail_after(20):
        # (in a task of its own, as in the worker: a failing TaskGroup child cancels its parent task)
        outcome = await asyncio.ensure_future(run_program(
            compile_program(textwrap.dedent(program).strip()), tool_names=TOOL_NAMES,
            call_tool=fake_call_tool, log=logs.append))
    return outcome.value, outcome.error_kind, outcome.error_message


@pytest.fixture(scope="module")
async def session_box() -> AsyncIterator[tuple[Sandbox, SandboxSession]]:
    async with Sandbox(warm=1) as sandbox, sandbox.open_session() as session:
        yield sandbox, session


class _Key:
    def __repr__(self) -> str:
        raise ValueError("ran")


def test_the_result_check_runs_no_code_of_a_key() -> None:
    """The target is real: a key's ``__repr__`` would run in the check; now only its type is named."""
    with pytest.raises(ValueError, match="ran"):
        repr(_Key())
    with pytest.raises(LosslessJsonError, match="object key of type '_Key' is not a string"):
        snapshot({_Key(): 1})
    with pytest.raises(ValueError):
        repr(10 ** 5000)  # (CPython's int-to-text limit: the old message raised this)
    with pytest.raises(LosslessJsonError, match="object key 7 is not a string"):
        snapshot({7: 1})


@pytest.mark.parametrize("case", sorted(RESULT_KEYS))
async def test_a_result_key_cannot_run_code_after_the_program(
        case: str, session_box: tuple[Sandbox, SandboxSession]) -> None:
    program, expected = RESULT_KEYS[case]
    value, kind, message = await _in_process(program)
    assert (kind, value) == ("invalid-output", None)
    assert message is not None and expected in message
    sandbox, session = session_box
    for opened in (None, session):
        with anyio.fail_after(30):
            result = await sandbox.run(textwrap.dedent(program).strip(), tool_names=TOOL_NAMES,
                                       call_tool=fake_call_tool, session=opened)
        assert result.error is not None and result.error.kind == "invalid-output", result
        assert expected in result.error.message
    with anyio.fail_after(30):
        after = await sandbox.run("return 'still here'", tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                                  session=session)
    assert after.value == "still here" and not after.stats.session_restarted


async def test_a_finaliser_that_changes_the_result_ends_the_run_cleanly(
        session_box: tuple[Sandbox, SandboxSession]) -> None:
    """A generator's ``finally`` run by the collector around the result check: the finaliser ran before
    the copy (a session run collects its garbage at its end: the late key is part of the value), or the
    copy was taken first (the value as returned), or the run is ``invalid-output``; never a dead worker."""
    changed = "the program's result changed while it was checked"

    def clean(value: object, kind: str | None, message: str | None) -> bool:
        if kind is None:
            if not isinstance(value, dict):
                return False
            late = [key for key in value if key.startswith("late")]
            return len(value) - len(late) == 20000 and len(late) <= 1
        return kind == "invalid-output" and message is not None and changed in message

    assert clean(*await _in_process(_FINALISER))
    sandbox, session = session_box
    for opened in (None, session):
        with anyio.fail_after(30):
            result = await sandbox.run(textwrap.dedent(_FINALISER).strip(), tool_names=TOOL_NAMES,
                                       call_tool=fake_call_tool, session=opened)
        error = result.error
        assert clean(result.value, *((None, None) if error is None else (error.kind, error.message)))
    with anyio.fail_after(30):
        after = await sandbox.run("return 'still here'", tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                                  session=session)
    assert after.value == "still here" and not after.stats.session_restarted


@pytest.mark.parametrize("case", sorted(ODD_EXCEPTIONS))
async def test_an_exception_is_reported_without_running_its_text_hooks(
        case: str, session_box: tuple[Sandbox, SandboxSession]) -> None:
    program, ending = ODD_EXCEPTIONS[case]
    value, kind, message = await _in_process(program)
    assert value is None and kind == "exception" and message is not None and message.endswith(ending)
    sandbox, session = session_box
    with anyio.fail_after(30):
        result = await sandbox.run(program, tool_names=TOOL_NAMES, call_tool=fake_call_tool, session=session)
    assert result.error is not None and result.error.kind == "exception", result
    assert result.error.message.endswith(ending) and not result.stats.session_restarted


async def test_tools_of_an_earlier_session_run_are_refused(
        session_box: tuple[Sandbox, SandboxSession]) -> None:
    sandbox, session = session_box
    limits = SandboxLimits(wall_seconds=5.0, cpu_seconds=3.0)
    results = []
    for program in ("kept = tools\nreturn 1",
                    "mine = tools.search({'q': 1})\nreturn [await kept.search({'q': 2}), await mine]",
                    "return await tools.search({'q': 3})"):
        with anyio.fail_after(30):
            results.append(await sandbox.run(program, tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                                             session=session, limits=limits))
    refused = results[1].error
    assert refused is not None and refused.kind == "exception", results[1]
    assert "belongs to an earlier run of this session" in refused.message
    assert results[2].value == {"tool": "search", "args": {"q": 3}}
    assert not any(result.stats.session_restarted for result in results)


_LATE_TASK = """
import asyncio
ticks = []
async def ticker():
    while True:
        ticks.append(1)
        await asyncio.sleep(0.01)
def g():
    try:
        yield 1
    finally:
        asyncio.gather(ticker())
result = {}
for i in range(20000):
    result["a" + str(i)] = [i]
def arm():
    it = g()
    next(it)
    box = [it]
    box.append(box)
arm()
return result
"""


async def test_no_task_outlives_its_run(session_box: tuple[Sandbox, SandboxSession]) -> None:
    sandbox, session = session_box
    results = []
    for program in (_LATE_TASK, "await asyncio.sleep(0.2)\nreturn len(ticks)"):
        with anyio.fail_after(30):
            results.append(await sandbox.run(program, tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                                             session=session))
    assert results[0].error is None and isinstance(results[0].value, dict)
    assert results[1].error is None and results[1].value == 0, results[1]


def test_plain_asyncio_lets_a_task_exit_escape_every_try() -> None:
    """The attack is real: under plain asyncio the program's ``try`` never sees it; the loop ends."""
    body = textwrap.indent(TASK_EXITS["gather-SystemExit"].strip(), "    ")
    script = f"import asyncio\nasync def main():\n{body}\nprint(asyncio.run(main()))\nprint('survived')\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          check=False)
    assert "caught" not in done.stdout and "survived" not in done.stdout, done


@pytest.mark.parametrize("case", sorted(TASK_EXITS))
async def test_an_exit_raised_in_a_task_reaches_the_program(
        case: str, session_box: tuple[Sandbox, SandboxSession]) -> None:
    """In the sandbox the program catches it where it awaits, as any other error."""
    expected = "caught " + case.rsplit("-", 1)[1]
    value, kind, message = await _in_process(TASK_EXITS[case])
    assert (value, kind) == (expected, None), message
    sandbox, session = session_box
    with anyio.fail_after(30):
        result = await sandbox.run(textwrap.dedent(TASK_EXITS[case]).strip(), tool_names=TOOL_NAMES,
                                   call_tool=fake_call_tool, session=session)
    assert result.error is None and result.value == expected, result
    assert not result.stats.session_restarted


async def test_an_uncaught_exit_in_a_task_is_the_program_error() -> None:
    program = "import asyncio\nasync def leave():\n    raise SystemExit(3)\nawait asyncio.gather(leave())"
    value, kind, message = await _in_process(program)
    assert value is None and kind == "exception" and message is not None and message.endswith("SystemExit: 3")


# -- class keywords ----------------------------------------------------------------------------------

#: Private class keywords are host switches: each payload works under plain CPython (what it returns
#: there is checked), and is refused at compile time in the sandbox.
PRIVATE_CLASS_KEYWORDS = {
    # an enum class made from a plain namespace: its "members" stay raw values
    "enum-simple": ("import enum\nclass E(enum.Enum, _simple=True):\n    a = 1\nreturn type(E.a).__name__",
                    "int"),
    # a typing alias subclass: program-writable, and it forwards every public write to its origin
    "typing-root": ("import typing, string\nclass G(type(typing.List[int]), _root=True):\n    pass\n"
                    "g = G(string.Template, ())\ng.planted = 1\nok = string.Template.planted\n"
                    "del string.Template.planted\nreturn ok", 1),
    "splat": ("import enum\nclass E(enum.Enum, **{'_simple': True}):\n    a = 1\nreturn type(E.a).__name__",
              "int"),
}


def _plain_value(program: str) -> object:
    namespace: dict[str, object] = {}
    exec(compile("def attack():\n" + textwrap.indent(program, "    "), "<plain>", "exec"), namespace)
    return namespace["attack"]()  # type: ignore[operator]


@pytest.mark.parametrize("case", sorted(PRIVATE_CLASS_KEYWORDS))
async def test_private_class_keywords_are_refused(case: str) -> None:
    program, plain = PRIVATE_CLASS_KEYWORDS[case]
    assert _plain_value(program) == plain
    with pytest.raises(ProgramCompileError, match=r"class keyword|cannot be used"):
        compile_program(program)


async def test_public_class_keywords_reach_the_class_as_in_cpython() -> None:
    """They used to be dropped silently (``total=False`` meant nothing); now CPython's answer."""
    program = "import string\nclass T(string.Template, foo=1):\n    pass\nreturn 1"
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        _plain_value(program)
    value, kind, message = await _in_process(program)
    assert value is None and kind == "exception" and message is not None
    assert message.endswith("got an unexpected keyword argument 'foo'")
    assert "line 2, in <program>" in message


async def test_no_metaclass_can_be_called_for_a_class_with_any_hooks() -> None:
    """Held: a metaclass called directly is ``type()``'s three-argument form with a free namespace.

    Under plain CPython ``type(enum.Enum)(..., _simple=True)`` builds a class from a program dict, so
    with any hook (here ``__init_subclass__``, run by the next class; ``__reduce_ex__``, ``__getattr__``
    ...); in the sandbox ``type()`` of a class is the one-argument ``SafeType`` and no metaclass is
    reachable from a facade.
    """
    program = ("import enum\nran = []\ndef hook(cls, **k):\n    ran.append('program hook ran')\n"
               "M = type(enum.Enum)\nC = M('C', (), {'__init_subclass__': classmethod(hook)}, _simple=True)\n"
               "M('D', (C,), {}, _simple=True)\nreturn ran")
    assert _plain_value(program) == ["program hook ran"]
    value, kind, message = await _in_process(program)
    assert value is None and kind == "exception" and message is not None
    assert "type() takes exactly one argument in the sandbox" in message
