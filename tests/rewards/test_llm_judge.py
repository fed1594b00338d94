"""LLMJudge plumbing over real HTTP against a scripted loopback server (replies scripted: no verdict quality)."""

import asyncio
import json
import re
import threading
import time

import pytest

from rubricgym.rewards.cache import JudgeCache
from rubricgym.rewards.gullible import gullible_reply
from rubricgym.rewards.llm_judge import LLMJudge
from rubricgym.rewards.rubric import Criterion, Rubric

CRIT = Criterion(id="explains", text="The agent explains each calculation.", judge="Look for a reason per step.")
STEP_CRIT = Criterion(id="step_ok", text="The step is sensible.", scope="step")
RUBRIC = Rubric(id="r", criteria=[CRIT, STEP_CRIT])
GOOD = '{"rationale": "each step says why", "met": true, "score": 0.8, "evidence_steps": [0]}'


def judge_for(server, **kw):
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout_s", 5)
    return LLMJudge(base_url=server.base_url, model="stub", **kw)


async def test_verdict_from_json_reply_and_prompt_content(oracle_trajs, stub_server):
    with stub_server(lambda body: GOOD) as server:
        v = await judge_for(server).judge(CRIT, oracle_trajs[0], rubric=RUBRIC)
    assert v.ok and v.met and v.score == 0.8 and v.evidence.steps == [0]
    assert v.judge == "llm:stub" and v.model == "stub"
    body = server.requests[0]
    prompt = body["messages"][1]["content"]
    assert CRIT.text in prompt and CRIT.judge in prompt and oracle_trajs[0].task.prompt in prompt
    assert "### Final answer" in prompt
    assert body["response_format"]["type"] == "json_schema" and body["temperature"] == 0.0
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["rationale", "applicable", "met", "score"]
    assert prompt.index("rationale") < prompt.index('"met"')  # the rationale comes before the verdict


async def test_step_scope_prompt_marks_the_step(oracle_trajs, stub_server):
    with stub_server(lambda body: GOOD) as server:
        v = await judge_for(server, context_steps=1).judge(STEP_CRIT, oracle_trajs[0], 2, rubric=RUBRIC)
    prompt = server.requests[0]["messages"][1]["content"]
    assert v.step == 2
    assert ">>> THE STEP TO JUDGE <<<\n### Step 2" in prompt and "### Step 1" in prompt
    assert "### Step 0" not in prompt and "1 earlier step(s) omitted" in prompt


async def test_unparseable_reply_is_retried_then_an_error(oracle_trajs, stub_server):
    replies = iter(["I refuse to use JSON.", GOOD])
    with stub_server(lambda body: next(replies)) as server:
        v = await judge_for(server, parse_retries=1).judge(CRIT, oracle_trajs[0])
    assert v.ok and v.details["attempts"] == 2 and len(server.requests) == 2
    assert server.requests[1]["temperature"] > 0  # the retry samples instead of repeating the greedy reply

    with stub_server(lambda body: "still no verdict") as server:
        v = await judge_for(server, parse_retries=2).judge(CRIT, oracle_trajs[0])
    assert not v.ok and v.score is None and v.met is None
    assert "JudgeParseError" in v.error and len(server.requests) == 3


async def test_server_errors_are_retried_by_the_client(oracle_trajs, stub_server):
    count = {"n": 0}

    def flaky(body):
        count["n"] += 1
        return (503, "overloaded") if count["n"] <= 2 else GOOD

    with stub_server(flaky) as server:
        j = LLMJudge(base_url=server.base_url, model="stub", max_retries=3, timeout_s=5)
        j.client.backoff_s = 0.01
        v = await j.judge(CRIT, oracle_trajs[0])
    assert v.ok and count["n"] == 3


async def test_dead_server_gives_error_verdicts_not_zeros(oracle_trajs, stub_server):
    with stub_server(lambda body: GOOD) as server:
        url = server.base_url
    j = LLMJudge(base_url=url, model="stub", max_retries=1, timeout_s=2)
    j.client.backoff_s = 0.01
    v = await j.judge(CRIT, oracle_trajs[0])
    assert not v.ok and v.score is None and "EndpointError" in v.error


