"""The two host names a program sees: the ``tools`` proxy and ``ToolCallError``.

``tools.NAME(...)`` and ``tools["NAME"](...)`` return an opaque awaitable; awaiting it sends one call
through the worker's ``call_tool`` (which the program never sees) and returns the tool's value, or raises
``ToolCallError`` when the host's handler raised :class:`~codemode.sandbox.errors.ToolCallFailure`. The proxy,
the bindings and the awaitables keep their state in ``_``-slots, which no program can read, refuse every
write and every copy, and expose no public attribute except the declared tool names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NoReturn

from .boundary import json_ready
from .errors import ToolCallFailure
from .facades import SafeAwaitable
from .lossless import LosslessJsonError, snapshot

__all__ = ("ToolBinding", "ToolCallError", "ToolsProxy")

CallTool = Callable[[str, Any], Awaitable[Any]]


class ToolCallError(Exception):
    """A tool call failed: ``tool_name`` says which, ``code`` the host's error code, ``str(err)`` why.

    Programs may raise their own (``raise ToolCallError("no results")``); ``tool_name`` and ``code``
    are then optional keywords (``""`` and ``"PROGRAM"`` by default).
    """

    def __init__(self, message: object = "", *, tool_name: str = "", code: str = "PROGRAM") -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.code = code

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class _Sealed:
    """Common base: no writes, no copies, no pickling."""

    __slots__ = ()

    def _deny(self, *args: object) -> NoReturn:
        raise TypeError(f"{type(self).__name__} objects are read-only")

    __setattr__ = __delattr__ = __setitem__ = __delitem__ = _deny

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError(f"{type(self).__name__} objects cannot be copied")

    def __copy__(self) -> _Sealed:
        return self

    def __deepcopy__(self, memo: object) -> _Sealed:
        return self


class ToolBinding(_Sealed):
    """``tools.NAME``: calling it with one dict or with keyword arguments returns an awaitable call."""

    __slots__ = ("_call_tool", "_name")

    def __init__(self, name: str, call_tool: CallTool) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_call_tool", call_tool)

    def __call__(self, *args: object, **kwargs: object) -> SafeAwaitable:
        name: str = object.__getattribute__(self, "_name")
        if args and kwargs:
            raise TypeError(f"tools.{name}() takes either one dict of arguments or keyword arguments, "
                            "not both")
        if len(args) > 1:
            raise TypeError(f"tools.{name}() takes at most one positional argument (a dict), got {len(args)}")
        arguments: object = args[0] if args else dict(kwargs)
        if not isinstance(arguments, dict):
            raise TypeError(f"tools.{name}() expects a dict of arguments, not {type(arguments).__name__!r}")
        try:
            arguments = snapshot(json_ready(arguments, "args"), root="args")
        except LosslessJsonError as exc:
            raise TypeError(f"arguments of tools.{name}() must be lossless JSON: {exc}") from None
        call_tool: CallTool = object.__getattribute__(self, "_call_tool")

        async def invoke() -> Any:
            try:
                return await call_tool(name, arguments)
            except ToolCallFailure as failure:
                raise ToolCallError(failure.message, tool_name=name, code=failure.code) from None

        return SafeAwaitable(invoke, f"tools.{name}(...)")

    def __repr__(self) -> str:
        return f"<tool {object.__getattribute__(self, '_name')!r}>"


class ToolsProxy(_Sealed):
    """The program's ``tools``: attribute and item access to the declared tools, nothing else."""

    __slots__ = ("_bindings",)

    def __init__(self, tool_names: Sequence[str], call_tool: CallTool) -> None:
        bindings = {str(name): ToolBinding(str(name), call_tool) for name in tool_names}
        object.__setattr__(self, "_bindings", MappingProxyType(bindings))

    def _lookup(self, name: object, error: type[LookupError] | type[AttributeError]) -> ToolBinding:
        bindings: Mapping[str, ToolBinding] = object.__getattribute__(self, "_bindings")
        if type(name) is str and name in bindings:
            return bindings[name]
        declared = ", ".join(sorted(bindings)) or "(none)"
        raise error(f"no tool named {name!r}; declared tools: {declared}")

    def __getattr__(self, name: str) -> ToolBinding:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._lookup(name, AttributeError)

    def __getitem__(self, name: object) -> ToolBinding:
        return self._lookup(name, KeyError)

    def __contains__(self, name: object) -> bool:
        return type(name) is str and name in object.__getattribute__(self, "_bindings")

    def __repr__(self) -> str:
        names = ", ".join(sorted(object.__getattribute__(self, "_bindings")))
        return f"<tools: {names}>"
