"""CaRR scoring pieces, on worked examples: citations, answers, support from what was seen, chain reachability."""

from __future__ import annotations

from typing import Any

import pytest

from rubricgym.core.types import Action, Observation, Step, ToolCall
from rubricgym.envs.deepsearch import carr


def _step(i: int, seen: list[tuple[str, str]], tool: str = "open") -> Step:
    """A step that showed ``seen``: an ``open`` of its (one) page, or a ``search`` whose snippets showed it (CaRR
    reads it from the step's typed record; only what was opened or found counts as read)."""
    shown = [{"url": u, "text": t} for u, t in seen]
    info: dict[str, Any]
    if tool == "open":
        args, info = {"doc": seen[0][0]}, {"tool": "open", "url": seen[0][0], "seen": shown}
    else:
        args, info = {"query": "q"}, {"tool": "search", "query": "q", "k": 5, "results": [], "seen": shown}
    return Step(
        index=i,
        stage="gather",
        action=Action(text="", tool_call=ToolCall(name=tool, arguments=args)),
        observation=Observation(messages=[]),
        info=info,
    )


HIDDEN: dict[str, Any] = {
    "answer": "Ada Vell",
    "aliases": ["Vell, Ada"],
    "confusable": ["Ada Velll"],
    "entities": {
        "E0": {"name": "Ada Vell", "aliases": ["Vell, Ada"]},
        "E1": {"name": "Brook", "aliases": []},
        "E2": {"name": "Dunmere", "aliases": []},
    },
    "statements": [
        {
            "id": "S1",
            "text": "<E0> was born in <E1>",
            "entities": ["E0", "E1"],
            "evidence": [{"url": "u://ada", "text": "Ada Vell was born in Brook."}],
        },
        {
            "id": "S2",
            "text": "<E1> is on the <E2> road",
            "entities": ["E1", "E2"],
            "evidence": [{"url": "u://brook", "text": "Brook lies on the Dunmere road."}],
        },
        {
            "id": "S3",
            "text": "<E2> was founded in 1700",
            "entities": ["E2"],
            "evidence": [{"url": "u://dun", "text": "Dunmere was founded in 1700."}],
        },
    ],
}


def test_citations_skip_the_references_section_and_repeat_urls():
    text = "Answer: X\nA [1](u://a), B [2](u://b) and again [1](u://a).\n\n## References\n[3](u://c)"
    assert carr.cited_urls(text) == ["u://a", "u://b"]
    many = " ".join(f"[{i}](u://{i})" for i in range(30))
    assert len(carr.cited_urls(many)) == carr.MAX_CITED


def test_answer_line_and_outcome_match():
    assert carr.answer_line("Some thoughts.\n**Final answer:** Ada Vell [1](u://x)") == "Ada Vell"
    assert carr.answer_line("Answer: Ada Vell [1]\nmore") == "Ada Vell"
    assert carr.answer_line("\n\nAda Vell, I think.\nBecause...") == "Ada Vell, I think."
    names = ["Ada Vell", "Vell, Ada"]
    assert carr.outcome_match("Ada Vell", names)
    assert carr.outcome_match("The answer is ada vell.", names)
    assert carr.outcome_match("Vell, Ada", names)
    assert not carr.outcome_match("Ada Velll", names, ["Ada Velll"])
    assert not carr.outcome_match("Ada", names)
    assert not carr.outcome_match("Ada Vell or Bo Rin or Cy Tal or Di Mo or Ed Nu or Fa Po or Gi Qu or Ha Ru", names)


def test_full_support_and_a_connected_chain_score_one():
    steps = [
        _step(0, [("u://ada", "x. Ada Vell was born in Brook. y")]),
        _step(1, [("u://brook", "Brook lies on the Dunmere road.")]),
        _step(2, [("u://dun", "Dunmere was founded in 1700.")]),
    ]
    text = "Answer: Ada Vell\nBorn in Brook [1](u://ada), on the Dunmere road [2](u://brook), 1700 [3](u://dun)."
    p = carr.score(HIDDEN, text, steps)
    assert p["correct"] and p["rubric"] == 1.0 and p["c_grpo"] == 1.0
    assert all(r["reachable"] for r in p["statements"])


def test_a_supported_statement_cut_off_from_the_answer_does_not_count():
    # S2 unsupported (its page cited but never seen): S3 is supported yet unreachable from E0
    steps = [
        _step(0, [("u://ada", "Ada Vell was born in Brook.")]),
        _step(1, [("u://dun", "Dunmere was founded in 1700.")]),
    ]
    text = "Answer: Ada Vell\nBrook [1](u://ada); Dunmere road [2](u://brook); 1700 [3](u://dun)."
    p = carr.score(HIDDEN, text, steps)
    rows = {r["id"]: r for r in p["statements"]}
    assert rows["S1"]["reachable"] and not rows["S2"]["supported"]
    assert rows["S3"]["supported"] and not rows["S3"]["reachable"]
    assert p["chain"] == 1 / 3 and p["evidence"] == 2 / 3  # S1 and S3 seen, S2's sentence never
    assert p["rubric"] == 0.5 * (1 / 3) + 0.5 * (2 / 3)
    assert p["c_grpo"] == (1 - 0.3) * 1 + 0.3 * p["rubric"]
    assert p["unseen_cited"] == ["u://brook"]


