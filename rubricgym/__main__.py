"""``python -m rubricgym`` is the ``rubricgym`` command (what ``torchrun -m rubricgym train ...`` launches)."""

from rubricgym.cli import main

main()
