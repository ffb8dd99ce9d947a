"""The minimizer: the smallest stream that still fails the same way, and its
export as a regression test in the shape of the conformance cases.

Pure (no Django): `ddmin`, `stream`, `lens` and `export`.  Stored captures
are minimized and exported by `inspector/captures/minimizing.py`.
"""

from .ddmin import DDProgress, DDStats, ddmin
from .export import regression_case, to_sse
from .stream import (
    Minimized,
    NothingToMinimize,
    NotRefused,
    PassReport,
    Predicate,
    Progress,
    TargetNotMet,
    minimize,
    refusal_signature,
    same_refusal,
)

__all__ = [
    "DDProgress",
    "DDStats",
    "Minimized",
    "NotRefused",
    "NothingToMinimize",
    "PassReport",
    "Predicate",
    "Progress",
    "TargetNotMet",
    "ddmin",
    "minimize",
    "refusal_signature",
    "regression_case",
    "same_refusal",
    "to_sse",
]
