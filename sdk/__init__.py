"""SDK generation: the ``tools:sdk`` prompt declarations and ``.pyi`` stubs for program authors.

* :func:`render_python_sdk` renders the prompt section for a tool set (spec 8);
* :func:`render_stub_module` / :func:`write_stub_package` render the same declarations as a stub for
  editors and type checkers;
* :func:`check_program` type-checks a ``run_code`` program against those stubs with mypy;
* :func:`python_type` is the context-free schema -> type mapping (objects become ``dict[str, Any]``).

The input is :class:`ToolSignature`, the SDK's own frozen value, so the SDK does not depend on the
runtime's definition types.
"""

from __future__ import annotations

from codemode.sdk._schema import python_type as python_type
from codemode.sdk.check import Diagnostic as Diagnostic
from codemode.sdk.check import check_program as check_program
from codemode.sdk.prompt import render_python_sdk as render_python_sdk
from codemode.sdk.signature import ToolSignature as ToolSignature
from codemode.sdk.stubs import render_stub_module as render_stub_module
from codemode.sdk.stubs import write_stub_package as write_stub_package

__all__ = (
    "Diagnostic",
    "ToolSignature",
    "check_program",
    "python_type",
    "render_python_sdk",
    "render_stub_module",
    "write_stub_package",
)
