"""The attack run of issue 12, as one command: the server started as the README starts it,
then attacked over HTTP and websockets from outside, category by category.

Run from the repository root:

    .venv/bin/python bench/attack.py                          # scratch SQLite, in-memory layer
    .venv/bin/python bench/attack.py --database-url postgres://postgres@127.0.0.1:5432/attack \\
        --redis-url redis://127.0.0.1:6379/9 --reset-database
    .venv/bin/python bench/attack.py --only secrets,ssrf      # some categories

The site: a scratch database (`--database-url` must name a scratch database;
`--reset-database` drops and recreates it) migrated, `manage.py load_demo`, a staff user,
and daphne on a free loopback port with INSPECTOR_UPSTREAMS naming a fake upstream
(`inspector.live.fake_upstream`, on loopback) and a recording upstream of this script's.
Categories (each counts what it tried and what went wrong; every goal is 0):

* secrets: canaries (API keys in headers, cookies, query and body; the inspector's own
  session, CSRF and token) sent through every intake, upstream echoing the key; then the
  whole database, its files, the server's log, every answer of the inspector and the
  headers the upstream received are searched -> canaries found;
* xss: hostile payloads stored through every intake in titles, file names, tool names,
  ids, arguments, models, event names and HAR URLs; every page that shows them (list,
  capture, frames, lenses, compare, admin...) and the live view's websocket messages are
  checked -> unescaped found;
* access: login required and API tokens on: every route of the URL conf and every websocket
  route, anonymous, with a wrong token, a revoked token, a logged-out session, no CSRF, a
  revoked share link -> leaks;
* ssrf: proxy path tricks (dot segments encoded every way, backslashes, encoded '/', '@',
  absolute URLs, other hosts and ports, IPv6, upstream redirects to an internal host)
  -> reached;
* hostile: tests/hardening/hardening_fuzz.py's cases over HTTP, NUL bytes, oversized and
  deeply nested input, bad paging and ids -> 5xx, hangs;
* load: bench/load.py's round (concurrent uploads and proxied streams) -> frames lost, 5xx;
* crash: kill -9 mid-upload and mid-proxied stream (tests/hardening's crash test), restart
  as the README does -> frames lost (received > 1 s before the kill), captures left live.

Prints one summary table; figures go to bench-results/attack.json (git-ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results" / "attack.json"
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "hardening")]

from server import daphne as daphne_server  # noqa: E402
from server import scratch_site  # noqa: E402

CATEGORIES = ("secrets", "xss", "access", "ssrf", "hostile", "load", "crash")
ADMIN = ("attack-admin", "Attack-Pw-" + secrets.token_hex(8))
TOKEN = "tok-" + secrets.token_hex(12)
TOKEN_AFTER = "tok-after-" + secrets.token_hex(12)
LOCKED = {
    "INSPECTOR_REQUIRE_LOGIN": "1",
    "INSPECTOR_DEBUG": "0",
    "INSPECTOR_SECRET_KEY": secrets.token_urlsafe(48),
}


# -- the site ----------------------------------------------------------------------------


class Recorder:
    """A loopback HTTP server that records every request it gets: the SSRF upstream
    (`rec`, whose base URL is /base/v1; a path or model naming `redirect` is answered
    with a redirect to `target`) and the internal host nothing may reach."""

    def __init__(self, name: str, target: str = "") -> None:
        self.name, self.target, self.seen = name, target, []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.seen.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers)}
                )
                wants = b"redirect" in body or "redirect" in self.path
                if wants and recorder.target:
                    self.send_response(int(self.path[-3:]) if self.path[-3:].isdigit() else 302)
                    self.send_header("Location", recorder.target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                out = json.dumps({"object": "list", "data": [], "from": recorder.name}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _any  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Site:
    scratch: Path
    env: dict[str, str]
    database_url: str
    scenarios: Path
    fake: Any
    rec: Recorder
    internal: Recorder
    logs: list[Path] = field(default_factory=list)

    def server_env(self, **extra: str) -> dict[str, str]:
        return {**self.env, **extra}

    @contextlib.contextmanager
    def server(self, name: str, **extra: str) -> Iterator[tuple[str, Any]]:
        log = self.scratch / f"daphne-{name}.log"
        self.logs.append(log)
        with daphne_server(self.server_env(**extra), log, seconds=60) as (url, proc):
            yield url, proc

    def manage(self, *command: str, **extra: str) -> None:
        subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *command],
            env=self.server_env(**extra),
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )


def reset_postgres(url: str) -> None:
    """Drop and recreate the scratch PostgreSQL database `url` names."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or name in ("postgres", "template1"):
        raise SystemExit(f"--reset-database: {name!r} does not look like a scratch database")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def prepare(args: argparse.Namespace) -> Site:
    """As the README's `make run`: migrate, load_demo; plus a staff user for the admin and
    the login, the scenarios, the fake upstream, the recording upstream and the internal
    host."""
    if args.reset_database and args.database_url:
        reset_postgres(args.database_url)
    scratch, env = scratch_site("attack-", args.database_url, args.redis_url)
    from hardening_load import write_scenario
    from test_hardening_crash_under_upload import LIVE_FRAMES, PACE_S, chunk

    from inspector.live.fake_upstream import DEFAULT_SCENARIOS, FakeUpstream

    scenarios = scratch / "scenarios"
    shutil.copytree(DEFAULT_SCENARIOS, scenarios)
    write_scenario(scenarios, args.load_frames, args.load_pace_ms)
    (scenarios / "paced.sse").write_bytes(b"".join(chunk(f"p{n} ") for n in range(LIVE_FRAMES)))
    (scenarios / "paced.json").write_text(json.dumps({"pace_ms": PACE_S * 1000}))
    (scenarios / "xss.sse").write_bytes(xss_chat_stream(XSS[0], XSS[1]))
    (scenarios / "xss.json").write_text(json.dumps({"pace_ms": 30}))
    fake = FakeUpstream(scenarios).start()
    # The fake reads request bodies with json.loads: the hostile category's 100,000-deep
    # body, forwarded by the proxy, would print its RecursionError (the proxy answers 502).
    fake.server.handle_error = lambda request, address: None
    internal = Recorder("internal")
    rec = Recorder("rec", target=f"http://127.0.0.1:{internal.port}/stolen")
    env["INSPECTOR_UPSTREAMS"] = f"fake={fake.url},rec=http://127.0.0.1:{rec.port}/base/v1"
    site = Site(scratch, env, env["DATABASE_URL"], scenarios, fake, rec, internal)
    site.manage("load_demo")
    site.manage(
        "createsuperuser",
        "--noinput",
        "--username",
        ADMIN[0],
        "--email",
        "attack@example.com",
        DJANGO_SUPERUSER_PASSWORD=ADMIN[1],
    )
    return site


# -- talking to the server ---------------------------------------------------------------


