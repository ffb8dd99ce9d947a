"""autobahn's debug log arguments, formatted only when a line is rendered
(`inspector/autobahn_log_args.py`), say what autobahn's own say."""

from __future__ import annotations

from autobahn import util
from autobahn.twisted import websocket as twisted_websocket
from autobahn.websocket import protocol
from twisted.logger import formatEvent

from inspector import asgi  # noqa: F401 - installs them, as daphne's start does
from inspector.autobahn_log_args import LazyText, lazy_hltype, lazy_hlval


class Peer:
    def dataReceived(self, data: bytes) -> None:
        pass


def test_they_format_to_autobahns_own_text():
    method = Peer().dataReceived
    assert str(lazy_hltype(method)) == util.hltype(method)
    assert str(lazy_hlval("tcp:127.0.0.1:5555")) == util.hlval("tcp:127.0.0.1:5555")
    assert f"{lazy_hlval(220, color='red', bold=False)}" == util.hlval(220, color="red", bold=False)
    assert f"{lazy_hlval(7):>20}" == f"{util.hlval(7):>20}"  # a format spec, as a str takes it


def test_a_rendered_log_line_reads_as_with_autobahns_own():
    method, peer = Peer().dataReceived, "tcp:127.0.0.1:5555"
    line = '{func} received {data_len} bytes for peer="{peer}"'
    lazy = {"func": lazy_hltype(method), "peer": lazy_hlval(peer), "data_len": lazy_hlval(3)}
    eager = {"func": util.hltype(method), "peer": util.hlval(peer), "data_len": util.hlval(3)}
    assert formatEvent({"log_format": line, **lazy}) == formatEvent({"log_format": line, **eager})


def test_nothing_is_formatted_until_asked():
    formatted = []

    def format_(value: object) -> str:
        formatted.append(value)
        return "text"

    lazy = LazyText(format_, 1, {})
    assert formatted == []
    assert str(lazy) == "text" and formatted == [1]


def test_the_asgi_module_installs_them_where_autobahn_looks_them_up():
    for module in (protocol, twisted_websocket):
        assert module.hltype is lazy_hltype and module.hlval is lazy_hlval
