"""Topologies are a table: one entry in ``TOPOLOGIES`` makes a topology selectable by the trainer and the arena."""

import json
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.suites.topology import TOPOLOGIES, Compare, TopologySpec, Tournament, TournamentResult
from rubricgym.trainers.config import TrainConfig
from rubricgym.trainers.trainer import Trainer


async def ladder(n: int, compare: Compare, anchor: int = 0) -> TournamentResult:
    """A made-up topology: neighbours play once; ranked by wins."""
    arena = Tournament(n, compare)
    pairs = [(i, i + 1) for i in range(n - 1)]
    wins = [0.0] * n
    for (i, j), (si, sj) in zip(pairs, await arena.round(pairs), strict=True):
        wins[i if si > sj else j] += si != sj
    return arena.finish(lambda i: (-wins[i],))


@pytest.fixture
def with_ladder(monkeypatch):
    monkeypatch.setitem(TOPOLOGIES, "ladder", TopologySpec(ladder, lambda n: n - 1))


async def test_the_trainer_validates_and_ranks_with_a_registered_topology(with_ladder):
    cfg = TrainConfig().with_overrides(**{"advantage.estimator": "tournament", "advantage.topology": "ladder"})
    assert cfg.advantage.topology == "ladder"

    class Judge:  # the longer trajectory id wins
        async def compare(self, a, b):
            return SimpleNamespace(ok=True, score_a=float(a.id > b.id), score_b=float(b.id > a.id))

    group = [SimpleNamespace(trajectory=SimpleNamespace(id=x, task=None)) for x in ("a", "c", "b")]
    entry = SimpleNamespace(pairwise=Judge())  # the group's reward entry (its pairwise judge)
    (result,) = await Trainer.rank_groups(SimpleNamespace(entry_for=lambda task: entry, cfg=cfg), [group])
    assert result.comparisons == 2 and result.order[0] == 1


def test_an_unknown_topology_is_refused_by_the_config():
    with pytest.raises(Exception, match="unknown topology 'ladder'; use one of anchor, round_robin"):
        TrainConfig().with_overrides(**{"advantage.topology": "ladder"})


def test_the_arena_plays_a_registered_topology(with_ladder, tmp_path, agents_file):
    suite = tmp_path / "s.yaml"
    entry = {"env": "toy-calculator-v0", "name": "toy", "kwargs": {"min_ops": 1, "max_ops": 1}, "tasks": 2}
    suite.write_text(yaml.safe_dump({"name": "s", "entries": [entry]}))
    agents = agents_file(*({"name": f"r{s}", "kind": "scripted", "agent": "random", "seed": s} for s in (1, 2, 3)))
    out = tmp_path / "o"
    args = ["arena", "--suite", str(suite), "--agents", str(agents), "--out", str(out), "--resamples", "20"]
    result = CliRunner().invoke(app, [*args, "--topology", "ladder"])
    assert result.exit_code == 0, result.output
    rep = json.loads((out / "arena.json").read_text())
    assert rep["topology"] == "ladder" and rep["matches"] == 2
