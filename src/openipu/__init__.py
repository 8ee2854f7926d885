"""openipu: the IPU programming stack (TensorFlow `ipu`, Keras on the IPU, PopART) on emulated IPUs.

Programs do not need to import this package: after installation the original
module paths (`tensorflow.python.ipu`, `popart`, `ipu_tensorflow_addons`,
`popdist`, `tf.keras.ipu`) resolve by themselves. Importing it explicitly
installs the same module aliases, which matters only when the start-up hook
is turned off (`OPENIPU_DISABLE_STARTUP_HOOK=1`).

The implementation lives in `openipu._src`; the public modules only re-export.
"""

import _openipu_startup

_openipu_startup.activate()

__version__ = "0.1.0"
