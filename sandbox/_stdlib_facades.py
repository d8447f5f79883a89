"""The wider standard library of programs: asyncio coordination, ``time``, text and data modules.

Each module here is a curated facade (see :mod:`codemode.sandbox.facades` for the rules and
:mod:`codemode.sandbox._audit` for what every entry point reaches). The members that needed more than
a pick from the real module:

* ``asyncio`` tasks, queues, locks, events, semaphores, task groups and timeouts are wrappers that keep
  the real object in a ``_``-slot: a program never holds a real Task, Future, loop or host coroutine.
  Every task is recorded in the run's registry, so nothing outlives the run.
* ``operator.attrgetter``/``methodcaller`` resolve every name with the program's ``getattr``.
* ``time.sleep`` blocks the worker's event loop: it raises, pointing at ``await asyncio.sleep``.
* ``pprint``'s functions print through the run's ``print`` (not the worker's standard output).
* ``os`` holds ``path`` (pure path functions only: nothing that reads the file system, the working
  directory or the environment); ``urllib`` holds ``parse``; ``pathlib`` has the pure path classes.
* ``csv``'s dialect registry and field size limit are process-wide: left out.
* ``shlex.split`` requires text (``None`` would read the worker's standard input).
* ``abc.ABCMeta`` would build classes from a namespace dict (any dunder): left out.
* ``zoneinfo.ZoneInfo(key)`` serves the common zones of :data:`ZONE_KEYS`, read before the worker gave up
  its file system; another key raises ``ZoneInfoNotFoundError`` listing them.
"""

from __future__ import annotations

import abc
import array
import asyncio
import calendar
import collections.abc
import contextlib
import contextvars
import csv
import difflib
import fnmatch
import graphlib
import html
import io
import numbers
import os.path
import pathlib
import pprint
import secrets
import shlex
import struct
import time
import types
import unicodedata
import urllib.parse
import zlib
import zoneinfo
from collections.abc import Callable, Iterable
from typing import Any, Final, NoReturn

from .guards import guarded_getattr, is_program_function

__all__ = ("CURRENT_PRINT", "ZONE_KEYS", "extra_members", "load_zones")

#: The run's ``print`` (set by the executor for the duration of a run): where ``pprint`` writes.
CURRENT_PRINT: contextvars.ContextVar[Callable[..., None] | None] = contextvars.ContextVar(
    "codemode_sandbox_print", default=None)


# -- asyncio ---------------------------------------------------------------------------------------


class Task:
    """A task started by ``asyncio.create_task``: awaitable, cancellable, nothing of the real task."""

    __slots__ = ("_task",)

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self._task = task

    def __await__(self) -> Any:
        return self._outcome().__await__()

    async def _outcome(self) -> Any:
        try:
            return await self._task
        except _ProgramExit as exc:  # (SystemExit/KeyboardInterrupt of the task, raised as it was)
            raise _released(exc) from None

    def cancel(self, msg: object = None) -> bool:
        return self._task.cancel(None if msg is None else str(msg))

    def cancelled(self) -> bool:
        return self._task.cancelled()

    def done(self) -> bool:
        return self._task.done()

    def result(self) -> Any:
        try:
            return self._task.result()
        except _ProgramExit as exc:
            raise _released(exc) from None

    def exception(self) -> BaseException | None:
        error = self._task.exception()
        return None if error is None else _released(error)

    def get_name(self) -> str:
        return self._task.get_name()

    def __repr__(self) -> str:
        state = "done" if self._task.done() else "pending"
        return f"<Task {self._task.get_name()} {state}>"

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("tasks cannot be copied")


Task.__module__ = "asyncio"


def _create_task(coro: object, *, name: object = None) -> Task:
    task = _spawn(coroutine_of(coro, "asyncio.create_task()"))
    if name is not None:
        task.set_name(str(name))
    return Task(task)


