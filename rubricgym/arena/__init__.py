"""The arena: env suites, suite evaluation, agent tournaments, Bradley-Terry ratings and reports.

Modules: ``suite`` (the ``Suite`` model and built-in suites), ``evaluate`` (``rubricgym eval``), ``topology``
(tournament topologies shared with the tournament trainer), ``ratings`` (Bradley-Terry, Elo, bootstrap),
``agents`` (agents files), ``matches`` (judged matches and their cache), ``arena`` (``rubricgym arena``),
``report`` (HTML) and ``curriculum`` (sampling a suite's entries while training).
"""
