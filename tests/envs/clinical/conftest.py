"""Shared helpers for the clinical env tests."""

import json

import pytest

import rubricgym
from rubricgym.envs.clinical.case import generate_case
from rubricgym.envs.clinical.schema import load_kb

EXAMPLES = "rubricgym/envs/clinical/data/example_cases.jsonl"


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


@pytest.fixture(scope="session")
def kb():
    return load_kb()


@pytest.fixture
def env():
    return rubricgym.make("clinical-v0")


def start(env, kb, condition: str, seed: int = 0):
    """Reset ``env`` to a synthetic case of ``condition``; returns the task."""
    task = env.task_for(generate_case(kb, seed, condition))
    env.reset(options={"task": task})
    return task
