"""Commands beside the pipeline: the generated CI pipelines (ci) and Make targets (makefile), and the doctor's checks of
this machine (doctor)."""
