"""Mail templates: archive, delete, star, mark unread, compose, reply, restore, and read mail.

The message lists show each sender's name, not the address: a sender's address is on the opened message."""

from __future__ import annotations

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
    template,
)

READ = "messages[id=*].read"  # opening a message marks it read: never a side effect
LINES = [
    "Sounds good, see you then.",
    "Thanks, I will review it today.",
    "Can we move this to next week?",
    "Please send me the final version.",
    "Great news, congratulations!",
]
SUBJECTS = ["Project update", "Quick question", "Travel plans", "Follow-up", "Agenda for Monday"]


def _msg(rng, s, **where):
    return pick_where(rng, s["messages"], **where)


def _open(m):
    return click("button", "~" + m["subject"])


def _new_id(s):
    return next_id("m", s["messages"])


def _folder_link(m):
    return [] if m["folder"] == "inbox" else [click("link", m["folder"].capitalize())]


@template("mail.archive", "mail", 1)
def archive(rng, s):
    m = _msg(rng, s, folder="inbox")
    return Spec(
        f"Archive the email with the subject {quote(m['subject'])}.",
        [G(f"messages[id={m['id']}].folder", "archive")],
        [_open(m), click("button", "Archive"), DONE],
        [f"messages[id={m['id']}].folder", READ],
    )


@template("mail.delete", "mail", 1)
def delete(rng, s):
    m = _msg(rng, s, folder="inbox")
    return Spec(
        f"Delete the email {quote(m['subject'])}.",
        [G(f"messages[id={m['id']}].folder", "trash")],
        [_open(m), click("button", "Delete"), DONE],
        [f"messages[id={m['id']}].folder", READ],
    )


@template("mail.star", "mail", 1)
def star(rng, s):
    m = (
        _msg(rng, s, folder="inbox", starred=False)
        if any(not x["starred"] and x["folder"] == "inbox" for x in s["messages"])
        else _msg(rng, s, folder="inbox")
    )
    m["starred"] = False
    return Spec(
        f"Star the email {quote(m['subject'])}.",
        [G(f"messages[id={m['id']}].starred", True)],
        [_open(m), click("button", "Star"), DONE],
        [f"messages[id={m['id']}].starred", READ],
    )


@template("mail.mark_unread", "mail", 2, split="test")
def mark_unread(rng, s):
    m = _msg(rng, s, folder="inbox")
    m["read"] = True
    return Spec(
        f"Open the email {quote(m['subject'])} and then mark it as unread.",
        [G(f"messages[id={m['id']}].read", False)],
        [_open(m), click("button", "Mark as unread"), DONE],
        [READ],
    )


@template("mail.compose", "mail", 2)
def compose(rng, s):
    to, subject, body = pick(rng, s["messages"])["from"], pick(rng, SUBJECTS), pick(rng, LINES)
    return Spec(
        f"Send an email to {to} with the subject {quote(subject)} and the message {quote(body)}.",
        [
            G(f"messages[subject={subject}].to", to, "ieq"),
            G(f"messages[subject={subject}].folder", "sent"),
            G(f"messages[subject={subject}].body", body, "ieq"),
        ],
        [
            click("button", "Compose"),
            fill("textbox", "To", to),
            fill("textbox", "Subject", subject),
            fill("textbox", "Message", body),
            click("button", "Send"),
            DONE,
        ],
        [f"messages[id={_new_id(s)}]*", READ],
    )


@template("mail.reply", "mail", 3)
def reply(rng, s):
    m = pick(rng, [x for x in s["messages"] if x["folder"] == "inbox" and not x["subject"].startswith("Re:")])
    body = pick(rng, LINES)
    subject = "Re: " + m["subject"]
    return Spec(
        f"Reply to the email {quote(m['subject'])} with {quote(body)}.",
        [
            G(f"messages[subject={subject}].to", m["from"]),
            G(f"messages[subject={subject}].folder", "sent"),
            G(f"messages[subject={subject}].body", body, "ieq"),
        ],
        [_open(m), click("button", "Reply"), fill("textbox", "Message", body), click("button", "Send"), DONE],
        [f"messages[id={_new_id(s)}]*", READ],
    )


@template("mail.restore", "mail", 2)
def restore(rng, s):
    m = _msg(rng, s, folder="archive")
    return Spec(
        f"Move the archived email {quote(m['subject'])} back to the inbox.",
        [G(f"messages[id={m['id']}].folder", "inbox")],
        [*_folder_link(m), _open(m), click("button", "Move to Inbox"), DONE],
        [f"messages[id={m['id']}].folder", READ],
    )


@template("mail.sender", "mail", 1)
def sender(rng, s):
    m = _msg(rng, s, folder="inbox")
    return Spec(
        f"Who sent the email {quote(m['subject'])}? Give their email address in the field `sender`.",
        [G("answer.sender", m["from"], "ieq")],
        [_open(m), answer(sender=m["from"]), DONE],
        [READ],
        ["sender"],
    )


@template("mail.count_unread", "mail", 2, split="test")
def count_unread(rng, s):
    k = sum(m["folder"] == "inbox" and not m["read"] for m in s["messages"])
    return Spec(
        "How many unread emails are in the inbox? Answer in the field `count` without opening any.",
        [G("answer.count", str(k), "ieq")],
        [answer(count=k), DONE],
        answer_fields=["count"],
    )


@template("mail.delete_from", "mail", 3)
def delete_from(rng, s):
    m = _msg(rng, s, folder="inbox")
    mine = [x for x in s["messages"] if x["from"] == m["from"] and x["folder"] == "inbox"]
    plan = [step for x in mine for step in (_open(x), click("button", "Delete"))]
    return Spec(
        f"Delete every email in the inbox from {m['from_name']} <{m['from']}>.",
        [G(f"messages[id={x['id']}].folder", "trash") for x in mine],
        [*plan, DONE],
        [*(f"messages[id={x['id']}].folder" for x in mine), READ],
    )
