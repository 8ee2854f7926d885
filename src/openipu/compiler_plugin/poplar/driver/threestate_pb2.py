"""`tensorflow.compiler.plugin.poplar.driver.threestate_pb2`: the classes, enums and enum values
of the original's threestate.proto (re-exports only)."""

from openipu._src.config import ipu_options_proto, ipu_options_schema

globals().update(ipu_options_proto.public_names(ipu_options_schema.THREESTATE_FILE))
