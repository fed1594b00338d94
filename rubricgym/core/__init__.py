"""Core types, the env contract, the registry, task sets, parsing, rollouts and the trajectory store.

``core`` imports nothing else of rubricgym's.
"""

from rubricgym.core.agent import Agent, AgentError, BaseAgent, SeededAgent
from rubricgym.core.checks import NamedCheck, check, check_set
from rubricgym.core.env import RubricEnv, ToolError, ToolOutput, UnicodeText
from rubricgym.core.parsing import parse_action
from rubricgym.core.registry import EnvSpec, list_envs, make, make_group, register, spec, unregister
from rubricgym.core.rollout import RolloutReport, rollout, rollout_group, rollout_many
from rubricgym.core.steprecord import Edits, RecordError, StepRecords, ToolRecord
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.tasks import TaskFileError, TaskSet
from rubricgym.core.tools import tool
from rubricgym.core.types import (
    SCHEMA_VERSION,
    Action,
    CheckResult,
    Message,
    Observation,
    Outcome,
    State,
    Step,
    Task,
    ToolCall,
    ToolSpec,
    Trajectory,
)

__all__ = [
    "SCHEMA_VERSION",
    "Action",
    "Agent",
    "AgentError",
    "BaseAgent",
    "SeededAgent",
    "CheckResult",
    "Edits",
    "EnvSpec",
    "Message",
    "NamedCheck",
    "Observation",
    "Outcome",
    "RolloutReport",
    "RecordError",
    "RubricEnv",
    "State",
    "Step",
    "StepRecords",
    "Task",
    "TaskFileError",
    "TaskSet",
    "ToolCall",
    "ToolError",
    "ToolOutput",
    "ToolRecord",
    "ToolSpec",
    "Trajectory",
    "TrajectoryStore",
    "UnicodeText",
    "check",
    "check_set",
    "list_envs",
    "make",
    "make_group",
    "parse_action",
    "tool",
    "register",
    "rollout",
    "rollout_group",
    "rollout_many",
    "spec",
    "unregister",
]