class Http:
    """httpx against one server, counting 5xx answers and hangs (no answer within the
    timeout).  A 502/504 of the proxy or guard is the upstream's failure relayed, by
    design, and is not counted."""

    def __init__(self, base: str, timeout: float = 30, cookies: dict | None = None) -> None:
        self.base, self.cookies = base, cookies or {}
        self.client = httpx.Client(timeout=timeout, follow_redirects=False)
        self.requests = 0
        self.server_errors: list[str] = []
        self.hangs: list[str] = []

    def __call__(self, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        self.requests += 1
        where = f"{method} {path[:200]}"
        cookies = {**self.cookies, **(kwargs.pop("cookies", None) or {})}
        if cookies:  # sent as a header: the client keeps no cookie between requests
            jar = "; ".join(f"{k}={v}" for k, v in cookies.items())
            kwargs["headers"] = {"Cookie": jar, **(kwargs.get("headers") or {})}
        try:
            response = self.client.request(method, self.base + path, **kwargs)
        except httpx.TimeoutException:
            self.hangs.append(where)
            return None
        except httpx.HTTPError as error:
            self.server_errors.append(f"{where}: {type(error).__name__}: {error}")
            return None
        finally:
            self.client.cookies.clear()
        relayed = path.startswith(("/proxy/", "/guard/")) and response.status_code in (502, 504)
        if response.status_code >= 500 and not relayed:
            self.server_errors.append(f"{where}: {response.status_code} {response.text[:300]!r}")
        return response

    def login(self) -> tuple[str, str]:
        """Log the staff user in: (sessionid, csrftoken)."""
        page = self("GET", "/accounts/login/")
        csrf = page.cookies["csrftoken"]
        answer = self(
            "POST",
            "/accounts/login/",
            data={"username": ADMIN[0], "password": ADMIN[1], "csrfmiddlewaretoken": csrf},
            cookies={"csrftoken": csrf},
        )
        assert answer is not None and answer.status_code == 302, answer and answer.text[:300]
        return answer.cookies["sessionid"], csrf

    def close(self) -> None:
        self.client.close()


def ws_url(base: str, path: str) -> str:
    return base.replace("http://", "ws://", 1) + path


def ws_messages(base: str, path: str, seconds: float, **connect: Any) -> list[Any]:
    """What a websocket client gets within `seconds` (text messages parsed as JSON)."""
    from websockets.sync.client import connect as ws_connect

    out: list[Any] = []
    deadline = time.monotonic() + seconds
    with ws_connect(ws_url(base, path), open_timeout=10, close_timeout=1, **connect) as socket:
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = socket.recv(timeout=left)
            except TimeoutError:
                break
            except Exception:  # noqa: BLE001 - closed by the server
                break
            out.append(json.loads(message) if isinstance(message, str) else message)
    return out


def wait_none_live(seconds: float = 30) -> int:
    """Until no capture is live; the number still live then."""
    from inspector.captures.models import Capture

    deadline = time.monotonic() + seconds
    while (live := Capture.objects.filter(outcome=Capture.Outcome.LIVE).count()) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    return live


def sse(bodies: list[Any], done: bool = True) -> bytes:
    out = b"".join(b"data: " + json.dumps(body).encode() + b"\n\n" for body in bodies)
    return out + (b"data: [DONE]\n\n" if done else b"")


# -- secrets -----------------------------------------------------------------------------


def secrets_category(site: Site, args: argparse.Namespace) -> dict[str, Any]:
    import test_hardening_secrets_every_intake as S  # noqa: N812
    from test_hardening_secrets_round_two import KEY

    site.fake.reset()
    with site.server("secrets") as (base, _):
        http = Http(base)
        session, csrf = http.login()
        own_token = "insp-token-canary-" + secrets.token_hex(8)
        cookie = f"sessionid={session}; csrftoken={csrf}; session={S.CANARY}; sid={S.CANARY}"
        headers = {**S.HEADERS, "Cookie": cookie, "X-CSRFToken": csrf}
        headers["X-Inspector-Token"] = own_token
        answers, relays, intakes = [], [], Counter()

        def send(name: str, method: str, path: str, *, extra=None, relay=False, **kw: Any):
            response = http(method, path, headers={**headers, **(extra or {})}, **kw)
            intakes[f"{name}: {response.status_code if response is not None else 'none'}"] += 1
            if response is not None:
                (relays if relay else answers).append(response)
            return response

        _secret_uploads(S, send, csrf)
        _secret_ingest(S, send, base, headers)
        _secret_proxy(S, KEY, send)
        still_live = wait_none_live()
        answers += _crawl_everything(http)
        time.sleep(0.5)  # the access log line follows the answer
        needles = {
            "canary (header, query, body)": S.SECRET,
            "echoed upstream key": KEY,
            "inspector session id": session,
            "inspector CSRF token": csrf,
            "inspector token header": own_token,
        }
        found = _search_everywhere(S, site, needles, answers, session)
        upstream = _upstream_leaks(site, session, csrf, own_token)
        found += upstream
        forwarded = sum(
            1 for served in site.fake.served() if S.CANARY in json.dumps(served.headers)
        )
        http.close()
    return {
        "intake_requests": sum(intakes.values()),
        "intakes": dict(intakes),
        "answers_searched": len(answers),
        "relays_not_searched": len(relays),
        "upstream_requests_searched": len(site.fake.served()),
        "upstream_requests_with_the_forwarded_key": forwarded,
        "marker_found_in_db": bool(S.table_cells_holding(S.MARK)),
        "captures_left_live": still_live,
        "canaries_found": len(found),
        "found": found,
        "server_errors": http.server_errors,
        "hangs": http.hangs,
        "requests": http.requests,
    }


def _secret_uploads(S: Any, send: Any, csrf: str) -> None:  # noqa: N803 - the test module
    """Upload form (file, text, HAR) and API (raw, multipart, HAR both ways), with the
    canaries in headers, cookies, query and form fields; the HAR holds them everywhere."""
    q, sse_file, har = S.QUERY, S.sse_stream(), S.har_with_secrets()
    form = {"title": S.MARK, "format": "auto", "csrfmiddlewaretoken": csrf, **S.FORM_SECRETS}
    for name, data, files in (
        ("upload form file", form, {"file": ("s.sse", sse_file)}),
        ("upload form text", {**form, "text": sse_file.decode(), "format": "sse"}, None),
        ("upload form HAR", form, {"file": ("s.har", har)}),
    ):
        send(name, "POST", f"/upload/?{q}", data=data, files=files)
    for name, content, kind in (
        ("API raw", sse_file, "text/event-stream"),
        ("API raw HAR", har, "application/json"),
    ):
        path = f"/api/captures?title={S.MARK}&{q}"
        send(name, "POST", path, content=content, extra={"Content-Type": kind})
    fields = {"title": S.MARK, **S.FORM_SECRETS}
    for name, upload in (
        ("API multipart", ("s.sse", sse_file)),
        ("API multipart HAR", ("s.har", har)),
    ):
        send(name, "POST", f"/api/captures?{q}", data=fields, files={"file": upload})


def _secret_ingest(S: Any, send: Any, base: str, headers: dict[str, str]) -> None:  # noqa: N803
    """Ingest over HTTP (JSON options, form options) and over the websocket."""
    from websockets.sync.client import connect

    q = S.QUERY
    opened = send(
        "ingest HTTP",
        "POST",
        f"/api/ingest?{q}",
        json={"title": S.MARK, "format": "sse", **S.BODY_SECRETS},
    )
    opened_form = send(
        "ingest HTTP form", "POST", f"/api/ingest?{q}", data={"title": S.MARK, **S.FORM_SECRETS}
    )
    for response in (opened, opened_form):
        if response is None or response.status_code != 201:
            continue
        urls = response.json()
        append = urlsplit(urls["append_url"]).path
        send("ingest HTTP", "POST", f"{append}?{q}", content=S.sse_stream())
        send("ingest HTTP", "POST", f"{urlsplit(urls['close_url']).path}?{q}", json=S.BODY_SECRETS)
    socket_headers = {k: v for k, v in headers.items()}
    with connect(
        ws_url(base, f"/ws/ingest/?{q}"), additional_headers=socket_headers, open_timeout=10
    ) as ws:
        ws.send(json.dumps({"open": {"title": S.MARK, "format": "sse", **S.BODY_SECRETS}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "opened"
        ws.send(S.sse_stream())
        ws.send(json.dumps({"close": True, **S.BODY_SECRETS}))
        ws.recv(timeout=10)


def _secret_proxy(S: Any, key: str, send: Any) -> None:  # noqa: N803
    """Proxy and guard on every dialect, streamed and whole, an upstream error, a cut,
    retries, the upstream echoing the key (whole and in a stream), a passed-through GET."""
    q = S.QUERY

    def body(model: str, stream: bool = True) -> dict[str, Any]:
        return {
            "model": model,
            "stream": stream,
            "user": S.MARK,
            "messages": [{"role": "user", "content": S.MARK}],
            "tools": S.TOOLS,
            **S.BODY_SECRETS,
        }

    chat = f"/proxy/fake/v1/chat/completions?{q}"
    for name, path, model, stream in (
        ("proxy chat streamed", chat, "ok-tool-call", True),
        ("proxy chat whole", chat, "ok-tool-call", False),
        ("proxy upstream 404", chat, "no-such-scenario", True),
        ("proxy cut mid-stream", chat, "cut-mid-stream", True),
        ("guard retried", f"/guard/fake/v1/chat/completions?{q}", "flaky-twice", True),
        ("proxy responses", f"/proxy/fake/v1/responses?{q}", "responses-ok", True),
        ("guard responses", f"/guard/fake/v1/responses?{q}", "responses-ok", True),
        ("proxy messages", f"/proxy/fake/v1/messages?{q}", "messages-ok", True),
    ):
        send(name, "POST", path, json=body(model, stream), relay=True)
    gemini = "/proxy/fake/v1beta/models/gemini-ok:streamGenerateContent"
    send("proxy gemini", "POST", f"{gemini}?alt=sse&{q}", json=body("gemini-ok"), relay=True)
    for scenario in ("echo-key", "echo-key-stream"):
        send(
            f"proxy {scenario}",
            "POST",
            f"/proxy/fake/v1/chat/completions?{q}",
            json=body(scenario),
            extra={"Authorization": f"Bearer {key}"},
            relay=True,
        )
    send("proxy passthrough GET", "GET", f"/proxy/fake/v1/models?{q}", relay=True)


def _crawl_everything(http: Http) -> list[httpx.Response]:
    """Every API answer and page about every capture: the list, details (strict and
    lenient), lenses, attempts, capture and frame pages, downloads and exports."""
    out = []
    listing = http("GET", "/api/captures?per_page=200")
    out.append(listing)
    chains = set()
    for item in listing.json()["results"] if listing is not None else []:
        slug = item["slug"]
        for path in (
            f"/api/captures/{slug}",
            f"/api/captures/{slug}/lenient",
            f"/c/{slug}/",
            f"/c/{slug}/frames/0/",
            f"/c/{slug}/raw",
            f"/c/{slug}/result.json",
            f"/c/{slug}/regression.sse",
            f"/c/{slug}/regression.expect.json",
        ):
            out.append(http("GET", path))
        detail = out[-8]
        if detail is not None and detail.status_code == 200:
            chains.add(detail.json().get("retry_chain"))
    out += [http("GET", f"/api/attempts/{chain}") for chain in chains if chain]
    out += [http("GET", "/"), http("GET", "/?q=sk-"), http("GET", "/admin/")]
    return [r for r in out if r is not None]


def _search_everywhere(
    S: Any,  # noqa: N803
    site: Site,
    needles: dict[str, str],
    answers: list[httpx.Response],
    session: str,
) -> list[str]:
    """Where each needle is found that it does not belong: any database cell (the
    session id only outside django_session), a decoded session, the database's own
    files (SQLite), the server's log, an answer of the inspector (body or headers)."""
    found = []
    files = []
    if site.database_url.startswith("sqlite"):
        db = Path(site.database_url.removeprefix("sqlite:///"))
        files = [p for p in (db, Path(f"{db}-wal")) if p.exists()]
    for what, needle in needles.items():
        cells = S.table_cells_holding(needle)
        if needle == session:
            cells = [c for c in cells if not c.startswith("django_session.")]
        found += [f"{what} in the database: {cell}" for cell in cells]
        if what.startswith("canary"):
            found += [f"{what} in {hit}" for hit in S.sessions_holding(needle)]
        for path in files if needle != session else ():  # django_session holds its key
            if _file_holds(path, needle):
                found.append(f"{what} in the database file {path.name}")
        for log in site.logs:
            text = log.read_text(errors="replace")
            if needle in text:
                line = next(line for line in text.splitlines() if needle in line)
                found.append(f"{what} in the server log {log.name}: {line[:300]}")
        for answer in answers:
            where = f"{answer.request.method} {answer.request.url.raw_path.decode()[:120]}"
            if needle in answer.text or needle in json.dumps(dict(answer.headers)):
                found.append(f"{what} in the answer to {where} ({answer.status_code})")
    return found


def _file_holds(path: Path, needle: str) -> bool:
    """`needle` in the bytes of a database file, read by another process: closing a file
    descriptor of the database in this process would drop the POSIX locks of this
    process's own SQLite connection (and let the server delete the WAL under it)."""
    found = subprocess.run(["grep", "-q", "-a", "-F", needle, str(path)], check=False)
    return found.returncode == 0


def _upstream_leaks(site: Site, session: str, csrf: str, token: str) -> list[str]:
    """The inspector's own credentials in what the upstream received."""
    found = []
    for served in site.fake.served():
        sent = json.dumps(served.headers) + served.path
        for what, needle in (("session id", session), ("CSRF token", csrf), ("token", token)):
            if needle in sent:
                found.append(f"inspector {what} sent upstream: {served.method} {served.path[:80]}")
        inspector_headers = [
            h for h in served.headers if h.startswith("x-inspector") or h == "x-csrftoken"
        ]
        if inspector_headers:
            found.append(f"inspector headers sent upstream: {inspector_headers}")
    return found


# -- XSS ---------------------------------------------------------------------------------

XSS = (
    "<script>xss_s()</script>",
    '"><img src=x onerror=xss_i()>',
    "'><svg/onload=xss_v()>",
    "</textarea></title><script>xss_t()</script>",
    "javascript:xss_j()//",
)


# What the detector must find (a check that can fail): each payload left unescaped.
XSS_CONTROL = [f"<p>{p}</p>" for p in XSS if "<" in p] + ['<a href="javascript:xss_j()//">']


class Markup(HTMLParser):
    """What a browser would run of the payloads: a tag with an `on...` attribute or a
    `javascript:` link (attribute values as the browser decodes them), a script whose
    code is a payload's call, an attribute named by a payload."""

    LINKS = ("href", "src", "action", "formaction", "xlink:href", "data", "srcdoc")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            value = value or ""
            if name.startswith("on") and "xss_" in value or "xss_" in name:
                self.found.append(f"<{tag} {name}={value[:60]!r}>")
            if name in self.LINKS and value.strip().lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}={value[:60]!r}>")
        self.in_script = tag == "script"

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.in_script = False

    def handle_data(self, data: str) -> None:
        if self.in_script and data.strip().startswith("xss_"):
            self.found.append(f"<script>{data[:60]}")


def unescaped(page: str) -> list[str]:
    """The payloads a page would run: a payload with markup found verbatim, or markup the
    parser finds."""
    found = [f"verbatim {p!r}" for p in XSS if "<" in p and p in page]
    parser = Markup()
    parser.feed(page)
    parser.close()
    return found + parser.found


def xss_chat_stream(payload: str, other: str) -> bytes:
    """A chat stream with `payload` as model, ids, tool name, content and in the arguments;
    a second call named `other` whose arguments never become JSON."""
    base = {"id": payload, "object": "chat.completion.chunk", "model": payload}

    def chunk(delta: dict[str, Any], finish: Any = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    first = {"index": 0, "id": payload, "type": "function"}
    first["function"] = {"name": payload, "arguments": json.dumps({"q": payload})[:9]}
    second = {"index": 1, "id": other, "type": "function"}
    second["function"] = {"name": other, "arguments": other}
    rest = {"index": 0, "function": {"arguments": json.dumps({"q": payload})[9:]}}
    return sse(
        [
            chunk({"role": "assistant", "content": payload}),
            chunk({"tool_calls": [first]}),
            chunk({"tool_calls": [second]}),
            chunk({"tool_calls": [rest]}),
            chunk({}, payload),
        ]
    )


def xss_responses_stream(payload: str) -> bytes:
    """A Responses stream with `payload` as event names, item ids and the tool name."""
    item = {"type": "function_call", "id": payload, "call_id": payload, "name": payload}
    events = [
        (payload, {"type": "response.created", "response": {"id": payload, "model": payload}}),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "arguments": ""},
            },
        ),  # noqa: E501
        (
            "response.function_call_arguments.delta",
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": payload,
                "delta": payload,
            },
        ),  # noqa: E501
        (payload, {"type": payload}),
    ]
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def xss_har(payload: str) -> bytes:
    from hardening_fuzz import har_document

    document = har_document([xss_chat_stream(payload, XSS[2])])
    entries = document["log"]["entries"]
    entries[1]["request"]["url"] = f"https://api.example.com/v1/chat/completions?q={payload}"
    entries.append(json.loads(json.dumps(entries[1])))
    entries[-1]["request"]["url"] = "javascript:xss_j()//" + payload
    return json.dumps(document).encode()


