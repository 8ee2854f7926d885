"""The IPU methods of Keras models built in an IPUStrategy scope (the later Keras API)."""
