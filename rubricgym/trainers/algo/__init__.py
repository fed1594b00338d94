"""The trainers' bottom floor: the math. Pure functions over tensors, arrays and typed records -- advantage
estimators, the PPO-clip loss, off-policy corrections, tournament ranking, guidance weights, entropy modulation,
rollouts and samples, the log-prob forward. Imports only ``trainers/config.py`` of the trainers (the schema whose
sections it reads); never ``engine/`` or the run loop (``tests/core/test_layering.py``)."""