def _ensure_tasks(items: Iterable[object], where: str) -> dict[asyncio.Task[Any], Task]:
    tasks: dict[asyncio.Task[Any], Task] = {}
    for item in items:
        wrapper = item if isinstance(item, Task) else _create_task(item)
        tasks[wrapper._task] = wrapper
    if not tasks:
        raise ValueError(f"{where} needs at least one task or awaitable")
    return tasks


def _wait(aws: Iterable[object], *, timeout: object = None,
          return_when: str = asyncio.ALL_COMPLETED) -> SafeAwaitable:
    if return_when not in (asyncio.ALL_COMPLETED, asyncio.FIRST_COMPLETED, asyncio.FIRST_EXCEPTION):
        raise ValueError(f"Invalid return_when value: {return_when!r}")
    seconds = _number(timeout, "asyncio.wait() timeout", optional=True)
    tasks = _ensure_tasks(list(aws), "asyncio.wait()")

    async def wait() -> tuple[set[Task], set[Task]]:
        done, pending = await asyncio.wait(list(tasks), timeout=seconds, return_when=return_when)
        return {tasks[t] for t in done}, {tasks[t] for t in pending}

    return SafeAwaitable(wait, "asyncio.wait(...)")


class _Waitable:
    """Common base of the synchronisation wrappers: the real primitive in ``_real``."""

    __slots__ = ("_real",)
    _real: Any

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError(f"{type(self).__name__} objects cannot be copied")

    def __repr__(self) -> str:
        return f"<asyncio.{type(self).__name__}>"


class Lock(_Waitable):
    """``asyncio.Lock``: ``async with lock:``, ``await lock.acquire()``, ``lock.release()``."""

    __slots__ = ()

    def __init__(self) -> None:
        self._real = asyncio.Lock()

    def acquire(self) -> SafeAwaitable:
        return SafeAwaitable(self._real.acquire, f"{type(self).__name__}.acquire()")

    def release(self) -> None:
        self._real.release()

    def locked(self) -> bool:
        return bool(self._real.locked())

    async def __aenter__(self) -> None:
        await self._real.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._real.release()


class Semaphore(Lock):
    """``asyncio.Semaphore(value)``."""

    __slots__ = ()

    def __init__(self, value: int = 1) -> None:
        self._real = asyncio.Semaphore(value)


class BoundedSemaphore(Lock):
    """``asyncio.BoundedSemaphore(value)``."""

    __slots__ = ()

    def __init__(self, value: int = 1) -> None:
        self._real = asyncio.BoundedSemaphore(value)


class Event(_Waitable):
    """``asyncio.Event``: ``set``, ``clear``, ``is_set``, ``await event.wait()``."""

    __slots__ = ()

    def __init__(self) -> None:
        self._real = asyncio.Event()

    def set(self) -> None:
        self._real.set()

    def clear(self) -> None:
        self._real.clear()

    def is_set(self) -> bool:
        return bool(self._real.is_set())

    def wait(self) -> SafeAwaitable:
        return SafeAwaitable(self._real.wait, "Event.wait()")


class Queue(_Waitable):
    """``asyncio.Queue(maxsize)`` (and the priority and LIFO variants below)."""

    __slots__ = ()
    _kind: Any = asyncio.Queue

    def __init__(self, maxsize: int = 0) -> None:
        self._real = self._kind(maxsize)

    @property
    def maxsize(self) -> int:
        return int(self._real.maxsize)

    def put(self, item: object) -> SafeAwaitable:
        return SafeAwaitable(lambda: self._real.put(item), "Queue.put(...)")

    def get(self) -> SafeAwaitable:
        return SafeAwaitable(self._real.get, "Queue.get()")

    def join(self) -> SafeAwaitable:
        return SafeAwaitable(self._real.join, "Queue.join()")

    def put_nowait(self, item: object) -> None:
        self._real.put_nowait(item)

    def get_nowait(self) -> Any:
        return self._real.get_nowait()

    def task_done(self) -> None:
        self._real.task_done()

    def qsize(self) -> int:
        return int(self._real.qsize())

    def empty(self) -> bool:
        return bool(self._real.empty())

    def full(self) -> bool:
        return bool(self._real.full())


