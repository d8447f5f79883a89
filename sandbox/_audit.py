"""The audit of what programs can reach: where the real stdlib acts on something a program chose.

Every facade entry point (and every builtin a program gets) is listed here with what it does, inside
the real stdlib, with program-controlled input: ``getattr``/``setattr``/``hasattr`` with program-chosen
names, ``exec``/``eval``/``compile`` of text built from program data, ``str.format`` with a program's
format string, protocol hooks it calls on program objects, and host state it keeps between runs. The
``guard`` column says how the sandbox closes that door (or that the entry point is left out).

This module is data only; nothing imports it at run time. ``tests/sandbox/escapes/test_audit.py`` holds
one attack per row (run under plain CPython, where it works, and in the sandbox, where it must fail),
a legitimate use per exposed row (same result as CPython) and, where a row is about host state, a
two-run check in a persistent session. It also checks that the rows cover every member of every facade
(``"*"`` stands for the members of a module no other row names) and every builtin a program gets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ("AUDIT", "AuditRow")


@dataclass(frozen=True)
class AuditRow:
    """One entry point (or a group that reaches the same thing) and how it is guarded."""

    #: Stable id (the tests key their attack and legitimate use on it).
    key: str
    #: The facade module, or ``"builtins"`` for the program's builtins.
    module: str
    #: Facade members (or builtins) the row covers; ``"*"``: every member no other row of the module names.
    #: For a row that is not exposed, the names that are left out.
    members: tuple[str, ...]
    #: What the real stdlib does with what the program chose.
    reaches: str
    #: How the sandbox guards it.
    guard: str
    #: Whether programs can call it at all.
    exposed: bool = True


_PROGRAM_CODE = "the hooks are program code, run under the policy with the program's builtins"

AUDIT: Final[tuple[AuditRow, ...]] = (
    # -- asyncio ---------------------------------------------------------------------------------------
    AuditRow("asyncio-awaitables", "asyncio",
             ("as_completed", "gather", "sleep", "wait_for", "CancelledError", "TimeoutError"),
             "runs program coroutines and host awaitables as tasks on the real event loop; a coroutine "
             "driven by hand (coroutine.send) yields the loop's futures, whose get_loop() is the loop",
             "facade wrappers return opaque SafeAwaitables; tasks are recorded in the run's registry and "
             "cancelled when it ends; coroutine.send/throw and the Future/Task accessors are refused by "
             "the resolved-function guard, however they are reached (type(c).send, super(), aliases)"),
    AuditRow("asyncio-loop", "asyncio",
             ("ensure_future", "get_event_loop", "get_running_loop", "run", "Future", "shield"),
             "hands out the event loop, futures and tasks (run_in_executor, subprocess_exec, ...)",
             "not exposed", exposed=False),
    AuditRow("asyncio-coordination", "asyncio",
             ("ALL_COMPLETED", "BoundedSemaphore", "Event", "FIRST_COMPLETED", "FIRST_EXCEPTION",
              "InvalidStateError", "LifoQueue", "Lock", "PriorityQueue", "Queue", "QueueEmpty", "QueueFull",
              "Semaphore", "Task", "TaskGroup", "Timeout", "create_task", "timeout", "wait"),
             "real tasks, queues, locks, events, task groups and timeouts hold the event loop and its "
             "futures (q._get_loop(), task.get_loop(), task.get_coro()); their methods return host "
             "coroutines",
             "wrappers keep the real object in a _-slot (unreadable) and return SafeAwaitables; "
             "create_task/wait/TaskGroup record every task in the run's registry (cancelled when the run "
             "ends); asend/athrow objects' send/throw are refused like coroutine.send"),
    # -- base64 ----------------------------------------------------------------------------------------
    AuditRow("base64-codecs", "base64", ("*",),
             "byte and text transforms (binascii in C, a85/b85 in Python); no names, no callbacks",
             "nothing program-named is looked up; the functions' globals are unreachable (_-names)"),
    # -- bisect ----------------------------------------------------------------------------------------
    AuditRow("bisect-key", "bisect", ("*",),
             "calls key= on items and the target's insert() (insort)",
             "key= is a program callable (getattr inside it is the guarded one); every mutable sequence a "
             "program holds is its own (facades hand in no host containers)"),
    # -- collections -----------------------------------------------------------------------------------
    AuditRow("collections-namedtuple", "collections", ("namedtuple",),
             "builds the __new__ source from typename and field_names and eval()s it; module= sets "
             "__module__ (later read as a key into sys.modules) and by default the caller's frame is read",
             "namedtuple checks every name before the eval (exact str identifiers, no keywords, no _ "
             "unless renamed); the facade refuses module= and passes the program's own module name"),
    AuditRow("collections-containers", "collections", ("ChainMap", "Counter", "OrderedDict", "defaultdict",
                                                       "deque"),
             "containers; defaultdict calls default_factory, ChainMap/Counter/dict subclasses call "
             "__missing__ of the program's class",
             "instances are the program's; a class statement cannot define __missing__ (policy)"),
    AuditRow("collections-abc", "collections", ("abc",),
             "the collections.abc facade (see its row)", "a facade, never the real module"),
    AuditRow("collections-abc-classes", "collections.abc", ("*",),
             "ABCs: register() adds to a process-wide registry; mixin methods (Mapping.get, Set.__or__, "
             "MutableMapping.update, Coroutine.close) call the subclass's own methods",
             "register of a host ABC is refused (resolved-function guard); " + _PROGRAM_CODE),
    AuditRow("collections-namedtuple-api", "collections", ("namedtuple",),
             "_asdict/_replace/_make/_fields/_field_defaults on any namedtuple, host ones included "
             "(DecimalTuple, CacheInfo, LinearRegression): _field_defaults is the class's own dict",
             "readable on namedtuples only (guarded _getattr_); _field_defaults is handed out as a copy, "
             "so a run cannot change a class every later run shares"),
    # -- copy ------------------------------------------------------------------------------------------
    AuditRow("copy-protocols", "copy", ("Error", "copy", "deepcopy"),
             "calls __copy__/__deepcopy__/__reduce_ex__/__reduce__ of the object's class, then "
             "_reconstruct: calls the callable the hook returned, setattr()s slot state by name and "
             "setitem()s/extends the result",
             "program classes cannot define these hooks (policy) and every helper that binds "
             "program-chosen names in a class namespace refuses _-names (enum functional API, "
             "update_wrapper, namedtuple, dataclass fields)"),
    AuditRow("copy-deepcopy-memo", "copy", ("deepcopy",),
             "deepcopy(x, memo) keeps every original it copied in memo[id(memo)], among them a host "
             "object's real __dict__ (a writable dict)",
             "the facade refuses a memo; deepcopy(x) uses a private one"),
    # -- dataclasses -----------------------------------------------------------------------------------
    AuditRow("dataclasses-dataclass", "dataclasses", ("dataclass",),
             "exec()s __init__/__repr__/__eq__/... whose source text is built from the field names (the "
             "keys of the class's __annotations__ and of its bases' __dataclass_fields__); setattr()s "
             "defaults by field name",
             "program classes only; every field name must be an identifier (also in NFKC form), not a "
             "keyword and not start with __, checked before the exec (annotations from a TypedDict base "
             "or any other source included)"),
    AuditRow("dataclasses-helpers", "dataclasses",
             ("FrozenInstanceError", "KW_ONLY", "MISSING", "asdict", "astuple", "field", "fields",
              "is_dataclass", "replace"),
             "getattr(obj, f.name) by field names; asdict/astuple deepcopy the leaves; replace calls "
             "obj.__class__(**changes); field(default=...) calls the default's type's __set_name__",
             "field names were checked when the class was made (check_field_reads: no field may "
             "resolve to a host class's _private state or a checked name such as str.format); deepcopy "
             "without a memo; the classes and defaults are the program's"),
    AuditRow("dataclasses-make-dataclass", "dataclasses", ("make_dataclass",),
             "builds a class from program names and a namespace= dict (any dunder), then the exec above",
             "not exposed", exposed=False),
    # -- datetime --------------------------------------------------------------------------------------
    AuditRow("datetime-types", "datetime", ("*",),
             "C types; strftime/strptime parse a program format text (regexes, the _strptime caches); "
             "tzinfo subclasses' utcoffset/dst/tzname are called",
             "format text never reaches getattr or str.format; " + _PROGRAM_CODE),
    # -- decimal ---------------------------------------------------------------------------------------
    AuditRow("decimal-values", "decimal", ("*",),
             "C constructors parse text, tuples and numbers; signals and constants",
             "no names are looked up; DecimalTuple's _field_defaults is copied (see the namedtuple API row)"),
    AuditRow("decimal-context", "decimal", ("Context", "getcontext", "localcontext", "setcontext"),
             "getcontext() is the thread's (the context's) current Context: host state that outlives a run "
             "and, in process, is the host's own",
             "each run gets a fresh Context (ProgramScope); the previous one is restored when it ends"),
    AuditRow("decimal-shared-contexts", "decimal", ("BasicContext", "DefaultContext", "ExtendedContext"),
             "process-wide template contexts: DefaultContext seeds every new context",
             "not exposed", exposed=False),
    # -- enum ------------------------------------------------------------------------------------------
    AuditRow("enum-functional", "enum", ("Enum", "Flag", "IntEnum", "IntFlag", "StrEnum"),
             "Enum('Name', names, module=, qualname=, type=, start=, boundary=) binds program-chosen "
             "names in a new class namespace: a dunder becomes a protocol hook (__annotations__ reaches "
             "dataclasses' exec, __reduce_ex__ copy's setattr), a sunder an enum hook (_missing_); "
             "module= names a real module",
             "the facade classes have a metaclass that checks every name (check_namespace_name: exact "
             "str, no leading _) and refuses module=; they answer isinstance/issubclass as the real "
             "classes"),
    AuditRow("enum-hooks", "enum", ("auto", "unique", "Enum"),
             "class statements: the host calls _missing_, _generate_next_value_, _ignore_ and "
             "__init_subclass__ hooks of the class and of auto()",
             "a class body cannot bind _-names (policy), the functional API refuses them: only the "
             "host's own hooks run"),
    # -- fractions -------------------------------------------------------------------------------------
    AuditRow("fractions-constructor", "fractions", ("Fraction",),
             "parses text with a regex; calls as_integer_ratio of float/Decimal (subclass) arguments "
             "and numerator/denominator of Rationals",
             "no names are looked up; " + _PROGRAM_CODE),
    # -- functools -------------------------------------------------------------------------------------
    AuditRow("functools-update-wrapper", "functools", ("update_wrapper", "wraps"),
             "getattr(wrapped, name) and setattr(wrapper, name) for every name in assigned=, and "
             "getattr(wrapper, name).update(getattr(wrapped, name)) for every name in updated= "
             "(updated=('__globals__',) merges a host module's globals into the program's)",
             "the wrapper must be a program function; assigned= may only name WRAPPER_ASSIGNMENTS and "
             "updated= only __dict__; a host function's __annotations__ is copied"),
    AuditRow("functools-callables", "functools", ("partial", "reduce"),
             "call the callable they are given with the program's arguments",
             "every reachable callable is reviewed; getattr/hasattr among them are the guarded ones"),
    AuditRow("functools-decorators", "functools",
             ("cache", "cached_property", "cmp_to_key", "lru_cache", "total_ordering"),
             "lru_cache runs update_wrapper with the defaults on the user function; cached_property writes "
             "instance.__dict__[attrname] (attrname from __set_name__); total_ordering setattr()s fixed "
             "operator names",
             "user functions and classes are the program's (total_ordering refuses others); attrname "
             "comes from a class body (policy)"),
    # -- hashlib ---------------------------------------------------------------------------------------
    AuditRow("hashlib-constructors", "hashlib", ("*",),
             "new(name) matches name against fixed sets and OpenSSL's digest table; no getattr",
             "name is data; algorithms_available/_guaranteed are frozen copies"),
    AuditRow("hashlib-file-digest", "hashlib", ("file_digest",),
             "reads a file object", "not exposed", exposed=False),
    # -- heapq -----------------------------------------------------------------------------------------
    AuditRow("heapq-key", "heapq", ("*",),
             "C list mutation; merge/nlargest/nsmallest call key=",
             "the lists and key callables are the program's"),
    # -- itertools -------------------------------------------------------------------------------------
    AuditRow("itertools-callbacks", "itertools", ("*",),
             "starmap/accumulate/groupby/filterfalse/dropwhile/takewhile call program callables",
             "every reachable callable is reviewed; getattr among them is the guarded one"),
    # -- json ------------------------------------------------------------------------------------------
    AuditRow("json-loads-hooks", "json", ("loads", "JSONDecodeError"),
             "calls object_hook/object_pairs_hook/parse_float/parse_int/parse_constant with parsed values",
             "the hooks are program callables or reviewed ones"),
    AuditRow("json-dumps-default", "json", ("dumps",),
             "calls default= on objects it cannot encode; indent/separators are concatenated",
             "default= is a program callable; cls= is refused (see the next row)"),
    AuditRow("json-custom-classes", "json", ("JSONDecoder", "JSONEncoder", "dump", "load"),
             "cls= and the codec classes let a subclass's methods run inside the host's encoder loop",
             "not exposed (dumps/loads take no cls=)", exposed=False),
    # -- math ------------------------------------------------------------------------------------------
    AuditRow("math-functions", "math", ("*",),
             "C; calls __floor__/__ceil__/__trunc__/__index__/__float__ of arguments",
             "a class statement cannot define those hooks (policy)"),
    # -- operator --------------------------------------------------------------------------------------
    AuditRow("operator-functions", "operator", ("*",),
             "C; call the operands' protocol methods (__index__, __length_hint__, __getitem__ ...)",
             "program classes define only the protocol hooks the policy lists (EXTRA_METHOD_NAMES): never "
             "__index__, __length_hint__'s host callers get program code run under the policy"),
    AuditRow("operator-attribute-callers", "operator", ("attrgetter", "methodcaller"),
             "getattr in C with program-chosen names (methodcaller('format', ...) included)",
             "the facade's attrgetter/methodcaller resolve every (dotted) name with guarded_getattr, so "
             "they read exactly what obj.name in the program reads (str.format comes back guarded)"),
    AuditRow("operator-writes", "operator", ("delitem", "iadd", "setitem"),
             "item writes and in-place operators that skip _write_",
             "not exposed", exposed=False),
    # -- random ----------------------------------------------------------------------------------------
    AuditRow("random-functions", "random", ("*",),
             "the module functions are methods of one generator: seed() in one run decides the draws "
             "of the next",
             "the facade's own generator (not the host's), reseeded at every run (ProgramScope)"),
    AuditRow("random-class", "random", ("Random",),
             "a program's own generators; Random.__init_subclass__ setattr()s fixed names",
             "instances and subclasses are the program's"),
    # -- re --------------------------------------------------------------------------------------------
    AuditRow("re-callbacks", "re", ("*",),
             "sub/subn call a program repl with a Match; repl templates parse \\g<name>; patterns are "
             "compiled in C and cached process-wide (purge clears the cache)",
             _PROGRAM_CODE + "; the cache holds immutable compiled patterns; DEBUG is 0 (no host output)"),
    # -- statistics ------------------------------------------------------------------------------------
    AuditRow("statistics-functions", "statistics", ("*",),
             "calls as_integer_ratio/numerator of the data and the data's type to convert results",
             _PROGRAM_CODE),
    # -- string ----------------------------------------------------------------------------------------
    AuditRow("string-template", "string", ("Template",),
             "regex over the template, mapping[name] lookups and str() of the values; a subclass's "
             "delimiter/idpattern/pattern are compiled by __init_subclass__",
             "no getattr and no str.format; the mapping and subclasses are the program's"),
    AuditRow("string-formatter", "string", ("Formatter",),
             "vformat/get_field walk attributes and items by program text",
             "not exposed, and its methods are refused however they are reached (resolved-function "
             "guard)", exposed=False),
    AuditRow("string-constants", "string", ("*",),
             "capwords(s, sep) splits and joins; the constants are str", "nothing to guard"),
    # -- textwrap --------------------------------------------------------------------------------------
    AuditRow("textwrap-wrapper", "textwrap", ("*",),
             "regexes over text; indent() calls predicate=; TextWrapper's class-level translation "
             "table is a dict shared by every instance",
             "the facade's TextWrapper has a frozen table; instances are the program's"),
    # -- typing ----------------------------------------------------------------------------------------
    AuditRow("typing-alias-forwarding", "typing", ("*",),
             "generic aliases forward every non-dunder attribute read to their origin class "
             "(typing.Annotated[str, 0].format is str.format; typing.Iterable.register is the host "
             "ABC's register, a process-wide registry)",
             "the resolved-function guard refuses the format family, the coroutine and asyncio accessors "
             "and ABCMeta.register of a class the program did not define, whatever object forwards them"),
    AuditRow("typing-namedtuple-typeddict", "typing", ("NamedTuple", "TypedDict"),
             "NamedTuple goes through collections.namedtuple; TypedDict keys become __annotations__ "
             "keys (any str), which dataclasses would paste into source on a subclass",
             "namedtuple checks the names; the dataclass facade checks every field name"),
    AuditRow("typing-overload", "typing", ("overload",),
             "records every decorated function in a process-wide registry (get_overloads)",
             "the facade returns the same placeholder without recording"),
    AuditRow("typing-evaluation", "typing", ("ForwardRef", "get_type_hints", "no_type_check"),
             "eval() of annotation strings in a module's globals (TypeVar bounds and NamedTuple/TypedDict "
             "string annotations are only compiled, never evaluated, by the exposed members)",
             "not exposed", exposed=False),
    # -- uuid ------------------------------------------------------------------------------------------
    AuditRow("uuid-values", "uuid", ("*",),
             "uuid3/uuid5 read namespace.bytes; UUID(hex=) calls the str methods of a str subclass",
             "UUID instances are immutable; " + _PROGRAM_CODE),
    AuditRow("uuid-node", "uuid", ("getnode", "uuid1"),
             "may spawn processes and read the host's hardware address", "not exposed", exposed=False),
    # -- the wider stdlib -------------------------------------------------------------------------------
    AuditRow("abc-abstractmethod", "abc", ("abstractmethod",),
             "sets __isabstractmethod__ on the function it is given (a host function's is process-wide)",
             "program functions only (also under classmethod/staticmethod)"),
    AuditRow("abc-classes", "abc", ("*",),
             "ABCMeta builds the class of a program's class statement; register() adds to a registry",
             "the class is the program's (ClassFactory); register of a host ABC, or of a program ABC "
             "below one (a virtual subclass of it is one of the host ABC too), is refused; "
             "abstractmethod marks program functions only"),
    AuditRow("abc-metaclass", "abc", ("ABCMeta", "get_cache_token", "update_abstractmethods"),
             "ABCMeta(name, bases, namespace) builds a class from any namespace dict (dunders included)",
             "not exposed", exposed=False),
    AuditRow("array-values", "array", ("*",),
             "C arrays; fromfile/tofile read and write file objects",
             "instances are the program's; no file object is reachable"),
    AuditRow("calendar-text", "calendar", ("*",),
             "text and HTML calendars from numbers; calendar()/month() use a module-level TextCalendar",
             "setfirstweekday (process-wide), the locale calendars and the print helpers are left out"),
    AuditRow("calendar-global", "calendar", ("LocaleTextCalendar", "prcal", "prmonth", "setfirstweekday"),
             "set the process-wide first weekday or locale, print to the worker's stdout",
             "not exposed", exposed=False),
    AuditRow("contextlib-managers", "contextlib", ("*",),
             "call program generators, callbacks and the __enter__/__exit__ (async too) of the objects "
             "they are given",
             _PROGRAM_CODE + "; redirect_stdout/chdir (process-wide) are left out"),
    AuditRow("contextlib-process", "contextlib", ("chdir", "redirect_stderr", "redirect_stdout"),
             "change the working directory or the process's standard streams", "not exposed", exposed=False),
    AuditRow("csv-io", "csv", ("*",),
             "C reader/writer iterate program iterables and call .write of a program object; DictWriter "
             "reads row dicts by field name; Sniffer runs regexes",
             "the iterables and file-like objects are the program's (io.StringIO)"),
    AuditRow("csv-registry", "csv", ("field_size_limit", "get_dialect", "list_dialects", "register_dialect",
                                     "unregister_dialect"),
             "the dialect registry and the field size limit are process-wide state",
             "not exposed", exposed=False),
    AuditRow("difflib-sequences", "difflib", ("*",),
             "SequenceMatcher calls isjunk; HtmlDiff %-formats text into fixed templates",
             _PROGRAM_CODE + "; the templates are the host's, the values program text"),
    AuditRow("fnmatch-patterns", "fnmatch", ("*",),
             "translate patterns to regexes, cached process-wide", "the cache holds compiled patterns only"),
    AuditRow("graphlib-sorter", "graphlib", ("*",),
             "hashes program nodes and calls their __eq__/__hash__", _PROGRAM_CODE),
    AuditRow("html-escape", "html", ("*",), "text transforms", "nothing program-named is looked up"),
    AuditRow("io-buffers", "io", ("*",),
             "in-memory text and byte buffers", "the file classes and open() are left out"),
    AuditRow("io-files", "io", ("FileIO", "TextIOWrapper", "open", "open_code"),
             "open files", "not exposed", exposed=False),
    AuditRow("numbers-abcs", "numbers", ("*",),
             "ABCs; register() adds to a process-wide registry",
             "register of a host ABC or of a program subclass of one is refused (resolved-function "
             "guard); subclasses are the program's"),
    AuditRow("os-path", "os", ("*",),
             "pure path functions and separators", "nothing that reads the file system, the environment or "
                                                   "the working directory is exposed"),
    AuditRow("os-path-pure", "os.path", ("*",),
             "pure string functions of posixpath", "abspath/relpath (getcwd), expanduser/expandvars "
                                                   "(environment) and every file-system query are left out"),
    AuditRow("os-system", "os", ("environ", "getcwd", "listdir", "open", "system"),
             "the environment, the file system, processes", "not exposed", exposed=False),
    AuditRow("os-path-system", "os.path",
             ("abspath", "exists", "expanduser", "expandvars", "getsize", "isdir", "isfile", "realpath",
              "relpath"),
             "read the file system, the working directory or the environment", "not exposed", exposed=False),
    AuditRow("pathlib-pure", "pathlib", ("*",),
             "pure path arithmetic", "the concrete Path classes (file access) are left out"),
    AuditRow("pathlib-concrete", "pathlib", ("Path", "PosixPath", "WindowsPath"),
             "read and write files", "not exposed", exposed=False),
    AuditRow("pprint-output", "pprint", ("*",),
             "repr() of the object graph; pprint() writes to sys.stdout (the worker's)",
             "PrettyPrinter/pprint/pp without stream= print through the run's print; " + _PROGRAM_CODE),
    AuditRow("secrets-tokens", "secrets", ("*",), "os.urandom", "no names, no callbacks"),
    AuditRow("shlex-split", "shlex", ("*",),
             "split(None) reads standard input; the shlex class's sourcehook opens files",
             "split requires a str; the shlex class is left out"),
    AuditRow("shlex-class", "shlex", ("shlex",), "sourcehook() opens files", "not exposed", exposed=False),
    AuditRow("struct-pack", "struct", ("*",),
             "C packing; pack_into writes into a buffer; the Struct cache is process-wide",
             "buffers are the program's; the cache holds immutable Structs"),
    AuditRow("time-clock", "time", ("*",),
             "clocks and C calendar conversions; strptime imports _strptime; sleep blocks the worker's "
             "event loop",
             "sleep raises and points at asyncio.sleep; tzname is a tuple copy"),
    AuditRow("types-namespaces", "types", ("*",),
             "SimpleNamespace(**kwargs) stores program-chosen names in an instance dict; "
             "MappingProxyType is a read-only view",
             "dunder keys are shadowed by object's data descriptors and unreadable (policy); the "
             "instances are the program's"),
    AuditRow("unicodedata-tables", "unicodedata", ("*",), "C table lookups", "no names, no callbacks"),
    AuditRow("urllib-parse", "urllib", ("*",), "the parse submodule", "see urllib.parse"),
    AuditRow("urllib-parse-functions", "urllib.parse", ("*",),
             "text transforms; urlencode calls quote_via; urlsplit keeps a process-wide cache",
             "quote_via is a program callable or a reviewed one; the cache holds immutable results"),
    AuditRow("zlib-codecs", "zlib", ("*",), "C compression", "no names, no callbacks"),
    AuditRow("zoneinfo-zones", "zoneinfo", ("*",),
             "ZoneInfo(key) reads a file under the TZPATH and caches it process-wide; from_file reads a file "
             "object; clear_cache/no_cache change the cache",
             "the common zones are read once before the worker gives up its file system and handed out "
             "by key; from_file/no_cache/clear_cache raise; type(zone) is the facade's class"),
    # -- builtins --------------------------------------------------------------------------------------
    AuditRow("builtins-attributes", "builtins", ("delattr", "getattr", "hasattr", "setattr"),
             "attribute access by program-chosen (computed) names",
             "guarded_getattr/hasattr/setattr/delattr: _-names and frame internals by name, the "
             "forbidden functions and AttributeError.obj by what the lookup resolves to (literal loads of "
             "those names: a native load, then check_resolved on what it found)"),
    AuditRow("builtins-super", "builtins", ("super",),
             "a super proxy resolves past the class's own overrides, so a guard keyed on the receiver's "
             "type misses it (super().format, super(E, e).obj)",
             "guards are keyed on the resolved function or descriptor; super().__init__ goes through "
             "guarded_super_init (real super objects only); a proxy's _x reads are the program's only "
             "when its object is (a program subclass of super is not a plain program class)"),
    AuditRow("builtins-super-init", "builtins", ("super",),
             "super(type(x), x).__init__(...) re-runs a base class's __init__ on any object it can name, "
             "host objects shared by every run included (a cached typing alias gets another origin)",
             "guarded_super_init: a real super proxy over an object the program may write (its own "
             "instances and classes), the write guard's rule"),
    AuditRow("builtins-type", "builtins", ("type",),
             "type(x) is the real class of an instance: its unbound methods (type(c).send, "
             "type(future).get_loop) bypass any guard keyed on the receiver",
             "SafeType (one argument; classes report SafeType; the inlined type(x) answers from a table "
             "of exactly SafeType's answers, only while the name type is still SafeType) and the "
             "resolved-function guard"),
    AuditRow("builtins-callbacks", "builtins",
             ("enumerate", "filter", "iter", "map", "max", "min", "next", "reversed", "sorted", "sum", "zip"),
             "call key functions and other program callables, and iteration protocols",
             _PROGRAM_CODE),
    AuditRow("builtins-formatting", "builtins", ("ascii", "format", "repr", "str"),
             "call __format__/__repr__/__str__ of the object; format specs are parsed, never walked",
             "a class statement may define __repr__/__str__ (program code), not __format__; str.format "
             "comes back as the guarded formatter (see the next row)"),
    AuditRow("builtins-str-format", "builtins", ("str",),
             "str.format/format_map resolve '{0.name}' fields with getattr in C, by program text",
             "every route to them (s.format, str.format, super(), aliases, methodcaller) gives the "
             "guarded formatter: text without attribute fields goes to the real method (item lookups "
             "and __format__ only), text with them to a Formatter whose attribute steps are "
             "guarded_getattr"),
    AuditRow("builtins-values", "builtins", ("*",),
             "C types and arithmetic; call the operands' protocol methods",
             "program classes define only __init__, comparisons, __contains__, __repr__, __str__, "
             "__post_init__"),
    AuditRow("builtins-classes", "builtins", ("__build_class__", "classmethod", "property", "staticmethod"),
             "class statements run the metaclass Python would pick; descriptors call their program "
             "functions (classmethod(property(f)) runs f on the class)",
             "ClassFactory picks the metaclass and records program classes; the descriptors only call "
             "program code"),
    AuditRow("builtins-import", "builtins", ("__import__",),
             "imports by program-chosen names", "guarded_import hands out facades of the allow-list only"),
    AuditRow("builtins-import-facade-classes", "builtins", ("__import__",),
             "a facade is the one instance of its own class, whose class attributes are the module's "
             "members: type(m) hands that class out, its __dict__ holds the members (functions wrapped in "
             "staticmethod, whose __func__ has the facade module's globals), and a write to it, a new "
             "__class__ for the facade or a subclass would change the module for every later run",
             "the classes' metaclass refuses calls, writes (setattr/delattr, from host code too) and "
             "subclasses; instances have no __dict__ and no slots; __dict__, __class__ and "
             "type.__setattr__ are _-names; vars and gc are not there"),
    AuditRow("builtins-introspection", "builtins", ("dir", "vars"),
             "dir() lists every name of an object (dunders, host privates); vars() hands out an object's "
             "real __dict__ (a host module's or class's namespace, writable)",
             "guarded_dir lists the names a program can read (facade members; _x names on its own "
             "objects); guarded_vars answers only for objects and classes of the program (a class gives "
             "a copy without dunders) and SimpleNamespace; a program subclass of super, staticmethod or "
             "classmethod is not the program's own (they hold another object's state: staticmethod's "
             "__dict__ holds the wrapped function's real __annotations__)"),
    AuditRow("builtins-left-out", "builtins",
             ("breakpoint", "compile", "eval", "exec", "globals", "help", "input", "locals",
              "memoryview", "open"),
             "evaluation of text, the interpreter's namespaces, files and the terminal",
             "not exposed", exposed=False),
)
