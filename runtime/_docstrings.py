"""Docstrings as tool documentation: the description, each parameter's text and the return's text.

The three common styles are read, and may even be mixed:

* Google: an ``Args:`` (``Arguments:``, ``Parameters:``, ``Keyword Args:``) section of ``name: text`` or
  ``name (type): text`` items, and a ``Returns:`` section;
* NumPy: a ``Parameters`` heading underlined with dashes, items ``name : type`` with the text indented
  below, and a ``Returns`` heading likewise;
* Sphinx: ``:param name: text`` (or ``:param type name: text``) and ``:returns: text`` fields.

The description is the text before the first section or field: what a reader of the function sees
first is what the model reads about the tool. A continuation line of an item is joined to it with a
space. Anything unrecognised stays in the description; parsing never fails.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ("Docstring", "parse_docstring")

_GOOGLE_PARAMS: Final = frozenset({"args", "arguments", "parameters", "params", "keyword args",
                                   "keyword arguments", "other parameters"})
_GOOGLE_RETURNS: Final = frozenset({"returns", "return", "yields"})
_GOOGLE_OTHER: Final = frozenset({"raises", "example", "examples", "note", "notes", "attributes",
                                  "see also", "warning", "warnings", "todo", "references"})
_GOOGLE_HEADER: Final = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ITEM: Final = re.compile(r"^\*{0,2}([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(?:\s+(.*))?$")
_NUMPY_PARAMS: Final = frozenset({"parameters", "other parameters"})
_NUMPY_RETURNS: Final = frozenset({"returns", "yields"})
_NUMPY_RULE: Final = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ITEM: Final = re.compile(r"^\*{0,2}([A-Za-z_]\w*)\s*(?::.*)?$")
_SPHINX_PARAM: Final = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+([^:]*?)\s*:\s*(.*)$")
_SPHINX_RETURNS: Final = re.compile(r"^:returns?\s*:\s*(.*)$")
_SPHINX_FIELD: Final = re.compile(r"^:[A-Za-z]+[^:]*:")
_TYPE_PREFIX: Final = re.compile(r"^[\w\[\].|,]+:\s+")


@dataclass(frozen=True, slots=True)
class Docstring:
    """What a docstring says: the description, ``params[name]`` and the return value's text."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)
    returns: str = ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(parts: list[str]) -> str:
    return " ".join(part.strip() for part in parts if part.strip())


def parse_docstring(doc: str | None) -> Docstring:
    """Read ``doc`` (a raw ``__doc__``, indented or not); an empty docstring gives empty texts."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    params: dict[str, str] = {}
    returns: list[str] = []
    end = len(lines)  # where the description stops
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip() or _indent(line):
            index += 1
            continue
        heading = line.strip().lower()
        if index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1]) and not heading.endswith(":"):
            end = min(end, index)
            index = _numpy_section(lines, index + 2, heading, params, returns)
            continue
        google = _GOOGLE_HEADER.match(line)
        if google and google.group(1).lower() in _GOOGLE_PARAMS | _GOOGLE_RETURNS | _GOOGLE_OTHER:
            end = min(end, index)
            index = _google_section(lines, index + 1, google.group(1).lower(), params, returns)
            continue
        if _SPHINX_FIELD.match(line):
            end = min(end, index)
            index = _sphinx_field(lines, index, params, returns)
            continue
        index += 1
    description = "\n".join(lines[:end]).strip()
    return Docstring(description, params, " ".join(returns).strip())


def _block(lines: list[str], start: int) -> int:
    """The end of the indented block (blank lines included) that starts at ``start``."""
    index = start
    while index < len(lines) and (not lines[index].strip() or _indent(lines[index])):
        index += 1
    return index


def _google_section(lines: list[str], start: int, heading: str, params: dict[str, str],
                    returns: list[str]) -> int:
    stop = _block(lines, start)
    body = lines[start:stop]
    if heading in _GOOGLE_RETURNS:
        text = _join(body)
        returns.append(_TYPE_PREFIX.sub("", text, count=1))
    elif heading in _GOOGLE_PARAMS:
        items = [line for line in body if line.strip()]
        level = min((_indent(line) for line in items), default=0)
        name: str | None = None
        for line in items:
            match = _GOOGLE_ITEM.match(line.strip()) if _indent(line) == level else None
            if match:
                name = match.group(1)
                params[name] = (match.group(2) or "").strip()
            elif name is not None:
                params[name] = _join([params[name], line])
    return stop


def _numpy_section(lines: list[str], start: int, heading: str, params: dict[str, str],
                   returns: list[str]) -> int:
    index = start
    name: str | None = None
    collected: list[str] = []
    while index < len(lines):
        line = lines[index]
        top = bool(line.strip()) and not _indent(line)
        if top and ((index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1]))
                    or _SPHINX_FIELD.match(line)):
            break  # the next heading, or Sphinx fields after the sections
        if heading in _NUMPY_PARAMS:
            if top:
                match = _NUMPY_ITEM.match(line.strip())
                name = match.group(1) if match else None
                if name is not None:
                    params[name] = ""
            elif name is not None and line.strip():
                params[name] = _join([params[name], line])
        elif heading in _NUMPY_RETURNS and line.strip() and _indent(line):
            collected.append(line)
        index += 1
    if collected:
        returns.append(_join(collected))
    return index


def _sphinx_field(lines: list[str], start: int, params: dict[str, str], returns: list[str]) -> int:
    stop = _block(lines, start + 1)
    text = _join([lines[start], *lines[start + 1:stop]])
    param = _SPHINX_PARAM.match(text)
    if param:
        names = param.group(1).split()
        if names:
            params[names[-1].lstrip("*")] = param.group(2).strip()
    else:
        returned = _SPHINX_RETURNS.match(text)
        if returned:
            returns.append(returned.group(1).strip())
    return stop
