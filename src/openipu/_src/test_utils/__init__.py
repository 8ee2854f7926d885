"""`ipu.test_utils`: the helpers the original's own tests use, which programs' tests use too."""
