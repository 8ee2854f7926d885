"""The `openipu` command: `openipu info`, `openipu demo` and `openipu report`."""
