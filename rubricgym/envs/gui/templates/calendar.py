"""Calendar templates: create, reschedule, retime, rename, relocate, delete, and read events."""

from __future__ import annotations

from rubricgym.envs.gui.templates.base import DONE, G, Spec, answer, click, fill, next_id, pick, quote, select, template

NEW_EVENTS = ["Piano lesson", "Haircut", "Parent-teacher meeting", "Book club", "Car service", "Team lunch"]
PLACES = ["Room 2B", "Town hall", "Downtown studio", "Cafe Luna", "Online"]
DAYS = [f"2024-05-{d}" for d in range(20, 27)]
TIMES = [f"{h:02d}:{m:02d}" for h in range(8, 18) for m in (0, 30)]


def _event(rng, s):
    return pick(rng, s["events"])


def _edit(e):
    return [click("button", "~" + e["title"]), click("button", "Edit event")]


def _new_id(s):
    return next_id("e", s["events"])


@template("calendar.create", "calendar", 3)
def create(rng, s):
    title, day, start = pick(rng, NEW_EVENTS), pick(rng, DAYS), pick(rng, TIMES)
    dur, place = pick(rng, ["30", "45", "60", "90"]), pick(rng, PLACES)
    return Spec(
        f"Add an event {quote(title)} on {day} at {start} for {dur} minutes at {place}.",
        [
            G(f"events[title={title}].date", day),
            G(f"events[title={title}].start", start),
            G(f"events[title={title}].duration", int(dur)),
            G(f"events[title={title}].location", place, "ieq"),
        ],
        [
            click("button", "New event"),
            fill("textbox", "Title", title),
            fill("textbox", "Date", day),
            fill("textbox", "Start time", start),
            select("Duration (minutes)", dur),
            fill("textbox", "Location", place),
            click("button", "Save event"),
            DONE,
        ],
        [f"events[id={_new_id(s)}]*"],
    )


@template("calendar.quick_add", "calendar", 2, split="test")
def quick_add(rng, s):
    title, start = pick(rng, NEW_EVENTS), pick(rng, TIMES)
    return Spec(
        f"Add an event {quote(title)} today ({s['today']}) at {start}.",
        [G(f"events[title={title}].date", s["today"]), G(f"events[title={title}].start", start)],
        [
            click("button", "New event"),
            fill("textbox", "Title", title),
            fill("textbox", "Start time", start),
            click("button", "Save event"),
            DONE,
        ],
        [f"events[id={_new_id(s)}]*"],
    )


@template("calendar.delete", "calendar", 1)
def delete(rng, s):
    e = _event(rng, s)
    return Spec(
        f"Delete the event {quote(e['title'])} on {e['date']}.",
        [G(f"events[id={e['id']}]", op="absent")],
        [click("button", "~" + e["title"]), click("button", "Delete event"), DONE],
        [f"events[id={e['id']}]*"],
    )


@template("calendar.reschedule", "calendar", 3)
def reschedule(rng, s):
    e = _event(rng, s)
    day = pick(rng, [d for d in DAYS if d != e["date"]])
    return Spec(
        f"Move the event {quote(e['title'])} to {day}, keeping its time.",
        [G(f"events[id={e['id']}].date", day), G(f"events[id={e['id']}].start", e["start"])],
        [*_edit(e), fill("textbox", "Date", day), click("button", "Save event"), DONE],
        [f"events[id={e['id']}].date"],
    )


@template("calendar.retime", "calendar", 2)
def retime(rng, s):
    e = _event(rng, s)
    start = pick(rng, [t for t in TIMES if t != e["start"]])
    return Spec(
        f"Change the start time of {quote(e['title'])} to {start}.",
        [G(f"events[id={e['id']}].start", start)],
        [*_edit(e), fill("textbox", "Start time", start), click("button", "Save event"), DONE],
        [f"events[id={e['id']}].start"],
    )


@template("calendar.rename", "calendar", 2)
def rename(rng, s):
    e = _event(rng, s)
    new = pick(rng, NEW_EVENTS)
    return Spec(
        f"Rename the event {quote(e['title'])} to {quote(new)}.",
        [G(f"events[id={e['id']}].title", new)],
        [*_edit(e), fill("textbox", "Title", new), click("button", "Save event"), DONE],
        [f"events[id={e['id']}].title"],
    )


@template("calendar.relocate", "calendar", 2, split="test")
def relocate(rng, s):
    e = _event(rng, s)
    place = pick(rng, PLACES)
    return Spec(
        f"Set the location of {quote(e['title'])} to {quote(place)}.",
        [G(f"events[id={e['id']}].location", place, "ieq")],
        [*_edit(e), fill("textbox", "Location", place), click("button", "Save event"), DONE],
        [f"events[id={e['id']}].location"],
    )


@template("calendar.extend", "calendar", 2)
def extend(rng, s):
    e = _event(rng, s)
    dur = pick(rng, [d for d in ("15", "45", "120") if int(d) != e["duration"]])
    return Spec(
        f"Make {quote(e['title'])} last {dur} minutes.",
        [G(f"events[id={e['id']}].duration", int(dur))],
        [*_edit(e), select("Duration (minutes)", dur), click("button", "Save event"), DONE],
        [f"events[id={e['id']}].duration"],
    )


@template("calendar.when", "calendar", 1)
def when(rng, s):
    e = _event(rng, s)
    return Spec(
        f"When does {quote(e['title'])} start? Give the date in the field `date` and the time (HH:MM) in `time`.",
        [G("answer.date", e["date"], "ieq"), G("answer.time", e["start"], "ieq")],
        [click("button", "~" + e["title"]), answer(date=e["date"], time=e["start"]), DONE],
        answer_fields=["date", "time"],
    )


@template("calendar.count_today", "calendar", 1)
def count_today(rng, s):
    k = sum(e["date"] == s["today"] for e in s["events"])
    return Spec(
        "How many events are on the calendar today? Answer in the field `count`.",
        [G("answer.count", str(k), "ieq")],
        [click("link", "~Today"), answer(count=k), DONE],
        answer_fields=["count"],
    )
