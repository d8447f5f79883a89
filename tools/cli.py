"""The ``codemode`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

__all__ = ("main",)


def _version() -> str:
    try:
        return version("codemode")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codemode", description="Code Mode runner for agent tools.")
    parser.add_argument("--version", action="version", version=f"codemode {_version()}")
    parser.add_subparsers(dest="command")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
