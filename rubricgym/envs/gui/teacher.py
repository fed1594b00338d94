"""The ``gui-v0`` teacher: operates the bundled apps from the task text and the pages it sees, never from ``hidden``.

The oracle replays its template's plan (which names the item to open and the text to type, and is hidden). The
teacher reads the instruction (the prompt the policy gets), turns it into the steps a person would take in that app
(open the item named in the instruction, use the form fields and buttons the pages show, find a setting by looking
through the app's sections), and takes each step on the current page: it finds an element's ref by role and name in
the ARIA snapshot, reads answers off the page it opened (a contact's card, a message's header, a product's price,
the items of a list) and claims ``done()`` when its steps are over. It never receives the task (``SeededAgent``), so
its trajectories are fit to clone (DESIGN.md: oracles vs teachers). Its seed varies its path: the order it fills a
form's fields, whether it opens an item from the list or through the search box, the order it looks through an
app's sections.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rubricgym.core.agent import ReplayingAgent, last_observation, tool_call
from rubricgym.core.types import Message

_ELEMENT = re.compile(
    r"^(?P<indent>\s*)- (?P<q>'?)(?P<role>[\w-]+)(?: \"(?P<name>(?:[^\"\\]|\\.)*)\")?(?P<attrs>[^\n]*?)"
    r"\[ref=(?P<ref>e\d+)\](?P<rest>[^\n]*)$",
    re.M,
)
_Q = r"“(.+?)”"


@dataclass(frozen=True)
class Element:
    """One element of an ARIA snapshot line: role, accessible name, ref, states and its text value."""

    role: str
    name: str
    ref: str
    checked: bool
    value: str
    indent: int
    line: int


def _scalar(text: str) -> str:
    """A YAML scalar of the snapshot as text (``"Re: x"`` and ``'a: b'`` unquoted)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            return str(json.loads(text))
        except json.JSONDecodeError:
            return text[1:-1]
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text


def parse_page(page: str) -> list[Element]:
    """Every element with a ref in an observation's ARIA snapshot."""
    out = []
    for n, m in enumerate(_ELEMENT.finditer(page)):
        name = m["name"] or ""
        if name:
            with contextlib.suppress(json.JSONDecodeError):
                name = json.loads(f'"{name}"')
            if m["q"]:
                name = name.replace("''", "'")
        rest = m["rest"]
        value = ""
        if rest.startswith(":") and rest[1:].strip():
            value = _scalar(rest[1:].rstrip("'").rstrip() if m["q"] and rest.endswith("'") else rest[1:])
        out.append(Element(m["role"], name, m["ref"], "[checked]" in (m["attrs"] or ""), value, len(m["indent"]), n))
    return out


def _clean(name: str) -> str:
    return name.lstrip("★☆📌 ").strip()


def find(page: str, role: str | tuple[str, ...], name: str, exact: bool = False) -> Element | None:
    """The element of ``role`` named ``name``: the same name (case and leading stars/pins aside) first, else (unless
    ``exact``) the first whose name contains it."""
    roles = (role,) if isinstance(role, str) else role
    els = [e for e in parse_page(page) if e.role in roles]
    want = name.casefold()
    for e in els:
        if _clean(e.name).casefold() == want:
            return e
    if exact:
        return None
    hits = [e for e in els if want in e.name.casefold()]
    return min(hits, key=lambda e: len(e.name)) if hits else None


def list_item(page: str, text: str) -> Element | None:
    """The button of the list item one of whose texts is exactly ``text`` (a subject, a title, a name), else the
    button whose name contains it (shortest first)."""
    els = parse_page(page)
    want = text.casefold()
    button: Element | None = None
    for e in els:
        if e.role == "listitem":
            button = None
        elif e.role == "button" and button is None:
            button = e
            if _clean(e.name).casefold() == want:
                return e
        elif button is not None and e.indent > button.indent and _clean(e.value).casefold() == want:
            return button
    return find(page, "button", text)


def definition(page: str, term: str) -> str | None:
    """The definition that follows ``term`` in a term/definition list (a contact's card, an event's details)."""
    els = parse_page(page)
    for a, b in zip(els, els[1:], strict=False):
        if a.role == "term" and a.value.casefold() == term.casefold() and b.role == "definition":
            return b.value
    return None


