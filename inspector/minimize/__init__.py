"""The minimizer: the smallest stream that still fails the same way, and its
export as a regression test in the shape of the conformance cases.

Pure (no Django): `ddmin`, `signature`, `stream`, `lens` and `export`.
Stored captures are minimized and exported by `inspector/captures/minimizing.py`.
"""

from .ddmin import DDProgress, DDStats, ddmin
from .export import regression_case, to_sse
from .faults import FAULT_CLASSES, Fault
from .progress import Progress, ProgressCallback
from .signature import FailureSignature, failure_signature
from .stream import (
    Minimized,
    NothingToMinimize,
    NotRefused,
    PassReport,
    Predicate,
    TargetNotMet,
    minimize,
    refusal_signature,
    same_failure,
    same_refusal,
)

__all__ = [
    "DDProgress",
    "DDStats",
    "FAULT_CLASSES",
    "FailureSignature",
    "Fault",
    "Minimized",
    "NotRefused",
    "NothingToMinimize",
    "PassReport",
    "Predicate",
    "Progress",
    "ProgressCallback",
    "TargetNotMet",
    "ddmin",
    "failure_signature",
    "minimize",
    "refusal_signature",
    "regression_case",
    "same_failure",
    "same_refusal",
    "to_sse",
]
