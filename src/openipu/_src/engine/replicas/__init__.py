"""The engine's replication: R replicas of a compiled program (see `lockstep`)."""
