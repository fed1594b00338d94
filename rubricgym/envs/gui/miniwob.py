"""MiniWoB++ as web tasks: one env per deterministic page of the ``miniwob`` package (``pip install
'rubricgym[miniwob]'``), ``miniwob-<page>-v0``, and the ``miniwob`` suite over them.

Each page becomes a generated ``WebTaskSpec`` (no code per page): ``reset`` seeds the page's ``Math.random``
(``Math.seedrandom``) and starts its episode (``core.startEpisodeReal``), ``instruction`` is the utterance
(``core.getUtterance()``: a string, or an object whose ``utterance`` field is the text), ``reward`` the page's own
(time-scaled) reward, ``done`` its done flag, ``success`` the page's full raw reward (1, before its time discount)
and ``progress`` the positive part of the raw reward: a page that pays partly right work a fraction (one box of
``click-checkboxes`` left unticked pays ``(n - 2) / n``, a wrong ``find-greatest`` card 0.1) gives partial credit,
never success. The page's clock is stretched
from its 7-30 s (written for scripted bots) to the episode's time limit, so an LLM agent is not timed out by it.
Every page of the package is served from its ``html/`` folder on a private origin, and the episode must stay on
its one page (the scope is that document; another page of the folder is an escape). Seeds divisible by 5 are
the test split.

Pages left out (``EXCLUDED``): real-time or animated ones (a timer, moving targets, a sequence shown over time),
pages that animate their widgets when a ``-nodelay`` twin exists (``book-flight`` and ``use-autocomplete`` exist only
as their ``-nodelay`` pages), and pages that need a mouse drag or a click at a point of a canvas, which the browser
tools (element refs, visible text, keys) cannot do. Of the other pages (``playable_pages``), only those
``rubricgym check`` passes on are registered (``pages``): a page needs a scripted oracle that solves it (``ORACLES``)
and must not pay random clicks like a solution (``FAILS_CHECK``). Every page left out has one reason
(``exclusion``), which ``rubricgym.make``/``run`` of its id answer instead of "unknown env id"; a playable page
left out still plays, unchecked, through ``page_class(page)()``.

The registry names each page's class ``rubricgym.envs.gui.miniwob:<class_name(page)>``; the module builds it on
first use (``__getattr__``), so registering a hundred pages imports nothing and pickling a class works.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from rubricgym.envs.gui.byo import RANDOM_AGENT, WebTaskEnv, WebTaskSpec

PACKAGE = "miniwob"
INSTALL = "pip install 'rubricgym[miniwob]'"
EPISODE_MS = 600_000
"""The page's own time limit, stretched to the env's default episode timeout (600 s)."""
FULL_REWARD = 1 - 1e-6
"""A page's success: its full raw reward (MiniWoB++ pays 1 for the task done; a fraction is partly right work)."""

RESET_JS = f"""async seed => {{
  Object.defineProperty(core, 'EPISODE_MAX_TIME', {{get: () => {EPISODE_MS}, set: () => {{}}, configurable: true}});
  Math.seedrandom(seed);
  core.startEpisodeReal();
  for (let i = 0; i < 60 && !WOB_TASK_READY; i++) await new Promise(r => setTimeout(r, 50));
  if (!WOB_TASK_READY) throw new Error('the MiniWoB++ page did not get ready in 3 s');
  core.hideDisplay();
}}"""
"""Seed the page, start its episode with a stretched clock, wait until it is ready, hide the score panel (its
countdown would make observations depend on the wall clock)."""

STATE_JS = """() => {
  const w = document.getElementById('wrap') || document.body;
  let dom = 0;
  for (let i = 0; i < w.innerHTML.length; i++) dom = (Math.imul(dom, 31) + w.innerHTML.charCodeAt(i)) | 0;
  const fields = [...w.querySelectorAll('input, textarea, select')]
    .map(e => e.type === 'checkbox' || e.type === 'radio' ? e.checked : e.value);
  return {dom, fields};
}"""
"""What the page shows (a digest of its task area and its fields' values): a step that changes it did work (the
``act`` stage, the ``worked`` check); every change is expected, since the page's own reward judges the outcome."""

