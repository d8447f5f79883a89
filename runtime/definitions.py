"""Tool definitions: the frozen :class:`ToolDefinition`, its :class:`ToolOutput`, and :func:`define_tool`.

A definition is the model-facing triple (``name``, ``description``, ``parameters``) plus host-only
members: the output contract (``output.schema`` in the enforced subset, ``output.render``), the async
body, a cooperative ``timeout_ms`` budget, the concurrency classifier, optional resource ``claims``, UI
presenters and a last-mile ``finalize_content``.

:func:`define_tool` is the author-facing constructor: it compiles the parameter DSL (spec 1.3) and makes
the pipeline validate arguments before the body runs. A raw definition (``ToolDefinition(...)`` or
:func:`raw_tool`, e.g. bridged from MCP) keeps its parameters as given and validates its own input.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from codemode.sandbox.lossless import LosslessJsonError, snapshot

from ._fast import validate_fast
from .errors import DefinitionError, JsonSchemaError
from .schema import SCALAR_TYPES, check_schema, ensure_supported_schema

if TYPE_CHECKING:
    from .pipeline import ToolCall, ToolContext
    from .results import ToolResult

__all__ = (
    "ArgsValidator",
    "ResourceClaims",
    "ToolDefinition",
    "ToolOutput",
    "compile_parameters",
    "define_tool",
    "raw_tool",
)

#: ``validate(args) -> violations`` (empty when valid).
ArgsValidator = Callable[[Any], list[str]]
Execute = Callable[[Any, "ToolContext"], Awaitable[Any]]
#: ``render(args, value) -> content blocks`` (``[{"type": "text", "text": ...}, ...]``).
Render = Callable[[Any, Any], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class ResourceClaims:
    """What a call reads and writes (opaque resource keys, e.g. file paths).

    Two calls may overlap only if neither writes what the other reads or writes.
    """

    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()

    def conflicts_with(self, other: ResourceClaims) -> bool:
        """True when the two claim sets may not run at the same time."""
        return bool(self.writes & (other.reads | other.writes) or other.writes & self.reads)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """The output contract: a schema (enforced subset) and ``render(args, value) -> content blocks``.

    ``presentation_meta(args, value) -> JSON`` is optional and only computed for top-level calls.
    """

    schema: Mapping[str, Any]
    render: Render
    presentation_meta: Callable[[Any, Any], Any] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ToolDefinition:
    """A registrable tool. Identity-compared; build one with :func:`define_tool` or :func:`raw_tool`.

    ``validate_arguments`` is the compiled argument check the pipeline runs right before ``execute``
    (None for raw definitions, which validate their own input).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    output: ToolOutput
    execute: Execute
    timeout_ms: float | None = None
    is_concurrency_safe: Callable[[Any], bool] | None = None
    present_call: Callable[[Any], Any] | None = None
    present_result: Callable[[Any, Any], Any] | None = None
    finalize_content: Callable[[ToolCall, ToolResult], Sequence[Mapping[str, Any]] | None] | None = None
    claims: Callable[[Any], ResourceClaims | None] | None = None
    validate_arguments: ArgsValidator | None = field(default=None, repr=False)

    def schema(self) -> dict[str, Any]:
        """The model-facing projection ``{"name", "description", "parameters"}`` (a detached copy)."""
        try:
            parameters = snapshot(self.parameters, root="parameters")
        except LosslessJsonError:
            raise DefinitionError(
                f'tool "{self.name}" parameters must be lossless JSON before schema projection') from None
        return {"name": self.name, "description": self.description, "parameters": parameters}


def check_definition(definition: object) -> None:
    """The registration checks of spec 1.2 (output contract, output schema subset, timeout), plus the
    callables' arities, so that a hook with the wrong signature fails here rather than on every call."""
    if not isinstance(definition, ToolDefinition):
        raise DefinitionError(f"expected a ToolDefinition, got {type(definition).__name__}")
    name = definition.name
    if not isinstance(name, str) or not name:
        raise DefinitionError(f"tool name must be a non-empty string, not {name!r}")
    output = definition.output
    if (not isinstance(output, ToolOutput) or not callable(output.render)
            or (output.presentation_meta is not None and not callable(output.presentation_meta))):
        raise DefinitionError(f'tool "{name}" must declare output=ToolOutput(schema=..., render=..., '
                              "presentation_meta=None)")
    ensure_supported_schema(output.schema, "schema")
    _check_timeout(definition.timeout_ms, f'tool "{name}" timeout_ms')
    if not callable(definition.execute):
        raise DefinitionError(f'tool "{name}" execute must be an async callable')
    if not isinstance(definition.description, str):
        raise DefinitionError(f'tool "{name}" description must be a string')
    for label, fn, params in (
        ("execute", definition.execute, "(args, ctx)"),
        ("output.render", output.render, "(args, value)"),
        ("output.presentation_meta", output.presentation_meta, "(args, value)"),
        ("is_concurrency_safe", definition.is_concurrency_safe, "(args)"),
        ("claims", definition.claims, "(args)"),
        ("present_call", definition.present_call, "(args)"),
        ("present_result", definition.present_result, "(args, result)"),
        ("finalize_content", definition.finalize_content, "(call, result)"),
    ):
        if fn is not None:
            _check_callable(fn, params, f'tool "{name}" {label}')


