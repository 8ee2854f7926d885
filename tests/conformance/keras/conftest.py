"""Conformance suite for graphcore/keras `keras/ipu/` (manifest: `originals.txt` here).

The `follows` mark is registered by the parent folder's conftest.
"""
