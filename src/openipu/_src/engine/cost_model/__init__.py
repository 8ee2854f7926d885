"""The cost model of the real chip: memory, cycles and out-of-memory for compiled programs."""
