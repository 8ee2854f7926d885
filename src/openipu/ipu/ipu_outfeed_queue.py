"""`tensorflow.python.ipu.ipu_outfeed_queue`."""

from openipu._src.engine.outfeed_queue import (
    IPUOutfeedMode,
    IPUOutfeedQueue,
    IPUOutfeedQueueIterator,
    ScopedIPUOutfeedQueue,
)

__all__ = ["IPUOutfeedMode", "IPUOutfeedQueue", "IPUOutfeedQueueIterator", "ScopedIPUOutfeedQueue"]
