"""The build context: which files BuildKit gets, a refusal when secrets are among them, and a staged copy.

BuildKit is handed a directory that holds only the included files, so the image never depends on how
a builder reads .dockerignore, and the digest names exactly what was sent: it can tag the image.

Its rooms: the ignore patterns (ignore), the walk of the trainer directory (walk), the secret and size checks
(secrets), and the listing, digest and staged copy (stage)."""

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
from .walk import MAX_DEPTH, included_files

__all__ = ["FIXED_MTIME", "LARGE_FILE_BYTES", "MAX_DEPTH", "BuildContext", "ContextListing", "Snapshot", "add_generated",
           "find_large_files", "find_secrets", "hash_context", "included_files", "list_context", "secret_reason", "staged"]