def _check_callable(fn: object, params: str, label: str) -> None:
    """``fn`` must be callable with ``params`` (``"(args, value)"``: two positional arguments)."""
    if not callable(fn):
        hint = " (pass True/False to define_tool or raw_tool for a constant)" if isinstance(fn, bool) else ""
        raise DefinitionError(f"{label} must be a callable {params}, not {type(fn).__name__}{hint}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no introspectable signature (some builtins): checked when called
        return
    count = params.count(",") + 1
    try:
        signature.bind(*range(count))
    except TypeError:
        shown = getattr(fn, "__qualname__", type(fn).__name__)
        raise DefinitionError(
            f"{label} must accept {count} positional argument{'s' if count > 1 else ''} {params}, "
            f"but {shown}{signature} does not") from None


def _check_callable_or_bool(value: object, label: str) -> None:
    if not isinstance(value, bool) and not callable(value):
        raise DefinitionError(f"{label} must be True, False or a callable (args) -> bool, "
                              f"not {type(value).__name__}")
    if not isinstance(value, bool):
        _check_callable(value, "(args)", label)


def _constant_classifier(value: bool | Callable[[Any], bool] | None) -> Callable[[Any], bool] | None:
    """``True``/``False`` as a classifier: ``True`` answers yes for every call, ``False`` is the default."""
    if value is True:
        return _always
    if value is False:
        return None
    return value


def _always(args: Any) -> bool:
    return True


def _constant_claims(
    value: ResourceClaims | Callable[[Any], ResourceClaims | None] | None,
) -> Callable[[Any], ResourceClaims | None] | None:
    """A :class:`ResourceClaims` value as a claimer that claims it for every call."""
    if isinstance(value, ResourceClaims):
        constant = value

        def claim(args: Any) -> ResourceClaims:
            return constant

        return claim
    return value


def _check_timeout(timeout_ms: object, label: str) -> None:
    if timeout_ms is None:
        return
    if (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float)
            or not math.isfinite(timeout_ms) or timeout_ms <= 0):
        raise DefinitionError(f"{label} must be a positive finite number")


# ----------------------------------------------------------------------------------- the author DSL

_DSL_TYPES: Final = ("string", "number", "integer", "boolean", "null", "array", "object", "json")
_ANNOTATION_ORDER: Final = ("description", "title", "default", "examples")
_KEYS: Final = {
    **{kind: frozenset({"type", "enum", "const"}) for kind in SCALAR_TYPES},
    "array": frozenset({"type", "items"}),
    "object": frozenset({"type", "additionalProperties", "properties"}),
    "json": frozenset({"type"}),
    "oneOf": frozenset({"oneOf"}),
}


