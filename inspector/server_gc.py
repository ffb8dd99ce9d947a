"""The cyclic GC of a long-lived server process: daphne's, and its recording
process's (`manage.py record_relays`).

Everything loaded when such a process starts lives as long as it does:
`gc.freeze()` takes it out of the collector's way (inspector/asgi.py).  What
a live stream keeps after that (its assembler's calls and fragments, its
rows' stamps, templates compiled on first use) is still traversed by every
full collection: 15-21 ms each, about every 2 s at 5,000 frames/s, with
nothing to collect (`gc.callbacks`, bench/README.md, issue 13's sixteenth
stop).  Each held every frame behind it.  So full collections are made rare:
the young generations are collected as Python's defaults say, and a full
collection waits for FULL_AFTER collections of the middle one instead of 10
(still only once the objects promoted since the last one are a quarter of
those it kept, as always).
"""

from __future__ import annotations

import gc

FULL_AFTER = 1000  # collections of generation 1 between two full collections (Python's: 10)


def make_full_collections_rare() -> None:
    """This process's full collections: after FULL_AFTER collections of the
    middle generation.  Python 3.14's incremental collector has no such
    third threshold (it ignores it): there this changes nothing."""
    young, middle, *_ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_AFTER)
