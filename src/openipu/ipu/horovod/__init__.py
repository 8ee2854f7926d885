"""`tensorflow.python.ipu.horovod`: the deprecated home of the distributed API.

Kept for older programs: the names of `ipu.distributed`, plus Horovod's
`size()` and `rank()` (instances, not replicas).
"""

from openipu._src.distributed.host_collectives import world_rank as rank
from openipu._src.distributed.host_collectives import world_size as size
from openipu.ipu.distributed import *  # noqa: F403 - the same names
from openipu.ipu.distributed import __all__ as _distributed_names

__all__ = [*_distributed_names, "rank", "size"]