class _Compiler:
    """Compiles the value-schema DSL, collecting every error (paths rooted at ``parameters``)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self._active: set[int] = set()

    def properties(self, spec: object, path: str) -> tuple[dict[str, Any], list[str]]:
        if not isinstance(spec, Mapping) or not all(isinstance(k, str) for k in spec):
            self.errors.append(f"{path} must be an object of value schemas")
            return {}, []
        compiled: dict[str, Any] = {}
        required: list[str] = []
        for key, child in spec.items():
            child_path = f"{path}.{key}"
            if isinstance(child, Mapping) and "required" in child:
                if child["required"] is not True:
                    self.errors.append(f"{child_path}.required must be true when present")
                else:
                    required.append(key)
            compiled[key] = self.node(child, child_path, allow_required=True)
        return compiled, required

    def node(self, spec: object, path: str, *, allow_required: bool = False) -> dict[str, Any]:
        if not isinstance(spec, Mapping) or not all(isinstance(k, str) for k in spec):
            self.errors.append(f"{path} must be a value schema object")
            return {}
        if id(spec) in self._active:
            self.errors.append(f"{path} is circular")
            return {}
        self._active.add(id(spec))
        try:
            return self._node(spec, path, allow_required)
        finally:
            self._active.discard(id(spec))

    def _node(self, spec: Mapping[str, Any], path: str, allow_required: bool) -> dict[str, Any]:
        if "oneOf" in spec and "type" in spec:
            self.errors.append(f"{path} cannot declare both type and oneOf")
            return {}
        kind: Any = "oneOf" if "oneOf" in spec else spec.get("type")
        if kind != "oneOf" and (not isinstance(kind, str) or kind not in _DSL_TYPES):
            self.errors.append(f"{path}.type must be {'/'.join(_DSL_TYPES)}, or use oneOf")
            return {}
        allowed = _KEYS[kind] | set(_ANNOTATION_ORDER) | ({"required"} if allow_required else set())
        for key in spec:
            if key not in allowed:
                self.errors.append(f"{path}.{key} is not supported by the value schema DSL")
        annotations = {key: spec[key] for key in _ANNOTATION_ORDER if key in spec}
        if kind == "oneOf":
            branches = spec["oneOf"]
            if not isinstance(branches, Sequence) or isinstance(branches, str) or len(branches) < 2:
                self.errors.append(f"{path}.oneOf must be an array of at least two value schemas")
                return {}
            compiled = [self.node(branch, f"{path}.oneOf[{i}]") for i, branch in enumerate(branches)]
            return {"oneOf": compiled, **annotations}
        if kind == "json":
            return annotations
        out: dict[str, Any] = {"type": kind, **annotations}
        if kind in SCALAR_TYPES:
            if "enum" in spec:
                values = spec["enum"]
                if not isinstance(values, Sequence) or isinstance(values, str) or not values:
                    self.errors.append(f"{path}.enum must be a non-empty array of scalar values")
                else:
                    out["enum"] = list(values)
            if "const" in spec:
                out["const"] = spec["const"]
        elif kind == "array":
            if "items" in spec:
                out["items"] = self.node(spec["items"], f"{path}.items")
        else:
            openness = spec.get("additionalProperties")
            if type(openness) is not bool:
                self.errors.append(f"{path}.additionalProperties must be explicitly true or false")
            else:
                out["additionalProperties"] = openness
            if "properties" in spec:
                properties, required = self.properties(spec["properties"], f"{path}.properties")
                out["properties"] = properties
                if required:
                    out["required"] = required
        return out


def compile_parameters(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Compile the parameter DSL (a map ``name -> value spec``) into a raw JSON Schema object.

    The root is an open object: ``{"type": "object", "properties": ..., "required": [...]}`` with
    ``required`` listing the ``required: True`` keys in declaration order (omitted when empty).
    Raises :class:`~codemode.runtime.errors.JsonSchemaError` listing every problem.
    """
    compiler = _Compiler()
    properties, required = compiler.properties(spec, "parameters")
    if compiler.errors:
        raise JsonSchemaError(compiler.errors)
    compiled: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        compiled["required"] = required
    ensure_supported_schema(compiled, "parameters")
    return compiled


def _subset_validator(schema: Mapping[str, Any]) -> ArgsValidator:
    def validate(args: Any) -> list[str]:
        return validate_fast(schema, args, "")

    return validate


def _jsonschema_validator(name: str, schema: Mapping[str, Any]) -> ArgsValidator:
    """Validate raw parameter schemas outside the subset with the ``jsonschema`` library."""
    jsonschema: Any = importlib.import_module("jsonschema")  # untyped library, kept behind Any
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        checker = cls(schema)
    except jsonschema.SchemaError as exc:
        raise DefinitionError(
            f'tool "{name}" parameters are not a valid JSON Schema: {exc.message}') from None

    def validate(args: Any) -> list[str]:
        found: list[str] = []
        try:
            for error in checker.iter_errors(args):
                where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
                label = where.lstrip(".") or "arguments"
                found.append(f'"{label}" {error.message}')
        except Exception as exc:  # a checker bug must not crash the call
            found.append(f'"arguments" could not be validated: {exc}')
        return found

    return validate


