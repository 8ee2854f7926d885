"""`tensorflow.python.ipu.ipu_infeed_queue`."""

from openipu._src.feeds.infeed import IPUInfeedQueue

__all__ = ["IPUInfeedQueue"]