class PriorityQueue(Queue):
    """``asyncio.PriorityQueue``."""

    __slots__ = ()
    _kind = asyncio.PriorityQueue


class LifoQueue(Queue):
    """``asyncio.LifoQueue``."""

    __slots__ = ()
    _kind = asyncio.LifoQueue


class TaskGroup(_Waitable):
    """``async with asyncio.TaskGroup() as tg: tg.create_task(...)``; its tasks are the run's too."""

    __slots__ = ()

    def __init__(self) -> None:
        self._real = asyncio.TaskGroup()

    async def __aenter__(self) -> TaskGroup:
        await self._real.__aenter__()
        return self

    async def __aexit__(self, kind: Any, value: Any, traceback: Any) -> bool | None:
        try:
            return await self._real.__aexit__(kind, value, traceback)  # type: ignore[no-any-return]
        except BaseExceptionGroup as group:
            for error in group.exceptions:  # (a task's SystemExit ends the group as CPython's does)
                if type(error) is _ProgramExit:
                    raise _released(error) from None
            raise

    def create_task(self, coro: object, *, name: object = None) -> Task:
        # (the run's registry starts it: contained, cancelled with the run, refused once the run ended)
        started = coroutine_of(coro, "TaskGroup.create_task()")
        label = None if name is None else str(name)
        return Task(_spawn(started, lambda wrapped: self._real.create_task(wrapped, name=label)))


class Timeout(_Waitable):
    """``async with asyncio.timeout(seconds):`` (raises ``TimeoutError`` when it expires)."""

    __slots__ = ()

    def __init__(self, delay: float | None) -> None:
        seconds = _number(delay, "asyncio.timeout() delay", optional=True)
        self._real = None if seconds is None else seconds

    async def __aenter__(self) -> Timeout:
        seconds = self._real
        when = None if seconds is None else asyncio.get_running_loop().time() + seconds
        self._real = asyncio.timeout_at(when)
        await self._real.__aenter__()
        return self

    async def __aexit__(self, kind: Any, value: Any, traceback: Any) -> bool | None:
        return await self._real.__aexit__(kind, value, traceback)  # type: ignore[no-any-return]

    def expired(self) -> bool:
        return bool(self._real.expired()) if isinstance(self._real, asyncio.Timeout) else False


def _timeout(delay: float | None) -> Timeout:
    return Timeout(delay)


for _cls in (Lock, Semaphore, BoundedSemaphore, Event, Queue, PriorityQueue, LifoQueue, TaskGroup, Timeout):
    _cls.__module__ = "asyncio"


def _asyncio_members() -> dict[str, object]:
    from .facades import _present  # (the facades module calls this while it loads)

    return {
        "ALL_COMPLETED": asyncio.ALL_COMPLETED, "FIRST_COMPLETED": asyncio.FIRST_COMPLETED,
        "FIRST_EXCEPTION": asyncio.FIRST_EXCEPTION, "QueueEmpty": asyncio.QueueEmpty,
        "QueueFull": asyncio.QueueFull, "InvalidStateError": asyncio.InvalidStateError,
        "BoundedSemaphore": BoundedSemaphore, "Event": Event, "LifoQueue": LifoQueue, "Lock": Lock,
        "PriorityQueue": PriorityQueue, "Queue": Queue, "Semaphore": Semaphore, "Task": Task,
        "TaskGroup": TaskGroup, "Timeout": Timeout,
        **_present("asyncio", create_task=_create_task, wait=_wait, timeout=_timeout),
    }


# -- operator --------------------------------------------------------------------------------------


