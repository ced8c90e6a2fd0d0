"""Names the pipeline's stages share with the images they make and the containers they run: the labels a build sets
(each defined here once; tests/test_import_graph.py holds the rest of the code to it), and the Dockerfile stage that
builds the trainer's compiled extensions."""

LABEL_PREFIX = "dev.buildkit-py"
EXTENSIONS_STAGE = "trainer-build"  # the Dockerfile stage that builds the trainer's compiled extensions (build_extensions)
# The labels a build sets itself (--label), beside the Dockerfile's.
CONTENT_LABEL = f"{LABEL_PREFIX}.content-digest"
REVISION_LABEL = "org.opencontainers.image.revision"
VARIANT_LABEL = f"{LABEL_PREFIX}.variant"
BUILD_LABELS = (CONTENT_LABEL, REVISION_LABEL, VARIANT_LABEL)
# The labels the Dockerfile sets from the plan.
BASE_NAME_LABEL = "org.opencontainers.image.base.name"
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"
VERSION_LABEL = f"{LABEL_PREFIX}.version"
PYTHON_LABEL = f"{LABEL_PREFIX}.python"
FRAMEWORK_LABEL = f"{LABEL_PREFIX}.framework"
CUDA_LABEL = f"{LABEL_PREFIX}.cuda"
CUDNN_LABEL = f"{LABEL_PREFIX}.cudnn"
CUDA_ARCHS_LABEL = f"{LABEL_PREFIX}.cuda-archs"
TPU_LABEL = f"{LABEL_PREFIX}.tpu"
LOCK_LABEL = f"{LABEL_PREFIX}.lock-digest"
PLAN_LABEL = f"{LABEL_PREFIX}.plan"
# What marks the SBOM and provenance among the referrers other tools attach ("sbom" or "provenance").
ATTESTATION_ANNOTATION = f"{LABEL_PREFIX}.attestation"
# The labels of the containers a local run or study starts (found again by them to clean up).
JOB_LABEL = f"{LABEL_PREFIX}.job"
STUDY_LABEL = f"{LABEL_PREFIX}.study"
