"""The viewer's pages, rendered from Jinja2 templates for both faces: served (``app.py``) and exported as static
files (``export.py``). ``Links`` is the only difference between the two: URLs with query strings, or relative
file names that open from ``file://``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from rubricgym.viewer import arena as arena_pages
from rubricgym.viewer.dashboard import dashboard
from rubricgym.viewer.episode import Redactor, episode_view
from rubricgym.viewer.groups import advantages, diff, members, run_scale
from rubricgym.viewer.index import RunIndex
from rubricgym.viewer.runs import Run, discover
from rubricgym.viewer.table import Query, page

HERE = Path(__file__).parent
KINDS = {
    "arena": "arena (rubricgym arena)",
    "eval": "suite evaluation (rubricgym eval)",
    "train": "training run (rubricgym train)",
    "score": "scored run (rubricgym run + score)",
    "run": "run (rubricgym run; not scored yet)",
}


class NotFound(KeyError):
    """A page that does not exist (unknown run, episode, group or match); the message says which."""


@dataclass
class Links:
    """Where each page lives: ``static=False`` for the server's URLs, ``True`` for exported files (relative to a
    page ``depth`` folders below the export root)."""

    static: bool = False
    depth: int = 0

    @property
    def root(self) -> str:
        return "../" * self.depth if self.static else "/"

    def home(self) -> str:
        return self.root + ("index.html" if self.static else "")

    def asset(self, name: str) -> str:
        return f"{self.root}static/{name}"

    def _run(self, rid: str, page: str) -> str:
        return f"{self.root}r/{quote(rid)}/{page}"

    def run(self, rid: str) -> str:
        return self._run(rid, "index.html" if self.static else "")

    def episodes(self, rid: str, params: dict[str, str] | None = None) -> str:
        params = params or {}
        if self.static:
            return self._run(rid, f"episodes-{params.get('page', '1')}.html")
        return self._run(rid, "episodes" + (f"?{urlencode(params)}" if params else ""))

    def episode(self, rid: str, store: int, line: int) -> str:
        return self._run(rid, f"ep-{store}-{line}.html" if self.static else f"ep/{store}/{line}")

    def group(self, rid: str, store: int, gid: str, a: int | None = None, b: int | None = None) -> str:
        if self.static:
            return self._run(rid, f"group-{store}-{quote(gid, safe='')}.html")
        q = f"?{urlencode({'a': a, 'b': b})}" if a is not None and b is not None else ""
        return self._run(rid, f"group/{store}/{quote(gid, safe='')}{q}")

    def dashboard(self, rid: str) -> str:
        return self._run(rid, "dashboard.html" if self.static else "dashboard")

    def arena(self, rid: str) -> str:
        return self._run(rid, "arena.html" if self.static else "arena")

    def match(self, rid: str, k: int) -> str:
        return self._run(rid, f"match-{k}.html" if self.static else f"match/{k}")


def _fmt(x: Any, spec: str = ".3f") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int | float):
        return format(x, spec)
    return str(x)


class Site:
    """The runs at a path, their lazy indexes, and a ``render_*`` per page."""

    def __init__(self, path: str | Path, show_hidden: bool = False):
        self.path = Path(path)
        self.show_hidden = show_hidden
        self.runs = {r.rid: r for r in discover(self.path)}
        self.indexes = {rid: RunIndex(r) for rid, r in self.runs.items()}
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(["html"]),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["f"] = _fmt

    def run(self, rid: str) -> Run:
        if rid not in self.runs:
            raise NotFound(f"no run {rid!r} here; runs: {', '.join(self.runs)}")
        return self.runs[rid]

    def _render(self, template: str, links: Links, **ctx: Any) -> str:
        return self.env.get_template(template).render(
            links=links, show_hidden=self.show_hidden, single=len(self.runs) == 1, kinds=KINDS, **ctx
        )

    # ---- pages ----------------------------------------------------------------------------------------------

    def render_index(self, links: Links) -> str:
        runs = []
        for rid, r in self.runs.items():
            index = self.indexes[rid]
            index.refresh()
            runs.append({"rid": rid, "run": r, "episodes": len(index), "rel": str(r.dir.relative_to(self.path)) or "."})
        return self._render("index.html", links, runs=runs, path=str(self.path))

    def render_run(self, rid: str, links: Links) -> str:
        r = self.run(rid)
        first = page(self.indexes[rid], Query())
        extra: dict[str, Any] = {}
        if r.kind == "train":
            extra["board"] = dashboard(r.dir)
        if r.kind == "arena":
            extra["arena"] = arena_pages.read_arena(r.dir)
        return self._render("run.html", links, run=r, table=first, why=arena_pages.WHY_BT_ELO, **extra)

    def render_episodes(self, rid: str, q: Query, links: Links) -> str:
        r = self.run(rid)
        table = page(self.indexes[rid], q)
        if q.page > table.pages:
            raise NotFound(f"page {q.page} does not exist: {table.total} matching episodes fill {table.pages} page(s)")
        return self._render("episodes.html", links, run=r, table=table)

    def _trajectory(self, rid: str, store: int, line: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
        index = self.indexes[rid]
        index.refresh()
        if not 0 <= store < len(index.stores) or not 0 <= line < len(index.stores[store]):
            raise NotFound(f"no episode {store}/{line} in run {rid}")
        s = index.stores[store]
        try:
            d = s.trajectory_json(line)
        except ValueError as e:
            raise NotFound(f"line {line + 1} of {s.store.path} is unreadable ({e})") from None
        return d, s.score_json(str(d.get("id", "")), line)

    def render_episode(self, rid: str, store: int, line: int, links: Links) -> str:
        r = self.run(rid)
        d, score = self._trajectory(rid, store, line)
        view = episode_view(d, score, r.meta(), self.show_hidden)
        n = len(self.indexes[rid].stores[store])
        nav = {
            "prev": links.episode(rid, store, line - 1) if line > 0 else None,
            "next": links.episode(rid, store, line + 1) if line + 1 < n else None,
            "group": links.group(rid, store, view["group_id"]) if view["group_id"] and r.kind == "train" else None,
        }
        return self._render(
            "episode.html", links, run=r, ep=view, store=store, line=line, nav=nav, label=r.stores[store]
        )

    def group_pair(self, rid: str, store: int, gid: str) -> list[Any]:
        rows = members(self.indexes[rid], store, gid)
        if not rows:
            raise NotFound(f"no group {gid!r} in run {rid}")
        return rows

    def render_group(
        self, rid: str, store: int, gid: str, links: Links, a: int | None = None, b: int | None = None
    ) -> str:
        r = self.run(rid)
        rows = self.group_pair(rid, store, gid)
        estimator, scale = run_scale(r.dir)
        adv = advantages([x.total for x in rows], scale)
        order = sorted(range(len(rows)), key=lambda k: (rows[k].total is None, -(rows[k].total or 0.0)))
        ia = a if a is not None and 0 <= a < len(rows) else order[0]
        ib = b if b is not None and 0 <= b < len(rows) and b != ia else (order[-1] if order[-1] != ia else order[0])
        da, _ = self._trajectory(rid, store, rows[ia].line)
        db, _ = self._trajectory(rid, store, rows[ib].line)
        red = Redactor((da.get("task") or {}).get("hidden"), self.show_hidden)
        d = diff(da, db, red)
        return self._render(
            "group.html",
            links,
            run=r,
            gid=gid,
            store=store,
            rows=[{"s": x, "adv": adv[k], "k": k} for k, x in enumerate(rows)],
            ia=ia,
            ib=ib,
            diff=d,
            estimator=estimator,
            scale=scale,
            prompt=red.text((da.get("task") or {}).get("prompt")),
        )

    def render_dashboard(self, rid: str, links: Links, fragment: bool = False) -> str:
        r = self.run(rid)
        if r.kind != "train":
            raise NotFound(f"run {rid} is not a training run ({KINDS[r.kind]}): only training runs have a dashboard")
        board = dashboard(r.dir)
        return self._render("charts.html" if fragment else "dashboard.html", links, run=r, board=board)

    def render_arena(self, rid: str, links: Links) -> str:
        r = self.run(rid)
        if r.kind != "arena":
            raise NotFound(f"run {rid} is not an arena ({KINDS[r.kind]})")
        rep = arena_pages.read_arena(r.dir)
        matches = arena_pages.Matches(r.dir).all()
        return self._render("arena.html", links, run=r, rep=rep, matches=matches, why=arena_pages.WHY_BT_ELO)

    def render_match(self, rid: str, k: int, links: Links) -> str:
        r = self.run(rid)
        if r.kind != "arena":
            raise NotFound(f"run {rid} is not an arena ({KINDS[r.kind]})")
        try:
            m = arena_pages.Matches(r.dir).get(k)
        except KeyError as e:
            raise NotFound(str(e)) from None
        index = self.indexes[rid]
        index.refresh()
        sides: dict[str, dict[str, Any] | None] = {}
        hidden: dict[str, Any] | None = None
        for side in ("a", "b"):
            where = index.locate(str(m.get(f"{side}_traj", "")))
            if where is None:
                sides[side] = None
                continue
            d, score = self._trajectory(rid, *where)
            hidden = (d.get("task") or {}).get("hidden")
            sides[side] = {"ep": episode_view(d, score, r.meta(), self.show_hidden), "link": links.episode(rid, *where)}
        red = Redactor(hidden, self.show_hidden)
        orders = arena_pages.orders(m)
        for o in orders:
            o["rationale"] = red.judged(o["rationale"])
        return self._render("match.html", links, run=r, m=m, sides=sides, orders=orders)
