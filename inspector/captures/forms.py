"""The forms every intake and list shares: one upload form for the upload
page and `POST /api/captures`, one filter form for the capture list page and
`GET /api/captures`.  What a request may hold is decided here once; the
page and the API differ only in how they say it (a page, or JSON)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import QuerySet

from inspector.assembly import AUTO, AUTO_DIALECT, FORMATS, HAR, JSONL, REFUSAL_CODES, SSE

from . import search
from .dialects import DIALECT_CHOICES, DIALECT_LABELS
from .models import Capture
from .uploads import TooLarge, check_size

# The error code of an input over the limit: the page and the API answer it with 413.
TOO_LARGE = "too_large"

FORMAT_CHOICES = [
    (AUTO, "Detect (by file name, else by the first bytes)"),
    (SSE, "SSE (text/event-stream)"),
    (JSONL, "JSON Lines"),
    (HAR, "HAR (browser or proxy recording)"),
]
UNKNOWN_FORMAT = f"unknown format %(value)r: use {', '.join((AUTO, *FORMATS))}"
UNKNOWN_DIALECT = f"unknown dialect %(value)r: use {', '.join(name for name, _ in DIALECT_CHOICES)}"


def first_error(form: forms.Form) -> str:
    """The form's first error as one line: "field: message", or the message
    when it is about the whole form."""
    for name, errors in form.errors.items():
        for message in errors:
            return message if name == "__all__" else f"{name}: {message}"
    return ""


class UploadForm(forms.Form):
    """A stream to store: a file, pasted text or (the API) the request body;
    exactly one of them, within the upload size policy (`uploads.py`)."""

    nothing_message = "Choose a file or paste a stream."

    file = forms.FileField(required=False, label="File")
    text = forms.CharField(
        required=False,
        strip=False,  # the stream is stored exactly as received
        label="or paste the stream",
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "class": "mono"}),
    )
    format = forms.ChoiceField(
        choices=FORMAT_CHOICES, initial=AUTO, error_messages={"invalid_choice": UNKNOWN_FORMAT}
    )
    dialect = forms.ChoiceField(
        required=False,
        choices=DIALECT_CHOICES,
        initial=AUTO_DIALECT,
        help_text="The wire format of the stream; a HAR's request URL decides it when detecting.",
        error_messages={"invalid_choice": UNKNOWN_DIALECT},
    )
    title = forms.CharField(required=False, max_length=200)

    def __init__(self, *args: Any, body: bytes | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.body = body

    @staticmethod
    def _size_checked(size: int) -> None:
        try:
            check_size(size)
        except TooLarge as error:
            raise forms.ValidationError(str(error), code=TOO_LARGE) from None

    def clean_file(self):
        upload = self.cleaned_data.get("file")
        if upload is not None:
            self._size_checked(upload.size)
        return upload

    def clean_text(self):
        text = self.cleaned_data.get("text") or ""
        self._size_checked(len(text.encode("utf-8")))
        return text

    def clean(self):
        data = super().clean()
        given = [data.get("file") is not None, bool(data.get("text")), bool(self.body)]
        if sum(given) > 1:
            raise forms.ValidationError("Upload a file or paste text, not both.")
        if not any(given) and not self.errors:
            raise forms.ValidationError(self.nothing_message)
        return data

    def too_large(self) -> bool:
        return any(
            error.code == TOO_LARGE for errors in self.errors.as_data().values() for error in errors
        )

    def payload(self) -> tuple[bytes, str | None]:
        """The bytes to store and the file name (None for text or a body)."""
        upload = self.cleaned_data.get("file")
        if upload is not None:
            return upload.read(), upload.name or None
        if self.body:
            return self.body, None
        return self.cleaned_data["text"].encode("utf-8"), None


class ApiUploadForm(UploadForm):
    """The upload form as `POST /api/captures` fills it: the stream is the
    body, or the multipart field `file`."""

    nothing_message = (
        "the upload is empty: send the stream as the body or as the multipart field 'file'"
    )


class CaptureFilterForm(forms.Form):
    """The capture list's filters, for the page and the API; every field is
    optional.  The refusal code's parameter is `code`; `refusal` (its older
    name on the page) is read as `code` too, and `group` (the HAR upload's
    first name, which the API documents) as `har_upload`."""

    outcome = forms.ChoiceField(
        required=False, choices=[("", "any outcome"), *Capture.Outcome.choices]
    )
    code = forms.ChoiceField(
        required=False,
        label="Refusal",
        choices=[("", "any refusal")] + [(code, code) for code in REFUSAL_CODES],
    )
    dialect = forms.ChoiceField(
        required=False,
        choices=[("", "any dialect"), *DIALECT_LABELS.items()],
        error_messages={"invalid_choice": UNKNOWN_DIALECT},
    )
    source = forms.ChoiceField(
        required=False, choices=[("", "any source"), *Capture.Source.choices]
    )
    model = forms.CharField(required=False, max_length=200)  # a part of the model's name
    q = forms.CharField(required=False, max_length=200, label="Search")
    # A HAR upload's streams (`group` is read as `har_upload` too), a retry chain's attempts.
    har_upload = forms.CharField(required=False, max_length=32, widget=forms.HiddenInput)
    retry_chain = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)

    def __init__(self, data: Any = None, **kwargs: Any) -> None:
        super().__init__(_with_aliases(data), **kwargs)

    def filter(self, queryset: QuerySet[Capture]) -> QuerySet[Capture]:
        """The captures that pass the filters; none when a filter is invalid
        (never all of them, as if it had been applied)."""
        if not self.is_valid():
            return queryset.none()
        data = self.cleaned_data
        if data["outcome"]:
            queryset = queryset.filter(outcome=data["outcome"])
        if data["code"]:
            queryset = queryset.filter(refusal_code=data["code"])
        if data["dialect"]:
            queryset = queryset.filter(dialect=data["dialect"])
        if data["source"]:
            queryset = queryset.filter(source=data["source"])
        if data["model"]:  # a part of its name: `gpt-4o` finds `gpt-4o-mini` too
            queryset = queryset.filter(model__icontains=data["model"])
        if data["q"]:
            queryset = queryset.filter(search.matching(data["q"]))
        if data["har_upload"]:
            queryset = queryset.filter(har_upload=data["har_upload"])
        if data["retry_chain"]:
            queryset = queryset.filter(retry_chain=data["retry_chain"])
        return queryset


# Older or plainer names of the list filters, read as the field they name.
FILTER_ALIASES = {"refusal": "code", "group": "har_upload"}


def _with_aliases(data: Any) -> Any:
    if data is None or not any(data.get(alias) for alias in FILTER_ALIASES):
        return data
    data = data.copy()
    for alias, name in FILTER_ALIASES.items():
        if not data.get(name) and data.get(alias):
            data[name] = data[alias]
    return data
