"""Storage: a capture is one stored stream; its frames are kept as received;
each assembly (one per policy) keeps the result and its calls, and the strict
assembly keeps every argument fragment with the scanner's state after it, so
pages render argument evolution without re-running anything.

Nothing here is SQLite-only: the same models and queries run on PostgreSQL.
"""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models import OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.urls import reverse

from inspector.assembly import LENIENT, STRICT
from inspector.assembly.jsontext import dumps

from .dialects import DIALECT_LABELS
from .records import CaptureSummary, RefusalRecord


class JsonText(models.TextField):
    """A TextField of UTF-8 JSON text that SQLite may hold as a BLOB: a large
    value is written through incremental blob I/O (`blob_io.py`), which
    stores bytes.  Read back, it is text on every database."""

    def from_db_value(self, value: object, expression: object, connection: object) -> object:
        if isinstance(value, (bytes, memoryview)):
            return bytes(value).decode("utf-8")
        return value


def document_head(policy: str) -> str:
    """How a result document's text begins: `Result.to_dict` makes the
    policy its first key (`{"policy":"strict"`)."""
    return dumps({"policy": policy})[:-1].decode()


def twin_document(strict: str, policy: str) -> str:
    """The strict result document's text under `policy`'s name: what a twin
    (strict's very result, `assembly.lenient_twin`) would store."""
    head = document_head(STRICT)
    if not strict.startswith(head):
        raise ValueError("a strict result's text begins with its policy")
    return document_head(policy) + strict[len(head) :]


def capture_path(slug: str) -> str:
    """The capture page's path, for a slug known without its row."""
    return reverse("capture", args=[slug])


def new_slug() -> str:
    """128 random bits, URL-safe: the capture's unguessable link."""
    return secrets.token_urlsafe(16)