def main_list_items(page: str) -> int:
    """How many items the main list of the page shows."""
    els = parse_page(page)
    lists = [e for e in els if e.role == "list"]
    if not lists:
        return 0
    lst = lists[-1]
    return sum(1 for e in els if e.role == "listitem" and e.line > lst.line and e.indent == lst.indent + 2)


@dataclass
class Product:
    name: str
    price: float | None = None
    stock: int | None = None


def products(page: str) -> list[Product]:
    """The product cards of a shop page: name, price and stock (0 when sold out)."""
    out: list[Product] = []
    for line in page.splitlines():
        m = re.search(r'- article "((?:[^"\\]|\\.)*)"', line)
        if m:
            out.append(Product(json.loads(f'"{m[1]}"')))
            continue
        if not out:
            continue
        if (price := re.search(r"\$(\d+(?:\.\d+)?)", line)) and out[-1].price is None and "strong" in line:
            out[-1].price = float(price[1])
        if stock := re.search(r"(\d+) in stock", line):
            out[-1].stock = int(stock[1])
        elif re.search(r"sold out|out of stock", line, re.I):
            out[-1].stock = 0
    return out


Reader = Callable[[str], "str | None"]


@dataclass
class Step:
    """One thing to do on the page: ``kind`` and its arguments (see ``Teacher._do``)."""

    kind: str
    role: str = ""
    name: str = ""
    text: str = ""
    want: bool = True
    read: dict[str, Reader] = field(default_factory=dict)


def click(role: str, name: str) -> Step:
    return Step("click", role, name)


def open_item(text: str) -> Step:
    return Step("open", "button", text)


def fill(role: str, name: str, text: str) -> Step:
    return Step("fill", role, name, text)


def choose(name: str, option: str) -> Step:
    return Step("select", "combobox", name, option)


def toggle(role: str, name: str, want: bool) -> Step:
    return Step("toggle", role, name, want=want)


def reveal(role: str, name: str) -> Step:
    """Look through the app's sections until an element of ``role`` named ``name`` shows."""
    return Step("reveal", role, name)


def answer(**read: Reader) -> Step:
    return Step("answer", read=read)


def _shuffled(rng: np.random.Generator, steps: list[Step]) -> list[Step]:
    return [steps[int(i)] for i in rng.permutation(len(steps))]


# ---- the instruction, read into steps ---------------------------------------------------------------------


def _notes(task: str, rng: np.random.Generator) -> list[Step] | None:
    if m := re.search(rf"Create a note titled {_Q} with the text {_Q} in the (.+?) folder\.", task):
        form = _shuffled(rng, [fill("textbox", "Title", m[1]), fill("textbox", "Body", m[2]), choose("Folder", m[3])])
        return [click("button", "New note"), *form, click("button", "Save")]
    if m := re.search(rf"Add a pinned note {_Q} that says {_Q}\.", task):
        form = _shuffled(rng, [fill("textbox", "Title", m[1]), fill("textbox", "Body", m[2])])
        return [click("button", "New note"), *form, toggle("checkbox", "Pinned", True), click("button", "Save")]
    if m := re.search(rf"Delete the note {_Q}\.", task):
        return [open_item(m[1]), click("button", "Delete note")]
    if m := re.search(rf"Rename the note {_Q} to {_Q}\.", task):
        return [open_item(m[1]), fill("textbox", "Title", m[2]), click("button", "Save")]
    if m := re.search(rf"Replace the text of the note {_Q} with {_Q}\.", task):
        return [open_item(m[1]), fill("textbox", "Body", m[2]), click("button", "Save")]
    if m := re.search(rf"(Pin|Unpin) the note {_Q}\.", task):
        return [open_item(m[2]), toggle("checkbox", "Pinned", m[1] == "Pin"), click("button", "Save")]
    if m := re.search(rf"Move the note {_Q} to the (.+?) folder\.", task):
        return [open_item(m[1]), choose("Folder", m[2]), click("button", "Save")]
    if m := re.search(rf"What does the note {_Q} say\?", task):
        return [open_item(m[1]), answer(text=lambda p: _value(p, "textbox", "Body"))]
    if m := re.search(r"How many notes are in the (.+?) folder\?", task):
        return [click("link", m[1]), answer(count=lambda p: str(main_list_items(p)))]
    return None


