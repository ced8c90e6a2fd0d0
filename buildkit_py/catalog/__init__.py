"""The data tables buildkit-py ships (base_images/), read and indexed, choosing nothing: the version matrix (matrix),
Google's executor images (executors), the system libraries wheels load (syslibs), and the maintenance of the matrix
against the package index (index_metadata)."""
