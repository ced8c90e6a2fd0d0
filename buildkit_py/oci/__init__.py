"""OCI images and the registries that hold them: media types (media), credentials, the distribution API's client,
what an image is in its registry and a multi-platform index (remote), and artifacts attached to an image
(referrers)."""