def _mail(task: str, rng: np.random.Generator) -> list[Step] | None:
    if m := re.search(rf"Archive the email with the subject {_Q}\.", task):
        return [open_item(m[1]), click("button", "Archive")]
    if m := re.search(rf"Delete the email {_Q}\.", task):
        return [open_item(m[1]), click("button", "Delete")]
    if m := re.search(rf"Star the email {_Q}\.", task):
        return [open_item(m[1]), click("button", "Star")]
    if m := re.search(rf"Open the email {_Q} and then mark it as unread\.", task):
        return [open_item(m[1]), click("button", "Mark as unread")]
    if m := re.search(rf"Send an email to (\S+) with the subject {_Q} and the message {_Q}\.", task):
        form = _shuffled(
            rng, [fill("textbox", "To", m[1]), fill("textbox", "Subject", m[2]), fill("textbox", "Message", m[3])]
        )
        return [click("button", "Compose"), *form, click("button", "Send")]
    if m := re.search(rf"Reply to the email {_Q} with {_Q}\.", task):
        return [open_item(m[1]), click("button", "Reply"), fill("textbox", "Message", m[2]), click("button", "Send")]
    if m := re.search(rf"Move the archived email {_Q} back to the inbox\.", task):
        return [click("link", "Archive"), open_item(m[1]), click("button", "Move to Inbox")]
    if m := re.search(rf"Who sent the email {_Q}\?", task):
        return [open_item(m[1]), answer(sender=_sender)]
    if re.search(r"How many unread emails are in the inbox\?", task):
        return [answer(count=_inbox_badge)]
    if m := re.search(r"Delete every email in the inbox from (.+?) <(.+?)>\.", task):
        return [Step("delete_all_from", "button", m[1], m[2])]
    return None


def _calendar(task: str, rng: np.random.Generator) -> list[Step] | None:
    if m := re.search(rf"Add an event {_Q} on (\S+) at (\S+) for (\d+) minutes at (.+?)\.$", task, re.M):
        form = _shuffled(
            rng,
            [
                fill("textbox", "Title", m[1]),
                fill("textbox", "Date", m[2]),
                fill("textbox", "Start time", m[3]),
                choose("Duration (minutes)", m[4]),
                fill("textbox", "Location", m[5]),
            ],
        )
        return [click("button", "New event"), *form, click("button", "Save event")]
    if m := re.search(rf"Add an event {_Q} today \((\S+)\) at (\S+)\.", task):
        form = _shuffled(
            rng, [fill("textbox", "Title", m[1]), fill("textbox", "Date", m[2]), fill("textbox", "Start time", m[3])]
        )
        return [click("button", "New event"), *form, click("button", "Save event")]
    if m := re.search(rf"Delete the event {_Q} on (\S+)\.", task):
        return [open_item(m[1]), click("button", "Delete event")]
    edit: tuple[str, Step] | None = None
    if m := re.search(rf"Move the event {_Q} to (\S+), keeping its time\.", task):
        edit = (m[1], fill("textbox", "Date", m[2]))
    elif m := re.search(rf"Change the start time of {_Q} to (\S+)\.", task):
        edit = (m[1], fill("textbox", "Start time", m[2]))
    elif m := re.search(rf"Rename the event {_Q} to {_Q}\.", task):
        edit = (m[1], fill("textbox", "Title", m[2]))
    elif m := re.search(rf"Set the location of {_Q} to {_Q}\.", task):
        edit = (m[1], fill("textbox", "Location", m[2]))
    elif m := re.search(rf"Make {_Q} last (\d+) minutes\.", task):
        edit = (m[1], choose("Duration (minutes)", m[2]))
    if edit:
        return [open_item(edit[0]), click("button", "Edit event"), edit[1], click("button", "Save event")]
    if m := re.search(rf"When does {_Q} start\?", task):
        return [open_item(m[1]), answer(date=lambda p: definition(p, "Date"), time=_event_time)]
    if re.search(r"How many events are on the calendar today\?", task):
        return [click("link", "Today"), answer(count=lambda p: str(main_list_items(p)))]
    return None


