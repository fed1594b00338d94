"""The arena: suite evaluation, agent tournaments, Bradley-Terry ratings and reports.

Modules: ``evaluate`` (``rubricgym eval``), ``ratings`` (Bradley-Terry, Elo, bootstrap), ``agents`` (agents
files), ``matches`` (judged matches and their cache), ``arena`` (``rubricgym arena``) and ``report`` (HTML).
Suites, the curriculum and the tournament topologies live in ``rubricgym.suites`` (shared with the trainer);
``arena.suite``, ``arena.topology`` and ``arena.curriculum`` re-export them for old imports.
"""
