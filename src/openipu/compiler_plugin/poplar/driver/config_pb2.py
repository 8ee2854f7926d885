"""`tensorflow.compiler.plugin.poplar.driver.config_pb2`: the classes, enums and enum values
of the original's config.proto (re-exports only)."""

from openipu._src.config import ipu_options_proto, ipu_options_schema

globals().update(ipu_options_proto.public_names(ipu_options_schema.CONFIG_FILE))
