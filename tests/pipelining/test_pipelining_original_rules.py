"""Pipelining rules as the original has them (audit F2, F6, F7)."""

from __future__ import annotations

import pytest
import tensorflow as tf

from openipu._src.pipelining import pipeline_options, pipelining_ops


def _stage(x):
    return x


@pytest.mark.parametrize("falsy", [None, [], 0, ""])
def test_falsy_stage_options_mean_no_options(falsy):  # F6
    options = pipelining_ops.PipelineStageOptions(
        convolution_options=falsy, matmul_options={"availableMemoryProportion": "0.2"}
    )
    assert options.convolution_options == {}
    assert options.get_proto()["matmul_options"] == {"availableMemoryProportion": "0.2"}
    with pytest.raises(
        TypeError, match=r"^PipelineStageOptions.slice_options must be dictionary.$"
    ):
        pipelining_ops.PipelineStageOptions(slice_options=["x"])


@pytest.mark.parametrize("name", ["infeed_queue", "outfeed_queue"])
def test_non_queue_messages_are_the_originals(name):  # F2
    with pytest.raises(TypeError, match=f"^{name} is not an instance of ipu_"):
        pipelining_ops.pipeline(
            [_stage, _stage], gradient_accumulation_count=4, **{name: tf.data.Dataset.range(2)}
        )


def test_keras_pipelining_kwargs_accept_name():  # F7
    checked = pipeline_options.check_keras_pipelining_kwargs({"name": "my_pipeline"})
    assert checked == {"name": "my_pipeline"}
    with pytest.raises(TypeError, match="unexpected keyword argument 'reduction_method'"):
        pipeline_options.check_keras_pipelining_kwargs({"reduction_method": "sum"})
