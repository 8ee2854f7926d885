"""The original's generated op functions (`gen_popops_ops`, `gen_poputil_ops`,
`gen_poprand_ops` of tensorflow/compiler/plugin/poplar/ops): raw operations with the
argument names, defaults and outputs of their REGISTER_OP definitions."""
