"""`auto_pipeline.utils`: model profiles and profiling (re-exports only)."""
