"""IPU optimizer wrappers and gradient accumulation (spec 21.16)."""
