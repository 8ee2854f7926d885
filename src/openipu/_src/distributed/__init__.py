"""Training across processes and hosts: PopDist, `poprun` and the multi-worker strategies.

Processes ("instances") talk through TensorFlow's multi-worker collectives
(`CollectiveAllReduceExtended`, gRPC, the cluster of `TF_CONFIG`); `poprun`
starts the instances of one machine with the environment they need
(`environment`). See `collective_extended` for how replicas map to processes.
"""
