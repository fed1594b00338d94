"""What agents are run on and how they are compared: shared by the trainer and the arena.

Modules: ``suite`` (the ``Suite`` model and the built-in suites in ``builtin/``), ``curriculum`` (which entry each
training task comes from: weights or SEC), ``topology`` (tournament topologies, a table by name: the tournament
trainer ranks a group of rollouts with them, the arena ranks agents) and ``stats`` (bootstrap intervals over tasks).

Place in the layers (docs/architecture.md): ``suites`` sits beside ``envs`` and ``agents``; it may import
``rewards`` and ``core`` only, and ``trainers`` and ``arena`` import it. It never imports ``trainers`` or
``arena``, so neither of those has to import the other (``tests/core/test_layering.py``).
"""
