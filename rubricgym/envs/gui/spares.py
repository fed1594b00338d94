"""Spare pages: pages the pool opened ahead at the URLs episodes recently started from, for file-served sites.

A spare is a ``Session`` of its own whose page was opened at an episode's start URL on a private origin no episode
has used. While it loads it waits in ``pool.warming``, then in ``pool.spares``, under its key (site, URL,
viewport); the next episode starting at that URL adopts its page instead of opening one. Every function runs on the
pool's loop.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubricgym.envs.gui.pool import BrowserPool
    from rubricgym.envs.gui.session import Session


def spare_key(session: Session) -> tuple[str, str, str, tuple[int, int]]:
    """The key of ``session``'s spares: its site, the URL its page was opened at, its viewport."""
    return (session.site.origin, str(session.site.root), session.opened_url, session.viewport)


async def take(session: Session) -> Session | None:
    """A spare opened ahead at ``session``'s URL (waiting for one being opened), or ``None``."""
    pool, key = session.pool, spare_key(session)
    ready = pool.spares.get(key, [])
    while ready:
        spare = ready.pop()
        if spare.alive():
            pool.spare_hits += 1
            return spare
        pool.background(spare.close())
    warming = pool.warming.get(key, [])
    if warming:  # claimed: it no longer goes to the ready list when it is done
        task = warming.pop(0)
        await asyncio.wait([task])  # a relaunch may cancel it, which must not cancel this open
        spare = None if task.cancelled() or task.exception() is not None else task.result()
        if spare is not None and spare.alive():
            pool.spare_hits += 1
            return spare
    pool.spare_misses += 1
    return None


def adopt(session: Session, spare: Session) -> None:
    """``session`` takes over ``spare``'s page: its origin is one no episode has used, its history holds only the
    URL it was opened at."""
    page = spare.page
    session.context, session.page, session.origin = spare.context, page, spare.origin
    session.generation = spare.generation
    spare.page = spare.context = None
    session.refs, session.seen_refs = set(), set()
    session.crashed = False
    session.blocked.extend(spare.blocked)  # what the page asked for while it loaded was refused all the same
    page.remove_listener("crash", spare.on_crash)
    page.on("crash", session.on_crash)
    page.set_default_timeout(session.action_timeout * 1000)
    session.pool.owners[page] = session


def open_ahead(session: Session) -> None:
    """Open a spare at ``session``'s URL for the next episode there, unless that URL has its share already. Keeps at
    most ``pool.spare_pages`` spares, dropping the least recently used URLs' first."""
    pool, key = session.pool, spare_key(session)
    pool.spares[key] = pool.spares.pop(key, [])  # the most recently used URL goes last
    if len(pool.spares[key]) + len(pool.warming.get(key, [])) >= pool.spare_pages:
        return
    held = sum(map(len, pool.spares.values())) + sum(map(len, pool.warming.values()))
    for other in list(pool.spares):  # oldest keys first (dicts keep insertion order)
        while held >= pool.spare_pages and other != key and pool.spares[other]:
            pool.background(pool.spares[other].pop(0).close())
            held -= 1
        if not pool.spares[other]:
            del pool.spares[other]
    if held >= pool.spare_pages:
        return
    spare = type(session)(pool, session.site, action_timeout=session.action_timeout, viewport=session.viewport)
    spare.opened_url = session.opened_url
    task = asyncio.ensure_future(spare.open_fresh(session.opened_url))
    pool.warming.setdefault(key, []).append(task)
    task.add_done_callback(lambda t: _warmed(pool, key, t))


def _warmed(pool: BrowserPool, key: Any, task: asyncio.Task[Session]) -> None:
    """A spare finished opening: ready for the next episode at its URL, unless an episode already claimed it."""
    waiting = pool.warming.get(key, [])
    if task not in waiting:
        return  # claimed (the claimer reads its result) or dropped by a relaunch
    waiting.remove(task)
    if not waiting:
        pool.warming.pop(key, None)
    if task.cancelled() or task.exception() is not None:
        return
    spare = task.result()
    if spare.alive():
        pool.spares.setdefault(key, []).append(spare)
    else:
        pool.background(spare.close())
