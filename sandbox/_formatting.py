"""``str.format`` and ``str.format_map`` for programs: field lookups go through the attribute guard.

CPython's ``str.format`` resolves ``{0.name}`` fields with a C-level ``getattr``, which no guard sees
(``"{0.__globals__}".format(f)``). Programs get :class:`SafeFormat` callables instead, wherever they
reach the method (``s.format``, ``str.format``, ``type(s).format``, ``super().format_map``): a format
string without attribute fields (``"{:.2f}"``, ``"{0[key]}"``, ``"{name!r:>10}"``, the vast majority) is
handed to the real method, which then does only item lookups and ``__format__`` calls, both also
reachable natively; one with an attribute field is formatted by a :class:`string.Formatter` whose
``get_field`` resolves every ``.name`` step with the program's ``getattr`` (so ``"{0.__class__}"`` is
refused exactly as ``x.__class__`` is, and ``"{p.x}"`` works as in CPython).
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]
import string
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ("SafeFormat", "has_attribute_field")

_MAX_NESTING: Final = 4


def has_attribute_field(text: str, depth: int = 0) -> bool:
    """Whether a format string has a field that reads an attribute (``{0.x}``), nested specs included.

    A string the parser rejects answers True, so the guarded formatter raises the error.
    """
    try:
        for _, field, spec, _ in _string.formatter_parser(text):
            if field is None:
                continue
            _, rest = _string.formatter_field_name_split(field)
            for is_attribute, _ in rest:
                if is_attribute:
                    return True
            if spec and "{" in spec and (depth >= _MAX_NESTING or has_attribute_field(spec, depth + 1)):
                return True
    except (ValueError, TypeError):
        return True
    return False


class _GuardedFormatter(string.Formatter):
    """A formatter whose attribute steps use the program's ``getattr``."""

    def __init__(self, getattr_: Callable[[object, str], Any]) -> None:
        self._getattr = getattr_

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        first, rest = _string.formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attribute, key in rest:
            obj = self._getattr(obj, key) if is_attribute else obj[key]
        return obj, first


class SafeFormat:
    """``format`` or ``format_map``, unbound (``str.format``) or bound to one string (``s.format``)."""

    __slots__ = ("_formatter", "_map", "_text")

    def __init__(self, formatter: _GuardedFormatter, use_map: bool, text: str | None) -> None:
        self._formatter = formatter
        self._map = use_map
        self._text = text

    def __eq__(self, other: object) -> bool:
        # (as bound methods compare in CPython: the same method of the same string)
        return (type(other) is SafeFormat and other._map == self._map and other._text is self._text
                and other._formatter is self._formatter)

    def __hash__(self) -> int:
        return hash((self._map, id(self._text)))

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        if self._text is None:
            name = "format_map" if self._map else "format"
            if not args or not isinstance(args[0], str):
                raise TypeError(f"descriptor '{name}' for 'str' objects needs a 'str' argument")
            text, args = args[0], args[1:]
        else:
            text = self._text
        if self._map:
            if kwargs or len(args) != 1:
                raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
            mapping: Mapping[str, Any] = args[0]
            if not has_attribute_field(text):
                return str.format_map(text, mapping)
            return self._formatter.vformat(str.__str__(text), (), mapping)
        if not has_attribute_field(text):
            return str.format(text, *args, **kwargs)
        return self._formatter.vformat(str.__str__(text), args, kwargs)

    def __repr__(self) -> str:
        name = "format_map" if self._map else "format"
        if self._text is None:
            return f"<method '{name}' of 'str' objects>"
        return f"<built-in method {name} of str object>"


def make_formats(getattr_: Callable[[object, str], Any]) -> tuple[SafeFormat, SafeFormat,
                                                                 Callable[[str, bool], SafeFormat]]:
    """The unbound ``format``/``format_map`` and a factory of bound ones, all using ``getattr_``."""
    formatter = _GuardedFormatter(getattr_)

    def bound(text: str, use_map: bool) -> SafeFormat:
        return SafeFormat(formatter, use_map, text)

    return SafeFormat(formatter, False, None), SafeFormat(formatter, True, None), bound
