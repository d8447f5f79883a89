"""The ``tools:sdk`` prompt section: fixed instructions plus a fenced Python declaration (spec 8.1).

The section tells the model how a ``run_code`` program reaches the tools and declares them as static
stubs. It is a pure function of the tool set: byte-identical for the same tools in any order, so it can
sit in a cached prompt prefix.
"""

from __future__ import annotations

from collections.abc import Iterable

from codemode.sandbox.facades import ALLOWED_MODULES
from codemode.sdk._declarations import Declarations, declare
from codemode.sdk._text import comment_text, docstring_text, json_quote
from codemode.sdk.signature import ToolSignature

__all__ = ("ERROR_CODES", "INSTRUCTIONS", "SANDBOX_RULES", "render_declaration", "render_python_sdk")

ERROR_CODES = (
    "UNKNOWN_TOOL",
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "TOOL_FAILED",
    "TOOL_TIMEOUT",
    "DENIED",
    "ABORTED",
)
"""The ``ToolCallError.code`` values the instructions name (the runtime's error codes)."""

#: Facades that only hold a submodule (``import os.path`` binds ``os``): the prompt names the submodule.
_PARENTS = frozenset({"os", "urllib"})

SANDBOX_RULES = "\n".join((
    "The program runs in a sandbox with no file, network, process or environment access: the outside world "
    "is reached through `tools` only.",
    f"Importable modules: {', '.join(name for name in ALLOWED_MODULES if name not in _PARENTS)}.",
    "Return (and pass to tools) dicts, lists, str, numbers, bool and None; convert the rest first: "
    "`sorted(a_set)`, `a_date.isoformat()`, `data.decode()`, `dataclasses.asdict(obj)`.",
    "Refused, with a message saying what to use: `open`, `exec`/`eval` of strings, `time.sleep` "
    "(use `await asyncio.sleep`), dunder attributes (`type(x)`, `vars(x)`, `dir(x)` and `x.__name__` work) "
    "and `_private` names of objects the program did not create.",
))
"""What the sandbox allows and refuses, in at most six lines (part of :data:`INSTRUCTIONS`)."""

INSTRUCTIONS = f"""## Writing code for run_code

`run_code` takes two required arguments: `code`, the body of an async Python function (top-level `await` \
and `return` both work), and `description`, one short line saying what the program does.

When the program runs, exactly two of the names declared below are bound: `tools` and `ToolCallError`. \
Everything else is a static stub for your reading: the `TypedDict` classes do not exist at run time, so \
pass arguments as plain dict and list values, never `FooArgs(field=1)`, which raises `NameError`.

- Call a tool with one dict, `await tools.name({{"key": value}})`, or with keywords, \
`await tools.name(key=value)`. Tools whose names are not plain identifiers, are reserved words or start \
with `_` are listed as comments; reach them by subscript: `await tools["name"]({{...}})`.
- Every call resolves to the tool's canonical JSON value, typed as declared below.
- Arguments must be lossless JSON: dicts with string keys, lists, strings, finite numbers, booleans and \
`None`; as with `json.dumps`, tuples become lists and int, float, bool or `None` keys become strings.
- A failed call raises `ToolCallError`: `err.tool_name` names the tool, `err.code` is a machine-readable \
code ({", ".join(f"`{code}`" for code in ERROR_CODES)}, ...) and `str(err)` is the message. Catch it with \
`try`/`except ToolCallError` where a failure is expected.
- Independent read-only calls MAY overlap under `asyncio.gather`; calls that change state run alone, in \
the order they were made. Use `await` to sequence work that depends on an earlier result.
- Produce the answer with `print(...)` and/or a top-level `return <value>` (lossless JSON). Only printed \
and returned output comes back to you; a successful image result is attached after the run, and other \
intermediate results stay out of the conversation.

{SANDBOX_RULES}

The available tools:"""
"""The fixed instruction block that precedes the fenced declaration."""


def _tools_body(declarations: Declarations) -> list[str]:
    body: list[str] = []
    for tool in declarations.tools:
        args, output = tool.args.text, tool.output.text
        if tool.method:
            signature = f"    async def {tool.name}(self, args: {args}) -> {output}:"
            doc = docstring_text(tool.description)
            if doc:
                body.extend((signature, f'        """{doc}"""'))
            else:
                body.append(signature + " ...")
        else:
            body.append(f"    # tools[{json_quote(tool.name)}](args: {args}) -> {output}")
            comment = comment_text(tool.description)
            if comment:
                body.append(f"    #   {comment}")
    if not any(tool.method for tool in declarations.tools):
        body.insert(0, "    pass")
    return body


def render_declaration(declarations: Declarations) -> str:
    """The Python text inside the fence (no trailing newline)."""
    lines = [
        f"from typing import {', '.join(declarations.typing_names)}",
        "",
        "class ToolCallError(Exception):",
        "    tool_name: str",
        "    code: str",
        "",
    ]
    for block in declarations.classes:
        lines.extend((block, ""))
    lines.append("class Tools(Protocol):")
    lines.extend(_tools_body(declarations))
    lines.extend(("", "tools: Tools"))
    return "\n".join(lines)


def render_python_sdk(signatures: Iterable[ToolSignature]) -> str:
    """The whole ``tools:sdk`` section for ``signatures`` (instructions, blank line, fenced declaration).

    Never raises: schemas that cannot be expressed degrade node by node (see :mod:`codemode.sdk._schema`).
    """
    declaration = render_declaration(declare(signatures))
    return f"{INSTRUCTIONS}\n\n```python\n{declaration}\n```"
