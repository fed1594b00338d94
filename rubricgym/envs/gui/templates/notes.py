"""Notes templates: create, edit, pin, move, delete, and read notes."""

from __future__ import annotations

from rubricgym.envs.gui.data import NOTE_LINES, NOTE_TITLES
from rubricgym.envs.gui.templates.base import (
    DONE,
    G,
    Spec,
    answer,
    click,
    fill,
    next_id,
    pick,
    pick_where,
    quote,
    select,
    template,
)

NEW_TITLES = [
    "Weekend plans",
    "Shopping list",
    "Ideas for the blog",
    "Questions for the doctor",
    "Packing list",
    "Podcast notes",
    "Renovation ideas",
    "Password hints",
]


def _note(rng, s, **where):
    return pick_where(rng, s["notes"], **where)


def _open(n):
    return click("button", "~" + n["title"])


def _new_id(s):
    return next_id("n", s["notes"])


@template("notes.create", "notes", 2)
def create(rng, s):
    title, body, folder = pick(rng, NEW_TITLES), pick(rng, NOTE_LINES), pick(rng, s["folders"])
    return Spec(
        f"Create a note titled {quote(title)} with the text {quote(body)} in the {folder} folder.",
        [G(f"notes[title={title}].body", body, "ieq"), G(f"notes[title={title}].folder", folder)],
        [
            click("button", "New note"),
            fill("textbox", "Title", title),
            fill("textbox", "Body", body),
            select("Folder", folder),
            click("button", "Save"),
            DONE,
        ],
        [f"notes[id={_new_id(s)}]*"],
    )


@template("notes.create_pinned", "notes", 3, split="test")
def create_pinned(rng, s):
    title, body = pick(rng, NEW_TITLES), pick(rng, NOTE_LINES)
    return Spec(
        f"Add a pinned note {quote(title)} that says {quote(body)}.",
        [G(f"notes[title={title}].body", body, "ieq"), G(f"notes[title={title}].pinned", True)],
        [
            click("button", "New note"),
            fill("textbox", "Title", title),
            fill("textbox", "Body", body),
            click("checkbox", "Pinned"),
            click("button", "Save"),
            DONE,
        ],
        [f"notes[id={_new_id(s)}]*"],
    )


@template("notes.delete", "notes", 1)
def delete(rng, s):
    n = _note(rng, s)
    return Spec(
        f"Delete the note {quote(n['title'])}.",
        [G(f"notes[title={n['title']}]", op="absent")],
        [_open(n), click("button", "Delete note"), DONE],
        [f"notes[id={n['id']}]*"],
    )


@template("notes.rename", "notes", 2)
def rename(rng, s):
    n = _note(rng, s)
    new = pick(rng, [t for t in NEW_TITLES if t != n["title"]])
    return Spec(
        f"Rename the note {quote(n['title'])} to {quote(new)}.",
        [G(f"notes[id={n['id']}].title", new), G(f"notes[title={n['title']}]", op="absent")],
        [_open(n), fill("textbox", "Title", new), click("button", "Save"), DONE],
        [f"notes[id={n['id']}].title"],
    )


@template("notes.edit_body", "notes", 2)
def edit_body(rng, s):
    n = _note(rng, s)
    body = pick(rng, [x for x in NOTE_LINES if x not in n["body"]])
    return Spec(
        f"Replace the text of the note {quote(n['title'])} with {quote(body)}.",
        [G(f"notes[id={n['id']}].body", body, "ieq")],
        [_open(n), fill("textbox", "Body", body), click("button", "Save"), DONE],
        [f"notes[id={n['id']}].body"],
    )


@template("notes.pin", "notes", 1)
def pin(rng, s):
    n = _note(rng, s, pinned=False)
    return Spec(
        f"Pin the note {quote(n['title'])}.",
        [G(f"notes[id={n['id']}].pinned", True)],
        [_open(n), click("checkbox", "Pinned"), click("button", "Save"), DONE],
        [f"notes[id={n['id']}].pinned"],
    )


@template("notes.unpin", "notes", 1, split="test")
def unpin(rng, s):
    n = _note(rng, s)
    n["pinned"] = True
    return Spec(
        f"Unpin the note {quote(n['title'])}.",
        [G(f"notes[id={n['id']}].pinned", False)],
        [_open(n), click("checkbox", "Pinned"), click("button", "Save"), DONE],
        [f"notes[id={n['id']}].pinned"],
    )


@template("notes.move", "notes", 2)
def move(rng, s):
    n = _note(rng, s)
    folder = pick(rng, [f for f in s["folders"] if f != n["folder"]])
    return Spec(
        f"Move the note {quote(n['title'])} to the {folder} folder.",
        [G(f"notes[id={n['id']}].folder", folder)],
        [_open(n), select("Folder", folder), click("button", "Save"), DONE],
        [f"notes[id={n['id']}].folder"],
    )


@template("notes.read", "notes", 1)
def read(rng, s):
    n = _note(rng, s)
    return Spec(
        f"What does the note {quote(n['title'])} say? Put its text in the answer field `text`.",
        [G("answer.text", n["body"], "ieq")],
        [_open(n), answer(text=n["body"]), DONE],
        answer_fields=["text"],
    )


@template("notes.count_folder", "notes", 2)
def count_folder(rng, s):
    folder = pick(rng, s["folders"])
    k = sum(n["folder"] == folder for n in s["notes"])
    return Spec(
        f"How many notes are in the {folder} folder? Answer in the field `count`.",
        [G("answer.count", str(k), "ieq")],
        [click("link", "~" + folder), answer(count=k), DONE],
        answer_fields=["count"],
    )


assert set(NEW_TITLES).isdisjoint(NOTE_TITLES)
