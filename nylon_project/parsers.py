"""JSON parsing that fails closed: deep nesting and bad encodings are a 400, never a 500."""

from __future__ import annotations

import json
import math

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 64


def _depth_ok(raw: bytes) -> bool:
    depth = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == 0x5C:  # backslash
                escaped = True
            elif ch == 0x22:
                in_string = False
        elif ch == 0x22:
            in_string = True
        elif ch in (0x5B, 0x7B):
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in (0x5D, 0x7D):
            depth -= 1
    return True


class JsonObject(dict):
    """A JSON object from a request body: marks data whose types are JSON's own (see
    ``nylon_project.api.StrictSerializer``), unlike a query string's, where every value is a string."""


class UnstorableBodyText(ParseError):
    """A body refused for text Postgres cannot store; ``field_path`` is where, when a field holds
    it (``nylon_project.api.Api`` puts the error under ``error.fields`` there), else None (the body
    itself is a string, or a key holds it)."""

    def __init__(self, detail, field_path: str | None):
        super().__init__(detail)
        self.field_path = field_path


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if not _depth_ok(raw):
            raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("Request body is not valid UTF-8.") from None
        try:
            data = json.loads(text, object_hook=JsonObject, parse_constant=_reject_constant,
                              parse_float=_finite) if text else JsonObject()
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        # Strict JSON refuses a raw control character and the UTF-8 decode a raw surrogate, so
        # either can only arrive as a \u escape: skip the walk over large bodies without one.
        where = unstorable_path(data) if "\\u" in text else None
        if where is not None:
            raise UnstorableBodyText(f"{where or 'The body'}: text with a NUL character (\\u0000) or an unpaired "
                                     "surrogate cannot be stored.", None if where in ("", "(a key)") else where)
        return data


def unstorable_text(value: str) -> bool:
    """Postgres text and jsonb hold neither NUL nor an unpaired surrogate (JSON's \\ud800 escapes)."""
    if "\x00" in value:
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def unstorable_path(value, path: str = "") -> str | None:
    """The JSON path of the first string (key or value) Postgres could not store, else None."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if unstorable_text(item):
                return where
        elif isinstance(item, dict):
            for k, v in item.items():
                child = f"{where}.{k}" if where else k
                if unstorable_text(k):
                    return where or "(a key)"
                stack.append((v, child))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:40]} is out of range for a number")
    return value


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")
