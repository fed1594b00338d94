"""Moved to ``rubricgym.suites.topology`` (the arena and the tournament trainer share it); kept for old imports."""

from rubricgym.suites.topology import (
    TOPOLOGIES,
    Compare,
    MatchResult,
    Topology,
    TopologySpec,
    Tournament,
    TournamentResult,
    anchor_ranking,
    bracket_order,
    double_elimination,
    expected_comparisons,
    round_robin,
    run_tournament,
    single_elimination,
    swiss,
    topology_spec,
)

__all__ = [
    "TOPOLOGIES",
    "Compare",
    "MatchResult",
    "Topology",
    "TopologySpec",
    "Tournament",
    "TournamentResult",
    "anchor_ranking",
    "bracket_order",
    "double_elimination",
    "expected_comparisons",
    "round_robin",
    "run_tournament",
    "single_elimination",
    "swiss",
    "topology_spec",
]