def _contacts(task: str, rng: np.random.Generator) -> list[Step] | None:
    if m := re.search(r"Add a contact (.+?), phone (.+?), who works at (.+?)\.$", task, re.M):
        form = _shuffled(
            rng, [fill("textbox", "Name", m[1]), fill("textbox", "Phone", m[2]), fill("textbox", "Company", m[3])]
        )
        return [click("button", "Add contact"), *form, click("button", "Save contact")]
    if m := re.search(r"Delete the contact (.+?)\.$", task, re.M):
        return [open_item(m[1]), click("button", "Delete contact")]
    if m := re.search(r"Task: (.+?) has a new phone number: (.+?)\. Update the contact\.", task):
        return [
            open_item(m[1]),
            click("button", "Edit"),
            fill("textbox", "Phone", m[2]),
            click("button", "Save contact"),
        ]
    if m := re.search(r"Task: (.+?) moved to (.+?)\. Update their company\.", task):
        return [
            open_item(m[1]),
            click("button", "Edit"),
            fill("textbox", "Company", m[2]),
            click("button", "Save contact"),
        ]
    if m := re.search(r"Add (.+?) to favorites\.", task):
        return [open_item(m[1]), click("button", "Add to favorites")]
    if m := re.search(r"Remove (.+?) from favorites\.", task):
        return [open_item(m[1]), click("button", "Remove from favorites")]
    if m := re.search(r"What is (.+?)'s phone number\?", task):
        return [open_item(m[1]), answer(phone=lambda p: definition(p, "Phone"))]
    if m := re.search(r"Find (.+?)'s email address", task):
        return [open_item(m[1]), answer(email=lambda p: definition(p, "Email"))]
    if m := re.search(r"Which company does (.+?) work for\?", task):
        return [open_item(m[1]), answer(company=lambda p: definition(p, "Company"))]
    if m := re.search(rf"How many of your contacts work at {_Q}\?", task):
        return [fill("searchbox", "Search contacts", m[1]), answer(count=lambda p: str(main_list_items(p)))]
    return None


def _settings(task: str, rng: np.random.Generator) -> list[Step] | None:
    if m := re.search(r"Set the screen brightness to (\d+)%\.", task):
        return [
            reveal("spinbutton", "Brightness (%)"),
            fill("spinbutton", "Brightness (%)", m[1]),
            Step("press", text="Enter"),
        ]
    if m := re.search(r"turn on dark mode and set the font size to (.+?)\.$", task, re.M):
        both = [
            [reveal("switch", "Dark mode"), toggle("switch", "Dark mode", True)],
            [reveal("combobox", "Font size"), choose("Font size", m[1])],
        ]
        return [s for part in _shuffled_parts(rng, both) for s in part]
    if m := re.search(r"Turn (on|off) (.+?)\.$", task, re.M):
        return [reveal("switch", m[2]), toggle("switch", m[2], m[1] == "on")]
    if m := re.search(r"Rename this device to (.+?)\.$", task, re.M):
        return [
            reveal("textbox", "Device name"),
            fill("textbox", "Device name", m[1]),
            click("button", "Rename device"),
        ]
    if re.search(r"What is this device called\?", task):
        return [reveal("textbox", "Device name"), answer(name=lambda p: _value(p, "textbox", "Device name"))]
    if m := re.search(r"Set the (.+?) to (.+?)\.$", task, re.M):
        return [reveal("combobox", m[1]), choose(m[1], m[2])]
    return None


def _shuffled_parts(rng: np.random.Generator, parts: list[list[Step]]) -> list[list[Step]]:
    return [parts[int(i)] for i in rng.permutation(len(parts))]


