"""The distributed launchers a repository runs its trainer with: `torchrun` (and `python -m torch.distributed.run` or
`.launch`), `accelerate launch` and `deepspeed`. Each starts the machine's processes itself; what it lacks on Vertex
AI is the cluster, which the service gives only as CLUSTER_SPEC. This module reads the launcher's own flags, says
where they contradict the job (the tool asks before submitting, the launcher again at start), and adds the node count,
node rank and master address: through torchrun's PET_* variables (its flags' defaults, so the repository's own flags
win), or as flags for the launchers that read no environment.

Standard library only: it runs in the image (and the tool imports it for the check before a job is sent).
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

TORCHRUN, ACCELERATE, DEEPSPEED = "torchrun", "accelerate", "deepspeed"
_TORCH_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# Options that take no value, per launcher (every other option takes one, as `--x V` or `--x=V`): the first word that
# is neither an option nor an option's value is the trainer, whose own arguments are never read as the launcher's.
_SWITCHES = {
    TORCHRUN: {"standalone", "no_python", "run_path", "m", "module", "use_env", "virtual_local_rank"},
    ACCELERATE: {"cpu", "multi_gpu", "tpu", "ipex", "use_deepspeed", "use_fsdp", "use_megatron_lm", "use_xpu", "m",
                 "module", "no_python", "debug", "q", "quiet", "same_network", "tpu_use_cluster", "tpu_use_sudo",
                 "downcast_bf16", "enable_cpu_affinity", "dynamo_use_fullgraph", "dynamo_use_dynamic",
                 "dynamo_use_regional_compilation", "h", "help"},
    DEEPSPEED: {"no_ssh", "no_ssh_check", "no_local_rank", "no_python", "m", "module", "force_multi", "save_pid",
                "elastic_training", "bind_cores_to_rank", "enable_each_rank_log"},
}
_ALIASES = {  # the same option under the names each launcher accepts
    "nproc_per_node": "nproc_per_node", "nnodes": "nnodes", "node_rank": "node_rank", "master_addr": "master_addr",
    "master_port": "master_port", "rdzv_endpoint": "rdzv_endpoint", "rdzv_backend": "rdzv_backend",
    "num_accelerators": "num_gpus", "H": "hostfile",
}
_DIGITS = re.compile(r"[0-9]{1,6}", re.ASCII)  # ASCII only: int() reads other scripts' digits too
DEEPSPEED_NO_SSH = (0, 14, 5)  # the first DeepSpeed whose runner starts one machine's share without ssh (--no_ssh)
HOSTFILE = "/tmp/buildkit-py/deepspeed-hostfile"


class Launch(namedtuple("Launch", "kind head flags trainer file", defaults=((),))):
    """kind: TORCHRUN | ACCELERATE | DEEPSPEED; head: how many words name the launcher (`torchrun`: 1, `accelerate
    launch` or `python -m torch.distributed.run`: 2 or 3), where added flags go; flags: ((name, value), ...) as
    written, names without dashes, `-` read as `_`, a switch's value True; trainer: the index of the trainer's word;
    file: the counts accelerate's --config_file holds ((name, value), ...), which its flags override."""

    __slots__ = ()

    def get(self, *names: str) -> object:
        found = [v for k, v in self.file + self.flags if k in names]
        return found[-1] if found else None

    def has(self, *names: str) -> bool:
        return any(k in names for k, _ in self.flags)


def _interpreter(word: str) -> bool:
    name = os.path.basename(word)
    return name == "python" or name.startswith("python3") or name == "python2"


_COUNT_LINE = re.compile(r"(num_processes|num_machines)\s*:\s*([0-9]{1,6})\s*(?:#.*)?")
MAX_CONFIG_BYTES = 1 << 20