class Capture(models.Model):
    class Source(models.TextChoices):
        UPLOAD = "upload"
        PROXY = "proxy"
        INGEST = "ingest"

    class Outcome(models.TextChoices):
        OK = "ok"
        REFUSED = "refused"
        LIVE = "live"  # still being captured

    slug = models.CharField(max_length=32, unique=True, default=new_slug, editable=False)
    title = models.CharField(max_length=200, blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.UPLOAD)
    # sse, jsonl, json-array, har or json (a whole body): what was received
    input_format = models.CharField(max_length=16)
    stream_format = models.CharField(max_length=16)  # sse, jsonl or json-array: how `raw` reads
    # chat, responses, messages or gemini: the wire format the strict assembly
    # read; `dialect_basis` says why (`dialects.py`: chosen, url,
    # frames, assumed; blank for captures stored before dialects were recorded).
    dialect = models.CharField(max_length=16, default="chat", db_index=True)
    dialect_basis = models.CharField(max_length=16, blank=True)
    # Captures made from one upload (a HAR with several streams) share its `har_upload`.
    har_upload = models.CharField(max_length=32, blank=True, db_index=True)
    har_entry = models.IntegerField(null=True, blank=True)
    source_url = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True, db_index=True)
    provider = models.CharField(max_length=100, blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    # When the recorded request started, as the recording says (a HAR entry's
    # startedDateTime); None when it does not say.
    started_at = models.DateTimeField(null=True, blank=True)
    byte_size = models.BigIntegerField(default=0)
    frame_count = models.IntegerField(default=0)
    outcome = models.CharField(max_length=8, choices=Outcome.choices, db_index=True)
    refusal_code = models.CharField(max_length=32, blank=True, db_index=True)
    lenient_outcome = models.CharField(max_length=8, blank=True)
    # Live capture (proxy, ingest): the request that was sent, secrets removed;
    # the upstream's name and HTTP status (also a HAR entry's response status);
    # retries of one logical request share their `retry_chain` and are numbered
    # by `attempt` from 1 (`live/attempts.py`).
    request_json = models.TextField(blank=True)
    # What of the request was forwarded but not stored as personal data
    # (INSPECTOR_DROP_FIELDS), names only: "body.user", "query.code".
    not_stored = models.JSONField(default=list, blank=True)
    upstream = models.CharField(max_length=100, blank=True)
    http_status = models.IntegerField(null=True, blank=True)
    retry_chain = models.CharField(max_length=64, blank=True, db_index=True)
    attempt = models.IntegerField(null=True, blank=True)
    retryable = models.BooleanField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    # Closed by recovery: the process recording it stopped before the stream
    # ended, so it holds only the frames stored until then.
    interrupted = models.BooleanField(default=False)
    # Opened by HTTP ingest: any process may take its appends (its bytes are
    # kept as IngestChunks while it is live); the ingest websocket's are not.
    http_ingest = models.BooleanField(default=False)
    # A capture made from another one (the minimizer's smallest failing stream).
    derived_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="derivatives"
    )
    derivation = models.CharField(max_length=200, blank=True)  # e.g. "minimized: keeps X"
    # The stream's bytes exactly as received.  The table's last column: SQLite
    # leaves a zeroblob unwritten only at the end of a row (`blob_io.py`).
    raw = models.BinaryField()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["retry_chain", "attempt"],
                condition=models.Q(attempt__isnull=False),
                name="retry_chain_attempt_unique",
            )
        ]

    # The columns its summary reads (`summary()`): never `raw`.
    SUMMARY_FIELDS = (
        "id",
        *CaptureSummary.__annotations__,
    )
    # What the capture page reads: everything but the raw bytes and the request.
    PAGE_FIELDS = (
        *SUMMARY_FIELDS,
        "dialect_basis",
        "source_url",
        "retry_chain",
        "attempt",
        "retryable",
        "derived_from",
        "derivation",
    )

    def __str__(self) -> str:
        return self.title or self.slug

    def get_absolute_url(self) -> str:
        return capture_path(self.slug)

    @property
    def dialect_label(self) -> str:
        """The dialect as a sentence names it ("Anthropic Messages")."""
        return DIALECT_LABELS.get(self.dialect, self.dialect)

    def summary(self) -> CaptureSummary:
        """Its metadata as the API lists it (read with SUMMARY_FIELDS)."""
        return CaptureSummary(
            slug=self.slug,
            title=self.title,
            source=self.source,
            input_format=self.input_format,
            stream_format=self.stream_format,
            dialect=self.dialect,
            model=self.model,
            provider=self.provider,
            created=self.created.isoformat(),
            byte_size=self.byte_size,
            frame_count=self.frame_count,
            outcome=self.outcome,
            refusal_code=self.refusal_code,
            lenient_outcome=self.lenient_outcome,
            har_upload=self.har_upload,
            har_entry=self.har_entry,
            started_at=self.started_at.isoformat() if self.started_at else None,
            http_status=self.http_status,
            interrupted=self.interrupted,
            not_stored=self.not_stored,
        )

    @property
    def policies_disagree(self) -> bool:
        """Whether strict and lenient reached different verdicts (`verdicts_differ`).
        A row read `with_lenient_code` answers without a query."""
        if not self.lenient_outcome:  # not assembled yet
            return False
        code = self.__dict__.get("lenient_refusal_code")
        if code is None:
            lenient = self.assemblies.filter(policy=LENIENT).values_list("refusal_code", flat=True)
            code = lenient.first() or ""
        return verdicts_differ((self.outcome, self.refusal_code), (self.lenient_outcome, code))


def verdicts_differ(strict: tuple[str, str], lenient: tuple[str, str]) -> bool:
    """The one meaning of "the policies disagree": their (outcome, refusal
    code) differ.  Both refusing with different codes is a disagreement too:
    the lenient policy then went on past what strict refused and failed
    elsewhere, which is worth seeing on the list as on the page."""
    return strict != lenient


def with_lenient_code(rows: QuerySet[Capture]) -> QuerySet[Capture]:
    """Rows that also carry `lenient_refusal_code`, read in the same query."""
    code = Assembly.objects.filter(capture=OuterRef("pk"), policy=LENIENT).values("refusal_code")[
        :1
    ]
    return rows.annotate(lenient_refusal_code=Coalesce(Subquery(code), Value("")))


