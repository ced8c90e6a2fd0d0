"""Names the pipeline's stages share with the images they make: the labels a build sets, and the Dockerfile stage
that builds the trainer's compiled extensions."""

LABEL_PREFIX = "dev.buildkit-py"
EXTENSIONS_STAGE = "trainer-build"  # the Dockerfile stage that builds the trainer's compiled extensions (build_extensions)
# The labels a build sets itself (--label), beside the Dockerfile's.
CONTENT_LABEL = f"{LABEL_PREFIX}.content-digest"
REVISION_LABEL = "org.opencontainers.image.revision"
VARIANT_LABEL = f"{LABEL_PREFIX}.variant"
BUILD_LABELS = (CONTENT_LABEL, REVISION_LABEL, VARIANT_LABEL)
