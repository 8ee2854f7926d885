"""PopART sessions: InferenceSession, TrainingSession, step IOs, weight IOs and the files sessions write."""

from openipu._src.popart.session.inference_session import InferenceSession
from openipu._src.popart.session.stepio import PyStepIO, PyStepIOCallback
from openipu._src.popart.session.training_session import TrainingSession
from openipu._src.popart.session.weights_io import PyWeightsIO

__all__ = ["InferenceSession", "PyStepIO", "PyStepIOCallback", "PyWeightsIO", "TrainingSession"]
