"""Building many objects at once: a configuration of 100,000 entries, a million rows.

Python's cyclic collector runs every few hundred allocations and, in its older
generations, walks every object made so far: while a large configuration is converted
or a large table loaded, it walks the objects already built again and again (more time
than the building itself). None of what is built in bulk here is part of a cycle, so
reference counting frees it all; the collector is paused for the block.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block (as it was before, after it); nests."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