def _shop(task: str, rng: np.random.Generator) -> list[Step] | None:
    def add(product: str) -> list[Step]:
        return [fill("searchbox", "Search products", product), Step("click_exact", "button", f"Add {product} to cart")]

    if m := re.search(r"Add the (.+?) to the cart\.", task):
        return add(m[1])
    if m := re.search(r"Put one (.+?) and one (.+?) in the cart\.", task):
        return [s for part in _shuffled_parts(rng, [add(m[1]), add(m[2])]) for s in part]
    if m := re.search(r"Add (\d+) units of the (.+?) to the cart\.", task):
        return [
            *add(m[2]),
            click("link", "Cart"),
            fill("spinbutton", f"Quantity of {m[2]}", m[1]),
            Step("press", text="Enter"),
        ]
    if m := re.search(r"Remove the (.+?) from the cart and keep the rest\.", task):
        return [click("link", "Cart"), Step("click_exact", "button", f"Remove {m[1]}")]
    if m := re.search(r"Buy one (.+?) with (\w+) shipping for ([^,]+), (.+?)\.$", task, re.M):
        form = _shuffled(
            rng,
            [
                fill("textbox", "Full name", m[3]),
                fill("textbox", "Shipping address", m[4]),
                choose("Shipping method", m[2]),
            ],
        )
        return [*add(m[1]), click("link", "Cart"), click("button", "Checkout"), *form, click("button", "Place order")]
    if m := re.search(r"How much does the (.+?) cost\?", task):
        name = m[1]
        return [fill("searchbox", "Search products", name), answer(price=lambda p: _product(p, name, "price"))]
    if m := re.search(r"Which is the cheapest product in the (.+?) category\?", task):
        return [click("link", m[1]), answer(product=_cheapest)]
    if m := re.search(rf"How many {_Q} are in stock\?", task):
        name = m[1]
        return [fill("searchbox", "Search products", name), answer(stock=lambda p: _product(p, name, "stock"))]
    if m := re.search(rf"Search the shop for {_Q} and add it to the cart\.", task):
        return add(m[1])
    return None


APPS: dict[str, Callable[[str, np.random.Generator], list[Step] | None]] = {
    "notes": _notes,
    "mail": _mail,
    "calendar": _calendar,
    "contacts": _contacts,
    "settings": _settings,
    "shop": _shop,
}


def plan_steps(prompt: str, rng: np.random.Generator) -> list[Step]:
    """The steps for the task the prompt states (empty when the teacher does not know this kind of task)."""
    app = re.search(r"You are operating the (\w+) app", prompt)
    task = prompt.split("\nYou are operating", 1)[0]
    if app is None or app[1].lower() not in APPS:
        return []
    return APPS[app[1].lower()](task, rng) or []


# ---- reading answers off pages -------------------------------------------------------------------------------


def _value(page: str, role: str, name: str) -> str | None:
    e = find(page, role, name, exact=True)
    return e.value if e is not None else None


def _sender(page: str) -> str | None:
    m = re.search(r"From: [^<\n]*<([^>\s]+)>", page)
    return m[1] if m else None


def _inbox_badge(page: str) -> str | None:
    e = find(page, "link", "Inbox")
    if e is None:
        return None
    m = re.fullmatch(r"Inbox\s*(\d+)?", e.name.strip())
    return (m[1] or "0") if m else None


def _event_time(page: str) -> str | None:
    when = definition(page, "Time")
    m = re.search(r"\d{1,2}:\d{2}", when or "")
    return m[0] if m else None


def _product(page: str, name: str, what: str) -> str | None:
    for p in products(page):
        if p.name.casefold() == name.casefold():
            if what == "price":
                return f"{p.price:.2f}" if p.price is not None else None
            return str(p.stock) if p.stock is not None else None
    return None


def _cheapest(page: str) -> str | None:
    priced = [p for p in products(page) if p.price is not None]
    return min(priced, key=lambda p: p.price or 0.0).name if priced else None


# ---- the agent --------------------------------------------------------------------------------------------------


