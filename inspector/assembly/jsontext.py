"""Compact JSON text, as `orjson.dumps` writes it, at any depth the parser
accepts.

orjson reads nesting up to 1024 levels but writes only up to 254; deeper
values fall back to the standard library, which writes the same compact
text (no spaces, non-ASCII kept as is).  So does a string holding a lone
surrogate, which orjson refuses: the standard library escapes it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import orjson

_DEEP_RECURSION = 5000


def dumps(value: Any, *, indent: bool = False) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0)
    except orjson.JSONEncodeError:
        if sys.getrecursionlimit() < _DEEP_RECURSION:
            sys.setrecursionlimit(_DEEP_RECURSION)
        options = {"indent": 2 if indent else None, "separators": None if indent else (",", ":")}
        text = json.dumps(value, ensure_ascii=False, **options)
        try:
            return text.encode()
        except UnicodeEncodeError:  # a lone surrogate, which UTF-8 can't carry: escaped
            return json.dumps(value, **options).encode()


def compact(value: Any) -> str:
    return dumps(value).decode()
