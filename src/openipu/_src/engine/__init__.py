"""The execution engine: compiled regions and the device loop every front end runs on."""
