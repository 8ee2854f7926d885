"""The compiler interface (`ipu_compiler.compile`) and the scoping contexts of `ipu.scopes`."""
