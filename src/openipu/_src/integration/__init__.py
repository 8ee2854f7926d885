"""Every change openipu makes to TensorFlow/Keras internals, in one place.

A *patch* replaces an attribute of a TensorFlow or Keras module or class (or gives
one a new attribute). Each patch is a `patching.Patch` record, declared in the
module of its family here, saying what it replaces, why, and for which
TensorFlow/Keras versions it was checked; `patching.apply`/`undo`/`applied`
install it. `registry.all_patches()` lists them all, and
`tests/integration/test_patches.py` fails when an upgrade moves a patched name.
Private TensorFlow/Keras attributes openipu reads go through
`keras_internals.py`, checked the same way.

This package is a leaf: it imports TensorFlow/Keras only, never openipu's engine
or front ends, which pass their handlers in when they install a patch. This
`__init__` and `patching` import nothing heavy, so the start-up hook can use them.
"""