def xss_category(site: Site, args: argparse.Namespace) -> dict[str, Any]:
    from inspector.captures.models import Capture

    before = set(Capture.objects.values_list("id", flat=True))
    with site.server("xss") as (base, _):
        http = Http(base)
        session, csrf = http.login()
        watcher = LiveWatcher(base, "/ws/captures/", seconds=30)
        intakes = _store_xss(site, http, csrf, base)
        wait_none_live()
        captures = list(
            Capture.objects.exclude(id__in=before).values_list("id", "slug", "frame_count")
        )
        staff = Http(base, cookies={"sessionid": session, "csrftoken": csrf})
        pages = _xss_pages(captures)
        results = [(path, http("GET", path)) for path in pages]
        results += [(path, staff("GET", path)) for path in _xss_admin_pages(captures)]
        # A share-link visitor (no session) sees the same pages.
        checked, found, no_csp, statuses = _check_pages(results)
        socket_messages = watcher.stop()
        for _, slug, _ in captures[:12]:
            socket_messages += ws_messages(base, f"/ws/captures/{slug}/", 2)
        socket_bad = _check_socket_messages(socket_messages)
        sinks = _js_sinks()
        errors, hangs = http.server_errors + staff.server_errors, http.hangs + staff.hangs
        requests = http.requests + staff.requests
    return {
        "payloads": len(XSS),
        "captures_with_payloads": len(captures),
        "intakes": dict(intakes),
        "pages_checked": checked,
        "page_statuses": dict(statuses),
        "unescaped_found": len(found) + len(socket_bad) + len(sinks),
        "unescaped": found + socket_bad + sinks,
        "html_without_csp": no_csp,
        "detector_control": all(unescaped(page) for page in XSS_CONTROL),
        "websocket_messages_checked": len(socket_messages),
        "server_errors": errors,
        "hangs": hangs,
        "requests": requests,
    }


class LiveWatcher:
    """A websocket viewer in a thread, collecting messages while the attack stores."""

    def __init__(self, base: str, path: str, seconds: float) -> None:
        self.messages: list[Any] = []
        self.thread = threading.Thread(
            target=lambda: self.messages.extend(ws_messages(base, path, seconds)), daemon=True
        )
        self.thread.start()
        time.sleep(0.5)

    def stop(self) -> list[Any]:
        self.thread.join(60)
        return list(self.messages)


def _store_xss(site: Site, http: Http, csrf: str, base: str) -> Counter:
    """Every intake, every place a string can sit."""
    cookies, done = {"csrftoken": csrf}, Counter()

    def post(label: str, path: str, **kwargs: Any) -> httpx.Response | None:
        response = http("POST", path, **kwargs)
        done[f"{label}: {response.status_code if response is not None else 'none'}"] += 1
        return response

    for n, payload in enumerate(XSS):
        other = XSS[(n + 1) % len(XSS)]
        stream = xss_chat_stream(payload, other)
        post("API raw", f"/api/captures?title={quote(payload)}&format=sse", content=stream)
        post(
            "API multipart (file name)", "/api/captures", files={"file": (f"{payload}.sse", stream)}
        )
        post(
            "API Responses stream",
            f"/api/captures?title={quote(payload)}",
            content=xss_responses_stream(payload),
        )
        post(
            "API HAR", f"/api/captures?title={quote(payload)}&format=har", content=xss_har(payload)
        )
        form = {"title": payload, "format": "auto", "csrfmiddlewaretoken": csrf}
        post(
            "upload form", "/upload/", data=form, files={"file": (payload, stream)}, cookies=cookies
        )
        opened = post("ingest HTTP open", "/api/ingest", json={"title": payload, "format": "sse"})
        if opened is not None and opened.status_code == 201:
            urls = opened.json()
            post("ingest HTTP append", urlsplit(urls["append_url"]).path, content=stream)
            post("ingest HTTP close", urlsplit(urls["close_url"]).path)
        request = {
            "model": "xss",
            "stream": True,
            "messages": [{"role": "user", "content": payload}],
            "tools": [{"type": "function", "function": {"name": payload, "parameters": {}}}],
        }
        group = {"X-Inspector-Group": quote(payload, safe="")}
        post("proxy", "/proxy/fake/v1/chat/completions", json=request, headers=group)
        post("guard", "/guard/fake/v1/chat/completions", json=request)
    _xss_ingest_socket(base, XSS[1])
    return done