def define_tool(
    *,
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    output: ToolOutput,
    execute: Execute,
    timeout_ms: float | None = None,
    is_concurrency_safe: bool | Callable[[Any], bool] | None = None,
    present_call: Callable[[Any], Any] | None = None,
    present_result: Callable[[Any, Any], Any] | None = None,
    finalize_content: Callable[[ToolCall, ToolResult], Sequence[Mapping[str, Any]] | None] | None = None,
    claims: ResourceClaims | Callable[[Any], ResourceClaims | None] | None = None,
) -> ToolDefinition:
    """Define a first-party tool whose arguments the pipeline validates before ``execute`` runs.

    ``parameters`` is the author DSL (``{"path": {"type": "string", "required": True}}``), or a raw JSON
    Schema object when ``parameters.get("type")`` is a string (used as is; validated with the subset
    validator when inside the subset, otherwise with ``jsonschema``). ``is_concurrency_safe``,
    ``present_call`` and ``present_result`` see only valid arguments: for invalid ones they answer
    ``False`` / ``None`` / ``None`` (soft validation, since replays may feed old arguments).

    ``is_concurrency_safe`` is a classifier ``fn(args) -> bool`` or a constant (``True``: every call may
    overlap other safe calls); ``claims`` is ``fn(args) -> ResourceClaims | None`` or one
    :class:`ResourceClaims` for every call. ``output.render(args, value)`` must return a list of
    content blocks; its arity (like every callable's) is checked here, what it returns on each call.
    ``timeout_ms`` is enforced by the timeout policy (``codemode.tools.install_timeout_policy``, which
    ``codemode.CodeMode`` installs); a runtime without it logs a warning the first time such a tool runs.
    """
    _check_timeout(timeout_ms, f"define_tool({name}): timeout_ms")
    if not isinstance(parameters, Mapping):
        raise DefinitionError(f"define_tool({name}): parameters must be a mapping")
    if isinstance(parameters.get("type"), str):
        compiled = snapshot(dict(parameters), root="parameters")
        if check_schema(compiled, "parameters"):
            validator = _jsonschema_validator(name, compiled)
        else:
            validator = _subset_validator(compiled)
    else:
        compiled = compile_parameters(parameters)
        validator = _subset_validator(compiled)

    def valid(args: Any) -> bool:
        return not validator(args)

    label = f'tool "{name}"'
    if is_concurrency_safe is not None:
        _check_callable_or_bool(is_concurrency_safe, f"{label} is_concurrency_safe")
    for what, hook, params in (("present_call", present_call, "(args)"),
                               ("present_result", present_result, "(args, result)"),
                               ("claims", None if isinstance(claims, ResourceClaims) else claims, "(args)")):
        if hook is not None:
            _check_callable(hook, params, f"{label} {what}")

    safe = None
    constant = _constant_classifier(is_concurrency_safe)
    if constant is not None:
        classify = constant

        def safe(args: Any) -> bool:
            return valid(args) and classify(args) is True

    call_presenter = None
    if present_call is not None:
        present = present_call

        def call_presenter(args: Any) -> Any:
            return present(args) if valid(args) else None

    result_presenter = None
    if present_result is not None:
        present_outcome = present_result

        def result_presenter(args: Any, result: Any) -> Any:
            return present_outcome(args, result) if valid(args) else None

    claimer = None
    claims_fn = _constant_claims(claims)
    if claims_fn is not None:
        claim = claims_fn

        def claimer(args: Any) -> ResourceClaims | None:
            return claim(args) if valid(args) else None

    definition = ToolDefinition(
        name=name, description=description, parameters=compiled, output=output, execute=execute,
        timeout_ms=timeout_ms, is_concurrency_safe=safe, present_call=call_presenter,
        present_result=result_presenter, finalize_content=finalize_content, claims=claimer,
        validate_arguments=validator,
    )
    check_definition(definition)
    return definition


def raw_tool(
    *,
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    output: ToolOutput,
    execute: Execute,
    **options: Any,
) -> ToolDefinition:
    """A definition whose parameters are used as given and whose arguments are NOT validated here.

    For bridged tools (MCP) that validate their own input. ``options`` are the other
    :class:`ToolDefinition` fields (``timeout_ms``, ``is_concurrency_safe``, ...); as in
    :func:`define_tool`, ``is_concurrency_safe`` may be a bool and ``claims`` a :class:`ResourceClaims`.
    """
    if "is_concurrency_safe" in options:
        safe = options["is_concurrency_safe"]
        if safe is not None:
            _check_callable_or_bool(safe, f'tool "{name}" is_concurrency_safe')
        options["is_concurrency_safe"] = _constant_classifier(safe)
    if "claims" in options:
        options["claims"] = _constant_claims(options["claims"])
    definition = ToolDefinition(name=name, description=description, parameters=parameters, output=output,
                                execute=execute, **options)
    check_definition(definition)
    return definition
