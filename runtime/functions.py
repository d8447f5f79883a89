"""Tools from plain functions: the :func:`tool` decorator.

A typed function already says everything a tool definition needs: its name, its parameters and their
types, what it returns, and (in its docstring) what it does and what each parameter means. ``@tool``
reads all of that and builds the :class:`~codemode.runtime.ToolDefinition` that
:func:`~codemode.runtime.define_tool` would::

    @tool
    async def search(query: str, limit: int = 10) -> list[str]:
        \"\"\"Search the notes.

        Args:
            query: Words to look for.
            limit: At most this many matches.
        \"\"\"

* **Parameters.** Each parameter's annotation becomes its JSON Schema (pydantic builds it, converted to
  the enforced subset, :mod:`codemode.runtime._subset`); a parameter with a default is optional. Every
  parameter needs an annotation (``typing.Any`` for any JSON value), and ``*args``/``**kwargs`` are not
  tools' parameters: both are refused when the function is decorated, naming the parameter, as is an
  annotation with no JSON form (a socket, a callable). The arguments a body receives were validated
  against the schema and then converted to the annotated types: a ``TypedDict``, a dataclass or a
  pydantic model parameter gets an instance; ``float`` gets a float even for ``1``. A conversion that
  fails (a pydantic validator refusing a value) is an ``INVALID_ARGS`` result, like a schema violation.
* **The context.** A parameter annotated :class:`~codemode.runtime.ToolContext`, or an unannotated one
  named ``ctx``, receives the call's context (identity, the cancel signal, ``defer_context``,
  ``conclude_turn``) and is not part of the schema.
* **The value.** The return annotation becomes the output schema; the returned value (a dataclass, a
  pydantic model, a ``TypedDict``, plain JSON) is converted to lossless JSON, which the pipeline then
  validates against that schema. Without a return annotation any JSON value may be returned.
* **Description.** The docstring's text before its first section is the tool's description; per-parameter
  text comes from a Google ``Args:`` section, NumPy ``Parameters`` or Sphinx ``:param x:`` fields
  (:mod:`codemode.runtime._docstrings`), unless the annotation carries its own
  (``Annotated[int, Field(description=...)]``). The ``Returns`` text describes the output.
* **Sync functions** run in a worker thread (:func:`anyio.to_thread.run_sync`), so a blocking body never
  stalls the event loop and the other calls of a turn or program. A thread cannot be interrupted: a
  cancelled or timed-out sync body runs to its end (the timeout policy reports it as stalled after its
  grace period), so long sync work should look at ``ctx.cancel.cancelled`` now and then. The hand-off
  costs ~0.1 ms per call (``bench/function_tools.py``): write cheap non-blocking tools as ``async def``.

pydantic is imported when the first tool is built, not when :mod:`codemode` is imported.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, overload

import anyio.to_thread

from codemode.sandbox.lossless import dumps, is_lossless, thaw

from ._docstrings import parse_docstring
from ._subset import to_subset
from .definitions import ResourceClaims, ToolDefinition, ToolOutput, define_tool
from .errors import DefinitionError, ToolArgsError, ToolOutputError
from .pipeline import ToolContext
from .results import text_block
from .schema import check_schema

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from .pipeline import ToolCall
    from .results import ToolResult

__all__ = ("tool",)

_ANY_OUTPUT: Final[dict[str, Any]] = {}


@overload
def tool(fn: Callable[..., Any], /) -> ToolDefinition: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_ms: float | None = None,
    is_concurrency_safe: bool | Callable[[Any], bool] | None = None,
    claims: ResourceClaims | Callable[[Any], ResourceClaims | None] | None = None,
    render: Callable[[Any, Any], Sequence[Mapping[str, Any]]] | None = None,
    presentation_meta: Callable[[Any, Any], Any] | None = None,
    present_call: Callable[[Any], Any] | None = None,
    present_result: Callable[[Any, Any], Any] | None = None,
    finalize_content: Callable[[ToolCall, ToolResult], Sequence[Mapping[str, Any]] | None] | None = None,
) -> Callable[[Callable[..., Any]], ToolDefinition]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_ms: float | None = None,
    is_concurrency_safe: bool | Callable[[Any], bool] | None = None,
    claims: ResourceClaims | Callable[[Any], ResourceClaims | None] | None = None,
    render: Callable[[Any, Any], Sequence[Mapping[str, Any]]] | None = None,
    presentation_meta: Callable[[Any, Any], Any] | None = None,
    present_call: Callable[[Any], Any] | None = None,
    present_result: Callable[[Any, Any], Any] | None = None,
    finalize_content: Callable[[ToolCall, ToolResult], Sequence[Mapping[str, Any]] | None] | None = None,
) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
    """Turn a typed function (sync or async) into a :class:`~codemode.runtime.ToolDefinition`.

    Use it bare (``@tool``) or with options (``@tool(timeout_ms=500)``); see the module docstring for
    what is read from the function. The options are :func:`~codemode.runtime.define_tool`'s:

    * ``name`` (default: the function's name) and ``description`` (default: from the docstring);
    * ``timeout_ms``, enforced by the timeout policy (which :class:`codemode.CodeMode` installs);
    * ``is_concurrency_safe``: ``True`` when every call may overlap other safe calls, or
      ``fn(args) -> bool`` deciding per call (``args`` is the validated JSON arguments); default exclusive;
    * ``claims``: a :class:`~codemode.runtime.ResourceClaims`, or ``fn(args) -> ResourceClaims | None``;
    * ``render(args, value) -> content blocks``: what the model sees of a direct call (default: a
      string value as is, anything else as compact JSON), and ``presentation_meta``;
    * ``present_call``, ``present_result``, ``finalize_content`` as in ``define_tool``.

    The result is the definition, not the function: register it (``rt.register(search)``) or hand it
    to ``CodeMode(tools=[search])``. Keep a reference to the plain function to call it directly.
    A bad signature raises :class:`~codemode.runtime.errors.DefinitionError` naming the function and
    the parameter.
    """
    options = _Options(name, description, timeout_ms, is_concurrency_safe, claims, render, presentation_meta,
                       present_call, present_result, finalize_content)
    if fn is None:
        return functools.partial(_build, options=options)
    return _build(fn, options=options)


@dataclass(frozen=True, slots=True)
class _Options:
    name: str | None
    description: str | None
    timeout_ms: float | None
    is_concurrency_safe: bool | Callable[[Any], bool] | None
    claims: ResourceClaims | Callable[[Any], ResourceClaims | None] | None
    render: Callable[[Any, Any], Sequence[Mapping[str, Any]]] | None
    presentation_meta: Callable[[Any, Any], Any] | None
    present_call: Callable[[Any], Any] | None
    present_result: Callable[[Any, Any], Any] | None
    finalize_content: Callable[[ToolCall, ToolResult], Sequence[Mapping[str, Any]] | None] | None


@dataclass(frozen=True, slots=True)
class _Parameter:
    """One schema parameter: how to convert its JSON argument and how to pass it on."""

    name: str
    adapter: TypeAdapter[Any]
    positional: bool  # positional-only: passed by position, never by keyword


def _build(fn: Callable[..., Any], *, options: _Options) -> ToolDefinition:
    if not callable(fn) or isinstance(fn, ToolDefinition):
        raise DefinitionError(f"@tool needs a function, not {type(fn).__name__}")
    label = f"@tool {_qualname(fn)}()"
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise DefinitionError(f"{label}: a generator cannot be a tool (a call returns one value); "
                              "return a list")
    pydantic = importlib.import_module("pydantic")
    tool_name = options.name if options.name is not None else getattr(fn, "__name__", None)
    if not isinstance(tool_name, str) or not tool_name or tool_name == "<lambda>":
        raise DefinitionError(f"{label}: the function has no usable name; pass @tool(name=...)")
    signature, hints = _signature(fn, label)
    doc = parse_docstring(inspect.getdoc(_unwrapped(fn)))
    parameters: list[_Parameter] = []
    context_name: str | None = None
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in signature.parameters.values():
        hint = hints.get(param.name, inspect.Parameter.empty)
        if _is_context(hint) or (param.name == "ctx" and hint is inspect.Parameter.empty):
            if context_name is not None:
                raise DefinitionError(f"{label}: parameters {context_name!r} and {param.name!r} both ask for "
                                      "the ToolContext; keep one")
            context_name = param.name
            continue
        where = f"{label}: parameter {param.name!r}"
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            star = "*" if param.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            raise DefinitionError(f"{where}: a tool's arguments are named JSON values, so {star}{param.name} "
                                  "cannot receive any; declare each parameter with its type")
        if hint is inspect.Parameter.empty:
            raise DefinitionError(f"{where} has no type annotation; annotate it (typing.Any accepts any JSON "
                                  "value)")
        adapter = _adapter(pydantic, hint, where)
        text = None if _describes_itself(hint) else doc.params.get(param.name)
        schema = _schema(adapter, "validation", where, text)
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        else:
            default = _default_json(adapter, param.default)
            if default is not _NO_DEFAULT:
                schema = {**schema, "default": default}
        properties[param.name] = schema
        parameters.append(_Parameter(param.name, adapter, param.kind is inspect.Parameter.POSITIONAL_ONLY))
    parameters_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters_schema["required"] = required
    parameters_schema["additionalProperties"] = False
    _check_subset(parameters_schema, label, "parameters")

    returns = hints.get("return", inspect.Parameter.empty)
    output_adapter: TypeAdapter[Any]
    output_schema: dict[str, Any] = dict(_ANY_OUTPUT)
    if returns is not inspect.Parameter.empty:
        output_adapter = _adapter(pydantic, returns, f"{label}: the return annotation")
        output_schema = _schema(output_adapter, "serialization", f"{label}: the return annotation",
                                doc.returns or None)
    else:
        output_adapter = pydantic.TypeAdapter(Any)
        if doc.returns:
            output_schema = {"description": doc.returns}
    _check_subset(output_schema, label, "output schema")

    execute = _executor(fn, tool_name, parameters, context_name, output_adapter, pydantic)
    return define_tool(
        name=tool_name,
        description=options.description if options.description is not None else doc.description,
        parameters=parameters_schema,
        output=ToolOutput(schema=output_schema, render=options.render or render_value,
                          presentation_meta=options.presentation_meta),
        execute=execute,
        timeout_ms=options.timeout_ms,
        is_concurrency_safe=options.is_concurrency_safe,
        claims=options.claims,
        present_call=options.present_call,
        present_result=options.present_result,
        finalize_content=options.finalize_content,
    )


def render_value(args: Any, value: Any) -> list[dict[str, Any]]:
    """The default render: a string value as is, anything else as compact JSON text."""
    return [text_block(value if isinstance(value, str) else dumps(value))]


# ------------------------------------------------------------------------------------ signature


def _unwrapped(fn: Callable[..., Any]) -> Any:
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    return inspect.unwrap(target) if callable(target) else target


def _qualname(fn: Callable[..., Any]) -> str:
    target = _unwrapped(fn)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return str(name or type(fn).__name__)


def _signature(fn: Callable[..., Any], label: str) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature and its evaluated annotations (``from __future__ import annotations`` included).

    An annotation that cannot be evaluated is reported by name; one spelled ``ToolContext`` counts as the
    context even when that name is imported only for type checking.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"{label}: cannot read the signature: {exc}") from None
    hints: dict[str, Any] = {}
    namespace = getattr(_unwrapped(fn), "__globals__", {})
    items = [(param.name, param.annotation, f"parameter {param.name!r}")
             for param in signature.parameters.values()]
    items.append(("return", signature.return_annotation, "the return annotation"))
    for key, annotation, what in items:
        if annotation is inspect.Parameter.empty or annotation is inspect.Signature.empty:
            continue
        if isinstance(annotation, str):
            if annotation == "ToolContext" or annotation.endswith(".ToolContext"):
                hints[key] = ToolContext
                continue
            try:
                annotation = eval(annotation, namespace)  # (the function's own annotation, as inspect does)
            except Exception as exc:
                raise DefinitionError(f"{label}: {what}: the annotation {annotation!r} cannot be evaluated "
                                      f"({exc}); define the names it uses at module level") from None
        hints[key] = annotation
    return signature, hints


def _is_context(hint: object) -> bool:
    """``ToolContext``, or ``ToolContext | None`` (a default of None keeps the function callable alone)."""
    if hint is ToolContext:
        return True
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ()
    return ToolContext in members and all(m is ToolContext or m is type(None) for m in members)


_NO_DEFAULT: Final = object()


def _default_json(adapter: TypeAdapter[Any], default: object) -> object:
    """The default as JSON for the schema's ``default`` annotation (omitted when it has no JSON form)."""
    try:
        value = adapter.dump_python(default, mode="json", warnings=False)
    except Exception:
        return _NO_DEFAULT
    return value if is_lossless(value) else _NO_DEFAULT


# ------------------------------------------------------------------------------------ schemas


def _adapter(pydantic: Any, annotation: object, where: str) -> TypeAdapter[Any]:
    try:
        adapter: TypeAdapter[Any] = pydantic.TypeAdapter(annotation)
    except Exception as exc:
        raise DefinitionError(f"{where} has type {_type_name(annotation)}, which has no JSON form: "
                              f"{_first_line(exc)}") from None
    return adapter


def _schema(adapter: TypeAdapter[Any], mode: Literal["validation", "serialization"], where: str,
            description: str | None) -> dict[str, Any]:
    """The subset schema of ``adapter``'s type; ``description`` (the docstring's) replaces the type's own."""
    try:
        raw = adapter.json_schema(mode=mode)
    except Exception as exc:
        raise DefinitionError(f"{where}: its type has no JSON schema: {_first_line(exc)}") from None
    if description:
        raw = {**raw, "description": description}
    return to_subset(raw)


def _check_subset(schema: dict[str, Any], label: str, what: str) -> None:
    violations = check_schema(schema, what)
    if violations:  # the conversion promises the subset; say so loudly if it ever does not
        raise DefinitionError(f"{label}: the {what} left the supported JSON Schema subset: "
                              + "; ".join(violations))


def _describes_itself(hint: object) -> bool:
    """``Annotated[T, Field(description=...)]``: the parameter's own text, which the docstring does not
    override (a type's docstring, which pydantic also turns into a description, it does)."""
    if typing.get_origin(hint) is not typing.Annotated:
        return False
    metadata: tuple[object, ...] = getattr(hint, "__metadata__", ())
    return any(isinstance(getattr(meta, "description", None), str) for meta in metadata)


def _type_name(annotation: object) -> str:
    name = getattr(annotation, "__qualname__", None)
    return name if isinstance(name, str) and not hasattr(annotation, "__args__") else repr(annotation)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# ------------------------------------------------------------------------------------ the body


def _executor(fn: Callable[..., Any], name: str, parameters: list[_Parameter], context_name: str | None,
              output: TypeAdapter[Any], pydantic: Any) -> Callable[[Any, ToolContext], Awaitable[Any]]:
    is_async = inspect.iscoroutinefunction(fn) or (  # (an object whose __call__ is async)
        not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__))
    validation_error: type[Exception] = pydantic.ValidationError

    def convert(args: Any) -> tuple[list[Any], dict[str, Any]]:
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        violations: list[str] = []
        for param in parameters:
            if param.name not in args:
                continue  # optional and not given: the function's own default applies
            try:
                value = param.adapter.validate_python(thaw(args[param.name]))
            except validation_error as exc:
                violations.extend(_violations(param.name, exc))
                continue
            if param.positional:
                positional.append(value)
            else:
                keywords[param.name] = value
        if violations:
            raise ToolArgsError(violations)
        return positional, keywords

    async def execute(args: Any, ctx: ToolContext) -> Any:
        positional, keywords = convert(args)
        if context_name is not None:
            keywords[context_name] = ctx
        if is_async:
            value = await fn(*positional, **keywords)
        else:
            value = await anyio.to_thread.run_sync(functools.partial(fn, *positional, **keywords))
            if inspect.isawaitable(value):
                value = await value
        try:
            return output.dump_python(value, mode="json", warnings=False)
        except Exception as exc:
            raise ToolOutputError(f'tool "{name}" returned a {type(value).__name__} that cannot be turned '
                                  f"into JSON: {_first_line(exc)}") from None

    return execute


def _violations(name: str, exc: Any) -> list[str]:
    found: list[str] = []
    for error in exc.errors(include_url=False):
        path = name + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
        message = str(error["msg"])
        found.append(f'"{path}" {message[:1].lower()}{message[1:]}')
    return found or [f'"{name}" is invalid']
