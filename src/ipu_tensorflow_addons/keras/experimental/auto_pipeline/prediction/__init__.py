"""`auto_pipeline.prediction`: partition search (re-exports only)."""
