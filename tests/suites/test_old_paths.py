"""Suites, topologies and the curriculum moved from ``rubricgym.arena``; the old import paths still work."""

from rubricgym.arena import curriculum, suite, topology
from rubricgym.suites import curriculum as new_curriculum
from rubricgym.suites import suite as new_suite
from rubricgym.suites import topology as new_topology


def test_old_import_paths_reexport_the_same_objects():
    for old, new in ((suite, new_suite), (topology, new_topology), (curriculum, new_curriculum)):
        assert old.__all__ and all(getattr(old, name) is getattr(new, name) for name in old.__all__)
    assert suite.load_suite("toy").name == "toy"
