"""Bridges to the tools users already run: TRL (``interop.trl``), verifiers (the top-level ``rubricgym_verifiers``
module) and dataset export (``interop.export``). Each imports its library only when used (``rubricgym[interop]``).
"""