class Frame(models.Model):
    """One frame as received, with what the strict assembly did with it."""

    capture = models.ForeignKey(Capture, on_delete=models.CASCADE, related_name="frames")
    number = models.IntegerField()
    kind = models.CharField(max_length=8)
    raw = models.TextField()
    arrived_ms = models.FloatField(null=True, blank=True)
    # Positions (in the strict result's `calls`) of the calls this frame touched.
    calls = models.JSONField(default=list, blank=True)
    # Dropped-delta reasons and anomaly kinds recorded at this frame.
    marks = models.JSONField(default=list, blank=True)
    # What the strict assembly's events say the frame did, one compact item
    # each (`frame_did.py`): the frames table's parsed row.  Written when the
    # frame is stored; [] for frames stored before it was.
    did = models.JSONField(default=list, blank=True)
    # Whether it carried text or reasoning (the frames panel's text filter).
    has_text = models.BooleanField(default=False)

    class Meta:
        ordering = ["number"]
        constraints = [
            models.UniqueConstraint(fields=["capture", "number"], name="frame_number_unique")
        ]
        # The text filter's frames (`pages/frame_filter.py`), counted and paged
        # without reading the capture's other frames; only they are indexed.
        indexes = [
            models.Index(
                fields=["capture", "number"], condition=models.Q(has_text=True), name="frame_text"
            )
        ]

    def __str__(self) -> str:
        return f"frame {self.number} ({self.kind})"


class IngestChunk(models.Model):
    """One HTTP ingest append's bytes, kept while its capture is live.

    The bytes received so far are the chunks in `offset` order (their sum is
    `Capture.byte_size` while the capture is live), so any server process can
    rebuild a capture's assembler from the database and take its next append
    (`live/ingest.py`).  The chunks are deleted when the capture closes: its
    `raw` then holds the bytes."""

    capture = models.ForeignKey(Capture, on_delete=models.CASCADE, related_name="ingest_chunks")
    offset = models.BigIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["capture", "offset"], name="ingest_chunk_offset_unique")
        ]

    def __str__(self) -> str:
        return f"{len(self.data)} bytes at {self.offset}"


class Assembly(models.Model):
    """What one policy made of a capture."""

    capture = models.ForeignKey(Capture, on_delete=models.CASCADE, related_name="assemblies")
    policy = models.CharField(max_length=10)
    outcome = models.CharField(max_length=8)
    refusal_code = models.CharField(max_length=32, blank=True)
    refusal_message = models.TextField(blank=True)
    refusal_frame = models.IntegerField(null=True, blank=True)
    refusal_call = models.IntegerField(null=True, blank=True)
    refusal_choice = models.IntegerField(null=True, blank=True)
    refusal_retryable = models.BooleanField(null=True, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    usage = models.JSONField(null=True, blank=True)
    text = models.TextField(blank=True)
    # The strict assembly's timeline picture data (`timeline_data.summarize`);
    # null for the lenient one and for captures stored before timelines.
    timeline = models.JSONField(null=True, blank=True)
    # The result document exactly as `manage.py assemble` prints it (text, so
    # key order survives PostgreSQL's jsonb); NULL for a lenient twin, whose
    # document is strict's under its own policy's name (`twin_rows.copy_twin`):
    # read either with `document()`.  The table's last column: see `raw_last`
    # in tests and `blob_io.py`.
    result_json = JsonText(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["capture", "policy"], name="assembly_policy_unique")
        ]

    def __str__(self) -> str:
        return f"{self.capture_id} {self.policy}: {self.outcome}"

    @classmethod
    def document_of(cls, capture_id: int, policy: str) -> str | None:
        """The result document of the capture's `policy` assembly (`document`);
        None when it has none (a capture still live)."""
        assembly = (
            cls.objects.filter(capture_id=capture_id, policy=policy)
            .only("capture_id", "policy", "result_json")
            .first()
        )
        return assembly.document() if assembly is not None else None

    def document(self) -> str:
        """The result document's text: the row's own, or a twin's (none of
        its own): the strict assembly's under this one's policy."""
        if self.result_json is not None:
            return self.result_json
        strict = Assembly.objects.filter(capture_id=self.capture_id, policy=STRICT)
        return twin_document(strict.values_list("result_json", flat=True).get(), self.policy)

    # The columns `refusal_record` reads.
    REFUSAL_FIELDS = (
        "refusal_code",
        "refusal_message",
        "refusal_frame",
        "refusal_call",
        "refusal_choice",
        "refusal_retryable",
    )

    def refusal_record(self) -> RefusalRecord | None:
        """The refusal as the result document writes it, from its columns."""
        if not self.refusal_code:
            return None
        return RefusalRecord(
            code=self.refusal_code,
            message=self.refusal_message,
            frame=self.refusal_frame,
            call=self.refusal_call,
            choice=self.refusal_choice,
            retryable=self.refusal_retryable,
        )


