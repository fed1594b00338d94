"""torchrun worker: ``rubricgym train`` under 2 ranks with ``ray: true`` (rank 0's Ray pool serves both), then a
collection after rank 0's pool is closed, which must fail on every rank; each rank writes what it saw."""

import asyncio
import json
import sys
from pathlib import Path

from rubricgym.trainers.config import load_config
from rubricgym.trainers.engine.distributed import leave, rank_world
from rubricgym.trainers.engine.ray_ranks import RankedCollectError
from rubricgym.trainers.trainer import Trainer


def main(config: str, out: str) -> None:
    trainer = Trainer(load_config(config))
    trainer.run()
    rank, world = rank_world()
    seen = {"rank": rank, "world": world, "backend": type(trainer.backend).__name__}
    if rank == 0:
        trainer.backend.close()  # the pool's actors and Ray are gone: the next collection fails on rank 0
    try:
        asyncio.run(trainer.backend.collect(trainer.tasks_at(0, 2), [1, 2], 2))
    except RankedCollectError as e:
        seen["error"] = str(e)
    Path(out, f"rank{rank}.json").write_text(json.dumps(seen))
    leave()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