async def test_json_mode_is_dropped_when_the_server_rejects_it(oracle_trajs, stub_server):
    def no_json_mode(body):
        if "response_format" in body:
            return 400, '{"error": "response_format is not supported"}'
        return GOOD

    with stub_server(no_json_mode) as server:
        j = judge_for(server)
        v1 = await j.judge(CRIT, oracle_trajs[0])
        v2 = await j.judge(CRIT, oracle_trajs[1])
    assert v1.ok and v2.ok and j.json_mode == "off"
    formats = [r.get("response_format", {}).get("type") for r in server.requests]
    assert formats == ["json_schema", "json_object", None, None]


async def test_cache_makes_rejudging_free_and_never_stores_errors(tmp_path, oracle_trajs, stub_server):
    cache = JudgeCache(tmp_path / "c.sqlite")
    with stub_server(lambda body: GOOD) as server:
        j = judge_for(server, cache=cache)
        first = await j.judge(CRIT, oracle_trajs[0], rubric=RUBRIC)
        again = await j.judge(CRIT, oracle_trajs[0], rubric=RUBRIC)
        other = await j.judge(CRIT, oracle_trajs[1], rubric=RUBRIC)  # different evidence: a miss
        bumped = await j.judge(CRIT, oracle_trajs[0], rubric=RUBRIC.model_copy(update={"version": "2"}))
    assert len(server.requests) == 3
    assert not first.cached and again.cached and not other.cached and not bumped.cached
    assert again.score == first.score and again.rationale == first.rationale
    # a fresh process reads the same file
    assert len(JudgeCache(tmp_path / "c.sqlite")) == 3

    with stub_server(lambda body: "garbage") as server:
        j = judge_for(server, cache=cache, parse_retries=0)
        failed = await j.judge(CRIT, oracle_trajs[2], rubric=RUBRIC)
        await j.judge(CRIT, oracle_trajs[2], rubric=RUBRIC)
    assert not failed.ok and len(server.requests) == 2 and len(cache) == 3


async def test_concurrency_is_limited(oracle_trajs, stub_server):
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def slow(body):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return GOOD

    with stub_server(slow) as server:
        j = judge_for(server, concurrency=2)
        verdicts = await asyncio.gather(*(j.judge(STEP_CRIT, oracle_trajs[0], i % 3) for i in range(8)))
    assert all(v.ok for v in verdicts) and len(server.requests) == 8
    assert state["peak"] == 2


async def test_implicit_rubric_likert(oracle_trajs, stub_server):
    with stub_server(lambda body: json.dumps({"rationale": "mostly", "score": 7})) as server:
        v = await judge_for(server).judge_rubric(RUBRIC, oracle_trajs[0])
    assert v.ok and v.score == pytest.approx(6 / 9) and v.details["likert"] == 7
    assert CRIT.text in server.requests[0]["messages"][1]["content"]
    with stub_server(lambda body: '{"score": 42}') as server:
        v = await judge_for(server, parse_retries=0).judge_rubric(RUBRIC, oracle_trajs[0])
    assert not v.ok and "outside" in v.error


def test_llm_judge_needs_an_endpoint():
    with pytest.raises(ValueError, match="base_url and model"):
        LLMJudge()


async def test_the_evidence_reaches_the_server_fenced_with_a_fresh_token(oracle_trajs, stub_server):
    with stub_server(lambda body: gullible_reply(body["messages"])) as server:
        j = judge_for(server)
        verdicts = [await j.judge(CRIT, oracle_trajs[0]) for _ in range(2)]
    assert all(v.ok and v.met for v in verdicts)  # the gullible judge credits grounded work
    system, prompts = (
        server.requests[0]["messages"][0]["content"],
        [r["messages"][1]["content"] for r in server.requests],
    )
    assert "never instructions" in system
    tokens = []
    for prompt in prompts:
        (token,) = re.findall(r"^<<<EVIDENCE ([0-9a-f]{16})>>>$", prompt, re.M)
        assert prompt.count(f"\n<<<END EVIDENCE {token}>>>\n\n# Your verdict") == 1
        assert f"between the lines <<<EVIDENCE {token}>>> and <<<END EVIDENCE {token}>>>" in prompt
        body = prompt.split(f"<<<EVIDENCE {token}>>>\n")[1].split(f"\n<<<END EVIDENCE {token}>>>")[0]
        assert "### Final answer" in body and oracle_trajs[0].steps[0].action.text in body
        tokens.append(token)
    assert tokens[0] != tokens[1]
