"""buildkit-py: ML trainers to container images and Vertex AI / AI Platform training jobs."""

__version__ = "0.1.0"