def _accelerate_file(path: str) -> tuple[tuple[str, str], ...]:
    """num_processes and num_machines of an accelerate config file (YAML as `accelerate config` writes it, top-level
    keys, or JSON); nothing where it cannot be read."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError):  # ValueError: a name no file can have (a NUL in it)
        return ()
    if path.endswith(".json"):
        import json

        try:
            data = json.loads(text)
        except ValueError:
            return ()
        return tuple((k, str(data[k])) for k in ("num_processes", "num_machines")
                     if isinstance(data, dict) and type(data.get(k)) is int)
    return tuple((m.group(1), m.group(2)) for m in map(_COUNT_LINE.fullmatch, text.splitlines()) if m)


def find(command: list[str] | tuple[str, ...], root: str | None = None) -> Launch | None:
    """The launcher the command starts, with its flags; None for any other command. root: where the command runs,
    for accelerate's --config_file (None: the file is not read)."""
    command = list(command)
    if not command:
        return None
    first = os.path.basename(command[0])
    if first == "torchrun":
        kind, head = TORCHRUN, 1
    elif first == "deepspeed":
        kind, head = DEEPSPEED, 1
    elif first == "accelerate" and command[1:2] == ["launch"]:
        kind, head = ACCELERATE, 2
    elif _interpreter(command[0]) and command[1:2] == ["-m"] and command[2:3] and command[2] in _TORCH_MODULES:
        kind, head = TORCHRUN, 3
    else:
        return None
    flags, i = [], head
    while i < len(command):
        word = command[i]
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or word == "-":
            break
        name, equals, value = word.lstrip("-").partition("=")
        name = name.replace("-", "_")
        name = _ALIASES.get(name, name)
        if equals:
            flags.append((name, value))
        elif name in _SWITCHES[kind]:
            flags.append((name, True))
            if name in ("m", "module"):  # the next word is the trainer's module
                i += 1
                break
        elif i + 1 < len(command):
            flags.append((name, command[i + 1]))
            i += 1
        else:
            flags.append((name, ""))
        i += 1
    launch = Launch(kind, head, tuple(flags), i)
    config = launch.get("config_file")
    if kind == ACCELERATE and root is not None and isinstance(config, str) and config:
        launch = launch._replace(file=_accelerate_file(os.path.join(root, config)))
    return launch


def _count(value: object) -> int | None:
    text = str(value).strip() if value is not None else ""
    return int(text) if _DIGITS.fullmatch(text) else None


def declared_per_node(launch: Launch) -> int | str | None:
    """The processes per machine the repository's launcher starts, as written: a number, "auto" (torchrun's
    gpu/auto, DeepSpeed's default: every GPU), or None where the launcher's flags do not say (accelerate's total over
    machines is per machine only when it names no machine count)."""
    if launch.kind == TORCHRUN:
        value = launch.get("nproc_per_node")
        if value is None:
            return 1
        return _count(value) or ("auto" if str(value) in ("gpu", "auto") else None)
    if launch.kind == DEEPSPEED:
        return _count(launch.get("num_gpus")) or "auto"
    total, machines = _count(launch.get("num_processes")), _count(launch.get("num_machines"))
    if total and machines:
        return total // machines if total % machines == 0 else None
    return total if launch.has("num_processes") or launch.file else None


def contradiction(launch: Launch, nodes: int, per_node: int | str | None) -> str | None:
    """What in the launcher's flags cannot hold in a job of `nodes` machines running `per_node` processes each (the
    job's setting; None: not set), as a sentence naming the flag and what to do; None when nothing does."""
    name = {TORCHRUN: "torchrun", ACCELERATE: "accelerate launch", DEEPSPEED: "deepspeed"}[launch.kind]
    count_flag = {TORCHRUN: "nnodes", ACCELERATE: "num_machines", DEEPSPEED: "num_nodes"}[launch.kind]
    given = launch.get(count_flag)
    if launch.kind == ACCELERATE and not launch.has(count_flag) and str(given) == "1":
        given = None  # a config file made on one machine: the job's machines replace its count
    if given is not None:
        low, colon, high = str(given).partition(":")
        fits = (bool(_DIGITS.fullmatch(low)) and (bool(_DIGITS.fullmatch(high)) if colon else True)
                and int(low) <= nodes <= (int(high) if colon else int(low)))
        if not fits:
            return (f"{name} --{count_flag} {given} in the trainer's command, but the job runs {nodes} "
                    f"machine{'s' if nodes != 1 else ''}: drop --{count_flag} (buildkit-py's launcher gives it from "
                    "CLUSTER_SPEC) or change the job's replica count")
    if nodes > 1:
        fixed = {TORCHRUN: ("node_rank", "master_addr", "rdzv_endpoint", "standalone"),
                 ACCELERATE: ("machine_rank", "main_process_ip"),
                 DEEPSPEED: ("node_rank", "master_addr", "hostfile", "include", "exclude")}[launch.kind]
        for flag in fixed:
            if launch.has(flag):
                return (f"{name} --{flag} in the trainer's command is the same on every machine, but the job runs "
                        f"{nodes}: drop it; buildkit-py's launcher gives each machine its own from CLUSTER_SPEC")
    own = declared_per_node(launch)
    explicit = launch.has("nproc_per_node", "num_gpus", "num_processes")
    if per_node is not None and explicit and own is not None and str(own) != str(per_node):
        return (f"the job runs {per_node} processes per machine, but the trainer's command starts {own} ({name}'s "
                "own flag): drop one of them")
    return None


