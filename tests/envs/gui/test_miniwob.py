"""MiniWoB++ from the ``miniwob`` package (#28 item 10): one generated env per deterministic page, the page's
own reward and success, a seed split, scripted oracles, and the built-in suite listing every page."""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

import rubricgym
from rubricgym.arena.suite import SUITES_DIR, load_suite
from rubricgym.core.registry import spec
from rubricgym.core.rollout import rollout
from rubricgym.envs.gui import miniwob
from rubricgym.envs.gui.agents import find_ref

if miniwob.html_root() is None:
    pytest.skip(f"the miniwob package is not installed ({miniwob.INSTALL})", allow_module_level=True)


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def test_every_page_of_the_package_is_registered_or_excluded_with_a_reason():
    every = set(miniwob.all_pages())
    assert len(every) == 130 and set(miniwob.EXCLUDED) <= every  # no stale exclusion
    assert set(miniwob.playable_pages()) == every - set(miniwob.EXCLUDED) and len(miniwob.playable_pages()) == 96
    assert set(miniwob.FAILS_CHECK) <= set(miniwob.ORACLES) <= set(miniwob.playable_pages())
    registered = {s.id for s in rubricgym.list_envs() if s.id.startswith("miniwob-")}
    assert registered == {miniwob.env_id(p) for p in miniwob.pages()}
    # only pages with an oracle that `rubricgym check` passes on are envs (issue 44 item 11)
    assert set(miniwob.pages()) == set(miniwob.ORACLES) - set(miniwob.FAILS_CHECK) and len(miniwob.pages()) == 21
    assert all((miniwob.exclusion(p) or "").strip() for p in every - set(miniwob.pages()))


@pytest.mark.parametrize(
    ("page", "why"),
    [
        ("chase-circle", "real time"),
        ("drag-box", "needs a mouse drag"),
        ("click-widget", "no scripted oracle"),
        ("click-button", "random clicks earn about half"),
        ("book-flight", "exists only as its page book-flight-nodelay"),
        ("use-autocomplete", "exists only as its page use-autocomplete-nodelay"),
    ],
)
def test_an_excluded_page_id_says_why_not_unknown(page, why):
    for build in (rubricgym.make, spec):
        with pytest.raises(KeyError) as e:
            build(miniwob.env_id(page))
        assert "unknown env id" not in str(e.value) and why in str(e.value)
        assert "left out on purpose" in str(e.value)
    with pytest.raises(KeyError, match="unknown env id 'miniwob-no-such-page-v0'"):
        spec("miniwob-no-such-page-v0")


def test_the_nodelay_only_pages_say_so():
    with pytest.raises(KeyError, match="its twin miniwob-book-flight-nodelay-v0 is left out too: no scripted oracle"):
        spec("miniwob-book-flight-v0")
    assert "book-flight and use-autocomplete exist only as their -nodelay pages" in miniwob.LISTING_NOTE
    listed = spec("miniwob-use-autocomplete-nodelay-v0").description  # what `rubricgym envs` shows beside the id
    assert "The use-autocomplete page exists only as this -nodelay page." in listed
    with pytest.raises(KeyError, match="its twin miniwob-use-autocomplete-nodelay-v0 is registered"):
        spec("miniwob-use-autocomplete-v0")


def test_one_action_pages_label_no_act_stage():
    """A page whose one working click ends the episode has no step that changes it without finishing it: declaring
    ``act`` there made `check`'s stage row fail on every such page (measured: click-dialog, click-test, focus-text)."""
    assert miniwob.page_class("click-dialog").stages == ("navigate", "finish")
    assert miniwob.page_class("enter-text").stages == ("navigate", "act", "finish")


def test_the_builtin_suite_lists_every_page():
    assert (SUITES_DIR / "miniwob.yaml").read_text() == miniwob.suite_yaml()  # regenerate with suite_yaml()
    suite = load_suite("miniwob")
    assert [e.name for e in suite.entries] == miniwob.pages()
    assert {e.split for e in suite.entries} == {"test"} and len(set(suite.weights.values())) == 1


