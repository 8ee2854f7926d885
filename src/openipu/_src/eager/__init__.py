"""`ipu.eager`: capturing the gradients that flow into chosen tensors."""
