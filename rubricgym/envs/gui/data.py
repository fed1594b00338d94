"""Seeded app data: the state each bundled app starts an episode in, drawn from a seed.

Generated in Python (not in the app's JS) so task templates can draw their parameters from the same data
without a browser; the app receives it through its ``load(state)`` contract.
"""

from __future__ import annotations

from typing import Any

import numpy as np

APPS = ("notes", "mail", "calendar", "contacts", "settings", "shop")
TODAY = "2024-05-20"

FIRST = [
    "Ana",
    "Ben",
    "Chloe",
    "David",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Liam",
    "Maya",
    "Noah",
    "Olga",
    "Pedro",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
]
LAST = [
    "Ruiz",
    "Okafor",
    "Martin",
    "Kowalski",
    "Rossi",
    "Haddad",
    "Lee",
    "Dubois",
    "Silva",
    "Berg",
    "Tanaka",
    "Walsh",
    "Cohen",
    "Novak",
    "Ivanova",
    "Costa",
    "Murphy",
    "Alvarez",
    "Nair",
    "Fischer",
]
COMPANIES = [
    "Acme Corp",
    "Globex",
    "Initech",
    "Umbrella Labs",
    "Stark Industries",
    "Wayne Foods",
    "Hooli",
    "Vandelay Imports",
    "Soylent",
    "Tyrell Systems",
]
NOTE_TITLES = [
    "Groceries",
    "Book list",
    "Trip to Lisbon",
    "Meeting notes",
    "Gift ideas",
    "Workout plan",
    "Recipe: lentil soup",
    "Project kickoff",
    "Garden plan",
    "Reading notes",
    "Budget 2024",
    "Car maintenance",
    "Conference talk",
    "Birthday party",
    "Moving checklist",
]
NOTE_LINES = [
    "eggs, milk, bread",
    "call the plumber",
    "ask about the deadline",
    "book the train tickets",
    "buy a new lamp",
    "30 minutes of running",
    "renew the passport",
    "draft the slides",
    "water the herbs",
    "compare insurance quotes",
    "pick up the dry cleaning",
    "send the invoice",
]
SUBJECTS = [
    "Quarterly report",
    "Lunch on Friday?",
    "Invoice #{n}",
    "Your order has shipped",
    "Team offsite",
    "Re: budget review",
    "Photos from the trip",
    "Password reset",
    "Weekly newsletter",
    "Contract draft",
    "Flight confirmation",
    "Dinner plans",
    "Design feedback",
    "Welcome aboard",
    "Meeting moved",
]
BODIES = [
    "Hi, please see the details below and let me know what you think.",
    "Could you get back to me by the end of the week?",
    "Thanks again for your help with this.",
    "Attached is the latest version. Comments welcome.",
    "Looking forward to seeing you there!",
]
EVENT_TITLES = [
    "Standup",
    "Dentist",
    "Lunch with {p}",
    "Project review",
    "Yoga class",
    "1:1 with {p}",
    "Budget meeting",
    "Coffee with {p}",
    "Team retro",
    "Doctor appointment",
    "Call with {p}",
    "Design workshop",
]
PLACES = ["Room 4A", "Main office", "Cafe Central", "Online", "Clinic on 5th", "Gym", "Library", ""]
PRODUCTS = [
    ("Wireless mouse", "Electronics", 24.99),
    ("USB-C charger", "Electronics", 19.5),
    ("Noise-cancelling headphones", "Electronics", 129.0),
    ("Desk lamp", "Home", 34.9),
    ("Coffee mug", "Home", 9.99),
    ("Throw blanket", "Home", 39.0),
    ("Running shoes", "Sports", 89.95),
    ("Yoga mat", "Sports", 25.0),
    ("Water bottle", "Sports", 14.5),
    ("Notebook", "Office", 6.25),
    ("Gel pens (10 pack)", "Office", 11.0),
    ("Backpack", "Office", 54.0),
    ("Cookbook", "Books", 28.0),
    ("Mystery novel", "Books", 15.99),
    ("Travel guide", "Books", 22.5),
    ("Plant pot", "Home", 12.0),
]


def _pick(rng: np.random.Generator, items: list[Any], k: int) -> list[Any]:
    return [items[i] for i in rng.choice(len(items), size=k, replace=False)]


def _people(rng: np.random.Generator, k: int) -> list[str]:
    firsts, lasts = _pick(rng, FIRST, k), _pick(rng, LAST, k)
    return [f"{f} {s}" for f, s in zip(firsts, lasts, strict=True)]


DOMAINS = ["example.com", "example.org", "example.net", "mail.example", "work.example"]
ADDRESS_FORMS = ["{f}.{l}", "{f0}{l}", "{f}{l0}", "{f}_{l}", "{l}.{f}", "{f}"]
"""How a person's address is written: ``first.last``, ``flast``, ``firstl``, ... (f/l: first/last name, 0: initial)."""


