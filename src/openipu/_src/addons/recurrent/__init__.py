"""Popnn recurrent numerics shared by the Keras and the TF1 addons layers."""