def _xss_ingest_socket(base: str, payload: str) -> None:
    from websockets.sync.client import connect

    with connect(ws_url(base, "/ws/ingest/"), open_timeout=10) as ws:
        ws.send(json.dumps({"open": {"title": payload, "format": "sse"}}))
        ws.recv(timeout=10)
        for piece in xss_chat_stream(payload, XSS[0]).split(b"\n\n"):
            ws.send(piece + b"\n\n")
            time.sleep(0.05)
        ws.send(json.dumps({"close": True}))
        ws.recv(timeout=10)


def _xss_pages(captures: list[tuple[int, str, int]]) -> list[str]:
    pages = ["/", "/upload/", "/?outcome=refused", "/?per_page=200"]
    for payload in XSS:
        q = quote(payload, safe="")
        pages += [f"/?q={q}", f"/?model={q}", f"/?code={q}", f"/?outcome={q}", f"/?page={q}"]
        pages += [f"/compare/?a={q}&b={q}", f"/c/{q}/", f"/{q}"]
    slugs = [slug for _, slug, _ in captures]
    for (_, slug, frames), other in zip(captures, slugs[1:] + slugs[:1], strict=True):
        pages += [f"/c/{slug}/", f"/c/{slug}/lenses/", f"/compare/?a={slug}&b={other}"]
        pages += [f"/c/{slug}/frames/{n}/" for n in range(min(frames, 8))]
        pages += [f"/c/{slug}/raw", f"/c/{slug}/result.json", f"/c/{slug}/regression.sse"]
        pages += [f"/c/{slug}/regression.expect.json", f"/api/captures/{slug}"]
        pages += [f"/c/{slug}/minimize/{quote(XSS[0], safe='')}"]
    pages += [f"/c/{slug}/lenses/" for slug in slugs]  # again, once the lenses have run
    return pages


def _xss_admin_pages(captures: list[tuple[int, str, int]]) -> list[str]:
    from inspector.captures.models import Call, Frame

    ids = [pk for pk, _, _ in captures]
    pages = ["/admin/", "/admin/captures/capture/", "/admin/captures/call/"]
    pages += ["/admin/captures/frame/", "/admin/captures/assembly/", "/admin/captures/fragment/"]
    pages += [f"/admin/captures/capture/?q={quote(p, safe='')}" for p in XSS]
    pages += [f"/admin/captures/capture/{pk}/change/" for pk in ids]
    calls = Call.objects.filter(assembly__capture_id__in=ids).values_list("id", flat=True)[:30]
    pages += [f"/admin/captures/call/{pk}/change/" for pk in calls]
    frames = Frame.objects.filter(capture_id__in=ids).values_list("id", flat=True)[:30]
    pages += [f"/admin/captures/frame/{pk}/change/" for pk in frames]
    return pages


def _check_pages(results: list[tuple[str, httpx.Response | None]]):
    """(HTML pages checked, unescaped payloads found, HTML pages without a CSP, statuses).
    A download must not be served as HTML."""
    checked, found, no_csp, statuses = 0, [], [], Counter()
    for path, response in results:
        if response is None:
            continue
        statuses[response.status_code] += 1
        kind = response.headers.get("content-type", "")
        if "html" not in kind:
            if unescaped(response.text) and not kind.startswith(
                ("application/json", "application/octet-stream", "application/zip", "text/plain")
            ):
                found.append(f"GET {path}: served as {kind!r} with markup")
            continue
        checked += 1
        if "content-security-policy" not in response.headers and response.status_code < 400:
            no_csp.append(path)
        found += [f"GET {path} ({response.status_code}): {hit}" for hit in unescaped(response.text)]
    return checked, found, no_csp, statuses


def _check_socket_messages(messages: list[Any]) -> list[str]:
    """Live messages are JSON data rendered as text by live.js: none may carry markup to
    insert (a field named like html holding a payload)."""
    bad = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and "html" in key.lower() and unescaped(value):
            bad.append(f"websocket message field {key!r}: {value[:200]!r}")

    for message in messages:
        walk(message)
    return bad


def _js_sinks() -> list[str]:
    """Script that would turn live messages into markup."""
    sink = re.compile(r"\.(?:innerHTML|outerHTML)\s*[+]?=|insertAdjacentHTML|document\.write")
    found = []
    for path in sorted((ROOT / "static").rglob("*.js")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if sink.search(line) and not line.lstrip().startswith("//"):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    return found


# -- access control ----------------------------------------------------------------------

SHARE_PAGES = (
    "capture",
    "frame",
    "capture-raw",
    "capture-result",
    "capture-lenses",
    "capture-export",
    "capture-find",  # Find in arguments: a 303 to a permalink of the same capture
)
PUBLIC = ("health", "login", "logout")
FILLS = {
    "slug": "{slug}",
    "n": "0",
    "job": "no-such-job",
    "kind": "sse",
    "group": "{chain}",
    "chain": "{chain}",  # /api/attempts/<chain> (its parameter was <group> before)
    "upstream": "fake",
    "path": "models",
    "version": "v1beta",
    "model": "gemini-ok",
    "verb": "streamGenerateContent",
    "content_type_id": "1",
    "object_id": "1",
    "id": "1",
}


def url_routes() -> list[tuple[str, str]]:
    """(concrete path template, route name) of every route in the URL conf."""
    from django.urls import URLResolver, get_resolver

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, str]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern.name or ""

    out = []
    for raw, name in walk(get_resolver().url_patterns, ""):
        path = raw.replace("(?P<app_label>auth|captures)", "captures")
        path = path.replace("(?P<url>.*)", "no-such-page/").replace(
            "(?P<path>.*)", "inspector/inspector.css"
        )
        path = path.replace("^", "").replace("$", "").replace("/?", "")
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: FILLS[m[1]], path)
        out.append(("/" + path, name or raw))
    return out


MACHINE = ("/api/", "/proxy/", "/guard/")
# Who knocks, with which methods: a valid staff session only reads (its unsafe requests
# would log it out, rotate the link aimed at or run Minimize); without CSRF it only writes.
WHO_METHODS = {
    "anonymous": ("GET", "POST"),
    "wrong token": ("GET", "POST"),
    "logged-out session": ("GET", "POST"),
    "valid token": ("GET", "POST"),
    "staff session": ("GET",),
    "staff session, no CSRF": ("POST",),
}


def _expected(name: str, path: str, method: str, who: str) -> bool:
    """May `who` do `method` on this route, by the README's rules (login required,
    sharing on, tokens set)?  Anything else must be refused."""
    safe = method in ("GET", "HEAD")
    if name == "health":
        return True  # public, says only "ok"
    if who == "staff session":  # the captures' admin is read-only; autocomplete wants its
        read_only = path.startswith("/admin/captures/") and path.endswith(("/add/", "/delete/"))
        return safe and not read_only and not path.endswith("/autocomplete/")  # parameters
    if path.startswith(MACHINE):
        return who == "valid token"
    if path.startswith("/static/"):
        return True  # public files, whatever the method
    if path == "/admin/login/" or name == "login":
        return safe
    return name in SHARE_PAGES and safe and who != "staff session, no CSRF"


def access_category(site: Site, args: argparse.Namespace) -> dict[str, Any]:
    from inspector.captures.models import Capture

    routes = url_routes()
    figures: dict[str, Any] = {"routes": len(routes)}
    leaks, over, statuses = [], [], Counter()
    with site.server("access", INSPECTOR_API_TOKENS=TOKEN, **LOCKED) as (base, _):
        http = Http(base)
        data = _access_data(http, base)
        session, csrf = data["session"], data["csrf"]
        gone_session = _logged_out_session(base)
        whos = {
            "anonymous": ({}, {}),
            "wrong token": ({"X-Inspector-Token": "wrong", "Authorization": "Bearer wrong"}, {}),
            "logged-out session": (
                {"X-CSRFToken": gone_session[1]},
                dict(zip(("sessionid", "csrftoken"), gone_session, strict=True)),
            ),  # noqa: E501
            "staff session, no CSRF": ({}, {"sessionid": session, "csrftoken": csrf}),
            "staff session": ({"X-CSRFToken": csrf}, {"sessionid": session, "csrftoken": csrf}),
            "valid token": ({"X-Inspector-Token": TOKEN, "Authorization": f"Bearer {TOKEN}"}, {}),
        }
        for template, name in routes:
            for who, (headers, cookies) in whos.items():
                for method in WHO_METHODS[who]:
                    path = template.format(**data["fill"])
                    body = _probe_body(name, method)
                    response = http(method, path, headers=headers, cookies=cookies, **body)
                    _judge(leaks, over, statuses, data, name, path, method, who, response)
                    _close_if_opened(http, response)
        revoked = _revoked_link(http, data, routes, leaks, statuses)
        sockets = _socket_matrix(base, data, gone_session, leaks)
        grew = Capture.objects.get(slug=data["live"]).frame_count
        if grew:
            leaks.append(f"an unauthenticated append grew the live ingest capture to {grew} frames")
        http("POST", f"/api/ingest/{data['live']}/close", headers={"X-Inspector-Token": TOKEN})
        errors, hangs, requests = http.server_errors, http.hangs, http.requests
    with site.server("access-rekeyed", INSPECTOR_API_TOKENS=TOKEN_AFTER, **LOCKED) as (base, _):
        http = Http(base)
        rekeyed = _revoked_token(http, base, routes, data, leaks, statuses)
        errors, hangs, requests = (
            errors + http.server_errors,
            hangs + http.hangs,
            requests + http.requests,
        )
    wait_none_live()
    figures |= {
        "requests": requests,
        "websocket_handshakes": sockets,
        "revoked_link_requests": revoked,
        "revoked_token_requests": rekeyed,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "leaks": len(leaks),
        "leaked": leaks,
        "refused_though_allowed": over,
        "server_errors": errors,
        "hangs": hangs,
    }
    return figures