EXCLUDED: dict[str, str] = {
    # real time: the reward depends on timing or on targets that move while the agent thinks
    "chase-circle": "real time: keep the mouse inside a moving circle",
    "moving-items": "real time: click items that move across the screen",
    "simon-says": "real time: repeat a sequence of buttons the page flashes over time",
    "button-delay": "real time: click, wait a given number of seconds, click again",
    "stock-market": "real time: buy when a price that changes every 100 ms drops below a mark",
    "hover-shape": "real time: the reward accrues while the mouse stays on a shape whose highlight moves",
    "click-pie": "animated: the pie menu unfolds over time (its page is click-pie-nodelay)",
    "book-flight": "animated widgets: book-flight exists only as its page book-flight-nodelay",
    "choose-date": "animated date picker (its page is choose-date-nodelay)",
    "click-collapsible": "animated sections (its page is click-collapsible-nodelay)",
    "click-collapsible-2": "animated sections (its page is click-collapsible-2-nodelay)",
    "use-autocomplete": "delayed suggestions: use-autocomplete exists only as its page use-autocomplete-nodelay",
    # a mouse drag, or a click at a point of an SVG/canvas picture: no tool does it
    "drag-box": "needs a mouse drag",
    "drag-circle": "needs a mouse drag",
    "drag-cube": "needs a mouse drag",
    "drag-items": "needs a mouse drag",
    "drag-items-grid": "needs a mouse drag",
    "drag-shapes": "needs a mouse drag",
    "drag-shapes-2": "needs a mouse drag",
    "drag-single-shape": "needs a mouse drag",
    "drag-sort-numbers": "needs a mouse drag",
    "draw-circle": "needs a mouse drag on a canvas",
    "draw-line": "needs a mouse drag on a canvas",
    "highlight-text": "needs a text selection with the mouse",
    "highlight-text-2": "needs a text selection with the mouse",
    "resize-textarea": "needs a mouse drag on the resize handle",
    "bisect-angle": "needs clicks at points of an SVG picture",
    "circle-center": "needs a click at a point of an SVG picture",
    "right-angle": "needs clicks at points of an SVG picture",
    "find-midpoint": "needs a click at a point of an SVG picture",
    "grid-coordinate": "needs a click at a point of an SVG grid",
    "hot-cold": "needs clicks at points of an invisible area (its only feedback is the mouse position)",
    "use-colorwheel": "needs a click at a point of a colour wheel",
    "use-colorwheel-2": "needs a click at a point of a colour wheel",
}
"""Page -> why it cannot be an env at all (the browser tools cannot play it fairly)."""

_AGENTS = "rubricgym.envs.gui.miniwob_agents"
ORACLES: dict[str, str] = {
    page: f"{_AGENTS}:{cls}"
    for page, cls in {
        "click-button": "ClickButton",
        "click-button-sequence": "ClickButtonSequence",
        "click-checkboxes": "ClickCheckboxes",
        "click-checkboxes-large": "ClickCheckboxes",
        "click-checkboxes-transfer": "ClickCheckboxes",
        "enter-date": "EnterDate",
        "enter-text-dynamic": "EnterText",
        "use-autocomplete-nodelay": "UseAutocomplete",
        "click-dialog": "ClickDialog",
        "click-dialog-2": "ClickDialog2",
        "click-link": "ClickLink",
        "click-option": "ClickOption",
        "choose-list": "ChooseList",
        "enter-time": "EnterTime",
        "odd-or-even": "OddOrEven",
        "simple-arithmetic": "SimpleArithmetic",
        "click-tab": "ClickTab",
        "text-transform": "TextTransform",
        "click-test": "ClickTest",
        "click-test-2": "ClickTest2",
        "enter-password": "EnterPassword",
        "enter-text": "EnterText",
        "enter-text-2": "EnterText2",
        "focus-text": "FocusText",
        "find-word": "FindWord",
        "focus-text-2": "FocusText2",
        "read-table": "ReadTable",
        "read-table-2": "ReadTable2",
        "simple-algebra": "SimpleAlgebra",
        "login-user": "LoginUser",
    }.items()
}
"""Page -> its scripted oracle (``"module:Class"``): pages whose instruction and ARIA snapshot say how to solve them."""
ONE_ACTION: frozenset[str] = frozenset(
    {"click-dialog", "click-dialog-2", "click-test", "click-test-2", "focus-text", "focus-text-2"}
)
"""Pages whose one working action ends the episode (a click that closes the dialog or focuses the box): no step can
change the page without finishing it, so they have no ``act`` stage, only ``navigate`` (looking, clicking what
does nothing) and ``finish``."""
ONE_ACTION_STAGES = ("navigate", "finish")
FAILS_CHECK: dict[str, str] = (
    {
        page: "random clicks earn about half its reward (`rubricgym check` consistency row, measured 2026-12-07: "
        "random 0.51 on average), so its reward does not tell work from luck"
        for page in ("click-button", "click-button-sequence", "click-tab")
    }
    | {
        page: "random clicks solve it (`rubricgym check` consistency row, measured 2026-12-07: random averages 1.0), "
        "so its reward does not tell work from luck"
        for page in ("click-dialog", "click-test", "click-test-2", "focus-text")
    }
    | {
        "click-checkboxes-transfer": "clicking boxes without reading the task earns about half its reward "
        "(`rubricgym check` consistency row, measured 2026-12-07: the activity probe averages 0.51)",
        "focus-text-2": "a random click ends the episode before any step that only looks, so `rubricgym check` sees no "
        "navigate step (measured 2026-12-07)",
    }
)
"""Pages with an oracle that ``rubricgym check`` does not pass (or is not yet shown to pass), and why: not
registered."""
NO_ORACLE = (
    "no scripted oracle solves it yet, so `rubricgym check` cannot show it is solvable (its tasks still play, "
    "unchecked, through rubricgym.envs.gui.miniwob.page_class({page!r})())"
)
"""Why a playable page without an oracle is not registered."""
OUTCOME_AGENTS: dict[str, dict[str, str]] = {
    "click-checkboxes": {"partial": f"{_AGENTS}:ClickCheckboxesOneMissing"},
}
"""Page -> its outcome-consistency agents by role (``RubricEnv.outcome_agents``): partly right work the page pays a
fraction of its reward, which must stay below every success."""


