"""IPU operators, one family per module, named as the original's `ipu.ops` modules."""