class attrgetter:
    """``operator.attrgetter``: every (dotted) name is read with the program's ``getattr``."""

    __slots__ = ("_names",)

    def __init__(self, attr: str, *attrs: str) -> None:
        names = (attr, *attrs)
        for name in names:
            if not isinstance(name, str):
                raise TypeError("attribute name must be a string")
        self._names = tuple(tuple(name.split(".")) for name in names)

    def _one(self, obj: object, path: tuple[str, ...]) -> Any:
        for step in path:
            obj = guarded_getattr(obj, step)
        return obj

    def __call__(self, obj: object) -> Any:
        if len(self._names) == 1:
            return self._one(obj, self._names[0])
        return tuple(self._one(obj, path) for path in self._names)

    def __repr__(self) -> str:
        return f"operator.attrgetter({', '.join(repr('.'.join(p)) for p in self._names)})"

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("attrgetter objects cannot be copied in the sandbox")


class methodcaller:
    """``operator.methodcaller``: the method is read with the program's ``getattr``."""

    __slots__ = ("_args", "_kwargs", "_name")

    def __init__(self, name: str, /, *args: object, **kwargs: object) -> None:
        if not isinstance(name, str):
            raise TypeError("method name must be a string")
        self._name = name
        self._args = args
        self._kwargs = kwargs

    def __call__(self, obj: object) -> Any:
        return guarded_getattr(obj, self._name)(*self._args, **self._kwargs)

    def __repr__(self) -> str:
        parts = [repr(self._name), *map(repr, self._args),
                 *(f"{key}={value!r}" for key, value in self._kwargs.items())]
        return f"operator.methodcaller({', '.join(parts)})"

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("methodcaller objects cannot be copied in the sandbox")


attrgetter.__module__ = methodcaller.__module__ = "operator"


# -- time ------------------------------------------------------------------------------------------


def _sleep(seconds: object) -> NoReturn:
    raise RuntimeError("time.sleep() would block every task of the program; "
                       "use 'await asyncio.sleep(seconds)'")


_TIME: Final = ("altzone", "asctime", "ctime", "daylight", "gmtime", "localtime", "mktime", "monotonic",
                "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time", "process_time_ns",
                "strftime", "strptime", "struct_time", "time", "time_ns", "timezone")


# -- pprint ----------------------------------------------------------------------------------------


class _RunOutput:
    """A stream that writes to the run's ``print``."""

    __slots__ = ()

    def write(self, text: str) -> int:
        printer = CURRENT_PRINT.get()
        if printer is None:
            raise RuntimeError("pprint can only print while a program runs")
        printer(text, end="")
        return len(text)


class PrettyPrinter(pprint.PrettyPrinter):
    """``pprint.PrettyPrinter``; without ``stream=`` it prints through the run's ``print``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) >= 4:  # (stream is the fourth positional parameter)
            if args[3] is None:
                args = (*args[:3], _RunOutput(), *args[4:])
        elif kwargs.get("stream") is None:
            kwargs["stream"] = _RunOutput()
        super().__init__(*args, **kwargs)


PrettyPrinter.__module__ = "pprint"


def _pprint(obj: object, stream: Any = None, indent: int = 1, width: int = 80, depth: int | None = None, *,
            compact: bool = False, sort_dicts: bool = True, underscore_numbers: bool = False) -> None:
    PrettyPrinter(stream=stream, indent=indent, width=width, depth=depth, compact=compact,
                  sort_dicts=sort_dicts, underscore_numbers=underscore_numbers).pprint(obj)


def _pp(obj: object, *args: Any, sort_dicts: bool = False, **kwargs: Any) -> None:
    _pprint(obj, *args, sort_dicts=sort_dicts, **kwargs)


# -- shlex -----------------------------------------------------------------------------------------


class HTMLCalendar(calendar.HTMLCalendar):
    """``calendar.HTMLCalendar`` without its class-level lists (shared by every instance and run)."""

    cssclasses = tuple(calendar.HTMLCalendar.cssclasses)  # type: ignore[assignment]
    cssclasses_weekday_head = tuple(calendar.HTMLCalendar.cssclasses_weekday_head)  # type: ignore[assignment]


HTMLCalendar.__module__ = "calendar"


class TextCalendar(calendar.TextCalendar):
    """``calendar.TextCalendar``; its ``pr*`` methods print through the run's ``print``."""

    def prweek(self, theweek: Any, width: int) -> None:
        _RunOutput().write(self.formatweek(theweek, width))

    def prmonth(self, theyear: int, themonth: int, w: int = 0, l: int = 0) -> None:  # noqa: E741
        _RunOutput().write(self.formatmonth(theyear, themonth, w, l))

    def pryear(self, theyear: int, w: int = 0, l: int = 0, c: int = 6, m: int = 3) -> None:  # noqa: E741
        _RunOutput().write(self.formatyear(theyear, w, l, c, m))