def html_root() -> Path | None:
    """The ``html/`` folder of the installed ``miniwob`` package (found without importing it), or ``None``."""
    found = importlib.util.find_spec(PACKAGE)
    if found is None or not found.submodule_search_locations:
        return None
    root = Path(next(iter(found.submodule_search_locations))) / "html"
    return root if (root / "miniwob").is_dir() and (root / "core" / "core.js").is_file() else None


def require_root() -> Path:
    root = html_root()
    if root is None:
        raise ModuleNotFoundError(f"the MiniWoB++ envs need the pages of the miniwob package: {INSTALL}")
    return root


def all_pages() -> list[str]:
    """Every task page the installed package ships (empty without it)."""
    root = html_root()
    return sorted(p.stem for p in (root / "miniwob").glob("*.html")) if root is not None else []


def playable_pages() -> list[str]:
    """Every page of the package the browser tools can play (all but the ``EXCLUDED`` ones)."""
    return [p for p in all_pages() if p not in EXCLUDED]


def exclusion(page: str) -> str | None:
    """Why ``page`` is not a registered env (``None`` when it is one): unplayable, no oracle, or fails check."""
    if page in EXCLUDED:
        return EXCLUDED[page]
    if page not in ORACLES:
        return NO_ORACLE.format(page=page)
    return FAILS_CHECK.get(page)


def pages() -> list[str]:
    """The registered pages (and the suite's): every playable page that ``rubricgym check`` passes on."""
    return [p for p in playable_pages() if exclusion(p) is None]


def excluded_id_reason(id: str) -> str | None:
    """The registry's answer for an unregistered ``miniwob-<page>-v0`` id of a page the package ships."""
    found = re.fullmatch(r"miniwob-(.+)-v0", id)
    if found is None or found[1] not in all_pages():
        return None
    page = found[1]
    why = f"the MiniWoB++ page {page!r} is left out on purpose: {exclusion(page)}"
    twin = f"{page}-nodelay"
    if twin in all_pages():
        state = "is registered" if exclusion(twin) is None else f"is left out too: {exclusion(twin)}"
        why += f"; its twin {env_id(twin)} {state}"
    return why


LISTING_NOTE = (
    "MiniWoB++: {registered} of the package's pages are registered (those `rubricgym check` passes on); the "
    "others answer with why they are left out. book-flight and use-autocomplete exist only as their -nodelay pages."
)
"""A line for the ``rubricgym envs`` listing (``{registered}``: how many pages are registered)."""


def env_id(page: str) -> str:
    return f"miniwob-{page}-v0"


def class_name(page: str) -> str:
    return "MiniWob_" + re.sub(r"\W", "_", page)


