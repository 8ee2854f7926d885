"""`tensorflow.compiler.plugin.poplar` (re-exports only)."""
