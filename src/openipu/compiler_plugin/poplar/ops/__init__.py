"""`tensorflow.compiler.plugin.poplar.ops`: the original's generated op modules (re-exports only)."""
