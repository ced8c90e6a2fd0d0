"""The machines of a job's worker pools: a machine type checked against the accelerators Vertex AI offers with it,
the default machine and count for an accelerator, a TPU's machine and topology, and a pool's machine spec as the
REST API takes it."""


from __future__ import annotations

from dataclasses import replace

from ..catalog.machines import load_machines
from ..catalog.matrix import load_matrix
from ..catalog.tpu import Tpu
from ..config import Pool
from ..errors import ConfigError, show
from ..pipeline.plan import tpu_named

CPU_MACHINE = "n1-standard-4"


def _vcpus(machine_type: str) -> int | None:
    last = machine_type.rsplit("-", 1)[-1]
    return int(last) if last.isdigit() else None


def check_machine(machine_type: str, accelerator: str | None, count: int, field: str) -> None:
    """Does Vertex AI offer this machine with this many of these GPUs? ConfigError (exit 2) if not."""
    m = load_machines()
    source = "(base_images/machines.yaml)"
    if machine_type in m.fixed:
        gpu, built_in = m.fixed[machine_type]
        if accelerator is None or count == 0:
            raise ConfigError(f"{machine_type} comes with {built_in} {gpu}: set accelerator_type {gpu} and "
                              f"accelerator_count {built_in} {source}", field=field)
        if accelerator != gpu or count != built_in:
            others = [t for t, (g, _) in m.fixed.items() if g == accelerator] + \
                     (list(m.n1_types[:1]) if accelerator in m.attached else [])
            hint = f"; {accelerator} runs on {', '.join(others)}" if others else ""
            raise ConfigError(f"{machine_type} has {built_in} {gpu}, not {count} {show(accelerator)}{hint} {source}",
                              field=field)
        return
    if accelerator is not None and count > 0:
        if machine_type not in m.n1_types or accelerator not in m.attached:
            fits = [t for t, (g, _) in m.fixed.items() if g == accelerator]
            where = f"on {', '.join(fits)}" if fits else ("on N1 machines (" + ", ".join(m.n1_types[:3]) + ", ...)"
                                                          if accelerator in m.attached else "nowhere we know of")
            raise ConfigError(f"{show(machine_type)} takes no {show(accelerator)}: it runs {where} {source}", field=field)
        counts = m.attached[accelerator]
        if count not in counts:
            raise ConfigError(f"{count} x {accelerator} is not offered: counts {', '.join(map(str, counts))} {source}",
                              field=field)
        vcpus = _vcpus(machine_type)
        if vcpus is not None and vcpus > counts[count]:
            fewer = [c for c, most in counts.items() if most >= vcpus]
            raise ConfigError(f"{machine_type} has {vcpus} vCPUs: with {accelerator} that needs "
                              f"{' or '.join(map(str, fewer)) or 'more'} GPUs, not {count} {source}", field=field)
        return
    if machine_type.split("-", 1)[0] not in m.cpu_families and machine_type not in m.n1_types:
        raise ConfigError(f"{show(machine_type)} is not a machine type for custom training without GPUs: families "
                          f"{', '.join(m.cpu_families)} {source}", field=field)


def default_machine(accelerator: str | None, count: int, field: str) -> str:
    m = load_machines()
    if accelerator is None or count == 0:
        return CPU_MACHINE
    fixed = [t for t, spec in m.fixed.items() if spec == (accelerator, count)]
    if fixed:
        return fixed[0]
    offered = [f"{t} ({n})" for t, (g, n) in m.fixed.items() if g == accelerator]
    if offered:
        raise ConfigError(f"{count} x {accelerator} is not offered; machines with it: {', '.join(offered)} "
                          "(base_images/machines.yaml)", field=field)
    if accelerator in m.attached and count in m.attached[accelerator]:
        # the biggest standard N1 the count allows, up to 8 vCPUs per GPU (a usual data-loading need)
        limit = min(m.attached[accelerator][count], 8 * count)
        return max((t for t in m.n1_types if t.startswith("n1-standard-") and (_vcpus(t) or 0) <= limit),
                   key=lambda t: _vcpus(t) or 0)
    return CPU_MACHINE  # check_machine then says where the accelerator runs


def default_count(machine_type: str | None, accelerator: str | None) -> int:
    fixed = load_machines().fixed.get(machine_type or "")
    if fixed:
        return fixed[1]
    return 1 if accelerator else 0


def machine_spec(pool: Pool, reservation: dict | None) -> dict:
    return {"machineType": pool.machine_type, "acceleratorType": pool.accelerator_type if pool.accelerator_count else None,
            "acceleratorCount": pool.accelerator_count or None, "tpuTopology": pool.tpu_topology,
            "reservationAffinity": reservation}


