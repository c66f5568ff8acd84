"""Text with NUL: the escape every parameter and every text column of a PostgreSQL store goes through, in the
connection's adapters (why: the package docstring)."""

from __future__ import annotations

import math
from typing import Any

from .driver import pg_string, pq, psycopg

# ---- text with NUL: the escape every parameter and every text column goes through (see the module docstring).

_NUL, _ONE = "\x00", "\x01"


def escape_text(text: str) -> str:
    """How `text` is stored: itself, unless it holds U+0000 or U+0001 (then U+0001 -> U+0001 U+0002, U+0000 -> U+0001 U+0001)."""
    if _NUL not in text and _ONE not in text:
        return text
    return text.replace(_ONE, "\x01\x02").replace(_NUL, "\x01\x01")


def unescape_text(stored: str) -> str:
    """The string `escape_text` stored as `stored`.

    Two replacements suffice: scanning left to right, a U+0001 always starts a
    pair, so a pair is never read across two of them.
    """
    if _ONE not in stored:
        return stored
    return stored.replace("\x01\x01", _NUL).replace("\x01\x02", _ONE)


if psycopg is not None:

    class _EscapingMixin:
        _encoding: str

        def dump(self, obj: str) -> bytes:
            if _NUL in obj or _ONE in obj:
                obj = escape_text(obj)
            return obj.encode(self._encoding)

    class _TextDumper(_EscapingMixin, pg_string.StrDumperUnknown):
        """The default str dumper (text format, unknown oid, so PostgreSQL infers the type), escaping."""

    class _TextOidDumper(_EscapingMixin, pg_string.StrDumper):
        """A str dumper to the text oid (arrays of text, `state = ANY(%s)`), escaping."""

    class _TextBinaryDumper(_EscapingMixin, pg_string.StrBinaryDumper):
        """A str dumper in binary format, escaping."""

    class _TextLoader(pg_string.TextLoader):
        def load(self, data: Any) -> str:
            text = str(data, "utf-8")
            return unescape_text(text) if _ONE in text else text

    class _TextBinaryLoader(_TextLoader):
        format = pg_string.TextBinaryLoader.format

    class _UntypedDumper(psycopg.adapt.Dumper):
        """int, float and bool as text of no stated type (oid 0): the server types each parameter from where it stands, the
        column or function it meets, as it types the parameters of a statement prepared without types. One statement then
        has one set of parameter types, whatever values (or NULLs) it carries, and `shiftchange_guard(count(*), %s)` finds
        its integer argument (a bigint, as psycopg would send a large Python int, would find no such function)."""

        oid = 0
        format = pq.Format.TEXT

        def dump(self, obj: Any) -> bytes:
            kind = type(obj)
            if kind is bool:
                return b"t" if obj else b"f"
            if kind is float and not math.isfinite(obj):
                return b"NaN" if math.isnan(obj) else (b"Infinity" if obj > 0 else b"-Infinity")
            return repr(obj).encode()


def _adapt_text(connection: Any) -> None:
    """Make `connection` store and read text through the NUL escape (registered in psycopg's order: the last is the default)."""
    adapters = connection.adapters
    adapters.register_dumper(str, _TextBinaryDumper)
    adapters.register_dumper(str, _TextOidDumper)
    adapters.register_dumper(str, _TextDumper)
    adapters.register_loader("text", _TextLoader)
    adapters.register_loader("text", _TextBinaryLoader)


def _adapt_numbers(connection: Any) -> None:
    """Make `connection` bind int, float and bool untyped (`_UntypedDumper`), in lists too (an int list typed by a cast)."""
    adapters = connection.adapters
    for kind in (int, float, bool):
        adapters.register_dumper(kind, _UntypedDumper)
