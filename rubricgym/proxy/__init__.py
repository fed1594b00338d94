"""The recording proxy: an OpenAI-compatible endpoint in front of the policy that records the exact token ids,
log-probs and policy version of every call, grouped into episodes, so agents written in any framework can be
trained on what they generated (``rubricgym proxy``; ``generation.agent_program`` in a training config)."""
