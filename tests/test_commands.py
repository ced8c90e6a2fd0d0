"""The one reader of commands (buildkit_py/sources/shell/) and what a command comes to (entrypoints.entry_of): a
table of command lines in the forms real trainer repositories write (wrappers, chains, scripts with "$@", launchers,
console scripts, variables, namespace packages), each with the entry it must give; and random shell text, which gives a
value or a refusal, never a traceback or a hang."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildkit_py.inference.layout import _module_root, _script_file
from buildkit_py.sources.entrypoints import Context, entry_of
from buildkit_py.sources.shell import ShellSyntaxError, read

FILES = {
    "pkg/__init__.py": "", "pkg/train.py": "def main():\n    pass\n", "pkg/eval.py": "",
    "src/seg/train.py": "print(1)\n",  # src/ and src/seg/ without __init__.py: namespace packages
    "gym-rl/__init__.py": "", "gym-rl/task.py": "",  # run as `python -m gym-rl.task`
    "train.py": "", "prep.py": "", "scripts/train.py": "", "tools/fit": "#!/usr/bin/env python3\nprint(1)\n",
    # a wrapper script: data in, the job's args as the Python command, the model out
    "run.sh": '#!/bin/bash\nset -e\ngsutil cp -r "${DATA_URI:-gs://b/data}" /data\npython3 "$@"\ngsutil cp -r /model gs://b/out\n',
    # stages in turn
    "stages.sh": "#!/bin/sh\npython prep.py\npython -m pkg.train --epochs 3\npython -m pkg.eval\n",
    # install steps, then one Python entry: the image installs at build time
    "scripts/only.sh": '#!/bin/bash\npip install -r requirements.txt\nexport ENV=prod\ncd /app\npython -m pkg.train "$@"\n',
    "entry.sh": "#!/bin/sh\nexec conda run --no-capture-output -n train python -m pkg.train \"$@\"\n",
}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory) -> Context:
    root = tmp_path_factory.mktemp("repo")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return Context(root, lambda m: _module_root(root, m) is not None, lambda r: _script_file(root, r),
                   {"train": ("pkg.train", "main"), "seg-train": ("src.seg.train", "main")})


def got(command, ctx: Context) -> str | None:
    """The entry as one line: `module M`, `script S`, `function M:F`, with ` args [...]`; a kept command is `kept`
    before it (and `kept` alone where no Python entry of the directory is in it)."""
    ctx.set_aside.clear()
    found = entry_of(command, ctx)
    if found is None:
        return None
    entry = (f"function {found.module}:{found.function}" if found.function else f"module {found.module}"
             if found.module else f"script {found.script}" if found.script else "")
    out = ("kept " if found.command is not None else "") + entry
    return (out + (f" args {list(found.args)}" if found.args else "")).strip()


ENTRIES = [  # (how the trainer is run, what it is)
    ("python -m pkg.train", "module pkg.train"),
    ("python3 train.py", "script train.py"),
    ("python3.10 -u scripts/train.py", "script scripts/train.py"),
    ("python -m src.seg.train", "module src.seg.train"),
    ("python -m gym-rl.task", "module gym-rl.task"),
    ("train", "function pkg.train:main"),
    ("/usr/bin/python3 -B -X dev -W ignore /app/train.py", "script train.py"),
    ("python -OO -m pkg.train", "module pkg.train"),
]
ONE_ENTRY = [  # wrappers that run one Python entry: the entry is the trainer
    "{}", "exec {}", "env A=1 B=2 {}", "nohup {}", "time {}", "conda run -n env {}", "conda run --no-capture-output -n env {}",
    "micromamba run -p /opt/env {}", "mamba run -n x {}", "uv run {}", "uv run --frozen --no-sync {}", "poetry run {}",
    "pipenv run {}", "pdm run {}", "hatch run {}", "sh -c '{}'", "bash -lc '{}'", "bash -c 'cd /app && {}'",
    "pip install -r requirements.txt && {}", "set -e; {}", "export X=1; {}", "sh -c 'exec {}'", "timeout 3600 {}",
    "xvfb-run -a {}", "stdbuf -oL {}", "nice -n 10 {}", "exec env PYTHONUNBUFFERED=1 {}",
]


@pytest.mark.parametrize("wrapper", ONE_ENTRY)
@pytest.mark.parametrize("entry, want", ENTRIES)
def test_one_python_entry_through_its_wrappers(ctx, wrapper, entry, want):
    assert got(wrapper.format(entry), ctx) == want
    assert got(wrapper.format(entry + " --epochs 3"), ctx) == want + " args ['--epochs', '3']"


KEPT = [  # more than one Python entry: the repository's command is kept, its Python entry named
    ("dvc pull data && python train.py", "kept script train.py"),
    ("gsutil cp gs://b/d /data && python -m pkg.train", "kept module pkg.train"),
    ("python prep.py && python -m pkg.train && python -m pkg.eval", "kept module pkg.train"),
    ("torchrun --nproc_per_node=8 train.py --lr 1e-4", "kept script train.py"),
    ("torchrun --standalone --nnodes=1 --nproc-per-node 8 -m pkg.train", "kept module pkg.train"),
    ("accelerate launch --multi_gpu --num_processes 8 scripts/train.py", "kept script scripts/train.py"),
    ("accelerate launch --config_file cfg.yaml -m pkg.train", "kept module pkg.train"),
    ("deepspeed --num_gpus 8 train.py --deepspeed ds.json", "kept script train.py"),
    ("python -m torch.distributed.run --nnodes 2 --nproc_per_node 4 train.py", "kept script train.py"),
    ("python -m torch.distributed.launch --use_env train.py", "kept script train.py"),
    ("uv run torchrun --nproc_per_node=8 train.py", "kept script train.py"),
    ("bash -lc \"uv run python -m pkg.train --x 1 && uv run python -m pkg.eval\"", "kept module pkg.train"),
    ("./run.sh train.py --epochs 3", "kept script train.py"),
    ("bash run.sh scripts/train.py", "kept script scripts/train.py"),
    ("/app/run.sh -m pkg.train", "kept module pkg.train"),
    ("sh stages.sh", "kept module pkg.train"),
    ("./stages.sh", "kept module pkg.train"),
    ("wget -q https://x/d.zip && unzip d.zip && python train.py", "kept script train.py"),
    ("python train.py | tee log.txt && gsutil cp log.txt gs://b/", "kept script train.py"),
]


@pytest.mark.parametrize("command, want", KEPT)
def test_the_repository_command_is_kept_when_it_is_more(ctx, command, want):
    assert got(command, ctx) == want
    found = entry_of(command, ctx)
    assert found.command and found.command[0] in ("sh", "bash", "/bin/sh", "torchrun", "accelerate", "deepspeed",
                                                  "python", "dvc", "gsutil", "./run.sh", "/app/run.sh")


FOLLOWED = [  # scripts followed, variables and defaults read as the shell reads them
    ("bash scripts/only.sh --epochs 2", "module pkg.train args ['--epochs', '2']"),
    ("sh ./scripts/only.sh", "module pkg.train"),
    ("./entry.sh", "module pkg.train"),
    ("M=pkg.train; python -m $M", "module pkg.train"),
    ("python -m ${MOD:-pkg.train}", "module pkg.train"),
    ('python -m "${MODULE:-pkg.train}" --data "${DATA-gs://b/d}"', "module pkg.train args ['--data', 'gs://b/d']"),
    ("export S=train.py && python $S", "script train.py"),
    ("S=scripts; python $S/train.py", "script scripts/train.py"),
    ("f() { python -m pkg.train \"$@\"; }; f --x 1", "module pkg.train args ['--x', '1']"),
    ("set -- --lr 3; python train.py \"$@\"", "script train.py args ['--lr', '3']"),
    ("python train.py \\\n  --epochs 3 \\\n  --lr 0.1", "script train.py args ['--epochs', '3', '--lr', '0.1']"),
    ("python 'train.py' \"--name=a b\"", "script train.py args ['--name=a b']"),
    ("cd scripts && python train.py", "script scripts/train.py"),
    ("cd /app/scripts && exec python3 -u train.py", "script scripts/train.py"),
    ("tools/fit --x", "script tools/fit args ['--x']"),
    ("sh -c 'train --epochs 1'", "function pkg.train:main args ['--epochs', '1']"),
    ("seg-train", "function src.seg.train:main"),
    ("[ -d /data ] || mkdir /data; python train.py", "script train.py"),
    ("if [ -n \"$X\" ]; then echo $X; fi\npython train.py", "script train.py"),
    ("cat <<EOF > /tmp/c.yaml\nlr: 1\nEOF\npython train.py --config /tmp/c.yaml",
     "script train.py args ['--config', '/tmp/c.yaml']"),
    ("python train.py 2>&1 > /tmp/log", "script train.py"),
    ("PYTHONPATH=. python -m pkg.train", "module pkg.train"),
    ("python -m pkg.train --job-dir=$JOB_DIR", "module pkg.train"),  # an unknown word is left out, with a note
]


@pytest.mark.parametrize("command, want", FOLLOWED)
def test_scripts_and_variables_are_followed(ctx, command, want):
    assert got(command, ctx) == want


NOTHING = [  # commands that name no trainer of this directory
    "python -m pip install -r requirements.txt", "python -c 'import x; x.run()'", "python -m not.here",
    "echo hello", "python $(cat which)", "python", "jupyter lab --ip 0.0.0.0", "gunicorn app:app",
    "python missing.py", "sh -c 'pip install x'", "bash -c \"python -m elsewhere.train\"", "nvidia-smi && sleep 3600",
    "python setup.py sdist", "torchrun elsewhere.py", "conda run -n x python other/missing.py",
]


@pytest.mark.parametrize("command", NOTHING)
def test_what_names_no_trainer_here(ctx, command):
    assert got(command, ctx) is None


@pytest.mark.parametrize("words, want", [
    (["python", "-m", "pkg.train"], "module pkg.train"),
    (["python3", "-u", "train.py", "--epochs", "3"], "script train.py args ['--epochs', '3']"),
    (["/bin/sh", "-c", "train"], "function pkg.train:main"),
    (["sh", "-c", "dvc pull && python train.py"], "kept script train.py"),
    (["conda", "run", "--no-capture-output", "-n", "env", "python", "-m", "pkg.train"], "module pkg.train"),
    (["/app/run.sh", "train.py"], "kept script train.py"),
    (["bash", "-c", "python3 \"$@\"", "sh", "train.py"], "script train.py"),
    (["torchrun", "--nproc_per_node=8", "-m", "pkg.train"], "kept module pkg.train"),
])
def test_exec_form_words(ctx, words, want):
    assert got(words, ctx) == want


def test_a_kept_command_changes_only_what_cannot_run_in_the_image(ctx):
    found = entry_of("gsutil cp gs://b/d /data && conda run -n env python -m pkg.train", ctx)
    assert found.command == ("/bin/sh", "-c", "gsutil cp gs://b/d /data && python -m pkg.train")
    assert any("conda run -n env" in c for c in found.changes)
    # uv run inside a script the command runs: the script runs as its edited text, its arguments passed on
    found = entry_of(["bash", "-lc", "uv run python -m pkg.train --x 1 && uv run python -m pkg.eval"], ctx)
    assert found.command == ("bash", "-lc", "python -m pkg.train --x 1 && python -m pkg.eval")
    found = entry_of("/app/run.sh train.py", ctx)  # nothing to change: as written, through its shell
    assert found.command == ("/bin/sh", "-c", "/app/run.sh train.py")
    found = entry_of(["/code/run.sh", "train.py"], ctx)  # another image's path to the same file
    assert found.command == ("bash", "/app/run.sh", "train.py"), found.command
    # a chain that `cd`s to where another image had the code goes where this one has it
    found = entry_of("cd /workspace/scripts && dvc pull && python train.py", ctx)
    assert found.command[2].startswith("cd /app/scripts && dvc pull"), found.command


def test_a_launcher_is_kept_with_its_options(ctx):
    found = entry_of("torchrun --nproc_per_node=8 --nnodes=$NNODES train.py --lr 1", ctx)
    assert found.launcher == "torchrun" and found.script == "train.py"
    assert found.command == ("/bin/sh", "-c", "torchrun --nproc_per_node=8 --nnodes=$NNODES train.py --lr 1")


def test_a_refusal_says_what_was_seen(ctx):
    ctx.set_aside.clear()
    assert entry_of("python -m elsewhere.train --x", ctx) is None
    assert [(a.where, a.why) for a in ctx.set_aside] == [("command:1", "module elsewhere.train is not in this directory")]
    ctx.set_aside.clear()
    assert entry_of(["sh", "-c", "python 'unclosed"], ctx) is None
    assert ctx.set_aside and "does not parse" in ctx.set_aside[0].why


@pytest.mark.parametrize("text, want", [
    ("a 'b c' \"d $X\" e\\ f", [["a", "b c", "d 1", "e f"]]),
    ("X=1; echo ${X:+set} ${Y:-none} ${Y-dash} ${X:?}", [["echo", "set", "none", "dash", "1"]]),
    ("echo $(date) `id` $((1+2))", [["echo", None, None, None]]),
    ("echo \"$@\"", [["echo", "p", "q r"]]),
    ("echo $@", [["echo", "p", "q", "r"]]),
    ("echo $1 ${2} $3", [["echo", "p", "q", "r"]]),
    ("a && b || c; d & e | f", [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]),
    ("# comment\na # not a word\nb#c", [["a"], ["b#c"]]),
    ("cat <<-'EOF'\n\tpython not_run.py\n\tEOF\nnext", [["cat"], ["next"]]),
    ("(cd x && y) ; { z; }", [["cd", "x"], ["y"], ["z"]]),
    ("exit 0\npython never.py", [["exit", "0"]]),
    ("echo ${UNSET}", [["echo", None]]),
])
def test_the_shell_reader(text, want):
    script = read(text, args=["p", "q r"] if "$@\"" in text else ["p", "q", "r"], variables={"X": "1"})
    assert [c.values for c in script.commands] == want


@pytest.mark.parametrize("text", ["echo 'open", 'echo "open', "echo $(open", "echo `open", "echo ${open"])
def test_unclosed_text_is_a_syntax_error_with_its_line(text):
    with pytest.raises(ShellSyntaxError) as caught:
        read("ok\n" + text)
    assert caught.value.line == 2


_ALPHABET = st.sampled_from(list("ab -'\"\\$`(){};&|<>#=\n\t*@0123")
                            + ["python", "-m", "pkg.train", "sh", "-c", "${X:-", "$(", "<<EOF", "EOF", "&&", "||",
                               "conda run -n e ", "uv run ", "torchrun ", "./run.sh", "bash ", "f() {", "}", "\"$@\""])


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_ALPHABET, max_size=60).map("".join))
def test_random_shell_text_gives_a_value_or_a_refusal(ctx, text):
    try:
        read(text, args=["x"])
    except ShellSyntaxError as exc:
        assert exc.line >= 1 and exc.message
    for command in (text, ["sh", "-c", text], shlex.split(text) if _splits(text) else ["x"]):
        ctx.set_aside.clear()
        found = entry_of(command, ctx)
        assert found is None or found.module or found.script or found.command


def _splits(text: str) -> bool:
    try:
        return bool(shlex.split(text))
    except ValueError:
        return False


def test_a_deep_or_long_text_ends(ctx):
    deep = "sh -c " + "'sh -c " * 30 + "python train.py" + "'" * 30
    entry_of(deep, ctx)  # ends: depth is bounded
    long_text = "python train.py && " * 20000 + "true"
    assert len(read(long_text).commands) <= 5000


def test_the_fixture_tree(ctx):
    assert (Path(ctx.directory) / "src/seg/train.py").is_file() and not (Path(ctx.directory) / "src/__init__.py").exists()
