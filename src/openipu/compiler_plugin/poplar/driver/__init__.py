"""`tensorflow.compiler.plugin.poplar.driver`: the backend's protobuf modules (re-exports only)."""
