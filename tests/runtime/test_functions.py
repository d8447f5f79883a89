"""``@tool``: a typed function becomes a tool definition (schema, description, conversion, options)."""

from __future__ import annotations

import dataclasses
import socket
import threading
import typing
from typing import Annotated, Any, Literal, NotRequired

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypedDict  # (pydantic needs this one on Python < 3.12)

from codemode.runtime import (
    DefinitionError,
    ResourceClaims,
    ToolContext,
    ToolDefinition,
    ToolResult,
    ToolRuntime,
    check_schema,
    tool,
)
from codemode.tools import install_timeout_policy

pytestmark = pytest.mark.anyio


class Point(TypedDict):
    x: int
    y: NotRequired[float]


@dataclasses.dataclass
class Box:
    """A box with a label."""

    label: str
    size: int = 1


class Order(BaseModel):
    item: str
    quantity: int = Field(ge=1)

    @field_validator("item")
    @classmethod
    def _known(cls, value: str) -> str:
        if value == "unobtainium":
            raise ValueError("we do not sell unobtainium")
        return value


class Receipt(BaseModel):
    item: str
    total: float


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


class Summary(TypedDict):
    count: int
    labels: list[str]


async def call(definition: ToolDefinition, args: Any, **options: Any) -> ToolResult:
    rt = ToolRuntime()
    rt.register(definition)
    with anyio.fail_after(10):
        return await rt.execute(definition.name, args, **options)


# ---------------------------------------------------------------------------------- sync and async


async def test_an_async_function_runs_in_the_event_loop_task() -> None:
    """It awaits an async body directly and returns its value as the result."""

    @tool
    async def greet(name: str) -> str:
        """Greet someone."""
        await anyio.lowlevel.checkpoint()
        return f"hello {name} from {threading.current_thread().name}"

    result = await call(greet, {"name": "ada"})
    assert result.value == f"hello ada from {threading.current_thread().name}"
    assert result.text == result.value
    assert greet.name == "greet" and greet.description == "Greet someone."


async def test_a_sync_function_runs_in_a_worker_thread() -> None:
    """It never runs a sync body on the event loop's thread, so a blocking body blocks nothing else."""
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        return threading.get_ident()

    result = await call(where, {})
    assert not result.is_error and result.value != loop_thread


async def test_a_blocking_sync_body_does_not_stall_other_calls() -> None:
    """While one sync body blocks its thread, an async call of the same turn completes."""
    release = threading.Event()

    @tool(is_concurrency_safe=True)
    def block() -> str:
        release.wait(5)
        return "released"

    @tool(is_concurrency_safe=True)
    async def free() -> str:
        release.set()
        return "free"

    rt = ToolRuntime()
    rt.register(block)
    rt.register(free)
    from codemode.runtime import ToolCallRequest

    with anyio.fail_after(5):
        results = await rt.execute_tool_calls([ToolCallRequest("1", "block", "{}"),
                                               ToolCallRequest("2", "free", "{}")])
    assert [result.value for result in results] == ["released", "free"]


# ---------------------------------------------------------------------------------- parameters


async def test_optional_parameters_take_the_function_defaults() -> None:
    """It lists only parameters without a default as required, records JSON defaults, and lets the
    function's own default apply to an omitted argument."""

    @tool
    def search(query: str, limit: int = 10, exact: bool | None = None) -> dict[str, Any]:
        return {"query": query, "limit": limit, "exact": exact}

    parameters = search.parameters
    assert parameters["required"] == ["query"]
    assert parameters["additionalProperties"] is False
    assert parameters["properties"]["limit"] == {"type": "integer", "default": 10}
    assert parameters["properties"]["exact"] == {"oneOf": [{"type": "boolean"}, {"type": "null"}],
                                                 "default": None}
    assert (await call(search, {"query": "q"})).value == {"query": "q", "limit": 10, "exact": None}
    assert (await call(search, {"query": "q", "limit": 3, "exact": True})).value == {
        "query": "q", "limit": 3, "exact": True}
    missing = await call(search, {"limit": 3})
    assert missing.code == "INVALID_ARGS" and '"query"' in missing.error.message  # type: ignore[union-attr]
    extra = await call(search, {"query": "q", "limti": 3})
    assert extra.code == "INVALID_ARGS" and "limti" in extra.error.message  # type: ignore[union-attr]


