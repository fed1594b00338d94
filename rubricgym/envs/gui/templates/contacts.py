"""Contacts templates: add, edit, favourite, delete, and look up contacts."""

from __future__ import annotations

from rubricgym.envs.gui.data import COMPANIES, FIRST, LAST
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


def _contact(rng, s, **where):
    return pick_where(rng, s["contacts"], **where)


def _open(c):
    return click("button", "~" + c["name"])


def _phone(rng):
    return f"+1 555 {int(rng.integers(100, 999))} {int(rng.integers(1000, 9999))}"


@template("contacts.add", "contacts", 2)
def add(rng, s):
    names = {c["name"] for c in s["contacts"]}
    name = pick(rng, [f"{f} {la}" for f in FIRST[:6] for la in LAST[-6:] if f"{f} {la}" not in names])
    phone, company = _phone(rng), pick(rng, COMPANIES)
    new = next_id("c", s["contacts"])
    return Spec(
        f"Add a contact {name}, phone {phone}, who works at {company}.",
        [G(f"contacts[name={name}].phone", phone), G(f"contacts[name={name}].company", company, "ieq")],
        [
            click("button", "Add contact"),
            fill("textbox", "Name", name),
            fill("textbox", "Phone", phone),
            fill("textbox", "Company", company),
            click("button", "Save contact"),
            DONE,
        ],
        [f"contacts[id={new}]*"],
    )


@template("contacts.delete", "contacts", 1)
def delete(rng, s):
    c = _contact(rng, s)
    return Spec(
        f"Delete the contact {c['name']}.",
        [G(f"contacts[name={c['name']}]", op="absent")],
        [_open(c), click("button", "Delete contact"), DONE],
        [f"contacts[id={c['id']}]*"],
    )


@template("contacts.update_phone", "contacts", 2)
def update_phone(rng, s):
    c, phone = _contact(rng, s), _phone(rng)
    return Spec(
        f"{c['name']} has a new phone number: {phone}. Update the contact.",
        [G(f"contacts[id={c['id']}].phone", phone)],
        [_open(c), click("button", "Edit"), fill("textbox", "Phone", phone), click("button", "Save contact"), DONE],
        [f"contacts[id={c['id']}].phone"],
    )


@template("contacts.update_company", "contacts", 2, split="test")
def update_company(rng, s):
    c = _contact(rng, s)
    company = pick(rng, [x for x in COMPANIES if x != c["company"]])
    return Spec(
        f"{c['name']} moved to {company}. Update their company.",
        [G(f"contacts[id={c['id']}].company", company, "ieq")],
        [_open(c), click("button", "Edit"), fill("textbox", "Company", company), click("button", "Save contact"), DONE],
        [f"contacts[id={c['id']}].company"],
    )


@template("contacts.favorite", "contacts", 1)
def favorite(rng, s):
    c = _contact(rng, s)
    c["favorite"] = False
    return Spec(
        f"Add {c['name']} to favorites.",
        [G(f"contacts[id={c['id']}].favorite", True)],
        [_open(c), click("button", "Add to favorites"), DONE],
        [f"contacts[id={c['id']}].favorite"],
    )


@template("contacts.unfavorite", "contacts", 1)
def unfavorite(rng, s):
    c = _contact(rng, s)
    c["favorite"] = True
    return Spec(
        f"Remove {c['name']} from favorites.",
        [G(f"contacts[id={c['id']}].favorite", False)],
        [_open(c), click("button", "Remove from favorites"), DONE],
        [f"contacts[id={c['id']}].favorite"],
    )


@template("contacts.phone", "contacts", 1)
def phone(rng, s):
    c = _contact(rng, s)
    return Spec(
        f"What is {c['name']}'s phone number? Answer in the field `phone`.",
        [G("answer.phone", c["phone"], "ieq")],
        [_open(c), answer(phone=c["phone"]), DONE],
        answer_fields=["phone"],
    )


@template("contacts.email", "contacts", 1, split="test")
def email(rng, s):
    c = _contact(rng, s)
    return Spec(
        f"Find {c['name']}'s email address and give it in the field `email`.",
        [G("answer.email", c["email"], "ieq")],
        [_open(c), answer(email=c["email"]), DONE],
        answer_fields=["email"],
    )


@template("contacts.company", "contacts", 1)
def company(rng, s):
    c = _contact(rng, s)
    return Spec(
        f"Which company does {c['name']} work for? Answer in the field `company`.",
        [G("answer.company", c["company"], "ieq")],
        [_open(c), answer(company=c["company"]), DONE],
        answer_fields=["company"],
    )


@template("contacts.count_company", "contacts", 3)
def count_company(rng, s):
    co = pick(rng, [c["company"] for c in s["contacts"]])
    k = sum(c["company"] == co for c in s["contacts"])
    return Spec(
        f"How many of your contacts work at {quote(co)}? Answer in the field `count`.",
        [G("answer.count", str(k), "ieq")],
        [fill("searchbox", "Search contacts", co), answer(count=k), DONE],
        answer_fields=["count"],
    )
