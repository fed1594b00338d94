"""``deepsearch-v0``: plan, search a corpus, read pages and answer with citations; rewarded CaRR-style.

The corpus is a generated fictional world (``n_docs`` pages, default 500) or a real one (a folder of
``.txt``/``.md``/``.html`` files or a JSONL of documents, with questions from a JSONL). Stages: ``plan`` (the
plan tool), ``gather`` (search, first opening of a page), ``review`` (find, re-opening a page) and ``answer``.
The terminal reward is C-GRPO (``(1-α)·outcome + α·R_rubric`` for a right answer, 0 for a wrong one) or the
bare outcome (``reward="outcome"``); the env's checks expose every part of it.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rubricgym.core.env import RubricEnv, ToolError, ToolOutput
from rubricgym.core.leaves import leaves
from rubricgym.core.tools import tool
from rubricgym.core.types import Task, ToolCall
from rubricgym.envs.deepsearch import carr, guidance, tools
from rubricgym.envs.deepsearch.checks import ALL, RUBRIC_FILE, task_rubric
from rubricgym.envs.deepsearch.corpus import Corpus, load_corpus
from rubricgym.envs.deepsearch.index import SearchIndex
from rubricgym.envs.deepsearch.questions import DIFFICULTY_HOPS, QuestionError, make_question
from rubricgym.envs.deepsearch.real import load_questions, resolve_gold
from rubricgym.envs.deepsearch.records import RECORDS, Answer, Find, Observed, Open, Plan, Search
from rubricgym.envs.deepsearch.render import render_world
from rubricgym.envs.deepsearch.world import MAX_DISTRACTORS, World, generate_world

HELDOUT_SPLITS = ("test", "heldout")
"""Splits drawn from the held-out world: another world seed, so no page, entity or answer is shared with training."""
TRAIN_WORLD_SPLIT = "test-train-world"
"""Held-out questions in the training world: their answers are the world's reserved entities, never a training
answer (the pages are shared: a gain here may be knowledge of the world, not skill)."""
SPLITS = ("train", *HELDOUT_SPLITS, TRAIN_WORLD_SPLIT)
HELDOUT_SEED_OFFSET = 1_000_003
"""The held-out world's seed is ``world_seed + HELDOUT_SEED_OFFSET`` unless ``heldout_world_seed`` names one."""
RESERVED_SHARE = 5
"""One entity in ``RESERVED_SHARE`` of the training world (by a hash of its name) answers only held-out questions."""
MAX_REDRAWS = 400


def reserved(world_key: str, name: str) -> bool:
    """Whether the entity ``name`` of the world ``world_key`` is reserved for held-out questions."""
    return int(hashlib.sha1(f"{world_key}|reserved|{name}".encode()).hexdigest()[:8], 16) % RESERVED_SHARE == 0


GUIDE = """
How to work: plan, then search for the entities the question describes, open their pages, check facts with
find, and answer. The answer must start with a line 'Answer: <name>' followed by the facts that justify it, each
cited inline as [n](url) with the URL of a page you actually read; only cited content you saw counts."""


@functools.lru_cache(maxsize=4)
def load_world(
    seed: int, n_docs: int, cache_dir: str | None, distractors: int | None = None
) -> tuple[World, Corpus, SearchIndex]:
    """The world, its corpus and its (disk-cached) index; memoised, as every env of a run shares them."""
    world = generate_world(seed, n_docs, distractors)
    corpus = render_world(world)
    return world, corpus, SearchIndex.open_or_build(corpus, cache_dir)


@functools.lru_cache(maxsize=4)
def _load_real(path: str, stamp: float, cache_dir: str | None) -> tuple[Corpus, SearchIndex]:
    corpus = load_corpus(path)
    return corpus, SearchIndex.open_or_build(corpus, cache_dir)


def load_real(path: str | Path, cache_dir: str | None = None) -> tuple[Corpus, SearchIndex]:
    """A real corpus and its index, reloaded when the folder or file changes."""
    p = Path(path).expanduser().resolve()
    files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    stamp = max((f.stat().st_mtime for f in files), default=0.0) + len(files)
    return _load_real(str(p), stamp, cache_dir)


