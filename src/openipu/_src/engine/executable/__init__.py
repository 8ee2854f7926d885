"""Executables: compiled programs written to a file, loaded and run without compiling again.

An executable is a program's `CompiledProgram` record (the engine's compile decisions),
its streams' signature (what one call takes and gives) and its computation as a frozen
TensorFlow graph (`program_graph`), in one file (`executable_file`). The embedded
runtime and serving run them, PopART sessions export them, and the executable cache
(`cache`) keeps them between processes.
"""