def _close_if_opened(http: Http, response: httpx.Response | None) -> None:
    """An ingest capture the matrix opened (with the valid token) is closed again."""
    if response is not None and response.status_code == 201 and "close_url" in response.text:
        close = urlsplit(response.json()["close_url"]).path
        http("POST", close, headers={"X-Inspector-Token": TOKEN})


def _probe_body(name: str, method: str = "POST") -> dict[str, Any]:
    if method != "POST":
        return {}
    if name.startswith(("proxy-", "guard-")):
        return {"json": {"model": "ok-tool-call", "stream": True, "messages": []}}
    if name == "ingest-append":
        return {"content": b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'}
    if name in ("api-captures", "upload"):
        return {"content": b"data: {}\n\ndata: [DONE]\n\n"}
    return {}


def _refused(response: httpx.Response) -> bool:
    """A refusal: 4xx, a redirect to a login (or to the admin's index, which redirects
    there), or a login form answered again without a session."""
    status = response.status_code
    if status in (401, 403, 404, 405, 400):
        return True
    location = response.headers.get("location", "")
    if status == 302:
        return (
            "/accounts/login/" in location or "/admin/login/" in location or location == "/admin/"
        )
    login_form = 'type="password"' in response.text
    return status == 200 and response.request.url.path.endswith("/login/") and login_form


def _judge(leaks, over, statuses, data, name, path, method, who, response) -> None:
    if response is None:
        return
    statuses[response.status_code] += 1
    allowed = _expected(name, path, method, who)
    refused = _refused(response)
    if not allowed and not refused:
        leaks.append(f"{who}: {method} {path} -> {response.status_code} {response.text[:160]!r}")
    elif not allowed and data["mark"] in response.text:
        leaks.append(f"{who}: {method} {path} refused but shows a capture's title")
    elif (
        allowed
        and response.status_code in (401, 403)
        or (allowed and "/accounts/login/" in response.headers.get("location", ""))
    ):
        over.append(f"{who}: {method} {path} -> {response.status_code}")


def _access_data(http: Http, base: str) -> dict[str, Any]:
    """Captures to aim at (one to revoke), a retry chain, a live ingest capture, a session."""
    mark = "access-mark-" + secrets.token_hex(4)
    token = {"X-Inspector-Token": TOKEN}
    stream = sse([{"choices": [{"index": 0, "delta": {"content": mark}, "finish_reason": "stop"}]}])
    slug = http("POST", f"/api/captures?title={mark}", content=stream, headers=token).json()["slug"]
    old = http("POST", f"/api/captures?title={mark}", content=stream, headers=token).json()["slug"]
    chat = {
        "model": "ok-tool-call",
        "stream": True,
        "messages": [{"role": "user", "content": mark}],
    }
    proxied = http(
        "POST",
        "/proxy/fake/v1/chat/completions",
        json=chat,
        headers={**token, "X-Inspector-Group": "chain-a"},
    )
    live = http("POST", "/api/ingest", json={"title": mark}, headers=token).json()["slug"]
    session, csrf = http.login()
    rotated = http(
        "POST",
        f"/c/{old}/rotate/",
        headers={"X-CSRFToken": csrf},
        cookies={"sessionid": session, "csrftoken": csrf},
    )
    assert rotated is not None and rotated.status_code == 303, rotated
    assert proxied is not None and proxied.status_code == 200, proxied
    return {
        "mark": mark,
        "fill": {"slug": slug, "chain": "chain-a"},
        "old": old,
        "live": live,
        "session": session,
        "csrf": csrf,
    }


def _logged_out_session(base: str) -> tuple[str, str]:
    other = Http(base)
    session, csrf = other.login()
    cookies = {"sessionid": session, "csrftoken": csrf}
    out = other("POST", "/accounts/logout/", headers={"X-CSRFToken": csrf}, cookies=cookies)
    assert out is not None and out.status_code in (200, 302), out
    other.close()
    return session, csrf


def _revoked_link(http: Http, data: dict[str, Any], routes, leaks, statuses) -> int:
    """The rotated slug: every capture route, anonymous and as staff, must be a 404."""
    tried = 0
    staff = {"sessionid": data["session"], "csrftoken": data["csrf"]}
    for template, _ in routes:
        if "{slug}" not in template:
            continue
        path = template.format(slug=data["old"], chain="chain-a")
        for cookies in ({}, staff):
            for method in ("GET", "POST"):
                headers = (
                    {"X-CSRFToken": data["csrf"], "X-Inspector-Token": TOKEN} if cookies else {}
                )
                response = http(method, path, cookies=cookies, headers=headers)
                tried += 1
                if response is None:
                    continue
                statuses[response.status_code] += 1
                if response.status_code != 404 and not _refused(response):
                    leaks.append(f"revoked link: {method} {path} -> {response.status_code}")
    return tried


def _socket_matrix(base: str, data: dict[str, Any], gone: tuple[str, str], leaks: list[str]) -> int:
    """Websocket handshakes that must be refused, and the one a share link may open."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    staff = f"sessionid={data['session']}; csrftoken={data['csrf']}"
    cases = [
        ("/ws/captures/", {}, "anonymous list"),
        ("/ws/captures/", {"Cookie": f"sessionid={gone[0]}"}, "logged-out session list"),
        ("/ws/captures/", {"Cookie": staff, "Origin": "http://evil.example"}, "cross-site list"),
        ("/ws/ingest/", {}, "anonymous ingest"),
        ("/ws/ingest/?token=wrong", {}, "wrong token ingest"),
        ("/ws/ingest/", {"X-Inspector-Token": "wrong"}, "wrong header token ingest"),
        ("/ws/ingest/", {"Cookie": staff, "Origin": "http://evil.example"}, "cross-site ingest"),
        ("/ws/ingest/", {"Cookie": f"sessionid={gone[0]}"}, "logged-out ingest"),
        (f"/ws/captures/{data['old']}/", {}, "revoked link live view"),
        (f"/ws/captures/{data['old']}/", {"Cookie": staff}, "revoked link live view (staff)"),
        ("/ws/other/", {"Cookie": staff}, "unknown socket"),
    ]
    for path, headers, what in cases:
        try:
            with connect(ws_url(base, path), additional_headers=headers, open_timeout=10) as ws:
                try:
                    message = ws.recv(timeout=3)
                except Exception:  # noqa: BLE001 - closed without a word: refused
                    continue
                if "ingest" in path:
                    ws.send(json.dumps({"open": {"title": "leak"}}))
                    message = ws.recv(timeout=3)
                if (
                    data["mark"] in str(message)
                    or '"opened"' in str(message)
                    or "snapshot" in str(message)
                ):
                    leaks.append(f"websocket {what}: {path} gave {str(message)[:160]!r}")
        except InvalidStatus:
            continue  # refused at the handshake
        except Exception:  # noqa: BLE001 - closed by the server
            continue
    # The share link's live view is open by design (sharing on): it must work.
    allowed = ws_messages(base, f"/ws/captures/{data['fill']['slug']}/", 2)
    if not allowed:
        leaks.append("control: the share link's live view gave nothing (the check cannot see)")
    return len(cases) + 1


def _revoked_token(http: Http, base: str, routes, data, leaks, statuses) -> int:
    """The server restarted with another token list: the old token opens nothing."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    tried = 0
    old = {"X-Inspector-Token": TOKEN, "Authorization": f"Bearer {TOKEN}"}
    for template, name in routes:
        if not template.startswith(("/api/", "/proxy/", "/guard/")):
            continue
        path = template.format(**data["fill"])
        for method in ("GET", "POST"):
            response = http(method, path, headers=old, **_probe_body(name, method))
            tried += 1
            if response is not None:
                statuses[response.status_code] += 1
                if not _refused(response):
                    leaks.append(f"revoked token: {method} {path} -> {response.status_code}")
    try:
        with connect(ws_url(base, f"/ws/ingest/?token={TOKEN}"), open_timeout=10) as ws:
            ws.send(json.dumps({"open": {"title": "leak"}}))
            leaks.append(f"revoked token: ingest websocket opened: {ws.recv(timeout=3)!r}")
    except (InvalidStatus, Exception):  # noqa: BLE001 - refused
        pass
    fresh = http("GET", "/api/captures", headers={"X-Inspector-Token": TOKEN_AFTER})
    if fresh is None or fresh.status_code != 200:
        leaks.append("control: the new token was refused (the check cannot see)")
    return tried + 2


# -- SSRF --------------------------------------------------------------------------------


def ssrf_tricks(internal: int) -> list[tuple[str, str, str, dict[str, str]]]:
    """(name, method, raw request target, extra headers): each sent as is (no client-side
    normalisation) to the proxy or guard; `rec` is the upstream whose base is /base/v1,
    `internal` a loopback port nothing may reach."""
    host = f"127.0.0.1:{internal}"
    p = "/proxy/rec/v1/"
    tricks = [
        ("dot segments", "GET", p + "../../stolen", {}),
        ("dot segments in the dialect route", "POST", "/proxy/rec/v1/chat/../../../stolen", {}),
        ("encoded dots", "GET", p + "%2e%2e/%2e%2e/stolen", {}),
        ("upper-case encoded dots", "GET", p + "%2E%2E/%2E%2E/stolen", {}),
        ("half-encoded dots", "GET", p + ".%2e/.%2e/stolen", {}),
        ("double-encoded dots", "GET", p + "%252e%252e/%252e%252e/stolen", {}),
        ("overlong UTF-8 dots", "GET", p + "%c0%ae%c0%ae/%c0%ae%c0%ae/stolen", {}),
        ("full-width dots", "GET", p + "%ef%bc%8e%ef%bc%8e/stolen", {}),
        ("%u dots", "GET", p + "%u002e%u002e/stolen", {}),
        ("encoded slash after dots", "GET", p + "..%2f..%2fstolen", {}),
        ("double-encoded slash", "GET", p + "..%252f..%252fstolen", {}),
        ("backslashes", "GET", p + "..\\..\\stolen", {}),
        ("encoded backslashes", "GET", p + "..%5c..%5cstolen", {}),
        ("encoded slashes", "GET", p + "a/%2f/b", {}),
        ("at-sign host", "GET", p + f"@{host}/stolen", {}),
        ("encoded at-sign host", "GET", p + f"%40{host}/stolen", {}),
        ("absolute URL in the path", "GET", p + f"http://{host}/stolen", {}),
        ("scheme-relative path", "GET", p + f"/{host}/stolen", {}),
        ("encoded scheme-relative path", "GET", p + f"%2f%2f{host}/stolen", {}),
        ("upstream name as URL", "GET", f"/proxy/http:%2f%2f{host}/v1/models", {}),
        ("upstream name as host:port", "GET", f"/proxy/{host}/v1/models", {}),
        ("upstream name as IPv6", "GET", f"/proxy/[::1]:{internal}/v1/models", {}),
        ("IPv6 in the path", "GET", p + f"@[::1]:{internal}/stolen", {}),
        ("upstream name climbing", "GET", f"/proxy/rec%2f..%2f..%2f{host}/v1/models", {}),
        ("absolute-form request target", "GET", f"http://{host}/proxy/rec/v1/models", {}),
        ("Host header", "GET", p + "models", {"Host": host}),
        ("X-Forwarded-Host", "GET", p + "models", {"X-Forwarded-Host": host}),
        ("CRLF in the path", "GET", p + f"models%0d%0aHost:%20{host}", {}),
        ("NUL then host", "GET", p + f"models%00@{host}", {}),
        ("query holding a host", "GET", p + f"models?x=@{host}&url=http://{host}/", {}),
        (
            "Gemini model climbing",
            "POST",
            "/proxy/rec/v1beta/models/..%2f..%2fstolen:streamGenerateContent",
            {},
        ),
        (
            "Gemini model with a host",
            "POST",
            f"/proxy/rec/v1beta/models/x@{host}:generateContent",
            {},
        ),
        ("upstream redirect (GET)", "GET", p + "redirect", {}),
        ("upstream redirect 307 (GET)", "GET", p + "redirect-307", {}),
        ("upstream redirect (chat)", "POST", p + "chat/completions", {"X-Body": "redirect"}),
        (
            "upstream redirect (guard)",
            "POST",
            "/guard/rec/v1/chat/completions",
            {"X-Body": "redirect"},
        ),
        ("upstream redirect (messages)", "POST", p + "messages", {"X-Body": "redirect"}),
        ("PUT passed through", "PUT", p + "../stolen", {}),
        ("DELETE passed through", "DELETE", p + "%2e%2e/stolen", {}),
    ]
    return tricks


def _raw_request(base: str, method: str, target: str, headers: dict[str, str]):
    """Send the request target byte for byte (httpx would normalise it)."""
    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    body = b""
    if "X-Body" in headers:
        model = headers.pop("X-Body")
        body = json.dumps({"model": model, "stream": True, "messages": []}).encode()
        headers["Content-Type"] = "application/json"
    try:
        connection.putrequest(method, target, skip_host="Host" in headers)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read()[:300]
    except TimeoutError:
        return "hang", b""
    finally:
        connection.close()


def ssrf_category(site: Site, args: argparse.Namespace) -> dict[str, Any]:
    rec, internal = site.rec, site.internal
    results, reached, statuses, server_errors, hangs = [], [], Counter(), [], []
    with site.server("ssrf") as (base, _):
        control = _raw_request(base, "GET", "/proxy/rec/v1/models", {})
        for name, method, target, headers in ssrf_tricks(internal.port):
            before_rec, before_internal = len(rec.seen), len(internal.seen)
            status, body = _raw_request(base, method, target, dict(headers))
            time.sleep(0.05)
            statuses[status] += 1
            if status == "hang":
                hangs.append(f"{method} {target}")
            elif status >= 500 and status not in (502, 504):
                server_errors.append(f"{method} {target}: {status} {body!r}")
            escaped = [
                s["path"] for s in rec.seen[before_rec:] if not _inside_base(s["path"], rec.port, s)
            ]
            hit = internal.seen[before_internal:]
            if hit or escaped:
                reached.append(f"{name}: {method} {target} -> internal {hit}, escaped {escaped}")
            results.append(
                {
                    "trick": name,
                    "method": method,
                    "target": target,
                    "status": status,
                    "upstream_paths": [s["path"] for s in rec.seen[before_rec:]],
                }
            )
    return {
        "tricks_tried": len(results),
        "reached": len(reached),
        "reaches": reached,
        "control_reached_upstream": bool(control[0] == 200 and rec.seen),
        "statuses": {str(k): v for k, v in statuses.items()},
        "tricks": results,
        "server_errors": server_errors,
        "hangs": hangs,
        "requests": len(results) + 1,
    }


def _inside_base(path: str, port: int, seen: dict[str, Any]) -> bool:
    """The upstream got a request below its base /base/v1/, without a dot segment however
    encoded, for its own host (a path that merely holds another host's name stays on it)."""
    from urllib.parse import unquote

    decoded = path.split("?")[0]
    for _ in range(3):
        decoded = unquote(decoded)
    host = {k.lower(): v for k, v in seen["headers"].items()}.get("host", "")
    segments = decoded.replace("\\", "/").split("/")
    return (
        decoded.startswith("/base/v1")
        and ".." not in segments
        and host in (f"127.0.0.1:{port}", "")
    )


# -- hostile input -----------------------------------------------------------------------


class Answer:
    """What tests/hardening/hardening_fuzz.py's `check` reads of an answer."""

    def __init__(self, response: httpx.Response) -> None:
        self.status_code = response.status_code
        self.content = response.content


class OverHttp:
    """The Django test client's `post`, as `hardening_fuzz.check` calls it, sent over HTTP
    to the real server (the upload form with its CSRF token, as a browser sends it)."""

    def __init__(self, http: Http, csrf: str) -> None:
        self.http, self.csrf = http, csrf

    def post(self, path: str, data: Any = None, content_type: str | None = None) -> Answer:
        if content_type is not None:
            response = self.http("POST", path, content=data, headers={"Content-Type": content_type})
        else:
            files = {k: (v.name, v.read()) for k, v in data.items() if hasattr(v, "read")}
            fields = {k: v for k, v in data.items() if k not in files}
            cookies = {}
            if path.startswith("/upload/"):
                fields["csrfmiddlewaretoken"], cookies = self.csrf, {"csrftoken": self.csrf}
            response = self.http("POST", path, data=fields, files=files or None, cookies=cookies)
        if response is None:
            raise NoAnswer(path)
        return Answer(response)

    def get(self, path: str) -> Answer:
        response = self.http("GET", path)
        if response is None:
            raise NoAnswer(path)
        return Answer(response)


class NoAnswer(Exception):
    pass


def hostile_category(site: Site, args: argparse.Namespace) -> dict[str, Any]:
    import warnings

    from hardening_fuzz import Upload, check, uploads
    from hypothesis import HealthCheck, Phase, given, seed, settings

    warnings.filterwarnings("ignore", "The recursion limit will not be reset")
    by_status, by_kind, broken = Counter(), Counter(), []
    with site.server("hostile") as (base, _):
        http = Http(base, timeout=args.hang_seconds)
        csrf = http("GET", "/upload/").cookies["csrftoken"]
        client = OverHttp(http, csrf)

        @settings(
            max_examples=args.fuzz_cases,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(upload=uploads())
        def run(upload: Upload) -> None:
            try:
                status = check(client, upload)
            except NoAnswer:
                status = "no answer"
            except AssertionError as error:
                status = "property broken"
                broken.append(f"{upload.kind} via {upload.via}: {str(error)[:300]}")
            by_status[str(status)] += 1
            by_kind[upload.kind] += 1

        started = time.monotonic()
        seed(args.seed)(run)()
        fuzz_seconds = time.monotonic() - started
        extra = _hostile_extras(http, base)
        still_live = wait_none_live()
        figures = {
            "fuzz_cases": sum(by_status.values()),
            "fuzz_seconds": round(fuzz_seconds, 1),
            "fuzz_by_status": dict(sorted(by_status.items())),
            "fuzz_by_kind": dict(sorted(by_kind.items())),
            "fuzz_property_broken": broken,
            "extra_cases": extra["tried"],
            "extra_by_status": extra["statuses"],
            "tried": sum(by_status.values()) + extra["tried"],
            "captures_left_live": still_live,
            "server_errors": http.server_errors,
            "hangs": http.hangs,
            "requests": http.requests,
        }
    return figures


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _hostile_extras(http: Http, base: str) -> dict[str, Any]:
    """NUL bytes in paths and queries, oversized bodies, deep nesting on every intake,
    bad paging and ids, malformed ingest and proxy requests."""
    from test_hardening_small_ones import NUL_PATHS, NUL_QUERIES

    statuses: Counter = Counter()
    slug = http("POST", "/api/captures", content=sse([{"choices": []}])).json()["slug"]
    big = b"data: " + b"x" * (21 * 1024 * 1024) + b"\n\n"
    deep = (
        f'data: {{"choices":[{{"index":0,"delta":{{"content":{_nested(100_000)}}}}}]}}\n\n'.encode()
    )
    cases: list[tuple[str, str, dict[str, Any]]] = []
    cases += [(m, quote(p, safe="/?=&"), {}) for m, p in NUL_PATHS]
    cases += [("GET", quote(p, safe="/?=&%"), {}) for p in NUL_QUERIES]
    cases += [
        ("POST", "/api/captures", {"content": big}),
        ("POST", "/api/captures", {"files": {"file": ("big.sse", big)}}),
        ("POST", "/api/captures", {"content": deep}),
        ("POST", "/api/captures?format=jsonl", {"content": deep[6:]}),
        ("POST", "/api/captures?format=har", {"content": ('{"log":' * 50_000).encode()}),
        ("POST", "/api/captures", {"content": b"\x00" * 100_000}),
        ("POST", "/api/ingest", {"content": _nested(100_000).encode()}),
        ("POST", "/api/ingest", {"content": b"[]"}),
        ("POST", "/api/ingest", {"content": b"1e99999"}),
        (
            "POST",
            "/api/ingest",
            {"json": {"format": "bogus", "dialect": "bogus", "title": "x" * 100_000}},
        ),
        ("POST", "/proxy/fake/v1/chat/completions", {"content": _nested(100_000).encode()}),
        ("POST", "/proxy/fake/v1/chat/completions", {"content": b"{not json"}),
        ("POST", "/proxy/fake/v1/chat/completions", {"content": b"[]"}),
        (
            "POST",
            "/proxy/fake/v1/chat/completions",
            {"json": {"model": "x" * 100_000, "stream": True}},
        ),
        ("POST", "/guard/fake/v1/chat/completions", {"content": b"\xff\xfe\x00"}),
        ("POST", "/proxy/fake/v1/messages", {"json": {"model": None, "stream": "yes"}}),
        ("POST", "/proxy/fake/v1beta/models/" + "g" * 200 + ":streamGenerateContent", {}),
        ("POST", "/proxy/fake/v1/responses", {"content": big}),
    ]
    for query in (
        "page=-1",
        "page=99999999999999999999",
        "page=abc",
        "per_page=0",
        "per_page=-5",
        "per_page=99999999999",
        "page=1e9",
        "outcome=%ff",
        "q=" + "%" * 50,
    ):
        cases += [("GET", f"/?{query}", {}), ("GET", f"/api/captures?{query}", {})]
        cases += [("GET", f"/api/captures/{slug}/lenses?{query}", {})]
    cases += [
        ("GET", f"/c/{slug}/frames/99999999999999999999999/", {}),
        ("GET", f"/c/{slug}/frames/{2**63}/", {}),
        ("GET", "/c/" + "s" * 10_000 + "/", {}),
        ("GET", "/api/attempts/" + "g" * 10_000, {}),
        ("GET", "/compare/?a=&b=", {}),
        ("GET", f"/compare/?a={slug}", {}),
        ("GET", f"/compare/?a={slug}&b={slug}&a=x", {}),
        ("GET", f"/c/{slug}/regression.{'x' * 5000}", {}),
        ("GET", f"/c/{slug}/minimize/{'j' * 10_000}", {}),
        ("POST", f"/api/ingest/{slug}/append", {"content": b"data: {}\n\n"}),
        ("POST", f"/api/ingest/{slug}/close", {}),
        ("GET", "/", {"headers": {f"X-H{n}": "v" * 100 for n in range(90)}}),
    ]
    for method, path, kwargs in cases:
        response = http(method, path, **kwargs)
        statuses[response.status_code if response is not None else "no answer"] += 1
        if path == "/api/ingest" and response is not None and response.status_code == 201:
            http("POST", urlsplit(response.json()["close_url"]).path)  # opened: closed again
    statuses.update(_hostile_ingest(http, base))
    return {"tried": sum(statuses.values()), "statuses": {str(k): v for k, v in statuses.items()}}


def _hostile_ingest(http: Http, base: str) -> Counter:
    """Ingest: appends past the total limit, a websocket fed garbage and too much; unknown
    websocket paths."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    out: Counter = Counter()
    opened = http("POST", "/api/ingest", json={"format": "sse"}).json()
    piece = b"data: " + b"y" * (8 * 1024 * 1024) + b"\n\n"
    for _ in range(3):
        response = http("POST", urlsplit(opened["append_url"]).path, content=piece)
        out[response.status_code if response is not None else "no answer"] += 1
    http("POST", urlsplit(opened["close_url"]).path)
    messages = [
        b"binary before open",
        "{",
        '{"open": 5}',
        '{"open": {"format": "bogus"}}',
        json.dumps({"open": {"title": _nested(5000)}}),
        '{"open": {}}',
        b"\x00\xff" * 1000,
        '{"close": "maybe"}',
        '{"close": true}',
        '{"close": true}',
    ]
    for message in messages:
        try:
            with connect(ws_url(base, "/ws/ingest/"), open_timeout=10, max_size=None) as ws:
                ws.send(message)
                ws.recv(timeout=5)
                out["websocket answered"] += 1
        except TimeoutError:
            out["websocket: no answer (hang?)"] += 1
            http.hangs.append(f"websocket ingest message {str(message)[:60]!r}")
        except Exception:  # noqa: BLE001 - closed by the server: a refusal
            out["websocket closed"] += 1
    for path in ("/ws/no-such-socket/", "/ws/captures/a/b/", "/ws/"):
        try:
            with connect(ws_url(base, path), open_timeout=10) as ws:
                out[f"websocket {path}: accepted"] += 1
        except InvalidStatus as error:
            status = error.response.status_code
            out[f"websocket {path}: {status}"] += 1
            if status >= 500:
                http.server_errors.append(f"websocket handshake {path}: {status}")
        except Exception as error:  # noqa: BLE001 - refused otherwise
            out[f"websocket {path}: {type(error).__name__}"] += 1
    try:
        with connect(ws_url(base, "/ws/ingest/"), open_timeout=10, max_size=None) as ws:
            ws.send(json.dumps({"open": {"format": "sse"}}))
            ws.recv(timeout=10)
            for _ in range(3):
                ws.send(piece)
            out["websocket oversized: " + str(ws.recv(timeout=30))[:60]] += 1
    except Exception as error:  # noqa: BLE001 - closed 1009, as the README says
        out[f"websocket oversized: {type(error).__name__}"] += 1
    return out


# -- load --------------------------------------------------------------------------------


def load_category(site: Site, args: argparse.Namespace) -> dict[str, Any]:
    """bench/load.py's round, on this site (its captures are checked with the rest)."""
    import load as load_bench

    scenario = (site.scenarios / "load.sse").read_bytes()
    settings = argparse.Namespace(
        uploads=args.load_uploads,
        streams=args.load_streams,
        min_frames=50,
        max_frames=500,
        timeout=args.load_timeout,
    )
    rounds = []
    with site.server("load") as (base, proc):
        for number in range(args.load_rounds):
            rounds.append(load_bench.load_round(base, proc.pid, number + 1, settings, scenario))
    statuses = Counter()
    for figures in rounds:
        statuses.update(figures["upload_statuses"])
    errors = sum(v for k, v in statuses.items() if not k.isdigit() or int(k) >= 500)
    return {
        "uploads": sum(r["uploads"] for r in rounds),
        "streams": sum(r["streams"] for r in rounds),
        "upload_statuses": dict(statuses),
        "frames_expected": sum(r["frames_expected"] for r in rounds),
        "frames_lost": sum(r["frames_lost"] for r in rounds),
        "captures_live": sum(r["captures_live"] for r in rounds),
        "captures_half_stored": sum(r["captures_half_stored"] for r in rounds),
        "held": all(not r["problems"] for r in rounds),
        "problems": [p for r in rounds for p in r["problems"]],
        "rounds": rounds,
        "server_errors": [f"{errors} uploads answered 5xx or not at all"] if errors else [],
        "hangs": [],
        "requests": sum(r["uploads"] + r["streams"] for r in rounds),
    }


# -- crash -------------------------------------------------------------------------------


def crash_category(site: Site, args: argparse.Namespace) -> dict[str, Any]:
    """tests/hardening/test_hardening_crash_under_upload.py's run: a big upload, a proxied
    stream and a websocket ingest; kill -9; restart as the README does (recover_live
    --force, then daphne): every frame the clients had received or sent more than a second
    before the kill is stored, and no capture is left live."""
    import signal

    import test_hardening_crash_under_upload as C  # noqa: N812

    from inspector.captures import models

    data = b"".join(C.chunk(f"u{n} ") for n in range(C.UPLOAD_FRAMES)) + b"data: [DONE]\n\n"
    got, sent, proxy_slug, ingest_slug, stop = [], [], [], [], threading.Event()
    with site.server("crash", INSPECTOR_MAX_UPLOAD_BYTES=C.UPLOAD_LIMIT) as (base, proc):
        uploader = threading.Thread(target=C.upload, args=(base, data), daemon=True)
        uploader.start()
        time.sleep(C.UPLOAD_HEAD_START_S)
        threads = [
            threading.Thread(target=C.read_proxied, args=(base, got, proxy_slug)),
            threading.Thread(target=C.ingest, args=(base, sent, ingest_slug, stop)),
        ]
        for thread in threads:
            thread.start()
        time.sleep(C.RUN_S)
        killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        stop.set()
        for thread in (*threads, uploader):
            thread.join(timeout=30)
    due = killed_at - C.DURABLE_WITHIN_S
    live_before = models.Capture.objects.filter(outcome="live").count()
    upload_live = models.Capture.objects.filter(title="big-upload", outcome="live").exists()
    site.manage("recover_live", "--force")
    pages = Counter()
    with site.server("after-crash") as (base, _):
        http = Http(base)
        for slug in proxy_slug + ingest_slug:
            response = http("GET", f"/c/{slug}/")
            pages[response.status_code if response is not None else "no answer"] += 1
    proxied_due = sum(1 for t in got if t < due)
    sent_due = sum(1 for t in sent if t < due)
    proxy_stored = C.stored(proxy_slug[0]) if proxy_slug else 0
    ingest_stored = C.stored(ingest_slug[0]) if ingest_slug else 0
    lost = max(0, proxied_due - proxy_stored) + max(0, sent_due - ingest_stored)
    live_after = models.Capture.objects.filter(outcome="live").count()
    half = _half_stored()
    return {
        "kills": 1,
        "upload_in_progress_at_kill": upload_live,
        "proxy_frames_received": len(got),
        "proxy_frames_due": proxied_due,
        "proxy_frames_stored": proxy_stored,
        "ingest_frames_sent": len(sent),
        "ingest_frames_due": sent_due,
        "ingest_frames_stored": ingest_stored,
        "frames_lost": lost,
        "captures_live_before_recovery": live_before,
        "captures_live_after_recovery": live_after,
        "captures_half_stored_after_recovery": len(half),
        "half_stored": half[:10],
        "recovered_pages": dict(pages),
        "survived": lost == 0 and live_after == 0 and not half and set(pages) == {200},
        "server_errors": http.server_errors,
        "hangs": http.hangs,
        "requests": http.requests,
    }


def _half_stored() -> list[tuple[str, int, int, int]]:
    """(slug, frame_count, frame rows, assemblies) of every capture not stored whole
    (counted per table: a join of frames and assemblies is slow on a 150,000-frame one)."""
    from django.db.models import Count

    from inspector.captures.models import Assembly, Capture, Frame

    def per_capture(model: Any) -> dict[int, int]:
        rows = model.objects.values("capture_id").annotate(n=Count("id"))
        return {row["capture_id"]: row["n"] for row in rows}

    frames, assemblies = per_capture(Frame), per_capture(Assembly)
    return [
        (slug, count, frames.get(pk, 0), assemblies.get(pk, 0))
        for pk, slug, count in Capture.objects.values_list("id", "slug", "frame_count")
        if frames.get(pk, 0) != count or assemblies.get(pk, 0) != 2
    ]


# -- the run -----------------------------------------------------------------------------

# Logged at ERROR by design: the upstream's failure relayed as 502 (proxy, guard), and
# Django's own line for a body over DATA_UPLOAD_MAX_MEMORY_SIZE (answered 413).
EXPECTED_ERRORS = ("ERROR django.request: Bad Gateway:", "ERROR django.security.RequestDataTooBig")

RUNNERS = {
    "secrets": secrets_category,
    "xss": xss_category,
    "access": access_category,
    "ssrf": ssrf_category,
    "hostile": hostile_category,
    "load": load_category,
    "crash": crash_category,
}


def summary_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(category, what was tried, the figure whose goal is 0)."""
    c = report["categories"]
    rows = []
    if "secrets" in c:
        s = c["secrets"]
        rows.append(
            (
                "secrets",
                f"{s['intake_requests']} intake requests, {s['answers_searched']} answers + "
                f"DB + log + {s['upstream_requests_searched']} upstream requests searched",
                f"canaries found: {s['canaries_found']}",
            )
        )
    if "xss" in c:
        x = c["xss"]
        rows.append(
            (
                "xss",
                f"{x['payloads']} payloads in {x['captures_with_payloads']} captures; "
                f"{x['pages_checked']} pages, {x['websocket_messages_checked']} live messages",
                f"unescaped found: {x['unescaped_found']}",
            )
        )
    if "access" in c:
        a = c["access"]
        rows.append(
            (
                "access",
                f"{a['routes']} routes, {a['requests']} requests, "
                f"{a['websocket_handshakes']} websocket handshakes",
                f"leaks: {a['leaks']}",
            )
        )
    if "ssrf" in c:
        rows.append(
            ("ssrf", f"{c['ssrf']['tricks_tried']} tricks", f"reached: {c['ssrf']['reached']}")
        )
    if "hostile" in c:
        h = c["hostile"]
        rows.append(
            (
                "hostile",
                f"{h['tried']} bad inputs ({h['fuzz_cases']} fuzz cases)",
                f"5xx: {len(h['server_errors'])}, hangs: {len(h['hangs'])}, "
                f"property broken: {len(h['fuzz_property_broken'])}",
            )
        )
    if "load" in c:
        lo = c["load"]
        rows.append(
            (
                "load",
                f"{len(lo['rounds'])} rounds of {lo['rounds'][0]['uploads']} uploads + "
                f"{lo['rounds'][0]['streams']} streams at once, "
                f"{lo['frames_expected']} frames",
                f"frames lost: {lo['frames_lost']}, "
                f"5xx: {len(lo['server_errors'])}, held: {'yes' if lo['held'] else 'NO'}",
            )
        )
    if "crash" in c:
        k = c["crash"]
        rows.append(
            (
                "crash",
                f"kill -9 mid-upload + mid-stream; "
                f"{k['proxy_frames_due'] + k['ingest_frames_due']} frames due",
                f"frames lost: {k['frames_lost']}, live after recovery: "
                f"{k['captures_live_after_recovery']}, half-stored: "
                f"{k['captures_half_stored_after_recovery']}",
            )
        )
    t = report["totals"]
    rows.append(
        (
            "all",
            f"{t['requests']} requests",
            f"5xx: {t['server_errors']}, hangs: {t['hangs']}, "
            f"ERROR lines in server logs: {t['log_errors']}",
        )
    )
    return rows


def print_summary(report: dict[str, Any]) -> None:
    rows = summary_rows(report)
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    print()
    environment = report["environment"]
    print(
        f"attack run on {environment['database']} + {environment['channel_layer']}"
        f" ({report['seconds']} s)"
    )
    line = "  ".join("-" * w for w in widths)
    print(line)
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="", help="a scratch database (default: SQLite)")
    parser.add_argument("--redis-url", default="", help="channel layer (default: in-memory)")
    parser.add_argument("--reset-database", action="store_true", help="drop and recreate it first")
    parser.add_argument("--only", default=",".join(CATEGORIES), help="categories (default: all)")
    parser.add_argument("--fuzz-cases", type=int, default=2000, help="hostile uploads (2000)")
    parser.add_argument("--seed", type=int, default=12, help="hypothesis seed (12)")
    parser.add_argument("--hang-seconds", type=float, default=30, help="no answer by then: a hang")
    parser.add_argument("--load-uploads", type=int, default=50, help="concurrent uploads (50)")
    parser.add_argument("--load-streams", type=int, default=10, help="concurrent proxied streams")
    parser.add_argument("--load-rounds", type=int, default=2, help="load rounds (2)")
    parser.add_argument("--load-frames", type=int, default=300, help="frames per proxied stream")
    parser.add_argument("--load-pace-ms", type=float, default=2, help="pause between its frames")
    parser.add_argument("--load-timeout", type=float, default=180, help="seconds per load round")
    args = parser.parse_args()
    chosen = [c for c in CATEGORIES if c in args.only.split(",")]

    started = time.monotonic()
    site = prepare(args)
    from django.db import connection

    report: dict[str, Any] = {"categories": {}, "failures": {}}
    try:
        for category in chosen:
            print(f"== {category}", flush=True)
            t0 = time.monotonic()
            try:
                figures = RUNNERS[category](site, args)
            except Exception as error:  # noqa: BLE001 - the run goes on; reported
                import traceback

                report["failures"][category] = traceback.format_exc()
                print(f"   {category} could not run: {type(error).__name__}: {error}", flush=True)
                continue
            figures["seconds"] = round(time.monotonic() - t0, 1)
            report["categories"][category] = figures
            bad = {
                k: v
                for k, v in figures.items()
                if k in ("canaries_found", "unescaped_found", "leaks", "reached", "frames_lost")
                and v
            }
            print(f"   done in {figures['seconds']} s {bad or ''}", flush=True)
    finally:
        site.fake.stop()
        site.rec.stop()
        site.internal.stop()
    tracebacks = [
        f"{log.name}: {line[:200]}"
        for log in site.logs
        for line in log.read_text(errors="replace").splitlines()
        if (" ERROR " in line or "Internal Server Error" in line)
        and not any(expected in line for expected in EXPECTED_ERRORS)
    ]
    figures = report["categories"].values()
    report["totals"] = {
        "requests": sum(f.get("requests", 0) for f in figures),
        "server_errors": sum(len(f.get("server_errors", [])) for f in figures),
        "hangs": sum(len(f.get("hangs", [])) for f in figures),
        "log_errors": len(tracebacks),
        "log_error_lines": tracebacks[:50],
    }
    report["seconds"] = round(time.monotonic() - started, 1)
    report["settings"] = vars(args) | {"database_url": site.database_url.split("@")[-1]}
    report["environment"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "database": connection.vendor,
        "channel_layer": "redis" if args.redis_url else "in-memory",
        "server_logs": [str(log) for log in site.logs],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print_summary(report)
    for category, figures in report["categories"].items():
        for key in (
            "found",
            "unescaped",
            "leaked",
            "reaches",
            "fuzz_property_broken",
            "problems",
            "server_errors",
            "hangs",
        ):
            for item in figures.get(key, [])[:10]:
                print(f"  {category} {key}: {str(item)[:400]}")
    for category, trace in report["failures"].items():
        print(f"  {category} FAILED to run:\n{trace}")
    print(f"figures: {RESULTS.relative_to(ROOT)}")
    zero = ("canaries_found", "unescaped_found", "leaks", "reached", "frames_lost")
    clean = (
        not report["failures"]
        and not any(f.get(k) for f in report["categories"].values() for k in zero)
        and not report["totals"]["server_errors"]
        and not report["totals"]["hangs"]
    )
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