class DeepSearchEnv(RubricEnv):
    """Multi-hop questions answered with search, open, find and cited answers (see the module docstring).

    Difficulty knobs (a ladder a small model can climb: 1 hop among few pages, then more hops, more pages and
    more distractors):

    - ``hops``: relations between the answer and the entity the question starts from, 1-5 (default: drawn from
      ``difficulty``);
    - ``difficulty``: ``easy`` (2 hops, exact constraints), ``medium`` (3 hops, half the numbers fuzzy: "in the
      1850s"), ``hard`` (4-5 hops, mostly fuzzy, more constraints); ``None`` draws one per task. With ``hops``
      it sets only the constraints' fuzziness;
    - ``n_docs``: the world's size in pages (100 to 1,000,000; default 500), which also sets how many entities
      share a question's descriptions;
    - ``distractors``: list and disambiguation pages among which the entity pages are searched (default: 10% of
      ``n_docs``); the entities and the questions of a seed stay the same whatever their number;
    - ``world_seed``: which world; ``window_chars``: how much of a page one ``open`` shows;
    - ``heldout_world_seed``: the world of the held-out splits (default ``world_seed + 1,000,003``);
    - ``reward``/``alpha``: C-GRPO (``(1-alpha)·outcome + alpha·rubric`` for a right answer) or the bare outcome.

    Splits of a generated world: ``train`` (the training world, its reserved answers left out), ``test`` or
    ``heldout`` (the held-out world: same size, another seed, no answer that names an entity of the training
    world) and ``test-train-world`` (the training world, only its reserved answers: unseen questions on seen pages,
    to report beside the held-out world's).

    ``corpus``/``questions`` replace the generated world by a real corpus and a questions JSONL (``real.py``);
    the world knobs do not apply to it. ``guidance`` gives three levels of hints for a failing group: where to
    start, the page to open first (as a search and a result number) and the chain of hops (``guidance.py``).
    """

    env_id = "deepsearch-v0"
    stages = ("plan", "gather", "review", "answer")
    held_out_splits = (HELDOUT_SPLITS[0], TRAIN_WORLD_SPLIT)
    default_max_steps = 40
    max_observation_chars = 6000
    check_set = ALL
    step_records = RECORDS
    rubric_file = RUBRIC_FILE
    discoverable = {
        field: frozenset({"search", "open", "find"}) for field in ("answer", "aliases", "entities", "gold_docs")
    }
    """The chain's entities, the answer and their pages are in the corpus: finding them is the task."""
    guidance_levels = guidance.LEVELS
    shortcut_agents = {"shotgun": "rubricgym.envs.deepsearch.agents:ShotgunAnswer"}
    outcome_agents = {
        "partial": "rubricgym.envs.deepsearch.agents:UncitedOracle",  # reads the chain, answers right, cites nothing
        "failed": "rubricgym.envs.deepsearch.agents:MisreadOracle",  # reads and cites the chain, answers wrong
    }
    scripted_agents = {
        name: f"rubricgym.envs.deepsearch.agents:{cls}"
        for name, cls in (
            ("oracle", "OracleAgent"),
            ("shortcut", "ShortcutAgent"),
            ("shortcut-lucky", "LuckyShortcutAgent"),
            ("random", "RandomAgent"),
        )
    } | {"teacher": "rubricgym.envs.deepsearch.teacher:Teacher"}

    def __init__(
        self,
        n_docs: int = 500,
        world_seed: int = 0,
        heldout_world_seed: int | None = None,
        difficulty: Literal["easy", "medium", "hard"] | None = None,
        hops: int | None = None,
        distractors: int | None = None,
        corpus: str | None = None,
        questions: str | None = None,
        reward: Literal["c_grpo", "outcome"] = "c_grpo",
        alpha: float = carr.ALPHA,
        window_chars: int = 2000,
        cache_dir: str | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
        announce_steps: bool = False,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.announce_steps = announce_steps
        if difficulty is not None and difficulty not in DIFFICULTY_HOPS:
            raise ValueError(f"difficulty must be one of {sorted(DIFFICULTY_HOPS)} or None, got {difficulty!r}")
        if hops is not None and not 1 <= hops <= 5:
            raise ValueError(f"hops must be between 1 and 5, got {hops}")
        if distractors is not None and not 0 <= distractors <= MAX_DISTRACTORS:
            raise ValueError(f"distractors must be between 0 and {MAX_DISTRACTORS:,} (or None), got {distractors}")
        if heldout_world_seed is not None and heldout_world_seed == world_seed:
            raise ValueError(
                f"heldout_world_seed must differ from world_seed ({world_seed}): the held-out world is another world"
            )
        if reward not in ("c_grpo", "outcome"):
            raise ValueError(f"reward must be 'c_grpo' or 'outcome', got {reward!r}")
        if (corpus is None) != (questions is None):
            raise ValueError("a real corpus needs both corpus=PATH and questions=PATH.jsonl")
        self.difficulty, self.hops, self.reward, self.alpha = difficulty, hops, reward, alpha
        self.window_chars = window_chars
        self.cache_dir = cache_dir
        self.n_docs, self.world_seed, self.distractors = n_docs, world_seed, distractors
        self.heldout_world_seed = world_seed + HELDOUT_SEED_OFFSET if heldout_world_seed is None else heldout_world_seed
        self.corpus_path = str(Path(corpus).expanduser().resolve()) if corpus else None
        self.questions = load_questions(questions) if questions else []
        self._world: World | None = None
        self._loaded: dict[str, Any] = {}
        self._train_names: frozenset[str] | None = None
        self._corpus, self._index = self._resources(self._world_params())
        if questions:
            resolve_gold(self.questions, self._corpus)
        self._opened: set[str] = set()
        self._reopened = False
        self._observed: list[Observed] = []

    # ---- resources --------------------------------------------------------------------------------------

    def _world_params(self, split: str = "train") -> dict[str, Any]:
        """The ``params.world`` of a task of ``split``: the training world, or the held-out one."""
        if self.corpus_path:
            return {"corpus": self.corpus_path}
        seed = self.heldout_world_seed if split in HELDOUT_SPLITS else self.world_seed
        params: dict[str, Any] = {"seed": seed, "n_docs": self.n_docs}
        if self.distractors is not None:  # absent by default, so the params of default worlds stay as they were
            params["distractors"] = self.distractors
        return params

    def _load(self, params: dict[str, Any]) -> tuple[World | None, Corpus, SearchIndex]:
        """The world (``None`` for a real corpus), corpus and index that ``params`` name (memoised)."""
        if "corpus" in params:
            return (None, *load_real(params["corpus"], self.cache_dir))
        extra = params.get("distractors")
        return load_world(
            int(params["seed"]), int(params["n_docs"]), self.cache_dir, None if extra is None else int(extra)
        )

    def _resources(self, params: dict[str, Any]) -> tuple[Corpus, SearchIndex]:
        self._world, corpus, index = self._load(params)
        self._loaded = params
        return corpus, index

    @property
    def corpus(self) -> Corpus:
        return self._corpus

    @property
    def index(self) -> SearchIndex:
        return self._index

    # ---- RubricEnv hooks --------------------------------------------------------------------------------

    def system_prompt(self) -> str:
        return super().system_prompt() + "\n" + GUIDE.strip()

    def _question_task(self, q: dict[str, Any], split: str) -> Task:
        return Task(
            id=q["id"],
            env_id=self.env_id,
            split=split,
            prompt=q["prompt"],
            params={"world": self._world_params(), "hops": q["hops"], "difficulty": "real"},
            hidden=copy.deepcopy(q["hidden"]),
            rubric=task_rubric(q["id"], q["hidden"]),
        )

    def task_origin(self, task: Task) -> str:
        """A question of the user's file by its own id and ``FILE:LINE`` (generated questions: ``""``)."""
        return next((q["origin"] for q in self.questions if q["id"] == task.id), "")

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        """Generated questions, or (real corpus) the first ``n`` questions of the file, in file order, each once."""
        if not self.corpus_path:
            return super().task_set(n, seed=seed, split=split)
        if n > len(self.questions):
            raise ValueError(
                f"the questions file has {len(self.questions)} question(s), fewer than the {n} asked "
                f"for; ask for at most {len(self.questions)} or add questions to the file"
            )
        return [self._question_task(q, split) for q in self.questions[:n]]

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        """A generated question of ``split`` (see the class docstring for what each split draws from)."""
        if self.corpus_path:
            return self._question_task(self.questions[int(rng.integers(len(self.questions)))], split)
        if split not in SPLITS:
            raise ValueError(f"deepsearch-v0 has the splits {list(SPLITS)}, not {split!r}")
        params = self._world_params(split)
        world, corpus, _ = self._load(params)
        assert world is not None
        allowed = self._answer_filter(split)
        difficulty = self.difficulty or str(rng.choice(sorted(DIFFICULTY_HOPS)))
        qrng = random.Random(int(rng.integers(2**62)))
        for _ in range(MAX_REDRAWS):  # the same draws as before for every question whose answer the split allows
            q = make_question(world, corpus, qrng, difficulty, self.hops)
            if allowed([q["hidden"]["answer"], *q["hidden"]["aliases"]]):
                break
        else:
            raise QuestionError(
                f"no {split} question with an allowed answer after {MAX_REDRAWS} draws; use a larger world (n_docs)"
            )
        # the difficulty too: with ``hops`` fixed, two difficulties can draw the same question, and an id names one task
        key = hashlib.sha1(f"{corpus.key}|{split}|{difficulty}|{q['prompt']}".encode()).hexdigest()[:12]
        task_id = f"ds-{key}"
        return Task(
            id=task_id,
            env_id=self.env_id,
            split=split,
            prompt=q["prompt"],
            params={"world": params, "hops": q["hops"], "difficulty": difficulty},
            hidden=q["hidden"],
            rubric=task_rubric(task_id, q["hidden"]),
        )

    def _answer_filter(self, split: str) -> Callable[[list[str]], bool]:
        """Which answers (a name and its aliases) a question of ``split`` may have: training answers are never the
        training world's reserved entities, held-out ones in the training world always are, and the held-out
        world's never name an entity of the training world."""
        key = f"world-s{self.world_seed}-n{self.n_docs}"  # not the distractors: the same world asks the same questions
        if split == "train":
            return lambda names: not reserved(key, names[0])
        if split == TRAIN_WORLD_SPLIT:
            return lambda names: reserved(key, names[0])
        if self._train_names is None:
            train_world, _, _ = self._load(self._world_params("train"))
            assert train_world is not None
            self._train_names = frozenset(n.casefold() for e in train_world.entities for n in (e.name, *e.aliases))
        taken = self._train_names
        return lambda names: not any(n.casefold() in taken for n in names)

    def guidance(self, task: Task, level: int) -> str | None:
        """Level 1: where to start (the entity the question describes last, and a search for it); 2: the page to
        open first (a search and the result to open); 3: the chain hop by hop. Never a name of the chain, a page
        of it or the answer (``guidance.py``)."""
        params = task.params.get("world")
        world, corpus, index = self._load(params if isinstance(params, dict) and params else self._world_params())
        return guidance.guidance(task, level, type(self).secrets(task), world, corpus, index)

    def client_task_refusal(self, task: Task) -> str | None:
        """Why a served env will not play a client's task: it may not pick another world (or corpus) to build."""
        world = task.params.get("world")
        if world is not None and world not in (self._world_params(), self._world_params(HELDOUT_SPLITS[0])):
            return (
                "params.world is not a world this server serves (its training or held-out world); a client task may "
                "only play those"
            )
        return None

    def begin(self, task: Task) -> None:
        params = task.params.get("world")
        wanted = params if isinstance(params, dict) and params else self._world_params()
        if wanted != self._loaded:  # a task of another world (the held-out one) or back to the training world
            self._corpus, self._index = self._resources(wanted)
        self._opened = set()
        self._reopened = False
        self._observed = []

    def call_tool(self, call: ToolCall) -> ToolOutput:
        """Every call starts as no re-read (``open`` sets it for ``stage_of``). The tools are plain ``def``, so
        both ``step`` and ``astep_typed`` run each call through here."""
        self._reopened = False
        return super().call_tool(call)

    def _record(self, record: Observed) -> dict[str, Any]:
        """Keep a call's record (the answer is scored from what the calls showed) and return it as its info."""
        self._observed.append(record)
        return record.info()

    # ---- tools ------------------------------------------------------------------------------------------

    @tool(examples={"text": "find the city first, then the organisation headquartered there, then its founder"})
    def plan(self, text: str) -> ToolOutput:
        """Write down your plan (which entities to find, in what order). It changes nothing in the world.

        Args:
            text: your plan
        """
        return ToolOutput(
            text="Plan noted. Now search for the first entity you need.", info=self._record(Plan(tool="plan", seen=[]))
        )

    @tool(examples={"query": "harbour town Dunmere road"})
    def search(self, query: str, k: int = 5) -> ToolOutput:
        """BM25 search over the encyclopedia. Returns the k best pages, each with its URL and a snippet in which
        query words are **bold**.

        Args:
            query: keywords: names, years, places, kinds of things
            k: number of results, 1-10 (default 5)
        """
        text, seen, results = tools.search(self._index, query, k)
        record = Search.model_validate(
            {
                "tool": "search",
                "query": " ".join(str(query).split()),
                "k": tools.as_int(k, 5),
                "results": results,
                "seen": seen,
            }
        )
        return ToolOutput(text=text, info=self._record(record))

    @tool(examples={"doc": "https://fictopedia.test/wiki/Brook"})
    def open(self, doc: str, offset: int = 0) -> ToolOutput:
        """Read a window of a page, from a character offset. 'doc' is a URL or doc id from search results.

        Args:
            doc: the page's URL (or doc id, or exact title)
            offset: character offset to start reading at (default 0)
        """
        text, seen, url = tools.open_page(self._corpus, doc, offset, self.window_chars)
        self._reopened = url in self._opened
        self._opened.add(url)
        return ToolOutput(text=text, info=self._record(Open.model_validate({"tool": "open", "url": url, "seen": seen})))

    @tool(examples={"doc": "https://fictopedia.test/wiki/Brook", "pattern": "founded in"})
    def find(self, doc: str, pattern: str) -> ToolOutput:
        """Find a phrase in a page (case-insensitive, literal); shows each match in its sentence.

        Args:
            doc: the page's URL (or doc id, or exact title)
            pattern: the phrase to look for
        """
        text, seen, url = tools.find(self._corpus, doc, pattern)
        record = Find.model_validate({"tool": "find", "url": url, "pattern": str(pattern), "seen": seen})
        return ToolOutput(text=text, info=self._record(record))

    @tool(
        examples={
            "text": "Answer: Ilse Tarrow\n- Ilse Tarrow was born in Brook [1](https://fictopedia.test/wiki/Ilse_Tarrow)"
        }
    )
    def answer(self, text: str) -> ToolOutput:
        """Give the final answer and end the episode: a line 'Answer: <name>' then the supporting facts, each cited
        inline as [n](url) with the URL of a page you read.

        Args:
            text: the answer
        """
        if not str(text).strip():
            raise ToolError("the answer is empty; write 'Answer: <name>' and the cited facts")
        assert self._task is not None
        parts = carr.score(self._task.hidden, str(text), self._observed, self.alpha)
        reward = parts["c_grpo"] if self.reward == "c_grpo" else parts["outcome"]
        record = Answer.model_validate(
            {
                "tool": "answer",
                "seen": [],
                **{k: parts[k] for k in ("answer", "correct", "outcome", "rubric", "c_grpo", "cited")},
            }
        )
        return ToolOutput(
            text="Answer recorded.",
            done=True,
            answer=str(text),
            reward=float(reward),
            info=self._record(record),
            solved=bool(parts["correct"]),  # the reward is partial credit (citations): a right answer solves it
        )

    def stage_of(self, call: ToolCall | None) -> str:
        if call is None:
            return self._stage or "plan"
        return {"plan": "plan", "search": "gather", "find": "review", "answer": "answer"}.get(
            call.name, "review" if self._reopened else "gather"
        )

    @classmethod
    def secrets(cls, task: Task) -> list[tuple[str, Any]]:
        """The answer, its aliases, the chain's entities (names, aliases, pages) and the gold pages; the question
        is the prompt and the decoys (``confusable``) are there to be seen. ``guidance`` keeps to all of them: it
        points at the page to start from by a search and a result number, never by its name or URL."""
        h = task.hidden
        ents = {k: {f: e.get(f) for f in ("name", "aliases", "url", "doc")} for k, e in h.get("entities", {}).items()}
        return list(
            leaves({"answer": h.get("answer"), "aliases": h.get("aliases", []), "gold_docs": h.get("gold_docs", [])})
        ) + list(leaves({"entities": ents}))

    def summary(self) -> dict[str, Any]:
        used = [r.tool for r in self._observed]
        last = self._observed[-1] if self._observed else None
        answer = last if isinstance(last, Answer) else None
        return {
            "searches": used.count("search"),
            "opened": len(self._opened),
            "finds": used.count("find"),
            "answered": "answer" in used,
            "correct": bool(answer and answer.correct),
            "rubric": answer.rubric if answer else 0.0,
            "c_grpo": answer.c_grpo if answer else 0.0,
        }