class Call(models.Model):
    """One assembled tool call, and how its identity evolved."""

    assembly = models.ForeignKey(Assembly, on_delete=models.CASCADE, related_name="calls")
    position = models.IntegerField()
    choice = models.IntegerField(default=0)
    # "" until it arrives: an empty id or name never counts as one.
    call_id = models.TextField(blank=True)
    name = models.TextField(blank=True)
    index = models.IntegerField(null=True, blank=True)
    started_frame = models.IntegerField(null=True, blank=True)
    settled_frame = models.IntegerField(null=True, blank=True)
    invalid_at = models.JSONField(null=True, blank=True)
    arguments = models.JSONField(null=True, blank=True)
    arguments_text = models.TextField(blank=True)
    fragment_count = models.IntegerField(default=0)
    # function, custom, builtin or server (`inspector.assembly.result.KINDS`).
    kind = models.CharField(max_length=10, default="function")
    # Responses: the item's id; Anthropic: the content block index (`call_forms.py`).
    item_id = models.TextField(blank=True)
    block = models.IntegerField(null=True, blank=True)
    # What the fragments are: json text, free text, or Gemini path pieces.
    argument_form = models.CharField(max_length=8, default="json")
    # [{"frame", "event", "field", "value"}]: identity established, ignored,
    # conflicting, index changes, guesses - in the order they happened.
    timeline = models.JSONField(default=list, blank=True)
    # A lenient twin's copy of strict's call (`twin_rows.copy_twin`): left out of the
    # search's indexes, which strict's row already puts its capture in.
    twin_copy = models.BooleanField(default=False)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["assembly", "position"], name="call_position_unique")
        ]

    def __str__(self) -> str:
        return f"call {self.position} {self.name or '?'}"

    @property
    def fragments(self) -> QuerySet[Fragment]:
        """A strict call's argument fragments (kept by capture and position:
        see `Fragment`); none for another policy's call."""
        assembly = self.assembly
        if assembly.policy != STRICT:
            return Fragment.objects.none()
        return Fragment.objects.filter(capture_id=assembly.capture_id, position=self.position)


class Fragment(models.Model):
    """One non-empty argument fragment of a strict call, with the scanner's
    state after it.

    Keyed by its capture and the call's position in the strict result, not
    by the Call row: a live recording writes a started call's fragments with
    the frames that bring them (a started call's position is final), long
    before the close writes the Call rows (`captures/fragment_rows.py`)."""

    # No index of its own: the unique (capture, position, seq) leads with it.
    capture = models.ForeignKey(
        Capture, on_delete=models.CASCADE, related_name="fragments", db_index=False
    )
    position = models.IntegerField()  # the strict call's (`Call.position`)
    seq = models.IntegerField()
    frame = models.IntegerField()
    offset = models.IntegerField()
    text = models.TextField()
    depth = models.IntegerField()
    in_string = models.BooleanField()
    complete = models.BooleanField()  # the root object has closed by the end of it
    invalid_from = models.IntegerField(null=True, blank=True)  # offset, once seen
    # Gemini path pieces: the arguments object after this piece, compact JSON.
    state = models.TextField(blank=True)

    class Meta:
        ordering = ["position", "seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["capture", "position", "seq"], name="fragment_position_seq_unique"
            )
        ]
        indexes = [
            models.Index(fields=["capture", "position", "frame"], name="fragment_position_frame")
        ]

    def __str__(self) -> str:
        return f"fragment {self.seq} of call {self.position} @ frame {self.frame}"


# Its own file; imported here so Django finds the model.
from .lens_runs import LensRun  # noqa: E402, F401
