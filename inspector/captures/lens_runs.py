"""What a lens made of a capture, stored once (`LensRun`, one row per capture
and lens): computed at the first request (`lens_cache.py`) and served from
here until the lens's library version changes.

Kept apart from `models.py` (which imports it, so Django finds the model):
its foreign key names the capture as "captures.Capture", so this file
imports nothing of the other models.
"""

from __future__ import annotations

from django.db import models


class LensRun(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"  # asked for, queued or running
        DONE = "done"
        TOO_LARGE = "too_large"  # more frames than INSPECTOR_LENS_MAX_FRAMES: never run
        FAILED = "failed"  # the lens process died or went over its memory limit
        TIMEOUT = "timeout"  # stopped after INSPECTOR_LENS_SECONDS
        # Stopped because nobody asked for it in INSPECTOR_LENS_ABANDON_SECONDS: no
        # result; the next request for it starts it again.
        ABANDONED = "abandoned"

    capture = models.ForeignKey(
        "captures.Capture", on_delete=models.CASCADE, related_name="lens_runs"
    )
    lens = models.CharField(max_length=32)  # the key in inspector.lenses.LENSES
    library = models.CharField(max_length=200, blank=True)
    version = models.CharField(max_length=200)  # the lens's version it was computed with
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    detail = models.TextField(blank=True)  # why too large, failed or stopped
    available = models.BooleanField(default=True)
    error = models.TextField(blank=True)  # what the library would raise
    call_count = models.IntegerField(default=0)
    divergence_count = models.IntegerField(default=0)
    result_json = models.TextField(blank=True)  # LensResult.to_dict()
    divergences_json = models.TextField(blank=True)  # its divergences from strict
    frames = models.IntegerField(null=True, blank=True)
    # The last request for it: set when claimed, and renewed by every page view or API
    # request while it is pending (the run stops when this grows old, lens_cache.py).
    requested = models.DateTimeField()
    started = models.DateTimeField(null=True, blank=True)  # claimed by a worker
    finished = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)  # the run, in its process
    wall_seconds = models.FloatField(null=True, blank=True)  # with the process around it
    peak_memory_kb = models.IntegerField(null=True, blank=True)

    # What is kept as the answer (ABANDONED is not: it is run again when asked for).
    FINAL = (Status.DONE, Status.TOO_LARGE, Status.FAILED, Status.TIMEOUT)

    class Meta:
        app_label = "captures"
        constraints = [models.UniqueConstraint(fields=["capture", "lens"], name="lens_run_unique")]

    def __str__(self) -> str:
        return f"{self.lens} of capture {self.capture_id}: {self.status}"
