"""The data tables buildkit-py ships (base_images/), read and indexed, choosing nothing: the version matrix (matrix,
with its TPU tables in tpu, the platforms, GPUs and machine types in machines, and the checks its loaders share in
reading), Google's executor images (executors), the system libraries wheels load (syslibs), and the maintenance of
the matrix against the package index (index_metadata, which reads the index with index_client)."""
