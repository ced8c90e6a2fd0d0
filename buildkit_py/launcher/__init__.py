"""The in-container launcher: checks the GPUs or TPU chips the job asked for, translates the cluster
environment the training service sets, then hands off to the trainer (in this interpreter when the
trainer is `python -m M` or `python SCRIPT`).

Standard library only, and no import from the rest of buildkit_py: this package is copied into
every image as `buildkit_launcher` and runs on whatever Python the image has.
"""