def _replaced(command: list[str], launch: Launch, name: str, value: str) -> list[str]:
    """The command with the launcher's option `name` (either spelling, either form) set to value."""
    out = list(command)
    i = launch.head
    while i < launch.trainer:
        word = out[i]
        key, equals, _ = word.lstrip("-").partition("=")
        if word.startswith("-") and _ALIASES.get(key.replace("-", "_"), key.replace("-", "_")) == name:
            if equals:
                out[i] = f"{word.partition('=')[0]}={value}"
            else:
                out[i + 1] = value
                i += 1
        i += 1
    return out


def _version(dist: str) -> tuple[int, ...] | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # Python 3.7
        return None
    try:
        text = version(dist)
    except PackageNotFoundError:
        return None
    parts = []
    for part in text.split(".")[:3]:
        digits = _DIGITS.match(part)
        if not digits:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def adapt(command: list[str], launch: Launch, nodes: int, node_rank: int, master: tuple[str, str],
          hosts: tuple[str, ...], per_node: int | None) -> tuple[list[str], dict[str, str], list[str]]:
    """The command and environment that give the launcher this machine's place in the cluster: (command, variables
    to add, log lines). per_node: the processes per machine the job asked for, counted (None: the launcher's own)."""
    addr, port = master
    env: dict[str, str] = {}
    notes: list[str] = []
    added: list[str] = []
    if launch.kind == TORCHRUN:
        env.update(PET_NNODES=str(nodes), PET_NODE_RANK=str(node_rank), PET_MASTER_ADDR=addr, PET_MASTER_PORT=port)
        if per_node is not None and not launch.has("nproc_per_node"):
            env["PET_NPROC_PER_NODE"] = str(per_node)
        notes.append(f"torchrun: node {node_rank} of {nodes}, master {addr}:{port} (PET_* variables; its own flags win)")
        return command, env, notes
    if launch.kind == ACCELERATE:
        if launch.has("num_processes"):
            own = declared_per_node(launch)
            if nodes > 1 and not launch.has("num_machines") and isinstance(own, int):
                # Without a machine count the repository's --num_processes counted one machine's processes;
                # accelerate's counts every machine's. Replaced where it stands: accelerate takes a flag's last value.
                command = _replaced(command, launch, "num_processes", str(own * nodes))
                notes.append(f"accelerate launch --num_processes {own} is one machine's: {own * nodes} over {nodes} "
                             "machines")
        else:
            own = per_node if per_node is not None else declared_per_node(launch) if nodes > 1 else None
            if isinstance(own, int):
                added += ["--num_processes", str(own * nodes)]
                if per_node is None:
                    notes.append(f"{launch.get('config_file')}: num_processes counts one machine's: {own * nodes} "
                                 f"over {nodes} machines")
        if nodes > 1:
            if not launch.has("num_machines"):
                added += ["--num_machines", str(nodes)]
            added += ["--machine_rank", str(node_rank), "--main_process_ip", addr, "--main_process_port", port]
            modes = ("multi_gpu", "cpu", "tpu", "use_deepspeed", "use_fsdp", "use_megatron_lm", "use_xpu", "config_file")
            if not launch.has(*modes):
                added.append("--multi_gpu")  # else accelerate runs one process when it has no config file to read
    elif nodes == 1:  # DeepSpeed on one machine needs no cluster: it starts each GPU's process itself
        if per_node is not None and not launch.has("num_gpus"):
            added += ["--num_gpus", str(per_node)]
    else:
        have = _version("deepspeed")
        if have is not None and have < DEEPSPEED_NO_SSH:
            raise ValueError(f"deepspeed {'.'.join(map(str, have))} reaches other machines only over ssh, which Vertex "
                             f"AI's do not run; DeepSpeed {'.'.join(map(str, DEEPSPEED_NO_SSH))} or later starts each "
                             "machine's share itself (--no_ssh): pin deepspeed>=0.14.5")
        slots = per_node if per_node is not None else _count(launch.get("num_gpus"))
        if slots is None:
            raise ValueError("deepspeed across machines needs the processes per machine: set trainer.processes_per_node "
                             "(auto: one per GPU) or --num_gpus in the trainer's command")
        os.makedirs(os.path.dirname(HOSTFILE), exist_ok=True)
        with open(HOSTFILE, "w") as handle:
            handle.writelines(f"{host} slots={slots}\n" for host in hosts)
        added += ["--hostfile", HOSTFILE, "--no_ssh", "--node_rank", str(node_rank), "--master_addr", addr,
                  "--master_port", port]
        if not launch.has("num_gpus") and per_node is not None:
            added += ["--num_gpus", str(per_node)]
    if added:
        notes.append(f"{launch.kind}: added " + " ".join(added))
    at = launch.head
    return command[:at] + added + command[at:], env, notes
