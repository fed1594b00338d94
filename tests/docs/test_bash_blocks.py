"""Every ``rubricgym`` command in a ```bash block of README.md and of the docs site names a real command and only
options that command has (the ``--help`` level: the command tree and option names come from the Typer app itself).

Expensive commands (training, serving, building packages) are checked this way only; the public-data tutorial's
commands also run as written in ``test_public_data.py``.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import typer.main

from rubricgym.cli import app
from tests.docs.pages import Block, blocks

ROOT_COMMAND: Any = typer.main.get_command(app)
BLOCKS = blocks("bash")
SEPARATORS = {"&&", "||", ";", "|", "&"}


def command_lines(block: Block) -> list[list[str]]:
    """The argument lists given to ``rubricgym`` in a bash block: continuation lines joined, comments dropped,
    ``a && b`` split, and ``python -m rubricgym`` / ``torchrun ... -m rubricgym`` / ``.venv/bin/rubricgym`` read
    as ``rubricgym``. Square brackets around optional parts (``[--json]``) are the page's notation, not shell."""
    text = block.text.replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        tokens = shlex.split(line, comments=True)
        segment: list[str] = []
        for token in [*tokens, ";"]:
            if token in SEPARATORS:
                args = _rubricgym_args(segment)
                if args is not None:
                    out.append(args)
                segment = []
            else:
                segment.append(token)
    return out


def _rubricgym_args(tokens: list[str]) -> list[str] | None:
    for i, token in enumerate(tokens):
        if token == "rubricgym" or token.endswith("/rubricgym"):
            if i > 0 and tokens[i - 1] == "-m" or i == 0 or "=" in tokens[i - 1] or token.endswith("/rubricgym"):
                return [t.strip("[]") for t in tokens[i + 1 :] if t.strip("[]")]
            if tokens[i - 1] in ("sudo", "exec", "nohup", "time"):
                return [t.strip("[]") for t in tokens[i + 1 :] if t.strip("[]")]
    return None


def resolve(args: list[str]) -> tuple[Any, list[str], list[str]]:
    """(command, its path, the remaining arguments); raises AssertionError naming an unknown sub-command."""
    cmd, path, rest = ROOT_COMMAND, ["rubricgym"], list(args)
    while hasattr(cmd, "list_commands") and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(None, rest[0])
        if sub is None:
            raise AssertionError(
                f"`{' '.join(path)}` has no command {rest[0]!r} (it has: {', '.join(cmd.list_commands(None))})"
            )
        cmd, path, rest = sub, [*path, rest[0]], rest[1:]
    return cmd, path, rest


def unknown_options(cmd: Any, rest: list[str]) -> list[str]:
    known = {"--help"}
    for p in cmd.params:
        known.update(getattr(p, "opts", []))
        known.update(getattr(p, "secondary_opts", []))
    names = [t.split("=", 1)[0] for t in rest if t.startswith("-") and not t.lstrip("-").replace(".", "").isdigit()]
    return [n for n in names if n not in known and n != "-"]


ALL_LINES = [(b, args) for b in BLOCKS for args in command_lines(b)]


def test_the_docs_show_many_commands():
    """Not vacuous: the pages' bash blocks hold dozens of rubricgym commands, and the README's among them."""
    assert len(ALL_LINES) >= 60, len(ALL_LINES)
    assert any(b.path == "README.md" for b, _ in ALL_LINES)
    paths = set()
    for _, args in ALL_LINES:
        try:
            paths.add(tuple(resolve(args)[1]))
        except AssertionError:
            continue  # an unknown command fails its own block's test below
    assert {("rubricgym", "train"), ("rubricgym", "run"), ("rubricgym", "serve"), ("rubricgym", "arena")} <= paths


@pytest.mark.parametrize("block", [b for b in BLOCKS if command_lines(b)], ids=lambda b: b.id)
def test_rubricgym_commands_exist_with_their_options(block: Block):
    for args in command_lines(block):
        cmd, path, rest = resolve(args)
        assert not hasattr(cmd, "list_commands") or "--help" in rest, (
            f"{block.id}: `{shlex.join(['rubricgym', *args])}` names the group `{' '.join(path)}`, not a command"
        )
        bad = unknown_options(cmd, rest)
        assert not bad, f"{block.id}: `{' '.join(path)}` has no option(s) {bad}: `{shlex.join(['rubricgym', *args])}`"


def test_the_check_catches_a_renamed_option_and_command():
    block = Block("example.md", 1, "bash", "rubricgym run toy-calculator-v0 --agnet oracle --out r\nrubricgym trian\n")
    (run_args, train_args) = command_lines(block)
    cmd, _, rest = resolve(run_args)
    assert unknown_options(cmd, rest) == ["--agnet"]
    with pytest.raises(AssertionError, match="no command 'trian'"):
        resolve(train_args)
    assert command_lines(Block("x", 1, "bash", "torchrun --nproc-per-node 2 -m rubricgym train --config t.yaml\n")) == [
        ["train", "--config", "t.yaml"]
    ]
