"""The facade audit (:mod:`codemode.sandbox._audit`), row by row.

For every row: an attack through that entry point (real under plain CPython, blocked in process and in the
worker) and/or a two-run check in a persistent session (a run poisons host state the row is about; a
later run must not see it, where under plain CPython it does). For every exposed row: a legitimate use
that gives the same value as plain CPython, in process and through the worker. The rows must cover every
member of every facade and every builtin a program gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from codemode.sandbox import Sandbox
from codemode.sandbox._audit import AUDIT, AuditRow
from codemode.sandbox.facades import FACADES
from codemode.sandbox.guards import build_safe_builtins
from codemode.sandbox.interpreter import compile_program, run_program
from codemode.sandbox.lossless import snapshot

from . import (
    test_computed_attributes,
    test_facade_classes,
    test_fast_paths,
    test_format_strings,
    test_helper_names,
    test_language_widening,
    test_side_doors,
)
from .conftest import (
    SECRET_ENV,
    TOOL_NAMES,
    Attack,
    EscapeHarness,
    fake_call_tool,
    same_attack,
)

_FORMAT_FIELD = "{0.__globals__[_os].environ}"


def _loader(member: str) -> str:
    """Read the secret through the loader of the C extension module a facade function belongs to."""
    return f"return {member}.__self__.__loader__.get_data(SECRET_PATH).decode()"


def _subclasses(member: str) -> str:
    """Read the secret through object.__subclasses__(), reached from a class a facade hands out."""
    module = member.split(".")[0]
    return f"""import {module}
for klass in {member}.__mro__[-1].__subclasses__():
    found = getattr(klass.__init__, "__globals__", {{}}).get("__builtins__")
    if isinstance(found, dict) and "open" in found:
        return found["open"](SECRET_PATH).read()
