"""The sandbox's low-level seam: the language half that runs inside a worker, as stages.

An integrator never needs these: :class:`~codemode.sandbox.Sandbox` compiles and runs a program in a
fresh, isolated worker process. They are for tools that work on the language layer itself (a benchmark
of the bare interpreter, a program checker): :func:`compile_program` turns source into a
:class:`CompiledProgram` (the restricted compilation, or a ``Program*Error``), and :func:`run_program`
runs one in the current process, with no process boundary, returning a :class:`ProgramOutcome`.

Like :mod:`codemode.runtime.lowlevel`, these names may change more freely than the package's top-level
ones. They are imported on first use, so importing this module loads no interpreter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from .interpreter import CompiledProgram as CompiledProgram
    from .interpreter import ProgramOutcome as ProgramOutcome
    from .interpreter import compile_program as compile_program
    from .interpreter import run_program as run_program

#: Where each name lives; ``__all__`` is derived from it (tests/test_public_api.py checks the
#: ``TYPE_CHECKING`` imports above against it).
_HOMES: dict[str, str] = {
    "CompiledProgram": ".interpreter",
    "ProgramOutcome": ".interpreter",
    "compile_program": ".interpreter",
    "run_program": ".interpreter",
}

__all__ = tuple(sorted(_HOMES))
# (the homes are relative to the package, this module's parent)
__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__package__}{home}" for name, home in _HOMES.items()})