def _emails(rng: np.random.Generator, names: list[str]) -> list[str]:
    """An address per name in a form and domain drawn from ``rng``, so none can be told from the name alone (a
    task that asks for it needs the page that shows it). Names are distinct in first and last name, so are these."""
    out = []
    for name in names:
        first, last = name.lower().split()
        form, domain = ADDRESS_FORMS[int(rng.integers(len(ADDRESS_FORMS)))], DOMAINS[int(rng.integers(len(DOMAINS)))]
        out.append(form.format(f=first, l=last, f0=first[0], l0=last[0]) + "@" + domain)
    return out


def _day(rng: np.random.Generator, spread: int = 6) -> str:
    return f"2024-05-{20 + int(rng.integers(-2, spread)):02d}"


def notes(rng: np.random.Generator) -> dict[str, Any]:
    titles = _pick(rng, NOTE_TITLES, 7)
    folders = ["Personal", "Work", "Ideas"]
    return {
        "folders": folders,
        "notes": [
            {
                "id": f"n{i + 1}",
                "title": t,
                "body": "; ".join(_pick(rng, NOTE_LINES, 2)),
                "folder": folders[int(rng.integers(3))],
                "pinned": bool(rng.random() < 0.25),
            }
            for i, t in enumerate(titles)
        ],
    }


def mail(rng: np.random.Generator) -> dict[str, Any]:
    people = _people(rng, 8)
    subjects = _pick(rng, SUBJECTS, 10)
    messages = []
    for i, subject in enumerate(subjects):
        messages.append(
            {
                "id": f"m{i + 1}",
                "from_name": people[i % len(people)],
                "from": "",  # drawn below, after the other draws (which stay what they were)
                "to": "me@example.com",
                "subject": subject.format(n=int(rng.integers(1000, 9999))),
                "body": str(rng.choice(BODIES)),
                "date": f"2024-05-{20 - i // 2:02d} {9 + i % 8:02d}:{int(rng.integers(0, 6)) * 10:02d}",
                "folder": "archive" if i >= 8 else "inbox",
                "read": bool(rng.random() < 0.4),
                "starred": bool(rng.random() < 0.2),
            }
        )
    address = dict(zip(people, _emails(rng, people), strict=True))
    for m in messages:
        m["from"] = address[m["from_name"]]
    return {"me": "me@example.com", "today": TODAY, "messages": messages}


def calendar(rng: np.random.Generator) -> dict[str, Any]:
    people = _people(rng, 4)
    titles = _pick(rng, EVENT_TITLES, 8)
    events = []
    for i, t in enumerate(titles):
        start = f"{int(rng.integers(8, 18)):02d}:{int(rng.integers(0, 4)) * 15:02d}"
        events.append(
            {
                "id": f"e{i + 1}",
                "title": t.format(p=people[i % 4].split()[0]),
                "date": _day(rng),
                "start": start,
                "duration": int(rng.choice([30, 45, 60, 90])),
                "location": str(rng.choice(PLACES)),
            }
        )
    return {"today": TODAY, "events": events}


def contacts(rng: np.random.Generator) -> dict[str, Any]:
    people = _people(rng, 9)
    contacts = [
        {
            "id": f"c{i + 1}",
            "name": p,
            "phone": f"+1 555 {int(rng.integers(100, 999))} {int(rng.integers(1000, 9999))}",
            "email": "",  # drawn below, after the other draws (which stay what they were)
            "company": str(rng.choice(COMPANIES)),
            "favorite": bool(rng.random() < 0.25),
        }
        for i, p in enumerate(people)
    ]
    for c, address in zip(contacts, _emails(rng, people), strict=True):
        c["email"] = address
    return {"contacts": contacts}


def settings(rng: np.random.Generator) -> dict[str, Any]:
    flags = ["wifi", "bluetooth", "dark_mode", "notifications", "location", "auto_update"]
    s: dict[str, Any] = {f: bool(rng.random() < 0.5) for f in flags}
    s["airplane_mode"] = False
    s.update(
        language=str(rng.choice(["English", "Español", "Français"])),
        font_size=str(rng.choice(["Small", "Medium", "Large"])),
        timezone=str(rng.choice(["UTC", "Europe/London", "America/New_York"])),
        brightness=int(rng.integers(4, 17)) * 5,
        device_name=f"{rng.choice(FIRST)}'s phone",
    )
    return {"settings": s}


def shop(rng: np.random.Generator) -> dict[str, Any]:
    chosen = sorted(rng.choice(len(PRODUCTS), size=12, replace=False).tolist())
    products = [
        {
            "id": f"p{i + 1}",
            "name": PRODUCTS[j][0],
            "category": PRODUCTS[j][1],
            "price": PRODUCTS[j][2],
            "stock": int(rng.integers(0, 9)) if rng.random() < 0.15 else int(rng.integers(3, 9)),
        }
        for i, j in enumerate(chosen)
    ]
    return {"products": products, "cart": [], "orders": []}


GENERATORS = {
    "notes": notes,
    "mail": mail,
    "calendar": calendar,
    "contacts": contacts,
    "settings": settings,
    "shop": shop,
}


def initial_state(app: str, seed: int) -> dict[str, Any]:
    """The state ``app`` starts in for data seed ``seed`` (deterministic)."""
    if app not in GENERATORS:
        raise ValueError(f"unknown app {app!r}; bundled apps: {', '.join(APPS)}")
    return GENERATORS[app](np.random.default_rng([seed, APPS.index(app)]))