"""


def _globals(member: str) -> str:
    """Read the secret through the globals of a Python function a facade member is."""
    return f'return {member}.__globals__["__builtins__"]["open"](SECRET_PATH).read()'


ATTACKS: list[Attack] = [
    same_attack(test_helper_names.ATTACKS, "coroutine-send-through-the-class-reaches-the-loop",
                "asyncio-awaitables"),
    Attack("asyncio-loop", """
        import asyncio
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """),
    Attack("base64-codecs", "import base64\n" + _globals("base64.b64encode")),
    Attack("bisect-key", "import bisect\n" + _loader("bisect.bisect")),
    Attack("collections-namedtuple", """
        import collections
        return collections.namedtuple.__globals__["_sys"].modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("collections-containers", """
        import collections
        class M(dict):
            def __missing__(self, key):
                return open(key).read()
        return collections.ChainMap(M())[SECRET_PATH]
    """),
    Attack("collections-namedtuple-api", """
        import decimal
        t = decimal.Decimal(1).as_tuple()
        return t._make.__func__.__globals__["_sys"].modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("copy-protocols", """
        import copy
        class R:
            def __reduce_ex__(self, protocol):
                return (open, (SECRET_PATH,))
        return copy.copy(R()).read()
    """),
    same_attack(test_helper_names.ATTACKS, "deepcopy-memo-hands-out-originals", "copy-deepcopy-memo"),
    Attack("dataclasses-dataclass", """
        import typing, dataclasses
        T = typing.TypedDict("T", {"__class__,)==0 or __import__('os'),(0": int})
        class Q(T):
            pass
        dataclasses.dataclass(Q, init=False, repr=False)
        return "the dataclass was made"
    """, plain="""
        import typing, dataclasses
        T = typing.TypedDict("T", {"__class__,)==0 or __import__('os'),(0": int})
        class Q(T):
            pass
        dataclasses.dataclass(Q, init=False, repr=False)
        os = Q.__eq__({}, {})[0]
        return os.read(os.open(SECRET_PATH, 0), 200).decode()
    """),
    Attack("dataclasses-helpers", """
        import dataclasses
        return dataclasses.fields.__globals__["sys"].modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("dataclasses-make-dataclass", """
        import dataclasses, copy
        X = dataclasses.make_dataclass("X", [("a", int)],
                                       namespace={"__reduce_ex__": lambda self, p: (open, (SECRET_PATH,))})
        return copy.copy(X(1)).read()
    """),
    Attack("datetime-types", """
        import datetime
        class Z(datetime.tzinfo):
            def utcoffset(self, dt):
                raise ValueError(open(SECRET_PATH).read())
        try:
            datetime.datetime(2020, 1, 1, tzinfo=Z()).utcoffset()
        except ValueError as e:
            return str(e)
    """),
    Attack("decimal-values", "import decimal\n" + _loader("decimal.getcontext")),
    same_attack(test_helper_names.ATTACKS, "enum-functional-annotations-reach-dataclass-exec",
                "enum-functional"),
    Attack("enum-hooks", """
        import enum
        class E(enum.Enum):
            _missing_ = classmethod(lambda cls, value: open(value).read())
            A = 1
        try:
            E(SECRET_PATH)
        except TypeError as e:
            return str(e)
    """),
    Attack("fractions-constructor", """
        import fractions
        class F(float):
            def as_integer_ratio(self):
                raise ValueError(open(SECRET_PATH).read())
        try:
            fractions.Fraction(F(1.5))
        except ValueError as e:
            return str(e)
    """),
    same_attack(test_helper_names.ATTACKS, "update-wrapper-updated-merges-host-globals",
                "functools-update-wrapper"),
    Attack("functools-callables", """
        import functools
        g = functools.reduce(getattr, ["__globals__"], lambda: 0)
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("functools-decorators", """
        import functools
        inner = functools.lru_cache(lambda: 0).__wrapped__
        return inner.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("hashlib-constructors", "import hashlib\n" + _globals("hashlib.new")),
    Attack("hashlib-file-digest", """
        import hashlib
        return hashlib.file_digest(open(SECRET_PATH, "rb"), "sha256").hexdigest()
    """, plain="import hashlib\n" + _globals("hashlib.file_digest")),
    Attack("heapq-key", "import heapq\n" + _loader("heapq.heappush")),
    Attack("itertools-callbacks", """
        import itertools
        g = list(itertools.starmap(getattr, [(lambda: 0, "__globals__")]))[0]
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("json-loads-hooks", """
        import json
        g = json.loads('{"a": "__globals__"}', object_hook=lambda d: getattr(lambda: 0, d["a"]))
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("json-dumps-default", """
        import json
        def default(f):
            return getattr(f, "__globals__")["__builtins__"]["open"](SECRET_PATH).read()
        return json.dumps(lambda: 0, default=default)
    """),
    Attack("json-custom-classes", """
        import json
        class E(json.JSONEncoder):
            def default(self, o):
                return open(SECRET_PATH).read()
        return json.dumps(object(), cls=E)
    """),
    Attack("math-functions", """
        import math
        class F:
            def __floor__(self):
                return open(SECRET_PATH).read()
        return math.floor(F())
    """),
    Attack("operator-functions", """
        import operator
        class I:
            def __index__(self):
                raise ValueError(open(SECRET_PATH).read())
        try:
            operator.index(I())
        except ValueError as e:
            return str(e)
    """),
    same_attack(test_language_widening.ATTACKS, "methodcaller-format", "operator-attribute-callers"),
    Attack("operator-writes", """
        import operator, json
        operator.setitem(vars(json), "dumps", lambda *a, **k: open(SECRET_PATH).read())
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("random-class", """
        import random
        os = random.Random.seed.__globals__["_os"]
        return os.read(os.open(SECRET_PATH, 0), 200).decode()
    """),
    Attack("re-callbacks", """
        import re
        return re.sub("x", lambda m: open(SECRET_PATH).read(), "x")
    """),
    Attack("statistics-functions", """
        import statistics
        class N(int):
            def as_integer_ratio(self):
                raise LookupError(open(SECRET_PATH).read())
        try:
            statistics.mean([N(1), N(2)])
        except LookupError as e:
            return str(e)
    """),
    Attack("string-template", """
        import string
        class V:
            def __str__(self):
                return open(SECRET_PATH).read()
        return string.Template("$x").substitute(x=V())
    """),
    Attack("string-formatter", f"""
        import string, random
        return string.Formatter().format("{_FORMAT_FIELD}", random.seed)
    """),
    Attack("string-constants", "import string\n" + _globals("string.capwords")),
    same_attack(test_fast_paths.ATTACKS, "inline-write-into-shared-class-dict", "textwrap-wrapper"),
    Attack("typing-alias-forwarding", f"""
        import typing, random
        return typing.Annotated[str, 0].format("{_FORMAT_FIELD}", random.seed)
    """),
    Attack("typing-namedtuple-typeddict", """
        import typing
        P = typing.NamedTuple("P", [("x", int)])
        return P._make.__func__.__globals__["_sys"].modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("typing-overload", """
        import typing
        return typing.overload.__globals__["sys"].modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("typing-evaluation", """
        import typing
        class C:
            x: "[open(SECRET_PATH).read()]"
        return typing.get_type_hints(C)
    """),
    Attack("uuid-values", """
        import uuid
        os = uuid.uuid4.__globals__["os"]
        return os.read(os.open(SECRET_PATH, 0), 200).decode()
    """),
    Attack("uuid-node", """
        import uuid
        os = uuid.getnode.__globals__["os"]
        return os.read(os.open(SECRET_PATH, 0), 200).decode()
    """),
    Attack("builtins-attributes", """
        g = getattr(lambda: 0, "__glo" + "bals__")
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("builtins-super", f"""
        import random
        class S(str):
            def leak(self, *args):
                return super().format(*args)
        return S("{_FORMAT_FIELD}").leak(random.seed)
    """),
    same_attack(test_format_strings.ATTACKS, "str-format-via-type", "builtins-type"),
    same_attack(test_computed_attributes.ATTACKS, "sorted-key-getattr", "builtins-callbacks"),
    Attack("builtins-formatting", """
        class F:
            def __format__(self, spec):
                return open(SECRET_PATH).read()
        return format(F())
    """),
    Attack("builtins-values", """
        class L:
            def __len__(self):
                raise ValueError(open(SECRET_PATH).read())
        try:
            len(L())
        except ValueError as e:
            return str(e)
    """),
    Attack("builtins-classes", """
        found = []
        def f(cls):
            found.append(open(SECRET_PATH).read())
            return 1
        class C:
            x = classmethod(property(f))
        C.x
        return found
    """),
    Attack("builtins-import", """
        import os
        return os.read(os.open(SECRET_PATH, 0), 200).decode()
    """),
    same_attack(test_facade_classes.ATTACKS, "facade-class-dict", "builtins-import-facade-classes"),
    same_attack(test_side_doors.ATTACKS, "eval-call", "builtins-left-out"),
    Attack("builtins-introspection", """
        import json
        return vars(json)["codecs"].open(SECRET_PATH).read()
    """),
    Attack("builtins-str-format", f"""
        import random, operator
        return operator.methodcaller("format", random.seed)("{_FORMAT_FIELD}")
    """),
    Attack("asyncio-coordination", """
        import asyncio
        loop = asyncio.Queue()._get_loop()
        return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """),
    Attack("abc-classes", "import abc\n" + _globals("abc.abstractmethod")),
    Attack("abc-metaclass", "import abc\n" + _globals("abc.ABCMeta.register")),
    Attack("array-values", """
        import array
        a = array.array("b")
        with open(SECRET_PATH, "rb") as handle:
            a.frombytes(handle.read())
        return a.tobytes().decode()
    """),
    Attack("calendar-text", "import calendar\n" + _globals("calendar.isleap")),
    Attack("calendar-global", "import calendar\n" + _globals("calendar.setfirstweekday")),
    Attack("contextlib-managers", "import contextlib\n" + _globals("contextlib.contextmanager")),
    Attack("contextlib-process", "import contextlib\n" + _globals("contextlib.chdir.__enter__")),
    Attack("csv-io", "import csv\n" + _loader("csv.reader")),
    Attack("difflib-sequences", "import difflib\n" + _globals("difflib.unified_diff")),
    Attack("fnmatch-patterns", "import fnmatch\n" + _globals("fnmatch.fnmatch")),
    Attack("graphlib-sorter", "import graphlib\n" + _globals("graphlib.TopologicalSorter.add")),
    Attack("html-escape", "import html\n" + _globals("html.escape")),
    Attack("io-buffers", _subclasses("io.StringIO")),
    Attack("io-files", "import io\nreturn io.open(SECRET_PATH).read()"),
    Attack("numbers-abcs", _subclasses("numbers.Number")),
    Attack("os-path", "import os\n" + _globals("os.path.join")),
    Attack("os-path-pure", "import os.path\n" + _globals("os.path.basename")),
    Attack("os-system", "import os\nreturn os.environ[" + repr(SECRET_ENV) + "]"),
    Attack("os-path-system", "import os.path\nreturn os.path.expandvars(" + repr("$" + SECRET_ENV) + ")"),
    Attack("pathlib-pure", "import pathlib\n" + _globals("pathlib.PurePath.joinpath")),
    Attack("pathlib-concrete", "import pathlib\nreturn pathlib.Path(SECRET_PATH).read_text()"),
    Attack("pprint-output", "import pprint\n" + _globals("pprint.pformat")),
    Attack("secrets-tokens", "import secrets\n" + _globals("secrets.token_hex")),
    Attack("shlex-split", "import shlex\n" + _globals("shlex.quote")),
    Attack("shlex-class", "import shlex\nreturn shlex.shlex().sourcehook(SECRET_PATH)[1].read()"),
    Attack("struct-pack", "import struct\n" + _loader("struct.pack")),
    Attack("time-clock", """
        import time
        spec = time.strftime.__self__.__loader__.find_spec.__func__.__globals__
        found = spec["__builtins__"]
        return (found["open"] if isinstance(found, dict) else found.open)(SECRET_PATH).read()
    """),
    Attack("types-namespaces", _subclasses("types.SimpleNamespace")),
    Attack("unicodedata-tables", "import unicodedata\n" + _loader("unicodedata.name")),
    Attack("urllib-parse", "import urllib.parse\n" + _globals("urllib.parse.quote")),
    Attack("urllib-parse-functions", "from urllib import parse\n" + _globals("parse.urlencode")),
    Attack("zlib-codecs", "import zlib\n" + _loader("zlib.compress")),
    Attack("collections-abc", "import collections.abc\n" + _globals("collections.abc.Mapping.get")),
    Attack("collections-abc-classes", """
        from collections.abc import Iterable
        class Fake:
            pass
        Iterable.register(Fake)
        import json
        return json.dumps.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("zoneinfo-zones", "import zoneinfo\n" + _globals("zoneinfo.available_timezones")),
]
_BY_ROW: dict[str, Attack] = {attack.id: attack for attack in ATTACKS}

#: (first run, second run): the first poisons what the row is about; the second returns True if it sees it.
PERSIST: dict[str, tuple[str, str]] = {
    "abc-abstractmethod": ("import abc, json\nabc.abstractmethod(json.dumps)",
                           "import abc, json\nclass C(abc.ABC):\n    f = json.dumps\ntry:\n    C()\n"
                           "except TypeError:\n    return True\nreturn False"),
    "csv-registry": ("import csv\ncsv.register_dialect('poisoned', delimiter=';')",
                     "import csv\nreturn hasattr(csv, 'list_dialects') and "
                     "'poisoned' in csv.list_dialects()"),
    "collections-namedtuple-api": (
        "import decimal\ndecimal.Decimal(1).as_tuple()._field_defaults['sign'] = 1",
        "import decimal\nreturn 'sign' in decimal.Decimal(2).as_tuple()._field_defaults"),
    "decimal-context": ("import decimal\ndecimal.getcontext().prec = 3",
                        "import decimal\nreturn decimal.getcontext().prec == 3"),
    "decimal-shared-contexts": ("import decimal\ndecimal.DefaultContext.prec = 5",
                                "import decimal\nreturn decimal.Context().prec == 5"),
    "functools-update-wrapper": (
        "import functools, json\n"
        "@functools.wraps(json.dumps, assigned=(), updated=('__builtins__',))\ndef w():\n    pass",
        "try:\n    open\nexcept NameError:\n    return False\nreturn True"),
    "hashlib-constructors": ("import hashlib\nhashlib.algorithms_available.add('poisoned')",
                             "import hashlib\nreturn 'poisoned' in hashlib.algorithms_available"),
    "random-functions": ("import random\nrandom.seed(7)",
                         "import random\nreturn random.random() == random.Random(7).random()"),
    "textwrap-wrapper": ("import textwrap\ntextwrap.TextWrapper.unicode_whitespace_trans[0] = 'x'",
                         "import textwrap\nreturn 0 in textwrap.TextWrapper.unicode_whitespace_trans"),
    "builtins-super-init": (
        "import typing\nsuper(type(typing.List), typing.List).__init__(dict, name='Poisoned')",
        "import typing\nreturn repr(typing.List) == 'typing.Poisoned'"),
    "typing-alias-forwarding": ("import typing\nclass P:\n    pass\ntyping.Iterable.register(P)",
                                "import typing\nreturn isinstance(P(), typing.Iterable)"),
}

_CLASSES = """
@dataclasses.dataclass(order=True, frozen=True)
class Pt:
    x: int
    y: int = 0
@dataclasses.dataclass
class Box:
    items: list = dataclasses.field(default_factory=list)
    _: dataclasses.KW_ONLY
    tag: str = "t"
"""

LEGIT: dict[str, str] = {
    "asyncio-awaitables": """
        import asyncio
        async def double(x):
            await asyncio.sleep(0)
            return 2 * x
        both = await asyncio.gather(double(1), double(2))
        one = await asyncio.wait_for(double(5), 1)
        done = [await f for f in asyncio.as_completed([double(3)])]
        try:
            await asyncio.wait_for(asyncio.sleep(1), 0.01)
        except asyncio.TimeoutError:
            timed_out = True
        return [both, one, done, timed_out]
    """,
    "base64-codecs": """
        import base64
        return [base64.b64encode(b"hi").decode(), base64.b64decode("aGk=").decode(),
                base64.b32encode(b"x").decode(), base64.a85encode(b"abc").decode(),
                base64.urlsafe_b64encode(b"\\xff\\xfe").decode()]
    """,
    "bisect-key": """
        import bisect
        a = [1, 3, 5]
        bisect.insort(a, 4)
        return [bisect.bisect(a, 3), a, bisect.bisect_left([("a", 1), ("b", 2)], 2, key=lambda t: t[1])]
    """,
    "collections-namedtuple": """
        import collections
        P = collections.namedtuple("P", "x y", defaults=[0])
        p = P(1)
        R = collections.namedtuple("R", ["def", "x"], rename=True)
        return [repr(p), p._asdict(), list(p._replace(y=5)), P._fields, list(P._make([3, 4])), repr(R(1, 2)),
                P.__name__]
    """,
    "collections-containers": """
        import collections
        c = collections.Counter("abracadabra")
        d = collections.defaultdict(list)
        d["a"].append(1)
        q = collections.deque([1, 2], maxlen=2)
        q.append(3)
        cm = collections.ChainMap({"a": 1}, {"a": 2, "b": 3})
        od = collections.OrderedDict(b=1, a=2)
        od.move_to_end("b")
        return [c.most_common(2), dict(d), list(q), dict(cm), list(od)]
    """,
    "collections-namedtuple-api": """
        import decimal, functools, statistics
        t = decimal.Decimal("1.5").as_tuple()
        info = functools.lru_cache(lambda: 0).cache_info()
        fit = statistics.linear_regression([1, 2, 3], [2, 4, 6])
        return [t._fields, t._asdict(), t._field_defaults, info._asdict(), fit._fields]
    """,
    "copy-protocols": """
        import copy
        class P:
            def __init__(self):
                self.v = [1]
        x = {"a": [1, {"b": 2}]}
        y = copy.deepcopy(x)
        y["a"][1]["b"] = 3
        z = copy.copy(x)
        z["c"] = 1
        p = copy.deepcopy(P())
        return [x, y, sorted(z), p.v, copy.copy(p).v is p.v]
    """,
    "copy-deepcopy-memo": """
        import copy
        src = {"k": (1, [2])}
        out = copy.deepcopy(src)
        return [out, out["k"][1] is src["k"][1]]
    """,
    "dataclasses-dataclass": "import dataclasses\n" + _CLASSES + textwrap.dedent("""
        return [repr(Pt(1, 2)), Pt(1) < Pt(2), dataclasses.astuple(Pt(3)), repr(Box(tag="x")), Pt(1) == Pt(1)]
    """),
    "dataclasses-helpers": "import dataclasses\n" + _CLASSES + textwrap.dedent("""
        try:
            Pt(1).x = 5
        except dataclasses.FrozenInstanceError as e:
            frozen = type(e).__name__
        return [dataclasses.asdict(Pt(1, 2)), [f.name for f in dataclasses.fields(Pt)],
                repr(dataclasses.replace(Pt(1, 2), y=9)), dataclasses.is_dataclass(Pt), frozen,
                dataclasses.fields(Box)[0].default is dataclasses.MISSING]
    """),
    "datetime-types": """
        import datetime
        class Plus2(datetime.tzinfo):
            def utcoffset(self, dt):
                return datetime.timedelta(hours=2)
            def dst(self, dt):
                return datetime.timedelta(0)
            def tzname(self, dt):
                return "P2"
        d = datetime.datetime(2024, 2, 29, 13, 5, tzinfo=datetime.timezone.utc)
        return [d.isoformat(), str(datetime.datetime.fromisoformat("2024-03-01T10:00").date()),
                (d + datetime.timedelta(days=1)).weekday(), d.tzname(),
                str(d - datetime.timedelta(hours=30)), list(datetime.date(2024, 1, 1).isocalendar()),
                datetime.datetime(2024, 1, 1, tzinfo=Plus2()).isoformat(), datetime.MAXYEAR,
                datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC).tzname()]
    """,
    "decimal-values": """
        import decimal
        q = decimal.Decimal("3.14159").quantize(decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP)
        try:
            decimal.Decimal(1) / decimal.Decimal(0)
        except decimal.DivisionByZero as e:
            err = type(e).__name__
        return [str(decimal.Decimal("1.1") + decimal.Decimal("2.2")), str(decimal.Decimal((0, (1, 4), -1))),
                str(decimal.Decimal(1) / decimal.Decimal(7)), str(q), err,
                list(decimal.Decimal("1.50").as_tuple())]
    """,
    "decimal-context": """
        import decimal
        with decimal.localcontext() as ctx:
            ctx.prec = 5
            a = str(decimal.Decimal(1) / decimal.Decimal(3))
        b = str(decimal.Decimal(1) / decimal.Decimal(3))
        decimal.getcontext().prec = 6
        c = str(decimal.Decimal(2).sqrt())
        decimal.setcontext(decimal.Context(prec=3))
        d = str(decimal.Decimal(2).sqrt())
        return [a, b, c, d]
    """,
    "enum-functional": """
        import enum
        Color = enum.Enum("Color", "RED GREEN BLUE")
        Shape = enum.IntEnum("Shape", [("SQUARE", 4), ("TRIANGLE", 3)])
        Perm = enum.IntFlag("Perm", {"R": 4, "W": 2})
        Odd = enum.Enum("Odd", ["a b", "class"], start=10)
        return [repr(Color.GREEN), Color(3).name, [s.value for s in Shape], int(Perm.R | Perm.W),
                str(Perm(6)),
                isinstance(Color.RED, enum.Enum), enum.StrEnum("S", "A B").A.value, Odd["a b"].value,
                Odd["class"].value, enum.Flag("F", "X Y").Y.value]
    """,
    "enum-hooks": """
        import enum, re
        class Planet(enum.Enum):
            MERCURY = enum.auto()
            VENUS = enum.auto()
        @enum.unique
        class Flagged(enum.Flag):
            A = enum.auto()
            B = enum.auto()
        class Lower(enum.StrEnum):
            X = enum.auto()
        class Num(enum.IntEnum):
            ONE = 1
        return [Planet.VENUS.value, repr(Flagged.A | Flagged.B), Lower.X.value, [m.name for m in Flagged],
                issubclass(Flagged, enum.Enum), repr(Flagged(0)), f"{Num.ONE:03d}", str(Num.ONE),
                isinstance(re.A, enum.Flag), issubclass(enum.IntFlag, enum.Flag), Planet(2).name,
                isinstance(Num.ONE, enum.IntEnum), issubclass(enum.StrEnum, enum.Enum)]
    """,
    "fractions-constructor": """
        import fractions, decimal
        return [str(fractions.Fraction(1, 3) + fractions.Fraction("1/6")), str(fractions.Fraction(0.25)),
                str(fractions.Fraction(decimal.Decimal("1.1"))),
                str(fractions.Fraction(7, 3).limit_denominator(2)), fractions.Fraction(3, 4).numerator]
    """,
    "functools-update-wrapper": """
        import functools, json
        def deco(f):
            @functools.wraps(f)
            def inner(*a, **k):
                return f(*a, **k)
            return inner
        @deco
        def add(a, b):
            "Add."
            return a + b
        def alias():
            pass
        functools.update_wrapper(alias, add, assigned=("__name__",), updated=())
        @functools.wraps(json.dumps)
        def dumps(*a):
            return json.dumps(*a)
        return [add(1, 2), add.__name__, add.__qualname__, alias.__name__, dumps.__name__, dumps([1])]
    """,
    "functools-callables": """
        import functools, operator
        return [functools.reduce(lambda a, b: a * b, [1, 2, 3, 4]), functools.partial(int, base=2)("101"),
                functools.partial(max, 3)(1, 2), functools.reduce(operator.add, [[1], [2]], [])]
    """,
    "functools-decorators": """
        import functools
        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        @functools.cache
        def sq(n):
            return n * n
        @functools.total_ordering
        class V:
            def __init__(self, v):
                self.v = v
            def __eq__(self, o):
                return self.v == o.v
            def __lt__(self, o):
                return self.v < o.v
        class C:
            @functools.cached_property
            def big(self):
                return sum(range(10))
        return [fib(30), fib.cache_info().hits > 0, sq(4), V(2) >= V(1), C().big,
                sorted([3, 1, 2], key=functools.cmp_to_key(lambda a, b: b - a))]
    """,
    "hashlib-constructors": """
        import hashlib
        return [hashlib.sha256(b"x").hexdigest(), hashlib.new("md5", b"x").hexdigest(),
                hashlib.pbkdf2_hmac("sha256", b"p", b"s", 10).hex(),
                "sha256" in hashlib.algorithms_guaranteed,
                hashlib.blake2b(b"x", digest_size=8).hexdigest(), hashlib.sha3_256(b"").hexdigest()]
    """,
    "heapq-key": """
        import heapq
        h = []
        for v in [5, 1, 3]:
            heapq.heappush(h, v)
        return [heapq.heappop(h), heapq.nlargest(2, [("a", 3), ("b", 1), ("c", 2)], key=lambda t: t[1]),
                list(heapq.merge([1, 4], [2, 3]))]
    """,
    "itertools-callbacks": """
        import itertools
        return [list(itertools.starmap(pow, [(2, 3), (3, 2)])),
                list(itertools.accumulate([1, 2, 3], lambda a, b: a * b)),
                [(k, len(list(g))) for k, g in itertools.groupby("aabbbc")],
                list(itertools.islice(itertools.count(5), 3)), list(itertools.pairwise("abc")),
                list(itertools.product("ab", repeat=2))]
    """,
    "json-loads-hooks": """
        import json
        try:
            json.loads("{")
        except json.JSONDecodeError as e:
            err = [e.msg, e.pos]
        return [json.loads('{"a": 1, "b": [1.5]}', object_hook=lambda d: sorted(d.items())),
                json.loads("[1, 2.5]", parse_float=str, parse_int=lambda s: int(s) * 10),
                json.loads('{"x": 1}', object_pairs_hook=lambda pairs: [list(p) for p in pairs]), err,
                json.loads("[NaN]", parse_constant=lambda name: name)]
    """,
    "json-dumps-default": """
        import json
        return [json.dumps({"b": 1, "a": [1, 2]}, sort_keys=True, indent=2), json.dumps({1, 2},
                default=sorted),
                json.dumps({"k": "\\u00e9"}, ensure_ascii=False, separators=(",", ":"))]
    """,
    "math-functions": """
        import math
        return [math.floor(2.5), math.isqrt(17), math.comb(5, 2), round(math.sqrt(2), 6), math.gcd(12, 18),
                math.prod([1, 2, 3]), math.inf > 1, math.isclose(0.1 + 0.2, 0.3)]
    """,
    "operator-attribute-callers": """
        import operator
        class P:
            def __init__(self, x):
                self.x = x
                self.inner = self
            def scaled(self, k):
                return self.x * k
        points = [P(3), P(1), P(2)]
        return [[p.x for p in sorted(points, key=operator.attrgetter("x"))],
                operator.attrgetter("x", "inner.x")(P(5)), operator.methodcaller("scaled", 2)(P(4)),
                list(map(operator.methodcaller("upper"), ["a", "b"])), repr(operator.attrgetter("x"))]
    """,
    "operator-functions": """
        import operator
        return [operator.add(1, 2), operator.itemgetter(1, 0)("ab"),
                sorted([(1, "b"), (0, "a")], key=operator.itemgetter(1)), operator.index(5),
                operator.contains([1], 1), operator.truth(0), operator.mul("ab", 2)]
    """,
    "random-functions": """
        import random
        random.seed(5)
        a = [random.randint(1, 1000) for _ in range(3)]
        random.seed(5)
        b = [random.randint(1, 1000) for _ in range(3)]
        return [a == b, len(random.sample(range(10), 4)), random.choice([7]), 0 <= random.random() < 1]
    """,
    "random-class": """
        import random
        r = random.Random(42)
        s = random.Random(42)
        return [r.random() == s.random(), r.randint(1, 6) == s.randint(1, 6), sorted(r.sample(range(5), 5)),
                random.Random(3).choice("abcdef")]
    """,
    "re-callbacks": """
        import re
        return [re.sub(r"(\\w+)@(\\w+)", lambda m: m.group(2) + "@" + m.group(1), "me@host"),
                re.sub(r"(?P<a>\\d)", r"<\\g<a>>", "a1b2"), re.findall(r"\\d+", "a12b3"),
                re.split(r"[,;]", "a,b;c"), bool(re.fullmatch(r"[a-z]+", "ABC", re.I)),
                re.compile(r"(?P<y>\\d{4})").match("2024").groupdict(), re.escape("a.b"),
                re.subn("a", "b", "aaa"), [m.span() for m in re.finditer("a", "bab")]]
    """,
    "statistics-functions": """
        import statistics, fractions
        return [statistics.mean([1, 2, 3, 4]), statistics.median([3, 1, 2]),
                round(statistics.stdev([1, 2, 3, 4]), 6), statistics.mode("aab"),
                str(statistics.mean([fractions.Fraction(1, 2), fractions.Fraction(1, 3)])),
                list(statistics.linear_regression([1, 2, 3], [2, 4, 6])), statistics.NormalDist(0, 1).cdf(0)]
    """,
    "string-template": """
        import string
        class Percent(string.Template):
            delimiter = "%"
        return [string.Template("$who likes ${what}").substitute(who="tim", what="kung pao"),
                string.Template("$a $b").safe_substitute(a=1), string.Template("$x").substitute({"x": [1]}),
                Percent("%x!").substitute(x=1)]
    """,
    "string-constants": """
        import string
        return [string.capwords("hello  world"), string.ascii_lowercase[:3], string.digits,
                string.capwords("a-b", "-")]
    """,
    "textwrap-wrapper": """
        import textwrap
        return [textwrap.wrap("The quick brown fox jumps", width=10), textwrap.fill("a b c d", width=3),
                textwrap.shorten("Hello world again", width=12), textwrap.dedent("  a\\n  b"),
                textwrap.indent("a\\nb", "> ", predicate=lambda line: line.startswith("a")),
                textwrap.TextWrapper(width=5).wrap("aaa bbb")]
    """,
    "typing-alias-forwarding": """
        import typing
        T = typing.TypeVar("T")
        class Box(typing.Generic[T]):
            def __init__(self, item: T):
                self.item = item
        def first(xs: typing.List[int]) -> typing.Optional[int]:
            return xs[0] if xs else None
        class Proto(typing.Protocol):
            def size(self) -> int:
                ...
        return [first([1]), Box[int](3).item, typing.cast(int, "x"), repr(typing.List[int]),
                repr(typing.Optional[str]), isinstance([], typing.Iterable), issubclass(list,
                typing.Sequence),
                typing.TYPE_CHECKING, repr(typing.Dict[str, typing.Any])]
    """,
    "typing-namedtuple-typeddict": """
        import typing
        class Emp(typing.NamedTuple):
            name: str
            id: int = 3
        Pt = typing.NamedTuple("Pt", [("x", int), ("y", int)])
        Movie = typing.TypedDict("Movie", {"name": str, "year-of": int})
        class Film(Movie, total=False):
            rating: int
        m: Movie = {"name": "x", "year-of": 1}
        return [repr(Emp("a")), Emp("b", 1)._asdict(), list(Pt(1, 2)._replace(x=5)), m,
                Movie(name="y", **{"year-of": 2}), Film(name="z", rating=1)]
    """,
    "typing-overload": """
        import typing
        @typing.overload
        def f(x: int) -> int:
            ...
        @typing.overload
        def f(x: str) -> str:
            ...
        def f(x):
            return x
        return [f(1), f("a")]
    """,
    "uuid-values": """
        import uuid
        return [str(uuid.uuid5(uuid.NAMESPACE_DNS, "python.org")), str(uuid.uuid3(uuid.NAMESPACE_URL, "x")),
                uuid.UUID("12345678123456781234567812345678").hex, uuid.uuid4().version,
                len(str(uuid.uuid4())),
                str(uuid.UUID(int=5))]
    """,
    "builtins-attributes": """
        class C:
            pass
        c = C()
        setattr(c, "x", 1)
        seen = [getattr(c, "x"), hasattr(c, "y"), getattr(c, "y", 5)]
        delattr(c, "x")
        return seen + [hasattr(c, "x"), getattr("abc", "upper")(), getattr(ValueError, "__name__")]
    """,
    "builtins-super": """
        class Base:
            def __init__(self, v):
                self.v = v
            def describe(self):
                return "base" + str(self.v)
        class Child(Base):
            def __init__(self, v):
                super().__init__(v * 2)
            def describe(self):
                return "child:" + super().describe()
        class E(ValueError):
            def __init__(self, msg):
                super().__init__("E: " + msg)
        class Named(str):
            def shout(self):
                return super().upper() + "!"
        return [Child(2).describe(), str(E("x")), super(Child, Child(1)).describe(), Named("hi").shout()]
    """,
    "builtins-super-init": """
        import collections
        class Base:
            def __init__(self, v):
                self.v = v
        class Child(Base):
            def __init__(self):
                super().__init__(3)
        class Ordered(collections.OrderedDict):
            def __init__(self, pairs):
                super().__init__(pairs)
                self.tag = "t"
        class Failure(Exception):
            def __init__(self, code):
                super(Failure, self).__init__("failed: " + str(code))
        return [Child().v, list(Ordered([("a", 1)]).items()), Ordered([]).tag, str(Failure(2))]
    """,
    "builtins-type": """
        class K:
            pass
        return [type(1).__name__, type("x") is str, isinstance(int, type), type([]) == list,
                type(K()).__name__,
                isinstance(K, type)]
    """,
    "builtins-callbacks": """
        return [sorted(["bb", "a", "ccc"], key=len), max([1, 5, 2], key=lambda v: -v), list(map(str, [1, 2])),
                list(filter(None, [0, 1, 2])), list(zip("ab", [1, 2])), list(reversed([1, 2])), sum([1, 2],
                10),
                next(iter([9])), list(enumerate("ab", 1)), min("bca")]
    """,
    "builtins-formatting": """
        class P:
            def __repr__(self):
                return "P!"
            def __str__(self):
                return "p"
        return [format(3.14159, ".2f"), format(5, "08b"), repr("x"), str(1.5), ascii("\\u00e9"), f"{1:>4}",
                repr(P()), str(P()), f"{P()}", "%s-%d" % ("a", 1)]
    """,
    "builtins-values": """
        return [abs(-2), divmod(7, 2), pow(2, 10, 1000), round(2.675, 2), int("ff", 16), float("1.5"),
                hex(255),
                chr(65), ord("A"), len({1: 2}), hash(1), bool([]), list(range(3)), isinstance(True, int),
                callable(len), bytes([65]).decode(), complex(1, 2).imag, frozenset([1]) == {1}, bin(5),
                oct(8)]
    """,
    "builtins-classes": """
        class A:
            count = 0
            @classmethod
            def make(cls):
                cls.count += 1
                return cls()
            @staticmethod
            def twice(x):
                return 2 * x
            @property
            def name(self):
                return "a"
        a = A.make()
        return [A.count, A.twice(3), a.name]
    """,
    "builtins-import-facade-classes": """
        import json, math
        from math import sqrt
        return [type(math).__name__, str(type(json)), isinstance(json, type(math)), sqrt(9.0), math.pi > 3,
                issubclass(type(json), type(math)), math.floor(2.5)]
    """,
    "builtins-introspection": """
        class P:
            kind = "point"
            def __init__(self, x):
                self.x = x
                self._seen = 0
        import types
        ns = types.SimpleNamespace(a=1)
        return [vars(P(2)), vars(ns), [n for n in dir(P(2)) if not n.startswith("__")],
                sorted(k for k in vars(P) if not k.startswith("__"))]
    """,
    "builtins-str-format": """
        class P:
            def __init__(self):
                self.x = 3
        return ["{0.x}-{1:>4}-{k[a]}".format(P(), 7, k={"a": 1}), str.format("{}", 2),
                "{p.x}".format_map({"p": P()}), "{:.2f}".format(3.14159)]
    """,
    "asyncio-coordination": """
        import asyncio
        q = asyncio.Queue()
        lock, event, sem = asyncio.Lock(), asyncio.Event(), asyncio.Semaphore(2)
        async def produce():
            for i in range(3):
                await q.put(i)
            event.set()
        async def work(n):
            async with sem:
                await asyncio.sleep(0)
                return n * 2
        task = asyncio.create_task(produce())
        await event.wait()
        got = [q.get_nowait() for _ in range(q.qsize())]
        async with lock:
            held = lock.locked()
        async with asyncio.TaskGroup() as tg:
            parts = [tg.create_task(work(i)) for i in range(3)]
        done, pending = await asyncio.wait([asyncio.create_task(work(5))])
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)
        except TimeoutError:
            late = True
        await task
        return [got, held, [p.result() for p in parts], [d.result() for d in done], len(pending), late]
    """,
    "abc-abstractmethod": """
        import abc
        class Base(abc.ABC):
            @abc.abstractmethod
            def run(self):
                ...
            @classmethod
            @abc.abstractmethod
            def make(cls):
                ...
        class Impl(Base):
            def run(self):
                return "ran"
            @classmethod
            def make(cls):
                return cls()
        try:
            Base()
        except TypeError:
            abstract = True
        return [Impl.make().run(), abstract]
    """,
    "abc-classes": """
        import abc
        class Shape(abc.ABC):
            @abc.abstractmethod
            def area(self):
                ...
        class Sq(Shape):
            def area(self):
                return 4
        try:
            Shape()
        except TypeError:
            refused = True
        return [Sq().area(), refused, isinstance(Sq(), Shape)]
    """,
    "array-values": """
        import array
        a = array.array("i", [1, 2, 3])
        a.append(4)
        a[0] = 9
        return [a.tolist(), a.itemsize, array.typecodes, a.tobytes().hex()]
    """,
    "calendar-text": """
        import calendar
        return [calendar.isleap(2024), calendar.monthrange(2024, 2), calendar.weekday(2024, 1, 1),
                calendar.month(2024, 2), calendar.monthcalendar(2024, 2)[0], calendar.day_name[0]]
    """,
    "contextlib-managers": """
        import contextlib
        log = []
        @contextlib.contextmanager
        def tag(name):
            log.append("open " + name)
            yield name.upper()
            log.append("close " + name)
        with tag("a") as t:
            log.append(t)
        with contextlib.suppress(KeyError):
            {}["missing"]
        with contextlib.ExitStack() as stack:
            stack.callback(log.append, "callback")
            stack.enter_context(tag("b"))
        @contextlib.asynccontextmanager
        async def atag():
            yield 5
        async with atag() as five:
            log.append(five)
        with contextlib.nullcontext(3) as three:
            log.append(three)
        return log
    """,
    "csv-io": """
        import csv, io
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=["name", "n"])
        writer.writeheader()
        writer.writerow({"name": "a,b", "n": 1})
        text = buffer.getvalue()
        rows = list(csv.reader(io.StringIO(text)))
        dicts = list(csv.DictReader(io.StringIO(text)))
        return [text, rows, dicts, csv.Sniffer().sniff("a;b\\n1;2\\n").delimiter]
    """,
    "difflib-sequences": """
        import difflib
        return [list(difflib.unified_diff(["a\\n", "b\\n"], ["a\\n", "c\\n"], "x", "y")),
                difflib.SequenceMatcher(None, "abcd", "abed").ratio(),
                difflib.get_close_matches("appel", ["ape", "apple", "peach"]),
                list(difflib.ndiff(["one"], ["ore"]))]
    """,
    "fnmatch-patterns": """
        import fnmatch
        return [fnmatch.fnmatch("a.py", "*.py"), fnmatch.filter(["a.py", "b.txt"], "*.txt"),
                fnmatch.translate("*.py")]
    """,
    "graphlib-sorter": """
        import graphlib
        ts = graphlib.TopologicalSorter({"c": {"b"}, "b": {"a"}})
        try:
            list(graphlib.TopologicalSorter({"a": {"b"}, "b": {"a"}}).static_order())
        except graphlib.CycleError:
            cycle = True
        return [list(ts.static_order()), cycle]
    """,
    "html-escape": """
        import html
        return [html.escape("<a href='x'>&</a>"), html.unescape("&lt;&amp;&#39;")]
    """,
    "io-buffers": """
        import io
        s = io.StringIO()
        s.write("one\\ntwo\\n")
        s.seek(0)
        b = io.BytesIO(b"xyz")
        return [s.readline(), s.read(), b.read(2).decode(), b.getvalue().decode()]
    """,
    "numbers-abcs": """
        import numbers, fractions
        return [isinstance(1, numbers.Integral), isinstance(1.5, numbers.Real),
                isinstance(fractions.Fraction(1, 2), numbers.Rational), isinstance("x", numbers.Number)]
    """,
    "os-path": """
        import os
        from os import path
        return [os.sep, os.path.join("a", "b"), path.splitext("x.tar.gz"), os.curdir]
    """,
    "os-path-pure": """
        import os.path
        from os.path import basename, dirname
        return [basename("/a/b.txt"), dirname("/a/b.txt"), os.path.normpath("a//b/../c"),
                os.path.split("/x/y"), os.path.isabs("/x"), os.path.commonpath(["/a/b", "/a/c"])]
    """,
    "pathlib-pure": """
        import pathlib
        p = pathlib.PurePosixPath("/data/report.tar.gz")
        return [p.name, p.suffix, p.suffixes, p.stem, str(p.parent), str(p / "x"), p.parts,
                str(p.with_suffix(".zip")), p.match("*.gz"), str(pathlib.PureWindowsPath("c:/a/b"))]
    """,
    "pprint-output": """
        import pprint
        data = {"b": list(range(30)), "a": {"nested": ["x" * 10] * 5}}
        return [pprint.pformat(data), pprint.pformat(data, width=40, compact=True), pprint.saferepr([1]),
                pprint.isreadable({"a": 1})]
    """,
    "secrets-tokens": """
        import secrets
        return [len(secrets.token_hex(8)), len(secrets.token_bytes(4)), secrets.choice([7]),
                secrets.compare_digest("a", "a"), 0 <= secrets.randbelow(10) < 10]
    """,
    "shlex-split": """
        import shlex
        return [shlex.split("a 'b c' d\\ e"), shlex.quote("it's"), shlex.join(["a b", "c"])]
    """,
    "struct-pack": """
        import struct
        packed = struct.pack("<IhB", 1, -2, 3)
        buffer = bytearray(8)
        struct.pack_into("<I", buffer, 2, 7)
        return [packed.hex(), struct.unpack("<IhB", packed), struct.calcsize("<IhB"), buffer.hex(),
                struct.Struct(">H").pack(258).hex()]
    """,
    "time-clock": """
        import time
        stamp = time.gmtime(86400 * 365)
        try:
            time.sleep(0)
            slept = True
        except RuntimeError:
            slept = True
        return [time.strftime("%Y-%m-%d %H:%M", stamp), stamp.tm_yday, time.monotonic() > 0,
                time.perf_counter() > 0, time.time() > 1e9, time.strptime("2020-02-03", "%Y-%m-%d").tm_mon,
                slept]
    """,
    "types-namespaces": """
        import types
        ns = types.SimpleNamespace(a=1, b=[2])
        ns.c = 3
        view = types.MappingProxyType({"k": 1})
        try:
            view["k"] = 2
        except TypeError:
            frozen = True
        return [repr(ns), ns.a + ns.c, dict(view), frozen, ns == types.SimpleNamespace(a=1, b=[2], c=3)]
    """,
    "unicodedata-tables": """
        import unicodedata
        return [unicodedata.name("é"), unicodedata.category("A"), unicodedata.normalize("NFD", "é"),
                unicodedata.lookup("SNOWMAN"), unicodedata.numeric("½")]
    """,
    "urllib-parse": """
        import urllib.parse
        import urllib
        return [urllib.parse.quote("a b"), urllib.parse.urlparse("https://x.org/p?q=1#f").netloc]
    """,
    "urllib-parse-functions": """
        from urllib.parse import urlencode, parse_qs, urljoin, urlsplit, unquote_plus
        return [urlencode({"a": 1, "b": "x y"}), parse_qs("a=1&a=2&b=3"), urljoin("http://h/a/b", "../c"),
                urlsplit("http://u@h:8/p?q").port, unquote_plus("a+b%21")]
    """,
    "zlib-codecs": """
        import zlib
        data = b"hello " * 20
        packed = zlib.compress(data, 9)
        return [zlib.decompress(packed) == data, zlib.crc32(b"abc"), zlib.adler32(b"abc"),
                len(packed) < len(data)]
    """,
    "collections-abc": """
        import collections.abc
        import collections
        return [isinstance({}, collections.abc.Mapping), isinstance([], collections.abc.Sequence),
                collections.abc is collections.abc, issubclass(list, collections.abc.MutableSequence)]
    """,
    "collections-abc-classes": """
        from collections.abc import Mapping, Iterable, Callable, MutableSet
        class Registry(Mapping):
            def __init__(self, **items):
                self._items = dict(items)
            def __getitem__(self, key):
                return self._items[key]
            def __iter__(self):
                return iter(self._items)
            def __len__(self):
                return len(self._items)
        r = Registry(a=1, b=2)
        return [r.get("a"), r.get("z", 0), sorted(r.keys()), list(r.items()), "a" in r, dict(r),
                isinstance(r, Mapping), isinstance(len, Callable), isinstance("x", Iterable),
                issubclass(set, MutableSet)]
    """,
    "zoneinfo-zones": """
        import zoneinfo, datetime
        paris = zoneinfo.ZoneInfo("Europe/Paris")
        summer = datetime.datetime(2024, 7, 1, 12, tzinfo=paris)
        winter = datetime.datetime(2024, 1, 1, 12, tzinfo=paris)
        return [summer.isoformat(), winter.isoformat(), summer.tzname(), str(paris), repr(paris),
                summer.astimezone(zoneinfo.ZoneInfo("Asia/Tokyo")).isoformat(),
                isinstance(paris, zoneinfo.ZoneInfo), paris is zoneinfo.ZoneInfo("Europe/Paris"),
                "UTC" in zoneinfo.available_timezones()]
    """,
    "builtins-import": """
        import json, math as m
        from collections import Counter
        return [json.dumps([1]), m.pi > 3, Counter("aa")["a"]]
    """,
}

_EXPOSED = [row for row in AUDIT if row.exposed]

# Plain CPython, the way the sandbox runs a program at module scope: the body of an async function whose
# top-level names are globals of a module named "program"; each program in a fresh decimal context (as
# the sandbox gives every run) and, for two-run checks, one namespace for both runs.
_CPYTHON_RUNNER = """
import ast, asyncio, contextlib, decimal, json, sys
from codemode.sandbox.compiler import _TopLevelNames
from codemode.sandbox.lossless import snapshot

def wrap(source):
    body = ast.parse(source).body
    names = _TopLevelNames()
    for stmt in body:
        names.visit(stmt)
    for i, stmt in enumerate(body):  # (top-level annotations are dropped, as at module scope in the sandbox)
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            body[i] = ast.Assign([stmt.target], stmt.value) if stmt.value else ast.Pass()
    head = [ast.Global(list(names.names))] if names.names else []
    arguments = ast.arguments([], [], None, [], [], None, [])
    entry = ast.AsyncFunctionDef("__program__", arguments, head + body, [])
    return ast.fix_missing_locations(ast.Module([entry], []))

async def run(source, namespace, fresh):
    try:
        exec(compile(wrap(source), "<program>", "exec"), namespace)
        with decimal.localcontext(decimal.Context()) if fresh else contextlib.nullcontext():
            return {"value": snapshot(await namespace.pop("__program__")(), root="result")}
    except BaseException as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}

async def main(jobs, fresh):
    results = {}
    for key, sources in jobs.items():
        namespace = {"__name__": "program"}
        results[key] = [await run(source, namespace, fresh) for source in sources]
    return results

jobs, fresh = json.loads(sys.stdin.read())
print(json.dumps(asyncio.run(main(jobs, fresh))))
"""


def _dedent(source: str) -> str:
    return textwrap.dedent(source).strip("\n")


def _legit_program(key: str) -> str:
    """A legitimate use as one program: its body in a function, the value made plain JSON (tuples become
    lists) by the program itself, so the sandbox and CPython are compared on the same text."""
    body = textwrap.indent(_dedent(LEGIT[key]), "    ")
    return (f"import json as audit_json\nasync def audit_body():\n{body}\n"
            "return audit_json.loads(audit_json.dumps(await audit_body(), sort_keys=True))")


def _cpython(jobs: dict[str, list[str]], *, fresh: bool) -> dict[str, list[dict[str, Any]]]:
    """Run each job's programs under plain CPython, in one fresh interpreter, one namespace per job.

    ``fresh``: each program in a fresh decimal context (as the sandbox runs a program); otherwise in the
    interpreter's one context, as plain CPython runs successive code.
    """
    done = subprocess.run([sys.executable, "-c", _CPYTHON_RUNNER], input=json.dumps([jobs, fresh]), text=True,
                          capture_output=True, timeout=120, check=True)
    results: dict[str, list[dict[str, Any]]] = json.loads(done.stdout)
    return results


@pytest.fixture(scope="module")
def cpython_legit() -> dict[str, dict[str, Any]]:
    """Every legitimate use's outcome under plain CPython (``{"value": ...}`` or ``{"error": ...}``)."""
    results = _cpython({key: [_legit_program(key)] for key in LEGIT}, fresh=True)
    return {key: runs[0] for key, runs in results.items()}


@pytest.fixture(scope="module")
def cpython_persist() -> dict[str, Any]:
    """Every two-run check's second value under plain CPython (one fresh interpreter, runs in sequence)."""
    results = _cpython({key: [_dedent(first), _dedent(second)] for key, (first, second) in PERSIST.items()},
                       fresh=False)
    return {key: runs[1].get("value", runs[1].get("error")) for key, runs in results.items()}


def _covered(module: str, members: dict[str, Any]) -> Iterator[str]:
    named = {name for row in AUDIT if row.module == module and row.exposed for name in row.members}
    if "*" in named:
        yield from members
    else:
        yield from named


def test_every_row_has_an_attack_and_every_exposed_row_a_legitimate_use() -> None:
    """It tests every row: an attack or a two-run check (or both), and a legitimate use where exposed."""
    keys = [row.key for row in AUDIT]
    assert len(keys) == len(set(keys))
    assert len(_BY_ROW) == len(ATTACKS)
    assert set(_BY_ROW) | set(PERSIST) == set(keys)
    assert set(_BY_ROW) <= set(keys) and set(PERSIST) <= set(keys)
    assert set(LEGIT) == {row.key for row in _EXPOSED}


@pytest.mark.parametrize("module", sorted(FACADES))
def test_rows_cover_every_facade_member(module: str) -> None:
    """Every member of every facade is named by an exposed row (or by a module's "*" row)."""
    members = object.__getattribute__(FACADES[module], "_facade_members")
    named = {name for row in AUDIT if row.module == module and row.exposed for name in row.members}
    assert named, f"no audit row for {module}"
    assert named - {"*"} <= set(members), f"rows name members {module} does not have"
    if "*" not in named:
        assert set(members) <= named, f"members of {module} no row covers: {set(members) - named}"


def test_rows_cover_every_builtin() -> None:
    """Every builtin a program gets (but the exception classes and constants) is named by a row."""
    table = build_safe_builtins(lambda *a: None)
    callables = {name for name, value in table.items()
                 if callable(value) and not (isinstance(value, type) and issubclass(value, BaseException))}
    named = {name for row in _EXPOSED if row.module == "builtins" for name in row.members}
    assert "*" in named and named - {"*"} <= callables
    left_out = {name for row in AUDIT if row.module == "builtins" and not row.exposed for name in row.members}
    assert not left_out & set(table)


@pytest.mark.parametrize("row", [row for row in AUDIT if not row.exposed], ids=lambda row: row.key)
def test_rows_that_are_not_exposed_are_left_out(row: AuditRow) -> None:
    """What a row says is left out is not a member of its facade."""
    if row.module == "builtins":
        return  # (checked with the builtins above)
    members = object.__getattribute__(FACADES[row.module], "_facade_members")
    assert not set(row.members) & set(members)


@pytest.mark.anyio
@pytest.mark.parametrize("key", sorted(_BY_ROW), ids=str)
async def test_row_attack_is_blocked(escape: EscapeHarness, key: str) -> None:
    """The row's attack reaches the secret under plain CPython and fails in the sandbox."""
    await escape.check(_BY_ROW[key])


async def _in_process(sources: list[str]) -> list[Any]:
    namespace: dict[str, Any] = {}
    outcomes = []
    for source in sources:
        with anyio.fail_after(20):
            outcome = await run_program(compile_program(source), tool_names=TOOL_NAMES,
                                        call_tool=fake_call_tool, log=lambda line: None, globals_=namespace)
        outcomes.append(outcome.value if outcome.error_kind is None else outcome.error_message)
    return outcomes


@pytest.mark.anyio
@pytest.mark.parametrize("key", sorted(LEGIT), ids=str)
async def test_row_legitimate_use_matches_cpython(worker_sandbox: Sandbox,
                                                  cpython_legit: dict[str, dict[str, Any]], key: str) -> None:
    """The row's ordinary use gives exactly CPython's value, in process and through the worker."""
    source = _legit_program(key)
    assert "value" in cpython_legit[key], f"it fails under plain CPython: {cpython_legit[key]}"
    expected = cpython_legit[key]["value"]
    (inline,) = await _in_process([source])
    assert inline == expected
    with anyio.fail_after(30):  # (a session runs at module scope, as the in-process run and CPython do)
        async with worker_sandbox.open_session() as session:
            result = await worker_sandbox.run(source, tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                                              session=session)
    assert result.error is None, result.error
    assert snapshot(result.value, root="result") == expected


@pytest.mark.anyio
@pytest.mark.parametrize("key", sorted(PERSIST), ids=str)
async def test_row_state_does_not_reach_the_next_run(worker_sandbox: Sandbox, cpython_persist: dict[str, Any],
                                                     key: str) -> None:
    """A later run of the same session does not see what an earlier run did to the row's host state.

    Under plain CPython (one interpreter, the two programs in sequence) it does.
    """
    first, second = (_dedent(source) for source in PERSIST[key])
    plain = cpython_persist[key]
    assert plain is True, f"the poisoning is not real under plain CPython: {plain}"
    assert (await _in_process([first, second]))[1] is False
    with anyio.fail_after(30):
        async with worker_sandbox.open_session() as session:
            await worker_sandbox.run(first, tool_names=TOOL_NAMES, call_tool=fake_call_tool, session=session)
            later = await worker_sandbox.run(second, tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                                             session=session)
    assert later.error is None and later.value is False, later
