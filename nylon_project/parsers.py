"""JSON parsing that fails closed: deep nesting and bad encodings are a 400, never a 500."""

from __future__ import annotations

import json

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
            return json.loads(text, parse_constant=_reject_constant) if text else {}
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")
