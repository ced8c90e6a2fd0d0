"""Which of the declarations found the repository means: the strongest evidence first."""


from __future__ import annotations

from .model import SAYS_TRAIN, SIDE, Declared


def says_train(name: str) -> bool:
    """Does a trainer's name (module or script) say it trains, and not tuning, a local try or a side job."""
    return bool(SAYS_TRAIN.search(name)) and not SIDE.search(name)


def choose(found: list[Declared]) -> tuple[Declared | None, list[Declared]]:
    """The declaration the repository means, and the others: the strongest evidence first (a Dockerfile a script
    builds, a Dockerfile that says train, any training Dockerfile, a job config's command, a submit command or SDK call,
    a script or Makefile target, a README); among several of that strength naming different trainers, those whose file
    says train and not tuning or a local try, then the one named most often; (None, candidates) when the repository
    itself stays ambiguous."""
    if not found:
        return None, []
    for rank in sorted({d.rank for d in found}):
        of_rank = [d for d in found if d.rank == rank]
        distinct = list(dict.fromkeys(d.name for d in of_rank))
        if len(distinct) > 1:
            training = [d for d in of_rank if d.file_says_train or (SAYS_TRAIN.search(d.where.split(":")[0])
                                                                    and not SIDE.search(d.where.split(":")[0]))]
            if len({d.name for d in training}) == 1:
                of_rank = training
            else:
                pool = training or of_rank
                plain = [d for d in pool if not SIDE.search(d.where.split(":")[0]) and not SIDE.search(d.name)]
                if len({d.name for d in plain}) == 1:
                    of_rank = plain
                else:
                    counts: dict[str, int] = {}
                    for d in pool:
                        counts[d.name] = counts.get(d.name, 0) + 1
                    top = max(counts.values())
                    if list(counts.values()).count(top) == 1:
                        of_rank = [d for d in pool if counts[d.name] == top]
                    else:
                        return None, of_rank
        chosen = of_rank[0]
        return chosen, [d for d in found if d.name != chosen.name]
    return None, []