def test_support_needs_a_citation_an_identified_entity_and_the_whole_sentence():
    steps = [_step(0, [("u://ada", "Ada Vell was born in Brookside.")])]  # not the same sentence
    assert carr.score(HIDDEN, "Answer: Ada Vell, born in Brook [1](u://ada)", steps)["chain"] == 0
    seen = [_step(0, [("u://ada", "Ada Vell was born in Brook.")])]
    assert carr.score(HIDDEN, "Answer: Ada Vell, born in Brook.", seen)["chain"] == 0  # no citation
    assert carr.score(HIDDEN, "Answer: Ada Vell [1](u://ada)", seen)["chain"] == 0  # E1 not named
    assert carr.score(HIDDEN, "Answer: Ada Vell, born in Brook [1](u://ada)", seen)["chain"] == 1 / 3


def test_a_wrong_answer_gets_nothing_however_well_cited():
    steps = [_step(0, [("u://ada", "Ada Vell was born in Brook.")])]
    p = carr.score(HIDDEN, "Answer: Ada Velll, born in Brook [1](u://ada)", steps)
    assert not p["correct"] and p["rubric"] == 0 and p["c_grpo"] == 0


def test_lexical_support_without_evidence_sentences():
    hidden = {**HIDDEN, "statements": [{"id": "S1", "text": "<E0> was born in <E1>", "entities": ["E0", "E1"]}]}
    steps = [_step(0, [("u://ada", "Records show that Ada Vell was born in the town of Brook in 1900.")])]
    assert carr.score(hidden, "Answer: Ada Vell, of Brook [1](u://ada)", steps)["rubric"] == 1.0
    steps = [_step(0, [("u://ada", "Ada Vell lived in Paris.")])]
    assert carr.score(hidden, "Answer: Ada Vell, of Brook [1](u://ada)", steps)["rubric"] == 0.0


def test_derived_chain_for_a_question_without_statements():
    hidden = {"answer": "Ada Vell", "aliases": [], "entities": {"E0": {"name": "Ada Vell"}}, "statements": []}
    steps = [_step(0, [("u://ada", "Ada Vell was born in Brook in 1901.")])]

    def rows(text: str) -> dict[str, bool]:
        return {r["id"]: r["supported"] for r in carr.score(hidden, text, steps)["statements"]}

    assert rows("Ada Vell [1](u://ada)") == {"answer": True, "cited_seen": True}  # no 'Answer:' line: line 1
    assert rows("Answer: Ada Vell\nShe was born in Brook in 1901 [1](u://ada).") == {
        "answer": True,
        "fact1": True,
        "cited_seen": True,
    }
    assert rows("Answer: Ada Vell\nShe was born in Paris in 1850 [1](u://ada).")["fact1"] is False
    assert rows("Answer: Ada Vell [1](u://nowhere)") == {"answer": False, "cited_seen": False}
    gold = {**hidden, "gold_docs": ["u://bio"]}
    assert carr.score(gold, "Answer: Ada Vell [1](u://ada)", steps)["statements"][0]["supported"] is False


def test_evidence_read_ranks_a_right_answer_and_snippets_are_not_read():
    """(#39) At equal correctness, the evidence read (opened or found, cited or not) earns half the rubric reward."""
    read = [_step(0, [("u://ada", "Ada Vell was born in Brook.")])]
    glimpsed = [_step(0, [("u://ada", "Ada Vell was born in Brook.")], tool="search")]
    bare = carr.score(HIDDEN, "Answer: Ada Vell", [])
    uncited = carr.score(HIDDEN, "Answer: Ada Vell", read)
    snippet = carr.score(HIDDEN, "Answer: Ada Vell", glimpsed)
    assert bare["c_grpo"] == snippet["c_grpo"] == (1 - 0.3)  # no page read: the outcome alone
    assert uncited["chain"] == 0 and uncited["evidence"] == 1 / 3  # S1's sentence read, not cited
    assert uncited["c_grpo"] == pytest.approx(0.7 + 0.3 * 0.5 / 3) and uncited["c_grpo"] > bare["c_grpo"]
    wrong = carr.score(HIDDEN, "Answer: Ada Velll", read)
    assert wrong["evidence"] == 0 and wrong["c_grpo"] == 0  # reading never pays a wrong answer
