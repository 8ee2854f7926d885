"""`tensorflow.compiler.plugin`: the original's IPU compiler plugin (re-exports only)."""