def resolve_pool(pool: Pool, field: str) -> Pool:
    """Defaults filled in (machine from the accelerator; accelerator and count from the machine), then checked."""
    fixed = load_machines().fixed.get(pool.machine_type or "")
    if fixed and pool.accelerator_type is None and pool.accelerator_count is None:
        pool = replace(pool, accelerator_type=fixed[0], accelerator_count=fixed[1])
    count = pool.accelerator_count if pool.accelerator_count is not None else default_count(pool.machine_type,
                                                                                            pool.accelerator_type)
    machine = pool.machine_type or default_machine(pool.accelerator_type, count, f"{field}.accelerator_count")
    if count and pool.accelerator_type is None:
        raise ConfigError(f"accelerator_count {count} needs an accelerator_type", field=f"{field}.accelerator_type")
    check_machine(machine, pool.accelerator_type, count, f"{field}.machine_type")
    return replace(pool, machine_type=machine, accelerator_count=count)


def check_pool(pool: Pool, field: str) -> None:
    """ConfigError (exit 2) unless Vertex AI offers the pool's machine with its accelerators, TPU or GPU, as the job
    will be checked: for a job file, said where the file wrote them."""
    tpu = tpu_of(pool)
    if tpu is not None:
        resolve_tpu_pool(pool, tpu, field)
    else:
        resolve_pool(pool, field)


def tpu_of(pool: Pool) -> Tpu | None:
    """The TPU a pool asks for: its accelerator_type, else the TPU its machine type comes with."""
    matrix = load_matrix()
    if pool.accelerator_type is not None:
        return tpu_named(matrix, pool.accelerator_type, "job.accelerator_type")
    return next((t for t in matrix.tpus.values() if pool.machine_type in t.machines), None)


def resolve_tpu_pool(pool: Pool, tpu: Tpu, field: str) -> tuple[Pool, int]:
    """A TPU VM pool checked against base_images/tpus.yaml: (the pool with its machine type,
    topology and count filled in, the chips of its machine)."""
    source = "(base_images/tpus.yaml)"
    offered = ", ".join(f"{m.name} ({m.chips} chip{'s' if m.chips > 1 else ''}"
                        f"{', topology ' + m.topology if m.topology else ''})"
                        for m in tpu.machines.values())
    name = pool.machine_type or min(tpu.machines.values(), key=lambda m: m.chips).name
    machine = tpu.machines.get(name)
    if machine is None:
        raise ConfigError(f"{show(name)} is not a machine type for {tpu.name}: {offered} {source}",
                          field=f"{field}.machine_type")
    if pool.replica_count not in (None, 1):
        raise ConfigError(f"replica_count {pool.replica_count}: a TPU VM job runs exactly one replica on Vertex AI "
                          f"(one {name}); drop replica_count or set it to 1", field=f"{field}.replica_count")
    count = pool.accelerator_count
    if machine.accelerator_count is None and count:
        raise ConfigError(f"accelerator_count {count}: {name} comes with {machine.chips} {tpu.name} chip(s) and Vertex AI "
                          f"takes no acceleratorCount for it; drop accelerator_count {source}",
                          field=f"{field}.accelerator_count")
    if machine.accelerator_count is not None and count not in (None, machine.accelerator_count):
        raise ConfigError(f"accelerator_count {count}: {name} with {tpu.name} takes accelerator_count "
                          f"{machine.accelerator_count} {source}", field=f"{field}.accelerator_count")
    topology = pool.tpu_topology or machine.topology
    if topology != machine.topology:
        allowed = f"its topology is {machine.topology}" if machine.topology else "it takes none"
        raise ConfigError(f"tpu_topology {show(pool.tpu_topology)} does not fit {name}: {allowed} (one host; larger "
                          f"slices need several replicas, which a TPU VM job cannot have); machine types: {offered} "
                          f"{source}", field=f"{field}.tpu_topology")
    return replace(pool, machine_type=name, accelerator_type=tpu.name, accelerator_count=machine.accelerator_count,
                   tpu_topology=topology), machine.chips


def inherit(pool: Pool | None, chief: Pool, *, gpus: bool = True) -> Pool:
    """A pool's machines default to the chief's (parameter servers: without its GPUs)."""
    pool = pool or Pool()
    if pool.machine_type or pool.accelerator_type:
        return pool
    return replace(pool, machine_type=chief.machine_type if gpus else CPU_MACHINE,
                   accelerator_type=chief.accelerator_type if gpus else None,
                   accelerator_count=chief.accelerator_count if gpus else 0,
                   boot_disk_type=pool.boot_disk_type or chief.boot_disk_type,
                   boot_disk_size_gb=pool.boot_disk_size_gb or chief.boot_disk_size_gb)
