"""`tensorflow.python.ipu.ipu_infeed_queue`."""

from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.feeds.infeed_iterator import IPUIterator, IPUOwnedIterator

__all__ = ["IPUInfeedQueue", "IPUIterator", "IPUOwnedIterator"]
