"""Conformance suite for graphcore/ipu_tensorflow_addons (manifest: `originals.txt` here).

The `follows` mark is registered by the parent folder's conftest.
"""
