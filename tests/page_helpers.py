"""What the page tests share: a demo capture stored from a file, and a page's HTML."""

from __future__ import annotations

from pathlib import Path

from inspector.captures.models import Capture
from inspector.captures.store import store_stream

DEMO = Path(__file__).resolve().parents[1] / "inspector" / "captures" / "demo"


def demo(name: str, title: str | None = None) -> Capture:
    """The demo SSE file `name` stored, titled by its name unless `title`
    is given ("" included)."""
    data = (DEMO / name).read_bytes()
    return store_stream(data, stream_format="sse", title=name if title is None else title)


def html(response, status: int = 200) -> str:
    """The page's text, once its status is the one expected."""
    assert response.status_code == status, response.status_code
    return response.content.decode()
