"""Escape family A7/A8: modules leak what they import; facades hand in reviewed members only."""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

_OPEN = '.modules["builtins"].open(SECRET_PATH).read()'

ATTACKS = [
    Attack("json-codecs-sys", f"""
        import json
        return json.codecs.sys{_OPEN}
    """),
    Attack("json-from-import-submodule", f"""
        from json import decoder
        return decoder.re.enum.sys{_OPEN}
    """),
    Attack("collections-private-sys", f"""
        import collections
        return collections._sys{_OPEN}
    """),
    Attack("collections-private-sys-computed", f"""
        import collections
        return getattr(collections, "_sys"){_OPEN}
    """),
    Attack("random-private-os", """
        import random
        fd = random._os.open(SECRET_PATH, 0)
        return random._os.read(fd, 200)
    """),
    Attack("re-enum-sys", f"""
        import re
        return re.enum.sys{_OPEN}
    """),
    Attack("string-private-re", f"""
        import string
        return getattr(string, "_re").enum.sys{_OPEN}
    """),
    Attack("textwrap-re", f"""
        import textwrap
        return textwrap.re.enum.sys{_OPEN}
    """),
    Attack("dataclasses-sys", f"""
        import dataclasses
        return dataclasses.sys{_OPEN}
    """),
    Attack("enum-sys", f"""
        import enum
        return enum.sys{_OPEN}
    """),
    Attack("statistics-sys", f"""
        import statistics
        return statistics.sys{_OPEN}
    """),
    Attack("fractions-sys", f"""
        import fractions
        return fractions.sys{_OPEN}
    """),
    Attack("datetime-sys", f"""
        import datetime
        return datetime.sys{_OPEN}
    """),
    Attack("base64-re", f"""
        import base64
        return base64.re.enum.sys{_OPEN}
    """),
    Attack("uuid-os", """
        import uuid
        return uuid.os.read(uuid.os.open(SECRET_PATH, 0), 200)
    """),
    Attack("copy-private-helper-globals", """
        import copy
        return copy._reconstruct.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("module-builtins-attribute", """
        import heapq
        return heapq.__builtins__["open"](SECRET_PATH).read()
    """),
    Attack("typing-get-type-hints-eval", """
        import typing
        class C:
            x: "[open(SECRET_PATH).read()]"
        hints = typing.get_type_hints
        try:
            return hints(C)
        except Exception as e:
            return str(e)
    """),
    Attack("typing-forward-ref-eval", """
        import typing
        ref = typing.ForwardRef("[open(SECRET_PATH).read()]")
        try:
            return ref._evaluate({}, {}, frozenset())
        except Exception as e:
            return str(e)
    """),
    Attack("typing-sys", f"""
        import typing
        return typing.sys{_OPEN}
    """),
    Attack("operator-builtins", """
        import operator
        return operator.__builtins__["open"](SECRET_PATH).read()
    """),
    Attack("hashlib-file-digest", """
        import hashlib
        return hashlib.file_digest(open(SECRET_PATH, "rb"), "sha256").hexdigest()
    """, plain="""
        import hashlib
        class Reader:
            def __init__(self):
                self.done = False
            def readinto(self, buffer):
                return 0
            def readable(self):
                return True
        f = hashlib.file_digest.__globals__["__builtins__"]["open"](SECRET_PATH)
        return f.read()
    """),
    Attack("uuid1-getnode-spawns", """
        import uuid
        return uuid._get_command_stdout.__globals__["os"].read(
            uuid._get_command_stdout.__globals__["os"].open(SECRET_PATH, 0), 200)
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
