"""The `openipu` command: `openipu info` and `openipu demo`."""