def test_a_page_env_is_a_generated_spec_with_a_seed_split():
    cls = spec("miniwob-click-link-v0").load()
    assert cls.__name__ == miniwob.class_name("click-link") and set(cls.agents()) == {"random", "oracle"}
    assert set(miniwob.page_class("click-widget").agents()) == {"random"}  # no oracle: playable, unregistered
    env = cls()
    s = env.web_spec
    assert s.scope == "/miniwob/click-link.html" and s.success == "() => WOB_RAW_REWARD_GLOBAL >= 0.999999"
    assert s.instruction_field == "utterance"
    test = env.task_set(6, seed=0, split="test")
    train = env.task_set(6, seed=0, split="train")
    assert all(t.params["page_seed"] % 5 == 0 for t in test) and all(t.params["page_seed"] % 5 for t in train)
    assert test[0].env_id == "miniwob-click-link-v0"
    with pytest.raises(ValueError, match="has no page"):
        miniwob.page_spec("no-such-page")


WRAP_JS = """() => (document.getElementById('wrap') || document.body).innerHTML
  .replace(/ data-wob_\\w+="[^"]*"/g, '')"""


@pytest.mark.slow
def test_every_page_resets_deterministically_with_a_text_instruction(pool):
    def first(page: str, seed: int) -> tuple[str, str]:
        env = miniwob.page_class(page)(pool=pool)
        try:
            obs, _ = env.reset(seed=seed)
            assert env.session is not None
            task = re.search(r"^Task: (.*)$", obs, re.M)
            return task[1] if task else "", pool.run(env.session.evaluate(WRAP_JS))
        finally:
            env.close()

    def bad(page: str) -> bool:  # determinism on the oracles' pages (every page was swept once, in the README)
        task, html = first(page, 5)
        return not task.strip() or "{" in task or (page in miniwob.ORACLES and (task, html) != first(page, 5))

    # four episodes at a time on the one browser, as rollouts run them (~1.8x faster than one at a time here)
    with ThreadPoolExecutor(4) as workers:
        every = miniwob.playable_pages()
        failed = [page for page, b in zip(every, workers.map(bad, every), strict=True) if b]
    assert failed == []


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(miniwob.ORACLES))
def test_the_oracle_solves_its_page(pool, page):
    cls = miniwob.page_class(page)
    env = cls(pool=pool)
    tasks = env.task_set(2, seed=0, split="test")
    env.close()

    async def play() -> list[bool]:
        out = []
        for i, task in enumerate(tasks):
            e = cls(pool=pool)
            try:
                traj = await rollout(e, cls.agents()["oracle"](seed=i), task, seed=i)
            finally:
                e.close()
            out.append(bool(traj.outcome.summary["success"]) and traj.outcome.reward == 1.0)
        return out

    assert asyncio.run(play()) == [True, True]


@pytest.mark.slow
def test_the_page_clock_is_stretched_and_another_page_is_out_of_scope(pool):
    env = miniwob.page_class("enter-password")(pool=pool)  # the page sets its own 15 s limit
    try:
        obs, _ = env.reset(seed=5)
        assert env.session is not None
        assert pool.run(env.session.evaluate("() => core.EPISODE_MAX_TIME")) == miniwob.EPISODE_MS
        assert "Time left" not in obs  # the score panel (a wall-clock countdown) is hidden
        _, reward, terminated, _, info = env.step(call("navigate", url="click-test.html"))
        assert not terminated and reward == 0.0 and "only pages under" in info["tool_error"]
        # the page ended by the agent without the task: a false completion, unpaid
        _, reward, terminated, _, _ = env.step(call("click", ref=find_ref(obs, "button", "Submit") or "e1"))
        assert terminated and reward == 0.0 and env.outcome.summary["page_reward"] == -1.0
        assert env.outcome.summary["false_completion"]
    finally:
        env.close()
