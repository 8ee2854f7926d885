"""The first IPU Keras API (tensorflow2-support.txt): Model, Sequential, PipelineModel, PipelineSequential."""
