"""clinical-v0 speed: synthetic cases per second and scripted oracle episodes per second, on one core.

Cases: ``generate_case`` + ``task_for`` (the whole ``Task`` an episode starts from). Episodes: ``reset`` plus
every ``step`` of the oracle (history, examination, key exams, diagnosis), driven synchronously the way a
trainer's env worker would (the agent's ``act`` coroutine is stepped directly, no event loop). Rates are per
second of this process's CPU time on one pinned core (wall-clock rates are printed too; on a shared machine they
mostly measure the neighbours). Peer: the same harness on toy-calculator-v0's oracle, measured in the same run.
Target: >= 1,000 oracle episodes/s.

    .venv/bin/python bench/clinical.py [--cases 2000] [--episodes 1000]
"""

from __future__ import annotations

import argparse
import os
import time

import rubricgym
from rubricgym.core.types import Message
from rubricgym.envs.clinical.case import generate_case
from rubricgym.envs.clinical.env import ClinicalEnv

TARGET_EPISODES_PER_S = 1000.0


def _act(agent, messages, tools) -> str:
    """Run an agent's ``act`` coroutine that never awaits I/O (scripted agents) without an event loop."""
    coro = agent.act(messages, tools)
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the agent awaited something; this harness only drives scripted agents")


def episodes_per_s(env_id: str, n: int) -> tuple[float, float, float]:
    env = rubricgym.make(env_id)
    tasks = env.task_set(n, seed=1)
    oracle = type(env).agents()["oracle"]()
    tools = env.tools()
    turn = Message(role="assistant", content="")  # scripted oracles only count the turns taken so far
    steps = 0
    t0 = time.process_time()
    w0 = time.perf_counter()
    for i, task in enumerate(tasks):
        agent = oracle.episode(task, i)
        history = list(env.reset_typed(seed=i, task=task).messages)
        while True:
            obs = env.step_typed(_act(agent, history, tools))
            steps += 1
            history += [turn, obs.messages[0]]
            if obs.done or obs.truncated:
                break
    dt, wall = time.process_time() - t0, time.perf_counter() - w0
    return n / dt, steps / n, n / wall


def cases_per_s(n: int) -> float:
    env = rubricgym.make("clinical-v0")
    assert isinstance(env, ClinicalEnv)
    t0 = time.process_time()
    for seed in range(n):
        env.task_for(generate_case(env.kb, seed))
    return n / (time.process_time() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--episodes", type=int, default=1000)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    episodes_per_s("clinical-v0", 50)  # warm the knowledge base and name indexes
    print(f"cases/s (generate_case + task_for):      {cases_per_s(args.cases):10.0f}")
    eps, steps, eps_wall = episodes_per_s("clinical-v0", args.episodes)
    peer, peer_steps, peer_wall = episodes_per_s("toy-calculator-v0", args.episodes)
    print(f"clinical-v0 oracle episodes/s:           {eps:10.0f}  ({steps:.1f} steps each; {eps_wall:.0f}/s wall)")
    print(
        f"toy-calculator-v0 oracle episodes/s:     {peer:10.0f}  ({peer_steps:.1f} steps each; {peer_wall:.0f}/s "
        "wall; peer)"
    )
    print(f"ratio clinical / toy-calculator:         {eps / peer:10.2f}")
    print(f"ratio to the target of {TARGET_EPISODES_PER_S:.0f} episodes/s:   {eps / TARGET_EPISODES_PER_S:10.2f}")


if __name__ == "__main__":
    main()
