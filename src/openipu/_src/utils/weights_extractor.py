"""`ipu.utils.export_variables_from_live_*` and `import_data_in_live_*`.

The original's tensorflow/compiler/plugin/poplar/tools/tensorflow_weights_extractor.py:
a session exports (and imports) all its graph's global variables, a Keras model its own
variables, read in the Keras backend session (in TF1 graph mode) or eagerly; the file
format is in `weights_file.py`. With `output_folder`, the updated session is saved with a
TF1 `Saver` checkpoint, the model as a SavedModel, as the original does.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from openipu._src.utils import weights_file


def _session_variables(session: Any) -> list[tf.Variable]:
    with session.graph.as_default():
        return list(tf.compat.v1.global_variables())


def _model_session() -> Any:
    """The Keras backend session in TF1 graph mode; None when variables are eager."""
    if tf.executing_eagerly():
        return None
    return tf.compat.v1.keras.backend.get_session()


def export_variables_from_live_session(
    session: Any, output_file: Any, gc_metadata: Any = None
) -> None:
    """Writes the values of all the global variables of `session`'s graph to `output_file`."""
    weights_file.export_variables(_session_variables(session), session, output_file, gc_metadata)


def export_variables_from_live_model(model: Any, output_file: Any, gc_metadata: Any = None) -> None:
    """Writes the values of the variables of the Keras `model` to `output_file`."""
    weights_file.export_variables(model.variables, _model_session(), output_file, gc_metadata)


def import_data_in_live_session(session: Any, data_files: Any, output_folder: Any = None) -> None:
    """Sets the variables of `session`'s graph that `data_files` hold values for."""
    weights_file.import_values(
        _session_variables(session), session, weights_file.read_values(data_files)
    )
    if output_folder:
        with session.graph.as_default():
            tf.compat.v1.train.Saver().save(session, output_folder)


def import_data_in_live_model(model: Any, data_files: Any, output_folder: Any = None) -> None:
    """Sets the variables of the Keras `model` that `data_files` hold values for."""
    values = weights_file.read_values(data_files)
    weights_file.import_values(model.variables, _model_session(), values)
    if output_folder:
        tf.saved_model.save(model, output_folder)
