"""An executor whose template refuses to start while a flag file exists (for the restart-breaker tests).

The template imports its executor before it says hello; while ``/tmp/codemode-broken-template-<host pid>``
exists (the host is the template's parent), that import fails, so every replacement template dies at its
start exactly as a broken installation or a crashing interpreter would. Otherwise it is the real interpreter.
"""

from __future__ import annotations

import os

from codemode.sandbox.interpreter import compile_program, run_program

__all__ = ("compile_program", "flag_path", "run_program")


def flag_path(host_pid: int) -> str:
    """The flag file that breaks the templates of the host process ``host_pid``."""
    return f"/tmp/codemode-broken-template-{host_pid}"


if os.path.exists(flag_path(os.getppid())):
    raise ImportError("this template is broken on purpose (the test's flag file exists)")
