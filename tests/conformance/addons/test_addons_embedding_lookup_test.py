"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/embedding_lookup_test.py`.

The addons' `Embedding` layer, called in a `tf.function` with `inputs_are_sorted`, gives
`tf.nn.embedding_lookup`'s results (batch sizes 1 and 2, a big table, serialized, sorted
ids); a table of rank 3 is rejected with the original's message; the config round-trips.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from ipu_tensorflow_addons.keras import layers


def _lookup(params, ids, indices_are_sorted=False, name=None, serialization_factor=1):
    layer = layers.Embedding(
        input_dim=params.shape[0],
        output_dim=params.shape[1],
        embeddings_initializer=keras.initializers.constant(params),
        name=name,
        serialization_factor=serialization_factor,
    )
    layer.build(input_shape=ids.shape)

    @tf.function
    def impl(ids, inputs_are_sorted):
        return layer(inputs=ids, inputs_are_sorted=inputs_are_sorted)

    return impl(ids, indices_are_sorted)


SMALL = np.array([[10], [20], [80], [40]])


@pytest.mark.follows("testEmbeddingLookup")
def test_embedding_lookup():
    ids = tf.constant([[1, 2, 3]])
    np.testing.assert_allclose(
        _lookup(SMALL, ids, name="emb_test_0"), tf.nn.embedding_lookup(SMALL, ids)
    )


@pytest.mark.follows("testEmbeddingLookupBatchSize2")
def test_embedding_lookup_batch_size2():
    ids = tf.constant([[1, 2, 3], [3, 4, 5]])
    params = np.array([[10], [20], [80], [40], [50], [60]])
    np.testing.assert_allclose(
        _lookup(params, ids, name="emb_test_1"), tf.nn.embedding_lookup(params, ids)
    )


@pytest.mark.follows("testEmbeddingLookupBigGather")
def test_embedding_lookup_big_gather():
    ids = np.arange(0, 8, dtype=np.int32).reshape([1, 8])
    params = np.arange(2400000, dtype=np.float32).reshape([12000, 200])
    result = _lookup(params, ids, name="emb_test_2")
    np.testing.assert_allclose(result, np.take(params, ids, axis=0))
    assert result.shape == (1, 8, 200)


@pytest.mark.follows("testEmbeddingBadInputShape")
def test_embedding_bad_input_shape():
    ids = np.arange(0, 16, dtype=np.int32)
    params = np.arange(25600, dtype=np.float32).reshape([32, 200, 4])
    with pytest.raises(ValueError, match=r"The input shape should be a"):
        _lookup(params, ids, name="emb_test_4")


@pytest.mark.follows("testEmbeddingLookupSerialization")
def test_embedding_lookup_serialization():
    ids = tf.constant([[1, 2, 3]])
    result = _lookup(SMALL, ids, name="emb_test_5", serialization_factor=4)
    np.testing.assert_allclose(result, tf.nn.embedding_lookup(SMALL, ids))


@pytest.mark.follows("testEmbeddingLookupSortedIds")
def test_embedding_lookup_sorted_ids():
    ids = tf.constant([[1, 2, 3]])
    result = _lookup(SMALL, ids, indices_are_sorted=True, name="emb_test_6")
    np.testing.assert_allclose(result, tf.nn.embedding_lookup(SMALL, ids))


@pytest.mark.follows("testGetConfig")
def test_get_config():
    config = layers.Embedding(input_dim=32, output_dim=200).get_config()
    assert layers.Embedding.from_config(config).get_config() == config
