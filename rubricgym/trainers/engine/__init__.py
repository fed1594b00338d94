"""The trainers' middle floor: how updates and sampling run. The update and its micro-batches, FSDP2 sharding,
LoRA, checkpoints and export, the rollout backends (local, Ray, vLLM: built from the config in one place,
``backends.make_backend``), weight sync and its buckets, data-parallel ranks. Imports ``algo/`` and the config;
never the run loop (``tests/core/test_layering.py``)."""
