"""The build context: which files BuildKit gets, a refusal when secrets are among them, and a staged copy.

BuildKit is handed a directory that holds only the included files, so the image never depends on how
a builder reads .dockerignore, and the digest names exactly what was sent: it can tag the image.

Its rooms: the secret and size checks (secrets), and the listing, digest and staged copy (stage); the ignore patterns
and the walk of the trainer directory that choose the files are sources.ignore and sources.walk, which inference
reads the same files with."""

from .secrets import LARGE_FILE_BYTES, find_large_files, find_secrets, secret_reason
from .stage import (
    FIXED_MTIME,
    BuildContext,
    ContextListing,
    Snapshot,
    add_generated,
    hash_context,
    list_context,
    staged,
)

__all__ = ["FIXED_MTIME", "LARGE_FILE_BYTES", "BuildContext", "ContextListing", "Snapshot", "add_generated",
           "find_large_files", "find_secrets", "hash_context", "list_context", "secret_reason", "staged"]