async def test_typed_arguments_arrive_as_instances_of_their_annotations() -> None:
    """A TypedDict, a dataclass and a pydantic model parameter are validated, then converted; a float
    parameter gets a float even for a JSON integer."""
    seen: dict[str, Any] = {}

    @tool
    def ship(point: Point, box: Box, order: Order, scale: float) -> str:
        seen.update(point=point, box=box, order=order, scale=scale)
        return "ok"

    args = {"point": {"x": 1}, "box": {"label": "b"}, "order": {"item": "tea", "quantity": 2}, "scale": 2}
    result = await call(ship, args)
    assert result.value == "ok"
    assert seen["point"] == {"x": 1}
    assert seen["box"] == Box(label="b", size=1)
    assert seen["order"] == Order(item="tea", quantity=2)
    assert type(seen["scale"]) is float and seen["scale"] == 2.0
    properties = ship.parameters["properties"]
    assert properties["box"]["description"] == "A box with a label."
    assert properties["order"]["properties"]["quantity"]["description"] == "(minimum: 1)"
    assert check_schema(ship.parameters, "parameters") == []


async def test_a_value_the_annotated_type_refuses_is_an_invalid_args_result() -> None:
    """It reports a failed conversion (a pydantic validator, a constraint) like a schema violation,
    naming the argument's path, and never runs the body."""
    ran: list[Order] = []

    @tool
    def buy(order: Order) -> None:
        ran.append(order)

    refused = await call(buy, {"order": {"item": "unobtainium", "quantity": 1}})
    assert refused.code == "INVALID_ARGS"
    assert '"order.item"' in refused.error.message and "unobtainium" in refused.error.message  # type: ignore[union-attr]
    too_few = await call(buy, {"order": {"item": "tea", "quantity": 0}})
    assert too_few.code == "INVALID_ARGS" and '"order.quantity"' in too_few.error.message  # type: ignore[union-attr]
    assert ran == []


# ---------------------------------------------------------------------------------- returns


@pytest.mark.parametrize(
    ("returned", "annotation", "value", "schema"),
    [
        (Receipt(item="tea", total=2.5), Receipt, {"item": "tea", "total": 2.5},
         {"type": "object", "properties": {"item": {"type": "string"}, "total": {"type": "number"}},
          "required": ["item", "total"], "additionalProperties": False}),
        (Box("b", 2), Box, {"label": "b", "size": 2},
         {"type": "object", "description": "A box with a label.",
          "properties": {"label": {"type": "string"}, "size": {"type": "integer", "default": 1}},
          "required": ["label"], "additionalProperties": False}),
        ({"count": 2, "labels": ["a", "b"], "extra": 1}, Summary, {"count": 2, "labels": ["a", "b"]},
         {"type": "object", "properties": {"count": {"type": "integer"},
                                           "labels": {"type": "array", "items": {"type": "string"}}},
          "required": ["count", "labels"], "additionalProperties": False}),
        ((1, "a"), tuple[int, str], [1, "a"], {"type": "array", "description": "(minItems: 2, maxItems: 2)"}),
        ({"nested": [1, None, True]}, dict[str, Any], {"nested": [1, None, True]},
         {"type": "object", "additionalProperties": True}),
        (None, None, None, {"type": "null"}),
    ],
    ids=["pydantic", "dataclass", "typeddict", "tuple", "json", "none"],
)
async def test_returned_values_become_lossless_json(returned: Any, annotation: Any, value: Any,
                                                    schema: Any) -> None:
    """It converts the returned value by its annotation, and the annotation is the output schema."""

    def body() -> Any:
        return returned

    body.__annotations__["return"] = annotation
    definition = tool(body)
    assert definition.output.schema == schema
    result = await call(definition, {})
    assert not result.is_error, result
    assert result.value == value


