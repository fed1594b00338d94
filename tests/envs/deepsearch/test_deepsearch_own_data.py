"""Issue 9: deep search on a user's own corpus and questions (no `rubrics`): citations count, correctness gates
the rubric, hops are the question's, search fills k, questions come in file order."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.core.tasks import TaskSet
from rubricgym.envs.deepsearch import DeepSearchEnv
from rubricgym.envs.deepsearch.agents import AGENTS
from rubricgym.envs.deepsearch.corpus import CorpusError
from rubricgym.rewards import CheckJudge, ProcessRewardModel

from .conftest import PAGES


def call(name: str, **args: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


PLAIN = [  # the common case: no rubrics; the first names its gold page
    {
        "id": "q-poet",
        "question": "Which poet was born in a harbour town that lies on the Dunmere road?",
        "answer": "Ada Vell",
        "gold_docs": ["people/ada_vell.md"],
    },
    {"id": "q-market", "question": "Which market town was founded in 1702?", "answer": "Dunmere"},
    {"id": "q-marsh", "question": "Which harbour town lies north of the salt marshes?", "answer": "Brook"},
]


@pytest.fixture()
def plain(tmp_path: Path) -> tuple[str, str]:
    folder = tmp_path / "corpus"
    for rel, text in PAGES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in PLAIN), encoding="utf-8")
    return str(folder), str(questions)


def _episode(plain: tuple[str, str], actions: list[str]):
    one = Path(plain[1]).with_name("poet.jsonl")  # the first question alone: its task whatever the draw order
    one.write_text(Path(plain[1]).read_text().splitlines()[0] + "\n")
    env = make("deepsearch-v0", corpus=plain[0], questions=str(one))
    task = env.task_set(1)[0]
    env.reset_typed(task=task)
    for a in actions:
        env.step(a)
    return env.trajectory()


def _url(plain: tuple[str, str], ref: str) -> str:
    env = make("deepsearch-v0", corpus=plain[0], questions=plain[1])
    return env.corpus.docs[env.corpus.resolve(ref)].url


def _variants(plain: tuple[str, str]) -> dict[str, object]:
    ada, brook = _url(plain, "people/ada_vell.md"), _url(plain, "places/brook.txt")
    read = [call("search", query="poet harbour town Dunmere road"), call("open", doc=ada)]
    return {
        "cited_seen": _episode(
            plain,
            [
                *read,
                call("answer", text=f"Answer: Ada Vell [1]({ada})\nAda Vell was born in Brook in 1901 [1]({ada})."),
            ],
        ),
        "uncited": _episode(plain, [*read, call("answer", text="Answer: Ada Vell")]),
        "cites_unseen": _episode(
            plain, [call("open", doc=ada), call("answer", text=f"Answer: Ada Vell [1]({brook}x)")]
        ),
        "wrong_cites_gold": _episode(plain, [*read, call("answer", text=f"Answer: Brook [1]({ada})")]),
    }


def test_citations_count_without_rubrics_and_env_reward_agrees_with_default_rubric(plain):
    trajs = _variants(plain)
    env_reward = {k: t.outcome.reward for k, t in trajs.items()}
    assert (
        env_reward["cited_seen"]
        > env_reward["uncited"]
        > env_reward["cites_unseen"]
        > env_reward["wrong_cites_gold"]
        == 0.0
    ), env_reward
    assert env_reward["cited_seen"] == 1.0
    prm = ProcessRewardModel(DeepSearchEnv.default_rubric(), [CheckJudge()])
    for name, t in trajs.items():
        assert asyncio.run(prm.score(t)).total == pytest.approx(t.outcome.reward), name


def test_gold_docs_restrict_which_cited_page_supports_the_answer(plain):
    weather = _url(plain, "misc/weather.md")
    (Path(plain[0]) / "misc" / "weather.md").write_text("# Weather\n\nAda Vell disliked the rain of Brook.")
    t = _episode(plain, [call("open", doc=weather), call("answer", text=f"Answer: Ada Vell [1]({weather})")])
    rows = DeepSearchEnv.checks()["carr_rubric"](t).details["statements"]
    assert rows[0]["id"] == "answer" and not rows[0]["supported"]  # named there, but not a gold page
    with pytest.raises(CorpusError, match="gold_docs entry 'nowhere.md'"):
        q = Path(plain[1]).with_name("poet.jsonl")
        q.write_text(json.dumps({**PLAIN[0], "gold_docs": ["nowhere.md"]}) + "\n")
        make("deepsearch-v0", corpus=plain[0], questions=str(q))


def test_wrong_answers_score_zero_under_the_rubric_score_uses(plain):
    from rubricgym.rewards.cli import rubric_for

    trajs = _variants(plain)
    bad = trajs["wrong_cites_gold"]
    prm = ProcessRewardModel(rubric_for(bad, None), [CheckJudge()])
    assert asyncio.run(prm.score(bad)).total == 0.0
    right = asyncio.run(
        ProcessRewardModel(rubric_for(trajs["cites_unseen"], None), [CheckJudge()]).score(trajs["cites_unseen"])
    ).total
    assert right > 0.5


def test_scripted_agents_on_plain_questions(plain):
    env_kw = {"corpus": plain[0], "questions": plain[1]}
    tasks = TaskSet.generate("deepsearch-v0", 3, **env_kw)
    rewards = {
        a: [
            asyncio.run(rollout(make("deepsearch-v0", **env_kw), AGENTS[a](seed=0), t, seed=0)).outcome.reward
            for t in tasks
        ]
        for a in ("oracle", "random")
    }
    assert rewards["oracle"] == [1.0, 1.0, 1.0]
    assert max(rewards["random"]) < 0.7


def test_hops_searched_credits_the_question_not_the_answer(plain):
    hops = DeepSearchEnv.checks()["hops_searched"]
    answer_only = _episode(plain, [call("search", query="Ada Vell"), call("answer", text="Answer: Ada Vell")])
    question = _episode(
        plain,
        [call("search", query="poet born harbour town lies Dunmere road"), call("answer", text="Answer: Ada Vell")],
    )
    assert hops(answer_only).score == 0.0 and not hops(answer_only).met
    assert hops(question).met and hops(question).score == 1.0


def test_search_returns_k_results_when_one_long_page_fills_the_pool(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "long.md").write_text(
        "# Long\n\n"
        + "\n\n".join(f"Section {i}. The lighthouse keeper logs the tide and the lighthouse lamp." for i in range(400))
    )
    for i in range(6):
        (folder / f"short{i}.md").write_text(f"# Short {i}\n\nA lighthouse stands on island {i}.")
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"question": "Which page is long?", "answer": "Long"}) + "\n")
    env = make("deepsearch-v0", corpus=str(folder), questions=str(q))
    hits = env.index.search("lighthouse", 5)
    assert len(hits) == 5 and len({h.doc for h in hits}) == 5


def test_questions_file_in_order_each_once(plain):
    tasks = TaskSet.generate("deepsearch-v0", 3, corpus=plain[0], questions=plain[1])
    assert [t.hidden["question_id"] for t in tasks] == ["q-poet", "q-market", "q-marsh"]
    again = TaskSet.generate("deepsearch-v0", 2, seed=5, corpus=plain[0], questions=plain[1])
    assert [t.hidden["question_id"] for t in again] == ["q-poet", "q-market"]
    assert [t.id for t in again] == [t.id for t in tasks[:2]]  # opaque ids, deterministic
    with pytest.raises(ValueError, match="has 3 question"):
        TaskSet.generate("deepsearch-v0", 15, corpus=plain[0], questions=plain[1])


def test_hops_searched_on_a_fictional_chain_ignores_searching_the_answer(ds_env, ds_tasks):
    hops = DeepSearchEnv.checks()["hops_searched"]
    task = ds_tasks[0]
    ds_env.reset_typed(task=task)
    ds_env.step(call("search", query=task.hidden["answer"]))
    ds_env.step(call("answer", text=f"Answer: {task.hidden['answer']}"))
    assert hops(ds_env.trajectory()).score == 0.0


def test_errors_name_a_question_by_its_own_id_and_line_not_its_hash(plain):
    """Issue #44 item 9: the task id is an opaque hash; messages to the file's owner name the record."""
    q = Path(plain[1]).with_name("gold.jsonl")
    rows = [PLAIN[1], {**PLAIN[0], "gold_docs": ["nowhere.md"]}]
    q.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(CorpusError) as bad:
        make("deepsearch-v0", corpus=plain[0], questions=str(q))
    assert f"question 'q-poet' at {q}:2" in str(bad.value) and "q-" + "0" * 12 not in str(bad.value)
    twice = Path(plain[1]).with_name("twice.jsonl")
    twice.write_text("".join(json.dumps(r) + "\n" for r in [PLAIN[0], PLAIN[1], PLAIN[0]]))
    with pytest.raises(CorpusError, match=rf"question 'q-poet' at {twice}:3 repeats question 'q-poet' at {twice}:1"):
        make("deepsearch-v0", corpus=plain[0], questions=str(twice))


def test_a_leak_in_the_users_question_names_its_id_and_line(plain):
    """A question that states its own answer is a leak the audit reports by the record's id and line."""
    from rubricgym.rewards.leaks import audit_leaks

    q = Path(plain[1]).with_name("leaky.jsonl")
    rows = [PLAIN[1], {"id": "q-gives-away", "question": "Is Ada Vell the poet born in Brook?", "answer": "Ada Vell"}]
    q.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kw = {"corpus": plain[0], "questions": str(q)}
    report = asyncio.run(audit_leaks("deepsearch-v0", n_tasks=2, env_kwargs=kw, agents={"oracle": AGENTS["oracle"]}))
    lines = [leak.line() for leak in report.leaks if leak.value == "Ada Vell"]
    assert lines and all(f"question 'q-gives-away' at {q}:2" in line for line in lines), lines
