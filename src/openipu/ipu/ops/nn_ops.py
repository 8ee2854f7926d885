"""`tensorflow.python.ipu.ops.nn_ops` (also `tensorflow.python.ipu.nn_ops`)."""

from openipu._src.ops.nn_ops import (  # noqa: F401  The original's helper, which tests import.
    _compute_sampled_logits,
    ctc_beam_search_decoder,
    ctc_beam_search_decoder_with_log_probs,
    ctc_loss_v2,
    ctc_loss_with_log_probs,
    gelu,
    hard_sigmoid,
    multi_conv,
    nce_loss,
    sampled_softmax_loss,
    softmax,
    swish,
)

__all__ = [
    "ctc_beam_search_decoder",
    "ctc_beam_search_decoder_with_log_probs",
    "ctc_loss_v2",
    "ctc_loss_with_log_probs",
    "gelu",
    "hard_sigmoid",
    "multi_conv",
    "nce_loss",
    "sampled_softmax_loss",
    "softmax",
    "swish",
]