async def test_without_a_return_annotation_any_json_value_is_returned() -> None:
    """It accepts any value that has a JSON form (a dataclass too) when the return is not annotated."""

    @tool
    def anything():  # type: ignore[no-untyped-def]
        return {"box": Box("b")}

    assert anything.output.schema == {}
    assert (await call(anything, {})).value == {"box": {"label": "b", "size": 1}}


@pytest.mark.parametrize(("returned", "code"), [("not a number", "INVALID_TOOL_OUTPUT"),
                                                (float("nan"), "INVALID_TOOL_OUTPUT")])
async def test_a_value_that_breaks_the_return_annotation_is_an_output_error(returned: Any, code: str) -> None:
    """It reports a value outside the annotation, or one that is not lossless JSON, as a tool error."""

    def body() -> float:
        return typing.cast(float, returned)

    assert (await call(tool(body), {})).code == code


async def test_the_default_render_shows_strings_raw_and_other_values_as_json() -> None:
    """It renders a string as is and other values as compact JSON."""

    @tool
    def text() -> str:
        return "plain"

    @tool
    def data() -> dict[str, int]:
        return {"a": 1}

    assert (await call(text, {})).text == "plain"
    assert (await call(data, {})).text == '{"a":1}'


# ---------------------------------------------------------------------------------- docstrings


def _google(query: str, limit: int = 5) -> list[str]:
    """Search the notes.

    Matches whole words only.

    Args:
        query: Words to look for,
            all of them.
        limit (int): At most this many.

    Returns:
        list[str]: The matching paths.

    Raises:
        ValueError: never.
    """
    return []


def _numpy(query: str, limit: int = 5) -> list[str]:
    """Search the notes.

    Matches whole words only.

    Parameters
    ----------
    query : str
        Words to look for,
        all of them.
    limit : int, optional
        At most this many.

    Returns
    -------
    list of str
        The matching paths.
    """
    return []


def _sphinx(query: str, limit: int = 5) -> list[str]:
    """Search the notes.

    Matches whole words only.

    :param query: Words to look for,
        all of them.
    :param int limit: At most this many.
    :returns: The matching paths.
    :rtype: list[str]
    """
    return []


@pytest.mark.parametrize("fn", [_google, _numpy, _sphinx], ids=["google", "numpy", "sphinx"])
def test_the_docstring_gives_the_description_and_each_parameter_text(fn: Any) -> None:
    """It takes the text before the first section as the description, each parameter's text into its
    schema and the return's text into the output schema, in all three docstring styles."""
    definition = tool(fn)
    assert definition.description == "Search the notes.\n\nMatches whole words only."
    properties = definition.parameters["properties"]
    assert properties["query"] == {"type": "string", "description": "Words to look for, all of them."}
    assert properties["limit"] == {"type": "integer", "description": "At most this many.", "default": 5}
    assert definition.output.schema["description"] == "The matching paths."


def test_an_annotated_description_wins_over_the_docstring_and_keeps_its_constraints() -> None:
    """It keeps ``Field(description=...)`` and folds constraints into the text the model reads."""

    def pick(count: Annotated[int, Field(ge=1, le=9, description="How many.")],
             mode: Annotated[str, Field(pattern="^[a-z]+$")]) -> None:
        """Pick.

        Args:
            count: Ignored: the annotation says it.
            mode: The mode.
        """

    properties = tool(pick).parameters["properties"]
    assert properties["count"]["description"] == "How many. (minimum: 1, maximum: 9)"
    assert properties["mode"]["description"] == 'The mode. (pattern: "^[a-z]+$")'


# ---------------------------------------------------------------------------------- bad signatures


