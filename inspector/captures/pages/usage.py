"""How a token usage object (the stream's `usage`, any JSON) reads on a page."""

from __future__ import annotations

import json
from typing import Any


def usage_items(usage: Any) -> list[tuple[str, str]]:
    """Each (key, value) of a usage object as text; none when it is no object."""
    if not isinstance(usage, dict):
        return []
    items = []
    for key, value in usage.items():
        shown = value if isinstance(value, int | float | str) else json.dumps(value)
        items.append((str(key), str(shown)))
    return items


def usage_summary(usage: Any) -> str:
    """A short reading of a usage object: "12 in · 30 out", else its items."""
    if not isinstance(usage, dict) or not usage:
        return ""
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        return f"{prompt} in \u00b7 {completion} out"
    return " \u00b7 ".join(f"{key} {value}" for key, value in usage_items(usage)[:3])
