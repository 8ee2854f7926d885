"""`tensorflow.compiler.plugin.poplar.driver.option_flag_pb2`: the classes, enums and enum values
of the original's option_flag.proto (re-exports only)."""

from openipu._src.config import ipu_options_proto, ipu_options_schema

globals().update(ipu_options_proto.public_names(ipu_options_schema.OPTION_FLAG_FILE))