def _socket_tool(path: str, conn: socket.socket) -> None: ...


def _untyped(path: str, limit) -> None: ...  # type: ignore[no-untyped-def]


def _varargs(*paths: str) -> None: ...


def _kwargs(**options: str) -> None: ...


def _callable(fn: typing.Callable[[int], int]) -> None: ...


class _OldTypedDict(typing.TypedDict):
    x: int


def _old_typed_dict(point: _OldTypedDict) -> None: ...


@pytest.mark.parametrize(
    ("fn", "parameter", "says"),
    [
        (_socket_tool, "conn", "has type socket, which has no JSON form"),
        (_untyped, "limit", "has no type annotation"),
        (_varargs, "paths", "*paths cannot receive any"),
        (_kwargs, "options", "**options cannot receive any"),
        (_callable, "fn", "no JSON schema"),
        (_old_typed_dict, "point", "typing_extensions.TypedDict"),
    ],
    ids=["socket", "unannotated", "varargs", "kwargs", "callable", "typing-typeddict"],
)
def test_a_bad_parameter_fails_at_decoration_naming_the_function_and_the_parameter(
        fn: Any, parameter: str, says: str) -> None:
    """It raises DefinitionError when the function is decorated, not when the model calls it."""
    with pytest.raises(DefinitionError) as caught:
        tool(fn)
    message = str(caught.value)
    assert f"@tool {fn.__qualname__}()" in message and f"parameter {parameter!r}" in message
    assert says in message


def test_other_bad_uses_fail_at_decoration() -> None:
    """A generator, a bad return annotation, a nameless callable, two context parameters and a name
    defined only locally (under ``from __future__ import annotations``) fail too."""

    class Local(TypedDict):
        x: int

    def numbers() -> typing.Iterator[int]:
        yield 1

    def returns_socket() -> socket.socket: ...

    def two(ctx: ToolContext, other: ToolContext) -> None: ...

    def local(point: Local) -> None: ...

    for fn, says in ((numbers, "a generator cannot be a tool"),
                     (returns_socket, "the return annotation has type socket"),
                     (lambda: 1, "pass @tool(name=...)"),
                     (two, "both ask for the ToolContext"),
                     (local, "parameter 'point': the annotation 'Local' cannot be evaluated")):
        with pytest.raises(DefinitionError, match="@tool") as caught:
            tool(fn)
        assert says in str(caught.value)


# ---------------------------------------------------------------------------------- the context


async def test_the_context_parameter_receives_the_tool_context() -> None:
    """A parameter annotated ToolContext (or ToolContext | None, or an unannotated ``ctx``) gets the
    call's context and is not part of the schema."""
    seen: list[Any] = []

    @tool
    async def annotated(text: str, context: ToolContext) -> str:
        seen.append(context)
        context.defer_context({"content": [{"type": "text", "text": "note"}], "source": {"kind": "test"}})
        return text

    @tool
    def optional(text: str, ctx: ToolContext | None = None) -> str:
        seen.append(ctx)
        return text

    @tool
    async def bare(text: str, ctx) -> str:  # type: ignore[no-untyped-def]
        seen.append(ctx)
        return text

    for definition in (annotated, optional, bare):
        assert set(definition.parameters["properties"]) == {"text"}
        result = await call(definition, {"text": "hi"}, call_id=f"call-{definition.name}")
        assert result.value == "hi"
        assert isinstance(seen[-1], ToolContext) and seen[-1].call_id == f"call-{definition.name}"
    first = await call(annotated, {"text": "x"})
    assert [dict(context["source"]) for context in first.additional_contexts] == [{"kind": "test"}]


# ---------------------------------------------------------------------------------- options


