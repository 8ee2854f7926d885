"""Pipelining: `pipelining_ops` (stages on several IPUs, gradient accumulation)."""
