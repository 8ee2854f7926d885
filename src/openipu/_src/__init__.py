"""openipu implementation. Nothing here is public API: the public modules re-export from it."""