async def test_options_name_description_render_and_claims() -> None:
    """It passes define_tool's options on: a name, a description, a render and constant claims."""
    claims = ResourceClaims(reads=frozenset({"notes"}))

    @tool(name="lookup", description="Look a word up.", claims=claims,
          render=lambda args, value: [{"type": "text", "text": f"{args['word']}={value}"}])
    def find(word: str) -> int:
        """Ignored, the option wins."""
        return len(word)

    assert (find.name, find.description) == ("lookup", "Look a word up.")
    assert find.claims is not None and find.claims({"word": "x"}) == claims
    assert (await call(find, {"word": "abc"})).text == "abc=3"


async def test_is_concurrency_safe_accepts_a_constant_or_a_classifier() -> None:
    """``True`` marks every valid call parallel; a classifier decides per call."""

    @tool(is_concurrency_safe=True)
    def always(n: int) -> int:
        return n

    @tool(is_concurrency_safe=lambda args: args["n"] > 0)
    def sometimes(n: int) -> int:
        return n

    @tool
    def never(n: int) -> int:
        return n

    rt = ToolRuntime()
    for definition in (always, sometimes, never):
        rt.register(definition)
    assert rt.execution_mode("always", {"n": 0}) == "parallel"
    assert rt.execution_mode("always", {"n": "bad"}) == "exclusive"
    assert [rt.execution_mode("sometimes", {"n": n}) for n in (1, 0)] == ["parallel", "exclusive"]
    assert rt.execution_mode("never", {"n": 1}) == "exclusive"


async def test_timeout_ms_is_enforced_by_the_timeout_policy() -> None:
    """It hands ``timeout_ms`` to the definition, which the timeout policy enforces."""

    @tool(timeout_ms=50)
    async def slow() -> str:
        await anyio.sleep(5)
        return "late"

    assert slow.timeout_ms == 50
    rt = ToolRuntime()
    rt.register(slow)
    install_timeout_policy(rt)
    with anyio.fail_after(5):
        result = await rt.execute("slow", {})
    assert result.code == "TOOL_TIMEOUT"


def test_the_decorator_works_bare_and_called_and_checks_its_options() -> None:
    """``@tool`` and ``@tool()`` build the same kind of definition; a bad option fails at decoration."""

    def f(x: int) -> int:
        return x

    assert isinstance(tool(f), ToolDefinition) and isinstance(tool()(f), ToolDefinition)
    with pytest.raises(DefinitionError, match="timeout_ms"):
        tool(timeout_ms=-1)(f)
    with pytest.raises(DefinitionError, match=r"render must accept 2 positional arguments \(args, value\)"):
        tool(render=lambda value: [])(f)
    with pytest.raises(DefinitionError, match="is_concurrency_safe must be True, False or a callable"):
        tool(is_concurrency_safe="yes")(f)  # type: ignore[call-overload]


def test_positional_only_and_keyword_only_parameters_are_passed_correctly() -> None:
    """It passes positional-only parameters by position and the rest by keyword."""

    def mixed(a: int, /, b: int, *, c: int = 3) -> list[int]:
        return [a, b, c]

    definition = tool(mixed)
    assert definition.parameters["required"] == ["a", "b"]

    async def main() -> Any:
        return (await call(definition, {"a": 1, "b": 2})).value

    assert anyio.run(main) == [1, 2, 3]


def test_the_schemas_stay_inside_the_subset_for_unions_and_recursive_types() -> None:
    """It converts unions, literals, enums and recursive models to the enforced subset."""

    def shape(tree: Tree, pick: Literal["a", 1] | None, either: int | str, number: int | float) -> Tree:
        return tree

    definition = tool(shape)
    properties = definition.parameters["properties"]
    assert check_schema(definition.parameters, "parameters") == []
    assert check_schema(dict(definition.output.schema), "output") == []
    assert properties["number"] == {"type": "number"}
    assert properties["either"] == {"oneOf": [{"type": "integer"}, {"type": "string"}]}
    assert properties["pick"] == {"oneOf": [{"type": "string", "const": "a"}, {"type": "integer", "const": 1},
                                            {"type": "null"}]}
    assert properties["tree"]["properties"]["children"] == {"type": "array", "items": {}, "default": []}