TextCalendar.__module__ = "calendar"


def _shlex_split(s: str, comments: bool = False, posix: bool = True) -> list[str]:
    if not isinstance(s, str):
        raise TypeError("shlex.split() needs a str (None would read standard input)")
    return shlex.split(s, comments, posix)


# -- abc -------------------------------------------------------------------------------------------


def _abstractmethod(funcobj: Any) -> Any:
    # abc.abstractmethod sets __isabstractmethod__ on what it is given: on a host function that is
    # process-wide state (a later run's class holding it would be abstract).
    target = funcobj.__func__ if isinstance(funcobj, (classmethod, staticmethod)) else funcobj
    if not is_program_function(target):
        raise TypeError("abc.abstractmethod only accepts functions defined by the program")
    return abc.abstractmethod(funcobj)


# -- zoneinfo --------------------------------------------------------------------------------------

#: The time zones programs can load: a worker has no file system, so the template reads these once
#: (:func:`load_zones`, from :func:`codemode.sandbox._preload.warm_lazy_state`).
ZONE_KEYS: Final = (
    "UTC", "Etc/UTC", "GMT", "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
    "America/Phoenix", "America/Anchorage", "America/Toronto", "America/Vancouver", "America/Mexico_City",
    "America/Sao_Paulo", "America/Argentina/Buenos_Aires", "America/Bogota", "America/Lima",
    "America/Santiago", "America/Caracas", "America/Halifax", "Europe/London", "Europe/Dublin",
    "Europe/Lisbon", "Europe/Paris", "Europe/Berlin", "Europe/Madrid", "Europe/Rome", "Europe/Amsterdam",
    "Europe/Brussels", "Europe/Vienna", "Europe/Zurich", "Europe/Stockholm", "Europe/Oslo",
    "Europe/Copenhagen", "Europe/Helsinki", "Europe/Warsaw", "Europe/Prague", "Europe/Budapest",
    "Europe/Athens", "Europe/Istanbul", "Europe/Kyiv", "Europe/Kiev", "Europe/Moscow", "Asia/Tokyo",
    "Asia/Seoul", "Asia/Shanghai", "Asia/Hong_Kong", "Asia/Taipei", "Asia/Singapore", "Asia/Kolkata",
    "Asia/Dubai", "Asia/Karachi", "Asia/Dhaka", "Asia/Bangkok", "Asia/Jakarta", "Asia/Manila", "Asia/Tehran",
    "Asia/Jerusalem", "Asia/Riyadh", "Australia/Sydney", "Australia/Melbourne", "Australia/Brisbane",
    "Australia/Perth", "Australia/Adelaide", "Pacific/Auckland", "Pacific/Honolulu", "Africa/Cairo",
    "Africa/Johannesburg", "Africa/Lagos", "Africa/Nairobi", "Africa/Casablanca", "Atlantic/Reykjavik",
    "US/Eastern", "US/Central", "US/Mountain", "US/Pacific",
)


