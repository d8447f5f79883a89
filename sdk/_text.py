"""Text safety for generated Python: identifiers, class-name parts, comments, docstrings and literals.

Everything the SDK writes into Python source passes through one of these functions, so the generated text
always parses and never carries raw control characters, lone surrogates or line breaks into a comment.
Identifier rules are the running interpreter's own (``str.isidentifier``, ``keyword``, NFKC), so a name the
SDK emits is one this CPython accepts. Whitespace collapsing and number formatting deliberately follow
JavaScript, for parity with the reference rendering (spec 8.2, 8.3, 13.2, 13.11).
"""

from __future__ import annotations

import keyword
import math
import unicodedata

from codemode.sandbox.lossless import wire_order_key as utf16_key

__all__ = (
    "HARD_KEYWORDS",
    "camel_case",
    "cap_utf16",
    "comment_text",
    "docstring_text",
    "is_bare_identifier",
    "is_field_name",
    "is_method_name",
    "js_number",
    "json_quote",
    "literal_value",
    "utf16_key",
)

HARD_KEYWORDS: frozenset[str] = frozenset((*keyword.kwlist, "__debug__"))
"""Names that can never be a method or field name: the hard keywords plus ``__debug__``."""

_JS_WHITESPACE_EXTRA = frozenset("\t\n\v\f\r \u00a0\ufeff\u2028\u2029")
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _is_js_whitespace(char: str) -> bool:
    return char in _JS_WHITESPACE_EXTRA or unicodedata.category(char) == "Zs"


def _is_surrogate(char: str) -> bool:
    return 0xD800 <= ord(char) <= 0xDFFF


def is_bare_identifier(name: str) -> bool:
    """Whether ``name`` is an identifier this interpreter accepts and that NFKC leaves unchanged.

    CPython normalises identifiers with NFKC while parsing, so ``ﬁeld`` would silently become ``field``:
    such names are not bare. Keywords are not excluded here (see :func:`is_method_name`).
    """
    return name.isidentifier() and unicodedata.normalize("NFKC", name) == name


def is_method_name(name: str) -> bool:
    """Whether a tool can be declared as ``async def <name>``: bare, not a hard keyword, no leading ``_``.

    Soft keywords (``match``, ``case``, ``type``, ``_``) are fine as method names; names with a leading
    underscore are reached only through subscript access so they can never collide with private or dunder
    members of the ``Tools`` protocol.
    """
    return is_bare_identifier(name) and name not in HARD_KEYWORDS and not name.startswith("_")


def is_field_name(name: str) -> bool:
    """Whether a property can be a ``TypedDict`` field: bare, not a hard keyword, not name-mangled.

    ``__token`` would be mangled inside a class body; ``__meta__`` (dunder form) is not, so it is kept.
    """
    if not is_bare_identifier(name) or name in HARD_KEYWORDS:
        return False
    return not (name.startswith("__") and not name.endswith("__"))


def cap_utf16(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-16 code units, never splitting an astral character."""
    if len(text) * 2 <= limit:
        return text
    if text.isascii():
        return text[:limit]
    units = 0
    for index, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return text[:index]
    return text


def _split_words(text: str) -> list[str]:
    words: list[str] = []
    current: list[str] = []
    for char in text:
        if char != "_" and ("a" + char).isidentifier():
            current.append(char)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


def camel_case(text: str) -> str:
    """CamelCase of ``text``: split on non-identifier characters and underscores, upper-case each head.

    The result is NFKC-normalised and may be empty; it is a *part* of a class name, not a name itself.
    """
    joined = "".join(word[0].upper() + word[1:] for word in _split_words(text))
    return unicodedata.normalize("NFKC", joined)


def json_quote(text: str) -> str:
    """``text`` as a JSON string literal, escaped the way JavaScript's ``JSON.stringify`` does it.

    The result is also a valid Python string literal with the same value: quotes, backslashes and C0
    controls are escaped, lone surrogates become ``\\udxxx``, everything else stays raw.
    """
    out = ['"']
    for char in text:
        short = _SHORT_ESCAPES.get(char)
        if short is not None:
            out.append(short)
        elif ord(char) < 0x20 or _is_surrogate(char):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def js_number(value: int | float) -> str:
    """A JSON number formatted like JavaScript, except that integral values print all their digits.

    ``1.0`` -> ``1``, ``2**60`` -> ``1152921504606846976``, ``1e21`` -> ``1000000000000000000000``,
    ``1.5`` -> ``1.5``, ``1e-7`` -> ``1e-7``, ``1.5e300`` -> ``1.5e+300``. The caller passes finite values.
    """
    if isinstance(value, int):
        return str(int(value))
    if value.is_integer():
        return str(int(value))
    mantissa, _, exponent_text = repr(value).lower().partition("e")
    negative = mantissa.startswith("-")
    mantissa = mantissa.lstrip("-")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # Position of the decimal point relative to the first significant digit (JavaScript's "n").
    point = len(whole) + int(exponent_text or "0") - (len(whole + fraction) - len(digits))
    digits = digits.rstrip("0") or "0"
    if 0 < point <= 21:
        text = (
            digits[:point] + "." + digits[point:]
            if point < len(digits)
            else digits + "0" * (point - len(digits))
        )
    elif -6 < point <= 0:
        text = "0." + "0" * (-point) + digits
    else:
        exponent = point - 1
        head = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = f"{head}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"
    return ("-" if negative else "") + text


def literal_value(value: object) -> str | None:
    """``value`` rendered inside ``Literal[...]``, or None when it is not a renderable JSON scalar."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return json_quote(value)
    if isinstance(value, int):
        return js_number(value)
    if isinstance(value, float) and math.isfinite(value):
        return js_number(value)
    return None


def comment_text(text: object) -> str:
    """A description made safe for one line of Python: collapsed, escaped, trimmed ("" means none).

    JavaScript whitespace runs become one space; other C0 controls, DEL and C1 become ``\\xNN``; lone
    surrogates become ``\\uNNNN``. Non-strings have no description.
    """
    if not isinstance(text, str):
        return ""
    out: list[str] = []
    in_space = False
    for char in text:
        if _is_js_whitespace(char):
            if not in_space:
                out.append(" ")
            in_space = True
            continue
        in_space = False
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02x}")
        elif _is_surrogate(char):
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out).strip(" ")


def docstring_text(text: object) -> str:
    """:func:`comment_text`, then backslashes doubled and quotes escaped for a ``\"\"\"...\"\"\"`` body."""
    return comment_text(text).replace("\\", "\\\\").replace('"', '\\"')
