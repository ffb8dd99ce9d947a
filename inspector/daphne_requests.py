"""daphne's HTTP requests without Twisted's form parsing.

Twisted's `http.Request` parses every `multipart/form-data` POST body for its
own `request.args` before daphne sees the request: it reads the whole body
into memory and hands it to the `email` package, which copies it again per
part.  daphne never reads `request.args` (it passes the body on to Django,
whose parser streams the file to disk), so for the upload form that work was
only memory: 5x the upload's size on top of what storing it takes
(bench/upload_memory.py, mode `form`).  Twisted has a switch for this,
`parsePOSTFormSubmission`; daphne builds its requests from the module name
`daphne.http_protocol.WebRequest` each time a connection starts, so
`inspector/asgi.py` puts a request class that turns it off there first.
"""

from __future__ import annotations

from typing import Any

from daphne import http_protocol


class WebRequestWithoutFormParsing(http_protocol.WebRequest):
    """daphne's request, with Twisted's form parsing off."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)


def install_unparsed_form_bodies() -> None:
    """Make daphne build `WebRequestWithoutFormParsing` requests (call before
    it serves: from the ASGI module)."""
    http_protocol.WebRequest = WebRequestWithoutFormParsing


__all__ = ["WebRequestWithoutFormParsing", "install_unparsed_form_bodies"]
