"""``rubricgym view PATH --export DIR``: the viewer's pages as a folder of static HTML that opens from ``file://``
(relative links, CSS and SVG inline or beside it, no server). The episode table is written page by page in file
order; its filters then apply to the rows of the page shown (a small script), since there is no server to ask."""

from __future__ import annotations

import shutil
from pathlib import Path

from rubricgym.core.safeio import atomic_write
from rubricgym.viewer.site import HERE, Links, Site
from rubricgym.viewer.table import PAGE_SIZE, Query


def export(site: Site, out: str | Path) -> dict[str, int]:
    """Write every page of ``site`` under ``out``; returns how many pages of each kind were written."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--export {out} is a file: give a directory (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(HERE / "static", out / "static", dirs_exist_ok=True)
    counts: dict[str, int] = {"runs": 0, "episodes": 0, "groups": 0, "matches": 0}
    top = Links(static=True, depth=0)
    only = next(iter(site.runs)) if len(site.runs) == 1 else None  # as served: one run opens on its own page
    atomic_write(out / "index.html", site.render_run(only, top) if only else site.render_index(top))
    links = Links(static=True, depth=2)
    for rid, run in site.runs.items():
        d = out / "r" / rid
        d.mkdir(parents=True, exist_ok=True)
        counts["runs"] += 1
        atomic_write(d / "index.html", site.render_run(rid, links))
        index = site.indexes[rid]
        index.refresh()
        pages = max(1, -(-len(index) // PAGE_SIZE))
        for p in range(1, pages + 1):
            atomic_write(d / f"episodes-{p}.html", site.render_episodes(rid, Query(page=p), links))
        groups: set[tuple[int, str]] = set()
        for s in index.stores:
            for line in range(len(s)):
                atomic_write(d / f"ep-{s.number}-{line}.html", site.render_episode(rid, s.number, line, links))
                counts["episodes"] += 1
                summary = s.summary(line)
                if run.kind == "train" and summary is not None and summary.group_id:
                    groups.add((s.number, summary.group_id))
        for store, gid in sorted(groups):
            page = site.render_group(rid, store, gid, links)
            atomic_write(d / Path(links.group(rid, store, gid)).name, page)
            counts["groups"] += 1
        if run.kind == "train":
            atomic_write(d / "dashboard.html", site.render_dashboard(rid, links))
        if run.kind == "arena":
            atomic_write(d / "arena.html", site.render_arena(rid, links))
            from rubricgym.viewer.arena import Matches

            for m in Matches(run.dir).all():
                atomic_write(d / f"match-{m['k']}.html", site.render_match(rid, m["k"], links))
                counts["matches"] += 1
    return counts
