"""How a trainer repository runs its trainer, read without running anything. Every place a repository writes a command
is read by one reader (sources/shell/) and one interpreter of what the command runs (`follow`): a Dockerfile's
ENTRYPOINT/CMD, job config files (`containerSpec.command`/`args`, `pythonPackageSpec`), pipeline component specs,
`cloudbuild.yaml` steps, shell scripts, Makefile recipes, `tasks.py`/`noxfile.py`, README and other markdown code blocks,
notebook cells, and Python submit code (Vertex AI SDK calls, job dicts). Wrappers are seen through (`sh -c`, `bash -lc`,
`conda run`, `uv run`, `poetry run`, `exec`, `env K=V`, `nohup`, `time`, `python -u`), a script the command runs is
followed into (its `"$@"` joined to the arguments passed), console scripts resolve through the package's entry points,
and distributed launchers (`torchrun`, `accelerate launch`, `deepspeed`) are kept as part of the entry.

Each candidate keeps where it was found (file:line) and how; `choose` ranks them by evidence. A command that is one
Python entry becomes a module or script; one that is more (a chain of stages, a data step before the trainer, a launcher,
a script with several stages, no Python at all) is kept as the repository's command, changed only where it cannot work
in the generated image (a conda environment, `uv run`/`poetry run` without the tool, a path laid out elsewhere)."""

from .choice import choose, says_train
from .dockerfiles import entry_of
from .mentions import declared_entries
from .model import Context, Declared, SetAside

__all__ = ["Context", "Declared", "SetAside", "choose", "declared_entries", "entry_of", "says_train"]