class ZoneInfo(zoneinfo.ZoneInfo):
    """``zoneinfo.ZoneInfo`` for programs: ``ZoneInfo(key)`` is one of the preloaded zones.

    The real class's ``from_file``, ``no_cache`` and ``clear_cache`` (files, and a process-wide cache)
    are refused; ``type(tz)`` of a zone a program holds is this class.
    """

    def __new__(cls, key: str) -> ZoneInfo:
        load_zones()
        found = _ZONES.get(key) if type(key) is str else None
        if found is None:
            raise zoneinfo.ZoneInfoNotFoundError(
                f"No time zone found with key {key!r} in the sandbox; available: "
                f"{', '.join(sorted(_ZONES))} (or datetime.timezone(datetime.timedelta(hours=N)) for a "
                "fixed offset)")
        return found

    @classmethod
    def _refused(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("ZoneInfo.from_file/no_cache/clear_cache are not available in the sandbox; "
                        "use ZoneInfo(key)")

    from_file = no_cache = clear_cache = _refused

    def __repr__(self) -> str:
        return f"zoneinfo.ZoneInfo(key={self.key!r})"


ZoneInfo.__module__ = "zoneinfo"
_ZONES: dict[str, ZoneInfo] = {}


def load_zones() -> None:
    """Read the zones of :data:`ZONE_KEYS` that this system has (once; ~20 ms)."""
    if _ZONES:
        return
    for key in ZONE_KEYS:
        try:
            _ZONES[key] = zoneinfo.ZoneInfo.__new__(ZoneInfo, key)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            continue


def _available_timezones() -> set[str]:
    load_zones()
    return set(_ZONES)


# -- the tables ------------------------------------------------------------------------------------

_OS_PATH: Final = ("basename", "commonpath", "commonprefix", "dirname", "extsep", "isabs", "join", "normcase",
                   "normpath", "sep", "split", "splitdrive", "splitext", "altsep", "curdir", "pardir",
                   "pathsep")
_URLLIB_PARSE: Final = ("DefragResult", "ParseResult", "SplitResult", "parse_qs", "parse_qsl", "quote",
                        "quote_from_bytes", "quote_plus", "unquote", "unquote_plus", "unquote_to_bytes",
                        "urldefrag", "urlencode", "urljoin", "urlparse", "urlsplit", "urlunparse",
                        "urlunsplit")
_CALENDAR: Final = ("Calendar", "FRIDAY", "IllegalMonthError", "IllegalWeekdayError",
                    "MONDAY",
                    "SATURDAY", "SUNDAY", "THURSDAY", "TUESDAY", "TextCalendar", "WEDNESDAY", "calendar",
                    "day_abbr", "day_name", "isleap", "leapdays", "month", "month_abbr", "month_name",
                    "monthcalendar", "monthrange", "timegm", "weekday", "weekheader")
_COLLECTIONS_ABC: Final = tuple(name for name in collections.abc.__all__ if name != "ByteString")
_UNICODEDATA: Final = ("bidirectional", "category", "combining", "decimal", "decomposition", "digit",
                       "east_asian_width", "is_normalized", "lookup", "mirrored", "name", "normalize",
                       "numeric", "unidata_version")
_ZLIB: Final = ("DEFLATED", "MAX_WBITS", "Z_BEST_COMPRESSION", "Z_BEST_SPEED", "Z_DEFAULT_COMPRESSION",
                "Z_DEFAULT_STRATEGY", "Z_FINISH", "Z_FULL_FLUSH", "Z_NO_FLUSH", "Z_SYNC_FLUSH", "adler32",
                "compress", "compressobj", "crc32", "decompress", "decompressobj", "error")


def extra_members() -> dict[str, Any]:
    """The members of the facades this module adds (``asyncio`` and ``operator`` entries are merged)."""
    from .facades import ModuleFacade, _pick, _present  # (the facades module calls this while it loads)

    os_path = ModuleFacade("os.path", {name: getattr(os.path, name) for name in _OS_PATH})  # type: ignore[call-arg]
    abcs = ModuleFacade("collections.abc", _pick(collections.abc, _COLLECTIONS_ABC))  # type: ignore[call-arg]
    url_parse = ModuleFacade("urllib.parse", _pick(urllib.parse, _URLLIB_PARSE))  # type: ignore[call-arg]
    return {
        "asyncio": _asyncio_members(),
        "collections": {"abc": abcs},
        "collections.abc": abcs,
        "operator": {"attrgetter": attrgetter, "methodcaller": methodcaller},
        "abc": {"ABC": abc.ABC, **_present("abc", abstractmethod=_abstractmethod)},
        "array": {"array": array.array, "typecodes": array.typecodes},
        "calendar": {**_pick(calendar, _CALENDAR), "HTMLCalendar": HTMLCalendar,
                     "TextCalendar": TextCalendar},
        "contextlib": _pick(contextlib, ("AsyncExitStack", "ExitStack", "aclosing", "asynccontextmanager",
                                         "closing", "contextmanager", "nullcontext", "suppress")),
        "csv": _pick(csv, ("Dialect", "DictReader", "DictWriter", "Error", "QUOTE_ALL", "QUOTE_MINIMAL",
                           "QUOTE_NONE", "QUOTE_NONNUMERIC", "Sniffer", "excel", "excel_tab", "reader",
                           "unix_dialect", "writer")),
        "difflib": _pick(difflib, ("Differ", "HtmlDiff", "IS_CHARACTER_JUNK", "IS_LINE_JUNK", "Match",
                                   "SequenceMatcher", "context_diff", "diff_bytes", "get_close_matches",
                                   "ndiff", "restore", "unified_diff")),
        "fnmatch": _pick(fnmatch, ("filter", "fnmatch", "fnmatchcase", "translate")),
        "graphlib": _pick(graphlib, ("CycleError", "TopologicalSorter")),
        "html": _pick(html, ("escape", "unescape")),
        "io": _pick(io, ("BytesIO", "StringIO", "UnsupportedOperation")),
        "numbers": _pick(numbers, ("Complex", "Integral", "Number", "Rational", "Real")),
        "os": {"path": os_path, "sep": os.sep, "linesep": os.linesep,
               "curdir": os.curdir, "pardir": os.pardir, "extsep": os.extsep},
        "os.path": os_path,
        "pathlib": _pick(pathlib, ("PurePath", "PurePosixPath", "PureWindowsPath")),
        "pprint": {"PrettyPrinter": PrettyPrinter, **_pick(pprint, ("isreadable", "isrecursive", "pformat",
                                                                    "saferepr")),
                   **_present("pprint", pprint=_pprint, pp=_pp)},
        "secrets": _pick(secrets, ("DEFAULT_ENTROPY", "SystemRandom", "choice", "compare_digest", "randbelow",
                                   "randbits", "token_bytes", "token_hex", "token_urlsafe")),
        "shlex": {**_pick(shlex, ("join", "quote")), **_present("shlex", split=_shlex_split)},
        "struct": _pick(struct, ("Struct", "calcsize", "error", "iter_unpack", "pack", "pack_into", "unpack",
                                 "unpack_from")),
        "time": {**_pick(time, _TIME), "tzname": tuple(time.tzname), **_present("time", sleep=_sleep)},
        "types": _pick(types, ("MappingProxyType", "SimpleNamespace")),
        "unicodedata": _pick(unicodedata, _UNICODEDATA),
        "urllib": {"parse": url_parse},
        "urllib.parse": url_parse,
        "zlib": _pick(zlib, _ZLIB),
        "zoneinfo": {"ZoneInfoNotFoundError": zoneinfo.ZoneInfoNotFoundError,
                     "ZoneInfo": ZoneInfo, **_present("zoneinfo", available_timezones=_available_timezones)},
    }


# (imported last: the facades module builds its table from extra_members() while it loads, so either
# module can be imported first)
from .facades import (  # noqa: E402
    SafeAwaitable,
    _number,
    _ProgramExit,
    _released,
    _spawn,
    coroutine_of,
)
