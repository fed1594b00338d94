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
pages that animate their widgets when a ``-nodelay`` twin exists, and pages that need a mouse drag or a click at a
point of a canvas, which the browser tools (element refs, visible text, keys) cannot do.

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
    "click-pie": "animated: the pie menu unfolds over time (click-pie-nodelay is in the suite)",
    "book-flight": "animated widgets (book-flight-nodelay is in the suite)",
    "choose-date": "animated date picker (choose-date-nodelay is in the suite)",
    "click-collapsible": "animated sections (click-collapsible-nodelay is in the suite)",
    "click-collapsible-2": "animated sections (click-collapsible-2-nodelay is in the suite)",
    "use-autocomplete": "delayed suggestions (use-autocomplete-nodelay is in the suite)",
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
"""Page -> why it is not in the suite."""

_AGENTS = "rubricgym.envs.gui.miniwob_agents"
ORACLES: dict[str, str] = {
    page: f"{_AGENTS}:{cls}"
    for page, cls in {
        "click-button": "ClickButton",
        "click-button-sequence": "ClickButtonSequence",
        "click-checkboxes": "ClickCheckboxes",
        "click-dialog": "ClickDialog",
        "click-dialog-2": "ClickDialog2",
        "click-link": "ClickLink",
        "click-option": "ClickOption",
        "click-tab": "ClickTab",
        "click-test": "ClickTest",
        "click-test-2": "ClickTest2",
        "enter-password": "EnterPassword",
        "enter-text": "EnterText",
        "enter-text-2": "EnterText2",
        "focus-text": "FocusText",
        "focus-text-2": "FocusText2",
        "login-user": "LoginUser",
    }.items()
}
"""Page -> its scripted oracle (``"module:Class"``): pages whose instruction and ARIA snapshot say how to solve them."""
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


def pages() -> list[str]:
    """The pages of the suite: every page of the package except the ``EXCLUDED`` ones."""
    return [p for p in all_pages() if p not in EXCLUDED]


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
    """Register ``miniwob-<page>-v0`` for every page of the suite (none when the package is not installed)."""
    from rubricgym.core.registry import register

    ids = []
    for page in pages():
        register(
            env_id(page),
            f"{__name__}:{class_name(page)}",
            replace=True,
            description=f"MiniWoB++ {page}: the page's own task, reward and success (its full raw reward).",
        )
        ids.append(env_id(page))
    return ids


SUITE_TASKS = 5


def suite_yaml(tasks: int = SUITE_TASKS) -> str:
    """The built-in ``miniwob`` suite (``rubricgym/suites/builtin/miniwob.yaml``): every page of the suite, ``tasks``
    held-out seeds each, equal weights."""
    head = (
        "# Generated by rubricgym.envs.gui.miniwob.suite_yaml() from the pages of the miniwob package (pip install\n"
        "# 'rubricgym[miniwob]'); tests/envs/gui/test_miniwob.py checks that it lists every page of the suite.\n"
        "name: miniwob\n"
        'version: "1"\n'
        "description: MiniWoB++ pages (deterministic ones; real-time and drag pages left out), the page's own "
        "reward and success, held-out seeds.\n"
        "entries:\n"
    )
    rows = [f"  - {{env: {env_id(p)}, name: {p}, split: test, tasks: {tasks}}}\n" for p in pages()]
    return head + "".join(rows)