class Teacher(ReplayingAgent):
    """Reads the task text, takes the steps it implies on the pages it sees, reads answers off those pages, then
    calls ``done()``. Acts only on ``messages``; one instance per episode (``episode``)."""

    name = "teacher"

    def _restart(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.steps: list[Step] | None = None
        self.visited: set[str] = set()
        self.searched: set[str] = set()
        self.stuck = 0
        self.opened: str | None = None
        self.acted = 0

    def _decide(self, messages: list[Message]) -> str:
        self.acted += 1
        page = last_observation(messages)
        if self.steps is None:
            prompt = next((m.content or "" for m in messages if m.role == "user"), "")
            self.steps = plan_steps(prompt, self.rng)
        while self.steps:
            action, finished = self._do(self.steps[0], page)
            if finished:
                self.steps.pop(0)
                self.stuck = 0
            if action is not None:
                return action
        return tool_call("done")

    def _do(self, step: Step, page: str) -> tuple[str | None, bool]:  # noqa: C901 - one dispatch over step kinds
        """The action for ``step`` on ``page`` (or None) and whether the step is over."""
        if step.kind in ("click", "click_exact"):
            e = find(page, step.role, step.name, exact=step.kind == "click_exact")
            if e is None:
                return self._explore(page, step)
            return tool_call("click", ref=e.ref), True
        if step.kind == "open":
            e = list_item(page, step.name)
            if e is None:
                return self._explore(page, step)
            return tool_call("click", ref=e.ref), True
        if step.kind in ("fill", "select"):
            e = find(page, step.role, step.name, exact=True) or find(page, step.role, step.name)
            if e is None:
                return self._explore(page, step)
            if step.kind == "fill":
                return tool_call("fill", ref=e.ref, text=step.text), True
            return tool_call("select", ref=e.ref, option=step.text), True
        if step.kind == "press":
            return tool_call("press", key=step.text), True
        if step.kind == "toggle":
            e = find(page, step.role, step.name, exact=True) or find(page, step.role, step.name)
            if e is None:
                return self._explore(page, step)
            return (None if e.checked == step.want else tool_call("click", ref=e.ref)), True
        if step.kind == "reveal":
            if find(page, step.role, step.name, exact=True) or find(page, step.role, step.name):
                return None, True
            return self._explore(page, step)
        if step.kind == "answer":
            fields = {k: read(page) for k, read in step.read.items()}
            if any(v is None for v in fields.values()):
                return self._explore(page, step)
            return tool_call("answer", fields=fields), True
        if step.kind == "delete_all_from":
            return self._delete_from(page, step.name, step.text)
        raise ValueError(f"unknown step kind {step.kind!r}")

    def _explore(self, page: str, step: Step) -> tuple[str | None, bool]:
        """The element the step needs is not on this page: search for it (items), else look in an app section not
        seen yet (in an order drawn from the seed); give the step up after a few tries."""
        self.stuck += 1
        if self.stuck > 6:
            return None, True
        if step.kind == "open" and step.name not in self.searched:
            box = next((e for e in parse_page(page) if e.role == "searchbox"), None)
            if box is not None:
                self.searched.add(step.name)
                return tool_call("fill", ref=box.ref, text=step.name), False
        links = [e for e in parse_page(page) if e.role == "link" and e.name not in self.visited]
        if not links:
            return None, True
        e = links[int(self.rng.integers(len(links)))]
        self.visited.add(e.name)
        return tool_call("click", ref=e.ref), False

    def _delete_from(self, page: str, name: str, address: str) -> tuple[str | None, bool]:
        """Open each inbox message whose sender is ``name``; delete it when its header shows ``address``."""
        header = re.search(r"From: [^<\n]*<([^>\s]+)>", page)
        delete = find(page, "button", "Delete", exact=True)
        if header is not None and delete is not None:
            if header[1].casefold() == address.casefold():
                return tool_call("click", ref=delete.ref), False
            self.visited.add(f"skip:{self.opened}")
            inbox = find(page, "link", "Inbox")
            return (tool_call("click", ref=inbox.ref), False) if inbox else (None, True)
        mine = [
            e
            for e in parse_page(page)
            if e.role == "button" and e.name.startswith(name + " ") and f"skip:{e.name}" not in self.visited
        ]
        heading = next((e for e in parse_page(page) if e.role == "heading" and e.name == "Inbox"), None)
        if heading is None:
            inbox = find(page, "link", "Inbox")
            self.stuck += 1
            return (tool_call("click", ref=inbox.ref), False) if inbox and self.stuck < 4 else (None, True)
        if not mine:
            return None, True
        self.opened = mine[0].name
        return tool_call("click", ref=mine[0].ref), False
