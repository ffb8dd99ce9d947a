"""autobahn's debug log arguments, formatted only when a debug line is written.

autobahn's websocket protocol logs every read and every write at debug level,
with arguments it colours first (`autobahn.util.hltype` and `hlval`, through
click's `style`).  txaio makes a disabled level's log call a no-op, but
Python still evaluates its arguments: on every websocket frame read and sent,
though no server runs with autobahn's debug level on.  That was 2% of a
daphne process's interpreter time at 5,000 frames a second through the ingest
socket and 7% at 1,000 (py-spy `--gil`, `bench/live_viewer.py`).

`install_lazy_log_arguments` gives the protocol modules versions of the two
that return a `LazyText`: it formats to the very same text, but only when a
log line is rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autobahn import util
from autobahn.twisted import websocket as twisted_websocket
from autobahn.websocket import protocol


class LazyText:
    """`format_(value, **options)`, computed when the text is asked for."""

    __slots__ = ("_format", "_value", "_options")

    def __init__(self, format_: Callable[..., str], value: Any, options: dict[str, Any]) -> None:
        self._format, self._value, self._options = format_, value, options

    def __str__(self) -> str:
        return self._format(self._value, **self._options)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    __repr__ = __str__


def lazy_hltype(obj: Any) -> LazyText:
    return LazyText(util.hltype, obj, {})


def lazy_hlval(value: Any, **options: Any) -> LazyText:
    return LazyText(util.hlval, value, options)


def install_lazy_log_arguments() -> None:
    """Make autobahn's websocket protocol modules format their debug log
    arguments lazily (call before it serves: from the ASGI module)."""
    for module in (protocol, twisted_websocket):
        module.hltype = lazy_hltype
        module.hlval = lazy_hlval


__all__ = ["LazyText", "install_lazy_log_arguments", "lazy_hltype", "lazy_hlval"]
