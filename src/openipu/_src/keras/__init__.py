"""Keras on the IPU: extensions, layers (one per file) and the first Keras API."""
