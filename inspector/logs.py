"""No secret in a log line: query values redacted wherever the server prints.

Clients put keys in query strings (`?key=` for Gemini, `?api-key=` for Azure,
`?sig=` for signed URLs, `?token=` for the ingest socket) and personal data
too (`?code=`, `?state=`).  Two writers print request paths:

* loggers (the app's, Django's, daphne's own): every handler the settings
  configure carries `RedactQueryValues`;
* daphne's access log, which is not a logger: its CLI builds an
  `AccessLogGenerator` after it has imported the ASGI application, so
  `inspector/asgi.py` swaps in `RedactingAccessLog` first.  However daphne
  is started (`make run`, the README's multi-process recipe, a systemd unit),
  its access log lines come through here.
"""

from __future__ import annotations

import logging

from daphne.access import AccessLogGenerator

from inspector.live.redact import redact_query_values


class RedactQueryValues(logging.Filter):
    """Rewrites a record's message (and traceback) with secret and personal
    query values replaced; never drops a record."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_query_values(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_query_values(record.exc_text)
        return True


class RedactingAccessLog(AccessLogGenerator):
    """daphne's NCSA-style access log, the request's query values redacted."""

    def write_entry(self, host, date, request, *args, **kwargs) -> None:  # noqa: ANN001
        super().write_entry(host, date, redact_query_values(request), *args, **kwargs)


def install_daphne_access_log() -> None:
    """Make daphne's CLI build its access log from `RedactingAccessLog`
    (call before the CLI builds its server: from the ASGI module)."""
    try:
        import daphne.cli
    except ImportError:  # pragma: no cover - daphne is a dependency
        return
    daphne.cli.AccessLogGenerator = RedactingAccessLog
