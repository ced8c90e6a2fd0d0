"""The image pipeline, one module per stage, each handing a frozen value to the next: plan (config -> Plan),
render (Plan -> Dockerfile), lock and resolution (the package set), context and recipe (the staged files),
build (an engine or remote builder) or fastbuild/fastpath (a code-only edit appended in the registry)."""
