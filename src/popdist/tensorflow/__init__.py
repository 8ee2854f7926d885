"""`popdist.tensorflow`: configuring an instance's IPUs from `poprun`'s environment."""

from openipu._src.distributed.popdist_tensorflow import set_ipu_config

__all__ = ["set_ipu_config"]
