"""The language policy: RestrictedPython's transformer, extended for async programs and made fast.

:class:`ProgramPolicy` subclasses RestrictedPython's ``RestrictingNodeTransformer``. What the base class
rejects stays rejected (``except*``, dunder names, ``exec``/``eval`` calls, unknown node types, ...),
with a message that says what to use instead. On top of it, ordinary Python is admitted:

* ``async def`` and ``await`` with exactly the name checks of ``def``; ``async for``, ``async with``,
  async comprehensions and async generators (``yield`` at the top level of a program is refused).
* ``match`` statements. A class pattern's keywords are attribute reads in C, so a keyword naming a
  ``_``-name or a name the attribute guard checks (:func:`needs_guarded_getattr`) is refused; value
  patterns may not name such attributes either. Positional sub-patterns read ``__match_args__``, which
  only the program's dataclasses and namedtuples (checked field names) and host value types define.
* ``nonlocal``; ``_private`` names (:func:`codemode.sandbox.guards.is_private_name`: one leading
  underscore, not ending in ``_``) as variables, parameters, functions and classes. ``obj._x`` loads go
  through ``_getattr_`` and stores through the private write hook (:data:`WRITE_PRIVATE_NAME`), which
  admit them on the program's own objects only.
* Protocol methods in class bodies (:data:`EXTRA_METHOD_NAMES`).
* ``tools`` and ``ToolCallError`` cannot be rebound at the top level (or through ``global``): later code,
  and later runs of a persistent session, rely on them.
* Annotated assignments are admitted (dataclasses need them); at the top level of a program, where names
  are module globals, the annotation is dropped, as CPython cannot annotate a global inside a function.

Guard rewrites that are provably no-ops are left out (the generated code is then plain CPython):

* **Attribute loads** ``a.b`` stay native unless ``b`` is in
  :data:`codemode.sandbox.guards.GUARDED_ATTRIBUTES` or starts with one of
  :data:`codemode.sandbox.guards.GUARDED_PREFIXES`. For every other literal name the guarded ``_getattr_(a,
  "b")`` performs no check that can fail (``_``-names and ``INSPECT_ATTRIBUTES`` are compile-time errors here,
  and every runtime check in :func:`codemode.sandbox.guards.guarded_getattr` is keyed on a name in the guarded
  set) and then returns ``getattr(a, "b")``, which is what ``LOAD_ATTR`` does.
* **Subscript loads** ``a[k]`` stay native: the item hook would be ``operator.getitem``, which is exactly
  ``BINARY_SUBSCR``. Nothing the sandbox hands in exposes privileged objects through ``__getitem__``.
* **Iteration** (``for`` targets, comprehensions, tuple unpacking in ``for``/assignments/``with``) stays
  native: the iteration hook would be the builtin ``iter``, and ``GET_ITER``/``UNPACK_SEQUENCE`` call
  the same ``PyObject_GetIter``. ``guarded_unpack_sequence`` with ``iter`` builds the same values.
* **Augmented assignment to a name** ``n += v`` stays native: ``_inplacevar_`` would be the operator table
  (``operator.iadd`` ...), which is what ``INPLACE_ADD`` calls. In-place operators only mutate their left
  operand, and the only in-place-mutable objects a program can reach are ones it created (the facades
  expose no mutable containers; the escape suite checks every facade member).
* **Star-calls** ``f(*a, **k)`` stay native: ``_apply_`` would only call ``f(*a, **k)``.

Attribute and subscript *stores and deletes* always go through ``_write_``; the guard's first branch is
inlined (``type(n) in WRITABLE_TYPES``), for a plain name directly and, in function bodies, for any
other object expression through a function-local temporary. Loads of the names decided on the resolved
value alone are a native load followed by :func:`codemode.sandbox.guards.check_resolved`, and a
one-argument ``type(x)`` is a lookup in :data:`codemode.sandbox.guards.TYPE_OF` while ``type`` is still
the sandbox's (:meth:`ProgramPolicy._inline_type`). ``print`` goes through the per-run capture exactly as
in RestrictedPython.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar, cast

from RestrictedPython.transformer import ALLOWED_FUNC_NAMES, INSPECT_ATTRIBUTES, RestrictingNodeTransformer

from .guards import (
    GUARDED_ATTRIBUTES,
    GUARDED_PREFIXES,
    NAMEDTUPLE_NAMES,
    READABLE_NAMES,
    RESOLVED_NAMES,
    is_private_name,
)

__all__ = (
    "CHECK_RESOLVED_NAME",
    "ENTRY_NAME",
    "EXTRA_METHOD_NAMES",
    "NO_VALUE_NAME",
    "RESERVED_GLOBALS",
    "SAFE_TYPE_NAME",
    "SUPER_INIT_NAME",
    "TYPE_NAME",
    "TYPE_OF_NAME",
    "WRITABLE_TYPES_NAME",
    "WRITE_PRIVATE_NAME",
    "WRITE_TEMP_NAME",
    "ProgramPolicy",
    "needs_guarded_getattr",
)

#: Name of the generated ``async def`` that holds the program body (unreachable for programs: ``_``).
ENTRY_NAME = "__codemode_program__"
#: Global bound to the sentinel a program returns when it falls off its end or uses a bare ``return``.
NO_VALUE_NAME = "__codemode_no_value__"
#: Globals of the inlined write-guard fast path (see :meth:`ProgramPolicy._inline_write`).
TYPE_NAME = "_codemode_type_"
WRITABLE_TYPES_NAME = "_codemode_writable_types_"
#: The function-local temporary of the inlined write guard for an object that is not a plain name.
WRITE_TEMP_NAME = "_codemode_written_"
#: Globals of the inlined one-argument ``type(x)`` (see :meth:`ProgramPolicy._inline_type`).
SAFE_TYPE_NAME = "_codemode_safe_type_"
TYPE_OF_NAME = "_codemode_type_of_"
#: Hook that checks what a load of a name in :data:`codemode.sandbox.guards.RESOLVED_NAMES` resolved to.
CHECK_RESOLVED_NAME = "_codemode_check_resolved_"
#: Hook that answers ``super().__init__`` (the one ``_``-attribute a program may load).
SUPER_INIT_NAME = "_codemode_super_init_"
#: Store hook of ``obj._private = v`` (:func:`codemode.sandbox.guards.write_private_guard`).
WRITE_PRIVATE_NAME = "_codemode_write_private_"
#: Special methods a class body may define on top of RestrictedPython's ``__init__``/comparisons:
#: each is only ever called on the program's own objects, by code running in the program's budget.
#: Protocol hooks (iteration, containers, context managers, arithmetic, ``async with``/``async for``)
#: are called by the interpreter on the program's objects only; hooks that host code calls with
#: privileges (copy and pickle protocols, ``__missing__``, ``__getattr__``, ``__set_name__``,
#: ``__init_subclass__``, ``__format__``, ``__del__``, ``__new__``, descriptors) stay refused.
EXTRA_METHOD_NAMES = frozenset({
    "__post_init__", "__repr__", "__str__", "__hash__", "__bool__", "__len__", "__iter__", "__next__",
    "__reversed__", "__getitem__", "__setitem__", "__delitem__", "__call__", "__enter__", "__exit__",
    "__aenter__", "__aexit__", "__aiter__", "__anext__",
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__", "__matmul__",
    "__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rfloordiv__", "__rmod__", "__rpow__",
    "__neg__", "__pos__", "__abs__", "__and__", "__or__", "__xor__", "__invert__", "__rand__", "__ror__",
    "__rxor__",
})
#: Host names a program may use but never rebind at the top level.
RESERVED_GLOBALS = frozenset({"ToolCallError", "tools"})

_FUNCTION_SCOPES = frozenset({"entry", "async", "sync"})
_T_visit = ast.AST | Iterable[ast.AST] | None
_Node = TypeVar("_Node", bound=ast.AST)


def _private_attribute(attr: str) -> str:
    return (f'"{attr}" cannot be used as an attribute in programs: names starting with "__" or of the form '
            '"_x_" are Python and sandbox internals; use the public API (type(x), x.__name__, vars(obj) '
            'and dir(obj) are available) or a "_x" name on your own objects')


#: RestrictedPython's messages that do not say what to do, with what to do instead.
_ALTERNATIVES: Final = (
    ("TryStar statements are not allowed.",
     "'except*' is not available in programs; use 'except ExceptionGroup as group' and inspect "
     "group.exceptions"),
    ('"*" imports are not allowed.',
     '"from module import *" is not available in programs; import the names you use '
     '("from math import sqrt, pi") or the module ("import math")'),
    ('The keyword argument "metaclass" is not allowed.',
     "class ...(metaclass=...) is not available in programs; derive from abc.ABC or enum.Enum, or use a "
     "class decorator"),
    ("Augmented assignment of attributes is not allowed.",
     "augmented assignment to this attribute is not available; read it, compute, then assign "
     "('x = obj.a; obj.a = x + 1')"),
    ("Augmented assignment of object items and slices is not allowed.",
     "augmented assignment to this item is not available; read it, compute, then assign"),
    ("Unpacking in comprehensions is not allowed.",
     "unpacking in comprehensions is not available; use a nested comprehension"),
)


def _with_alternative(info: str) -> str:
    for old, new in _ALTERNATIVES:
        if info == old:
            return new
    if info.endswith(" statements are not allowed."):
        construct = info[:-len(" statements are not allowed.")]
        return (f"{construct} is not available in programs; write it with ordinary statements (if/for/while, "
                "functions, classes, try/except)")
    if info.endswith('because it starts with "_".'):
        name = info.split('"')[1]
        return _private_attribute(name)
    if info.endswith(" is a reserved name."):
        return (f"{info[:-1]} in programs; choose another name (print() works as usual, printed output is "
                "collected for you)")
    return info


def needs_guarded_getattr(name: str) -> bool:
    """Whether an attribute load of the literal ``name`` must go through ``_getattr_``."""
    return name in GUARDED_ATTRIBUTES or name.startswith(GUARDED_PREFIXES)


class ProgramPolicy(RestrictingNodeTransformer):
    """RestrictedPython's policy with async functions, program-level rules and native fast paths.

    Diagnostics are collected as ``(line, message)`` pairs in :attr:`diagnostics`; the compiler turns
    them into one error. The policy expects the module produced by :mod:`codemode.sandbox.compiler`: a single
    ``async def`` named :data:`ENTRY_NAME` whose body is the program.
    """

    def __init__(self) -> None:
        super().__init__()
        self.diagnostics: list[tuple[int, str]] = []
        # Innermost-last stack of the function kinds we are inside: "entry", "async", "sync", "class".
        self._scopes: list[str] = []
        self._defining_method = False
        #: True once a ``global`` statement was seen anywhere in the program.
        self.uses_global = False
        self._visitors: dict[type, Any] = {}
        #: How many comprehensions we are inside (their targets get no inlined temporaries).
        self._comprehensions = 0

    # -- traversal (the stdlib's, minus its per-node overheads) ----------------------------------

    def visit(self, node: ast.AST) -> _T_visit:
        """Dispatch to ``visit_<Class>``, else to RestrictedPython's rejecting ``generic_visit``.

        The same dispatch as :meth:`ast.NodeVisitor.visit`, with the method looked up once per node
        class instead of once per node (compiling a program is on every run's critical path).
        """
        kind = type(node)
        visitor = self._visitors.get(kind)
        if visitor is None:
            visitor = self._visitors[kind] = getattr(self, "visit_" + kind.__name__, self.generic_visit)
        result: _T_visit = visitor(node)
        return result

    def node_contents_visit(self, node: _Node) -> _Node:
        """Visit every child of ``node`` exactly as :meth:`ast.NodeTransformer.generic_visit` does."""
        visit = self.visit
        for field in node._fields:  # (what ast.iter_fields does, without the generator)
            try:
                old_value = getattr(node, field)
            except AttributeError:
                continue
            if isinstance(old_value, list):
                new_values: list[Any] = []
                for value in old_value:
                    if isinstance(value, ast.AST):
                        value = visit(value)
                        if value is None:
                            continue
                        if not isinstance(value, ast.AST):
                            new_values.extend(value)
                            continue
                    new_values.append(value)
                old_value[:] = new_values
            elif isinstance(old_value, ast.AST):
                new_node = visit(old_value)
                if new_node is None:
                    delattr(node, field)
                else:
                    setattr(node, field, new_node)
        return node

    # -- diagnostics -------------------------------------------------------------------------------

    def error(self, node: ast.AST, info: str) -> None:
        """Record a diagnostic with the program line of ``node`` (RestrictedPython's say what to do)."""
        info = _with_alternative(info)
        line = getattr(node, "lineno", None)
        self.diagnostics.append((line if isinstance(line, int) else 0, info))
        self.errors.append(info)

    @contextmanager
    def _scope(self, kind: str) -> Iterator[None]:
        self._scopes.append(kind)
        try:
            yield
        finally:
            self._scopes.pop()

    def _at_top_level(self) -> bool:
        return bool(self._scopes) and self._scopes[-1] == "entry"

    # -- module and entry --------------------------------------------------------------------------

    def visit_Module(self, node: ast.Module) -> _T_visit:
        """Visit the generated entry function without the name check its ``_`` name would fail."""
        entry = node.body[0]
        assert isinstance(entry, ast.AsyncFunctionDef) and entry.name == ENTRY_NAME
        with self._scope("entry"), self.print_info.new_print_scope():
            entry.body = self._visit_body(entry.body)
            self.inject_print_collector(entry)
        return node

    def _visit_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            result = self.visit(stmt)
            if result is None:
                continue
            if isinstance(result, ast.AST):
                out.append(cast(ast.stmt, result))
            else:
                out.extend(cast(Iterable[ast.stmt], result))
        return out

    def inject_print_collector(self, node: Any, position: int = 0) -> None:
        """Inject the print capture (also into ``async def`` bodies) after leading ``global`` lines."""
        body = getattr(node, "body", [])
        while position < len(body) and isinstance(body[position], ast.Global):
            position += 1
        super().inject_print_collector(node, position)

    # -- async -------------------------------------------------------------------------------------

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        """RestrictedPython's name rule, plus :data:`EXTRA_METHOD_NAMES` for methods of a class body."""
        if allow_magic_methods and self._defining_method and name in EXTRA_METHOD_NAMES:
            return
        if name is not None and is_private_name(name):
            return
        if name is not None and name.startswith("_") and name != "_" and not (
                allow_magic_methods and name in ALLOWED_FUNC_NAMES and getattr(node, "col_offset", 0) != 0):
            self.error(node, f'"{name}" is not available as a name: names starting with "__" or of the form '
                             '"_x_" are reserved for Python and the sandbox; use a name like "_x" or "x"')
            return
        super().check_name(node, name, allow_magic_methods)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> _T_visit:
        """Check a ``def`` as RestrictedPython does, tracking that we are in a sync function."""
        self._check_rebinding(node, node.name)
        self._defining_method = bool(self._scopes) and self._scopes[-1] == "class"
        self.check_name(node, node.name, allow_magic_methods=True)
        self._defining_method = False
        node.name, real_name = "checked", node.name
        with self._scope("sync"):
            result: _T_visit = super().visit_FunctionDef(node)
        node.name = real_name
        return result

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> _T_visit:
        """Admit ``async def`` with the same name and parameter checks as ``def``."""
        self._check_rebinding(node, node.name)
        self._defining_method = bool(self._scopes) and self._scopes[-1] == "class"
        self.check_name(node, node.name, allow_magic_methods=True)
        self._defining_method = False
        self.check_function_argument_names(node)
        with self._scope("async"), self.print_info.new_print_scope():
            node = self.node_contents_visit(node)
            self.inject_print_collector(node)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> _T_visit:
        """Check a lambda's parameters; its body is a sync scope."""
        with self._scope("sync"):
            result: _T_visit = super().visit_Lambda(node)
        return result

    def visit_ClassDef(self, node: ast.ClassDef) -> _T_visit:
        """Check a class as RestrictedPython does (its body is neither async nor the top level).

        RestrictedPython's rewrite keeps only ``metaclass=__metaclass__``; the class's own keywords
        (``total=False``, ``boundary=...``) are kept too, as CPython passes them to the metaclass and
        ``__init_subclass__``. Only public names, written out: a private one is a host switch
        (``_root=True`` lets a typing alias be subclassed, ``_simple=True`` makes an enum class from a
        plain namespace), and ``**mapping`` could hand in any name at run time.
        """
        self._check_rebinding(node, node.name)
        keywords = list(node.keywords)
        for keyword in keywords:
            if keyword.arg is None:
                self.error(node, "class keywords from '**' are not allowed; write each keyword out")
            elif keyword.arg.startswith("_"):
                self.error(node, f'"{keyword.arg}" is an invalid class keyword because it starts with "_".')
        with self._scope("class"):
            result: _T_visit = super().visit_ClassDef(node)
        if isinstance(result, ast.ClassDef):
            for generated in result.keywords:  # (parsed from a template: give them the program's line)
                ast.copy_location(generated, node)
                ast.copy_location(generated.value, node)
            result.keywords.extend(k for k in keywords if k.arg is not None and k.arg != "metaclass")
            ast.copy_location(result, node)
        return result

    def visit_Await(self, node: ast.Await) -> _T_visit:
        """Admit ``await``; CPython itself rejects it outside async functions when compiling."""
        return self.node_contents_visit(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> _T_visit:
        """Admit ``async for``: the iteration hooks are the interpreter's, called on the iterable."""
        return self.node_contents_visit(node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> _T_visit:
        """Admit ``async with``, as ``with``."""
        return self.node_contents_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> _T_visit:
        """Iterate natively (see module docstring), async comprehensions included."""
        self._comprehensions += 1
        try:
            return self.node_contents_visit(node)
        finally:
            self._comprehensions -= 1

    def visit_Yield(self, node: ast.Yield) -> _T_visit:
        """Allow ``yield`` in functions (async generators included), not at the top level."""
        if self._at_top_level():
            self.error(node, "'yield' is not allowed at the top level of a program (it is the body of an "
                             "async function); use 'return' with a list, or define a generator function")
        return self.node_contents_visit(node)

    def visit_YieldFrom(self, node: ast.YieldFrom) -> _T_visit:
        """Allow ``yield from`` in plain functions (CPython rejects it in async ones)."""
        return self.visit_Yield(node)  # type: ignore[arg-type]

    def visit_Nonlocal(self, node: ast.Nonlocal) -> _T_visit:
        """Allow ``nonlocal`` of names a program may bind."""
        for name in node.names:
            self.check_name(node, name)
        return node

    # -- match -------------------------------------------------------------------------------------

    def visit_Match(self, node: ast.Match) -> _T_visit:
        """Admit ``match``; class patterns are checked in :meth:`visit_MatchClass`."""
        return self.node_contents_visit(node)

    def visit_match_case(self, node: ast.match_case) -> _T_visit:
        """A case: its pattern, guard and body."""
        return self.node_contents_visit(node)

    def visit_MatchValue(self, node: ast.MatchValue) -> _T_visit:
        """A value pattern (``case 1``, ``case Color.RED``): the dotted name is read natively.

        A value pattern is a literal or a dotted name, so only names that need no guard may appear in
        it (a guarded or private name could not be rewritten into a call here).
        """
        for sub in ast.walk(node.value):
            if isinstance(sub, ast.Attribute) and (needs_guarded_getattr(sub.attr)
                                                   or sub.attr.startswith("_")):
                self.error(node, f'"{sub.attr}" cannot be read in a match value pattern; bind the value to '
                                 "a name first and use a guard ('case x if x == value')")
                return node
        return self.node_contents_visit(node)

    def visit_MatchSingleton(self, node: ast.MatchSingleton) -> _T_visit:
        """``case None`` / ``case True``."""
        return node

    def visit_MatchSequence(self, node: ast.MatchSequence) -> _T_visit:
        """``case [a, b, *rest]``."""
        return self.node_contents_visit(node)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> _T_visit:
        """``case {"k": v, **rest}``: keys are literals or value patterns."""
        if node.rest is not None:
            self.check_name(node, node.rest)
        for key in node.keys:
            self.visit_MatchValue(ast.copy_location(ast.MatchValue(value=key), node))
        for pattern in node.patterns:
            self.visit(pattern)
        return node

    def visit_MatchClass(self, node: ast.MatchClass) -> _T_visit:
        """``case C(a, b, x=p)``: keyword patterns read attributes in C, so their names are checked.

        A keyword names an attribute that ``getattr`` reads on the subject (an instance of ``C``):
        names the guard would refuse or check (``_``-names, frame and code internals, ``format``,
        ``obj`` ...) are refused here. Positional patterns read the names in ``C.__match_args__``,
        which only the program's own dataclasses and namedtuples (checked field names) and host value
        types set.
        """
        for name in node.kwd_attrs:
            if name.startswith("_") or needs_guarded_getattr(name):
                self.error(node, f'"{name}" cannot be matched as a keyword of a class pattern (the sandbox '
                                 "refuses or checks reads of it); match 'case C() as x' and read it in the "
                                 "body")
        self.visit_MatchValue(ast.copy_location(ast.MatchValue(value=node.cls), node))
        for pattern in [*node.patterns, *node.kwd_patterns]:
            self.visit(pattern)
        return node

    def visit_MatchStar(self, node: ast.MatchStar) -> _T_visit:
        """``*rest`` in a sequence pattern."""
        if node.name is not None:
            self.check_name(node, node.name)
        return node

    def visit_MatchAs(self, node: ast.MatchAs) -> _T_visit:
        """``case x`` / ``case p as x`` / ``case _``."""
        if node.name is not None:
            self.check_name(node, node.name)
        return self.node_contents_visit(node)

    def visit_MatchOr(self, node: ast.MatchOr) -> _T_visit:
        """``case a | b``."""
        return self.node_contents_visit(node)

    # -- names -------------------------------------------------------------------------------------

    def _check_rebinding(self, node: ast.AST, name: str) -> None:
        if name in RESERVED_GLOBALS and self._at_top_level():
            self.error(node, f'"{name}" is provided by the sandbox and cannot be rebound; use another name')

    def visit_Name(self, node: ast.Name) -> _T_visit:
        """RestrictedPython's name rules plus the reserved top-level names."""
        if not isinstance(node.ctx, ast.Load):
            self._check_rebinding(node, node.id)
        result: _T_visit = super().visit_Name(node)
        return result

    def visit_Global(self, node: ast.Global) -> _T_visit:
        """Allow ``global`` except for the sandbox-provided names."""
        self.uses_global = True
        for name in node.names:
            self.check_name(node, name)
            if name in RESERVED_GLOBALS:
                self.error(node, f'"{name}" is provided by the sandbox and cannot be declared global; use '
                                 'another name')
        return self.node_contents_visit(node)

    def check_import_names(self, node: ast.ImportFrom | ast.Import) -> ast.AST:
        """RestrictedPython's import checks plus the reserved names, and no relative imports."""
        for alias in node.names:
            self._check_rebinding(node, (alias.asname or alias.name).split(".")[0])
        if isinstance(node, ast.ImportFrom) and node.level:
            self.error(node, "relative imports are not allowed")
        result: ast.AST = super().check_import_names(node)
        return result

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> _T_visit:
        """Check ``except ... as name`` like other bindings."""
        if node.name:
            self._check_rebinding(node, node.name)
        result: _T_visit = super().visit_ExceptHandler(node)
        return result

    # -- statements --------------------------------------------------------------------------------

    def visit_AnnAssign(self, node: ast.AnnAssign) -> _T_visit:
        """Admit annotated assignments; at the top level drop the annotation of a plain name."""
        node = self.node_contents_visit(node)
        if self._at_top_level() and isinstance(node.target, ast.Name):
            if node.value is None:
                return ast.copy_location(ast.Pass(), node)
            return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)
        return node

    def visit_Return(self, node: ast.Return) -> _T_visit:
        """A bare top-level ``return`` means "no value" (distinct from ``return None``)."""
        node = self.node_contents_visit(node)
        if node.value is None and self._at_top_level():
            node.value = ast.copy_location(ast.Name(NO_VALUE_NAME, ast.Load()), node)
        return node

    def visit_Assign(self, node: ast.Assign) -> _T_visit:
        """Native unpacking (see module docstring)."""
        return self.node_contents_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> _T_visit:
        """Native ``name op= value``; ``a.b op= v`` and ``a[k] op= v`` become ``_write_(a).b op= v``.

        Visiting the target wraps its object in ``_write_`` (as for any store), so the object is
        evaluated once, must be writable, and for a writable object ``_write_`` returns the object
        itself: the statement then does exactly what CPython does. The load half of ``.b`` is native,
        which is why targets whose attribute name is guarded stay rejected.
        """
        target = node.target
        if isinstance(target, ast.Attribute) and needs_guarded_getattr(target.attr):
            result: _T_visit = super().visit_AugAssign(node)
            return result
        return self.node_contents_visit(node)

    def visit_For(self, node: ast.For) -> _T_visit:
        """Native iteration (see module docstring)."""
        return self.node_contents_visit(node)

    def visit_With(self, node: ast.With) -> _T_visit:
        """Native unpacking of ``with ... as (a, b)`` (see module docstring)."""
        return self.node_contents_visit(node)

    # -- expressions -------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> _T_visit:
        """Reject ``exec``/``eval`` calls by name; star-calls stay native; ``type(x)`` is inlined."""
        if isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval"):
            self.error(node, f"{node.func.id}() of code strings is not available in programs; write the code "
                             "directly (a function or a dict of functions), or parse data with json.loads, "
                             "int() or float()")
        node = self.node_contents_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) == 1
                and not isinstance(node.args[0], ast.Starred) and not node.keywords):
            return self._inline_type(node)
        return node

    @staticmethod
    def _inline_type(node: ast.Call) -> ast.expr:
        """Turn ``type(x)`` into ``TYPE_OF[real_type(x)] if type is SafeType else type(x)``.

        The program's ``type`` is :data:`codemode.sandbox.guards.SafeType`, whose one-argument call is a
        Python-level metaclass ``__call__``. When the name ``type`` still means it (it can be rebound),
        the inlined form answers from :data:`codemode.sandbox.guards.TYPE_OF`, a dict whose entry for a
        class is exactly what ``SafeType(x)`` returns for its instances (``SafeType`` for a metaclass,
        the class itself otherwise), filled on first use. ``type`` and ``x`` are each evaluated once, in
        the order of the call; a rebound ``type`` is called as written.
        """
        arg = node.args[0]
        fast = ast.Subscript(
            value=ast.Name(TYPE_OF_NAME, ast.Load()),
            slice=ast.Call(func=ast.Name(TYPE_NAME, ast.Load()), args=[arg], keywords=[]),
            ctx=ast.Load())
        test = ast.Compare(left=ast.Name("type", ast.Load()), ops=[ast.Is()],
                           comparators=[ast.Name(SAFE_TYPE_NAME, ast.Load())])
        slow = ast.Call(func=node.func, args=[copy.deepcopy(arg)], keywords=[])
        inline = ast.IfExp(test=test, body=fast, orelse=slow)
        return ast.fix_missing_locations(ast.copy_location(inline, node))

    def _inline_write(self, node: ast.Attribute | ast.Subscript) -> None:
        """Turn ``_write_(n).a = v`` into ``(n if type(n) in WRITABLE else _write_(n)).a = v``.

        For a plain name ``n`` (evaluating a name twice has no side effects). Any other object
        expression ``e`` is evaluated once into a function-local temporary:
        ``(t if type(t := e) in WRITABLE else _write_(t)).a = v``; only in function bodies (a class body
        would bind the temporary as a class attribute) and outside comprehensions (whose targets may
        not rebind names of the enclosing scope). The test is the first branch of
        :func:`codemode.sandbox.guards.write_guard` (which returns the object itself exactly then), so
        the statement behaves the same while skipping a Python call for the common case.
        """
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_write_"
                and len(call.args) == 1):
            return
        target = call.args[0]
        if isinstance(target, ast.Name):
            name = target.id
            tested: ast.expr = ast.Name(name, ast.Load())
        elif self._comprehensions == 0 and self._scopes and self._scopes[-1] in _FUNCTION_SCOPES:
            name = WRITE_TEMP_NAME
            tested = ast.NamedExpr(target=ast.Name(name, ast.Store()), value=target)
            call.args = [ast.Name(name, ast.Load())]
        else:
            return
        test = ast.Compare(
            left=ast.Call(func=ast.Name(TYPE_NAME, ast.Load()), args=[tested], keywords=[]),
            ops=[ast.In()], comparators=[ast.Name(WRITABLE_TYPES_NAME, ast.Load())])
        inline = ast.IfExp(test=test, body=ast.Name(name, ast.Load()), orelse=call)
        node.value = ast.copy_location(inline, call)
        ast.fix_missing_locations(node)

    def visit_Attribute(self, node: ast.Attribute) -> _T_visit:
        """Name checks as in RestrictedPython; only guarded names are rewritten to ``_getattr_``.

        ``super().__init__`` / ``super(C, self).__init__`` becomes ``_super_init_(super(...))``,
        whose runtime check admits real ``super`` objects over objects the program may write only (a
        rebound ``super`` gets nothing, a host object cannot be re-initialised).
        """
        value = node.value
        if (node.attr == "__init__" and isinstance(node.ctx, ast.Load) and isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name) and value.func.id == "super"):
            inner = cast(ast.expr, self.visit(value))
            hook = ast.Call(func=ast.Name(SUPER_INIT_NAME, ast.Load()), args=[inner], keywords=[])
            return ast.fix_missing_locations(ast.copy_location(hook, node))
        if isinstance(node.ctx, ast.Load) and (node.attr in NAMEDTUPLE_NAMES or node.attr == "__members__"):
            # (RestrictedPython refuses every _-name; these are checked at run time instead)
            inner = cast(ast.expr, self.visit(value))
            guarded = ast.Call(func=ast.Name("_getattr_", ast.Load()),
                               args=[inner, ast.Constant(node.attr)], keywords=[])
            return ast.fix_missing_locations(ast.copy_location(guarded, node))
        if is_private_name(node.attr):
            # (checked at run time: readable and writable on objects of the program's own classes)
            inner = cast(ast.expr, self.visit(value))
            if isinstance(node.ctx, ast.Load):
                guarded = ast.Call(func=ast.Name("_getattr_", ast.Load()),
                                   args=[inner, ast.Constant(node.attr)], keywords=[])
                return ast.fix_missing_locations(ast.copy_location(guarded, node))
            hook = ast.Call(func=ast.Name(WRITE_PRIVATE_NAME, ast.Load()), args=[inner], keywords=[])
            node.value = ast.fix_missing_locations(ast.copy_location(hook, value))
            return node
        if isinstance(node.ctx, ast.Load) and node.attr in RESOLVED_NAMES:
            # (decided on the resolved value alone: a native load, then the check of what it found)
            inner = cast(ast.expr, self.visit(value))
            load = ast.Attribute(value=inner, attr=node.attr, ctx=ast.Load())
            checked = ast.Call(func=ast.Name(CHECK_RESOLVED_NAME, ast.Load()),
                               args=[load, ast.Constant(node.attr)], keywords=[])
            return ast.fix_missing_locations(ast.copy_location(checked, node))
        if isinstance(node.ctx, ast.Load) and not needs_guarded_getattr(node.attr):
            attr = node.attr
            if attr in READABLE_NAMES:
                return self.node_contents_visit(node)
            if attr.startswith("_") and attr != "_":
                self.error(node, _private_attribute(attr))
            elif attr.endswith("__roles__"):
                self.error(node, f'"{attr}" is an invalid attribute name because it ends with "__roles__".')
            elif attr in INSPECT_ATTRIBUTES:  # pragma: no cover - INSPECT names are all guarded
                self.error(node, f'"{attr}" is a restricted name.')
            return self.node_contents_visit(node)
        result: _T_visit = super().visit_Attribute(node)
        if isinstance(result, ast.Attribute):
            self._inline_write(result)
        return result

    def visit_Subscript(self, node: ast.Subscript) -> _T_visit:
        """Native item loads; stores and deletes go through ``_write_``."""
        if isinstance(node.ctx, ast.Load):
            return self.node_contents_visit(node)
        result: _T_visit = super().visit_Subscript(node)
        if isinstance(result, ast.Subscript):
            self._inline_write(result)
        return result