def page_spec(page: str, root: Path | None = None) -> WebTaskSpec:
    """The generated spec of one MiniWoB++ page."""
    root = root or require_root()
    if not (root / "miniwob" / f"{page}.html").is_file():
        raise ValueError(f"the miniwob package has no page {page!r}; its pages: {', '.join(all_pages())}")
    return WebTaskSpec(
        name=f"miniwob-{page}",
        root=root,
        url=f"miniwob/{page}.html",
        scope=f"/miniwob/{page}.html",
        reset=RESET_JS,
        instruction="() => core.getUtterance()",
        instruction_field="utterance",
        reward="() => WOB_REWARD_GLOBAL",
        done="() => WOB_DONE_GLOBAL",
        state=STATE_JS,
        success=f"() => WOB_RAW_REWARD_GLOBAL >= {FULL_REWARD}",
        progress="() => Math.max(0, Math.min(1, WOB_RAW_REWARD_GLOBAL))",
        max_steps=15,
        seeds=1000,
        test_every=5,
    )


class MiniWobEnv(WebTaskEnv):
    """One MiniWoB++ page's tasks (``page``); the registered ``miniwob-<page>-v0`` classes fix the page."""

    page: ClassVar[str] = "click-button"
    env_id = ""
    scripted_agents: ClassVar[Mapping[str, str]] = {"random": RANDOM_AGENT}

    def __init__(self, **kwargs: Any):
        super().__init__(_spec(self.page), **kwargs)
        self.env_id = env_id(self.page)


@functools.cache
def _spec(page: str) -> WebTaskSpec:
    return page_spec(page)


@functools.cache
def page_class(page: str) -> type[MiniWobEnv]:
    """The env class of ``page`` (its own oracle when one is written for it)."""
    agents = {"random": RANDOM_AGENT, **({"oracle": ORACLES[page]} if page in ORACLES else {})}
    attrs = {
        "__module__": __name__,
        "page": page,
        "scripted_agents": agents,
        "outcome_agents": OUTCOME_AGENTS.get(page, {}),
        **({"stages": ONE_ACTION_STAGES} if page in ONE_ACTION else {}),
    }
    return type(class_name(page), (MiniWobEnv,), attrs)


def __getattr__(name: str) -> Any:
    """``MiniWob_<page>`` classes, built on first use (the registry's entry points name them)."""
    if name.startswith("MiniWob_"):
        for page in all_pages():
            if class_name(page) == name:
                return page_class(page)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_miniwob() -> list[str]:
    """Register ``miniwob-<page>-v0`` for every page of the suite (none when the package is not installed), and
    make the ids of the pages left out answer why."""
    from rubricgym.core.registry import register, register_id_reason

    register_id_reason("miniwob-", excluded_id_reason)

    ids = []
    for page in pages():
        register(
            env_id(page),
            f"{__name__}:{class_name(page)}",
            replace=True,
            description=f"MiniWoB++ {page}: the page's own task, reward and success (its full raw reward)."
            + (
                f" The {page.removesuffix('-nodelay')} page exists only as this -nodelay page."
                if page in NODELAY_ONLY
                else ""
            ),
        )
        ids.append(env_id(page))
    return ids


NODELAY_ONLY = ("book-flight-nodelay", "use-autocomplete-nodelay")
"""Pages whose delayed twin is excluded with no other variant: their listing says so."""
SUITE_TASKS = 5


def suite_yaml(tasks: int = SUITE_TASKS) -> str:
    """The built-in ``miniwob`` suite (``rubricgym/suites/builtin/miniwob.yaml``): every page of the suite, ``tasks``
    held-out seeds each, equal weights."""
    head = (
        "# Generated by rubricgym.envs.gui.miniwob.suite_yaml() from the pages of the miniwob package (pip install\n"
        "# 'rubricgym[miniwob]'); tests/envs/gui/test_miniwob.py checks that it lists every page of the suite.\n"
        "name: miniwob\n"
        'version: "1"\n'
        "description: MiniWoB++ pages that rubricgym check passes on (real-time and drag pages, and pages without an "
        "oracle, left out), the page's own reward and success, held-out seeds.\n"
        "entries:\n"
    )
    rows = [f"  - {{env: {env_id(p)}, name: {p}, split: test, tasks: {tasks}}}\n" for p in pages()]
    return head + "".join(rows)
