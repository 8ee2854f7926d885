"""`tensorflow.python.ipu.ipu_outfeed_queue`."""

from openipu._src.feeds.outfeed import IPUOutfeedMode, IPUOutfeedQueue

__all__ = ["IPUOutfeedMode", "IPUOutfeedQueue"]
