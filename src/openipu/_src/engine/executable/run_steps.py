"""A program's input saying how many steps of its loop a run runs.

The original's embedded runtime runs a loop that cannot stall step by step, as its
calls' elements arrive (kernels/application_runtime/application_runtime.cc: the infeed
callback waits for data, a call ends with its step's outfeed). An executable here runs
its steps as one program, so a loop that cannot stall takes the number of steps to run
as its last input (all by default): a run given fewer elements runs only theirs.
A loop carrying values from step to step does not (its next run would restart them).
"""

#: The name of that input in the program's graph.
NAME = "openipu_run_steps"
#: The executable metadata's key saying the program has it.
METADATA_KEY = "run_steps_input"
#: The executable metadata's key saying its loop can stall (a pipeline: it runs all its
#: steps, on dummy data when its calls do not come in time).
CAN_STALL_KEY = "can_stall"
#: The executable metadata's key giving the streamed elements each step reads (when not 1):
#: a run takes `iterations` times as many, and gives `iterations` outfeed elements.
READS_PER_STEP_KEY = "reads_per_step"
