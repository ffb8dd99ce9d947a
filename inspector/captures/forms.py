"""The upload form and the capture list's filters."""

from __future__ import annotations

from django import forms
from django.db.models import QuerySet

from inspector.assembly import AUTO, HAR, JSONL, REFUSAL_CODES, SSE

from .intake import max_upload_bytes
from .models import Capture

# The error code of a file over the limit: the page answers it with 413.
TOO_LARGE = "too_large"

FORMAT_CHOICES = [
    (AUTO, "Detect (by file name, else by the first bytes)"),
    (SSE, "SSE (text/event-stream)"),
    (JSONL, "JSON Lines"),
    (HAR, "HAR (browser or proxy recording)"),
]


class UploadForm(forms.Form):
    """A stream to store: a file or pasted text, exactly one of them."""

    file = forms.FileField(required=False, label="File")
    text = forms.CharField(
        required=False,
        strip=False,  # the stream is stored exactly as received
        label="or paste the stream",
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "class": "mono"}),
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, initial=AUTO)
    title = forms.CharField(required=False, max_length=200)

    def clean_file(self):
        upload = self.cleaned_data.get("file")
        if upload is not None and upload.size > max_upload_bytes():
            raise forms.ValidationError(
                f"The file is {upload.size} bytes; the limit is {max_upload_bytes()}.",
                code=TOO_LARGE,
            )
        return upload

    def clean(self):
        data = super().clean()
        has_file = data.get("file") is not None
        has_text = bool(data.get("text"))
        if has_file and has_text:
            raise forms.ValidationError("Upload a file or paste text, not both.")
        if not has_file and not has_text and not self.errors:
            raise forms.ValidationError("Choose a file or paste a stream.")
        return data

    def payload(self) -> tuple[bytes, str | None]:
        """The bytes to store and the file name (None for pasted text)."""
        upload = self.cleaned_data.get("file")
        if upload is not None:
            return upload.read(), upload.name
        return self.cleaned_data["text"].encode("utf-8"), None


class CaptureFilterForm(forms.Form):
    """The capture list's filters; every field is optional."""

    outcome = forms.ChoiceField(
        required=False, choices=[("", "any outcome"), *Capture.Outcome.choices]
    )
    refusal = forms.ChoiceField(
        required=False,
        choices=[("", "any refusal")] + [(code, code) for code in REFUSAL_CODES],
    )
    model = forms.CharField(required=False, max_length=200)
    q = forms.CharField(required=False, max_length=200, label="Title contains")
    group = forms.CharField(required=False, max_length=32, widget=forms.HiddenInput)

    def filter(self, queryset: QuerySet[Capture]) -> QuerySet[Capture]:
        """The captures that pass the filters; none when a filter is invalid
        (never all of them, as if it had been applied)."""
        if not self.is_valid():
            return queryset.none()
        data = self.cleaned_data
        if data["outcome"]:
            queryset = queryset.filter(outcome=data["outcome"])
        if data["refusal"]:
            queryset = queryset.filter(refusal_code=data["refusal"])
        if data["model"]:
            queryset = queryset.filter(model=data["model"])
        if data["q"]:
            queryset = queryset.filter(title__icontains=data["q"])
        if data["group"]:
            queryset = queryset.filter(group=data["group"])
        return queryset
