"""Shop templates: cart, quantities, checkout, and product questions.

The shop's start page lists no product (categories and a search box only), so every plan first opens the
product's category or searches for it: a product question's answer is never on the first page."""

from __future__ import annotations

from rubricgym.envs.gui.templates.base import DONE, G, Spec, answer, click, fill, pick, press, quote, select, template

NAMES = ["Alex Morgan", "Sam Lee", "Jordan Blake", "Riley Chen"]
ADDRESSES = [
    "12 Oak Street, Springfield",
    "4 Harbour Road, Portsmouth",
    "88 Elm Avenue, Denver",
    "301 King Street, Toronto",
]


def _product(rng, s, exclude=()):
    return pick(rng, [p for p in s["products"] if p["stock"] >= 3 and p["id"] not in exclude])


def _add(p):
    """Open ``p``'s category, then add it to the cart."""
    return [click("link", p["category"]), click("button", f"Add {p['name']} to cart")]


@template("shop.add_to_cart", "shop", 1)
def add_to_cart(rng, s):
    p = _product(rng, s)
    return Spec(
        f"Add the {p['name']} to the cart.", [G(f"cart[product={p['id']}].qty", 1)], [*_add(p), DONE], ["cart*"]
    )


@template("shop.add_two", "shop", 2)
def add_two(rng, s):
    a = _product(rng, s)
    b = _product(rng, s, exclude=(a["id"],))
    return Spec(
        f"Put one {a['name']} and one {b['name']} in the cart.",
        [G(f"cart[product={a['id']}].qty", 1), G(f"cart[product={b['id']}].qty", 1), G("cart", 2, "len")],
        [*_add(a), *_add(b), DONE],
        ["cart*"],
    )


@template("shop.quantity", "shop", 3)
def quantity(rng, s):
    p = _product(rng, s)
    k = int(rng.integers(2, min(p["stock"], 5) + 1))
    return Spec(
        f"Add {k} units of the {p['name']} to the cart.",
        [G(f"cart[product={p['id']}].qty", k)],
        [
            *_add(p),
            click("link", "~Cart"),
            fill("spinbutton", f"Quantity of {p['name']}", str(k)),
            press("Enter"),
            DONE,
        ],
        ["cart*"],
    )


@template("shop.remove", "shop", 2, split="test")
def remove(rng, s):
    a = _product(rng, s)
    b = _product(rng, s, exclude=(a["id"],))
    s["cart"] = [{"product": a["id"], "qty": 1}, {"product": b["id"], "qty": 2}]
    return Spec(
        f"Remove the {b['name']} from the cart and keep the rest.",
        [G(f"cart[product={b['id']}]", op="absent"), G(f"cart[product={a['id']}].qty", 1)],
        [click("link", "~Cart"), click("button", f"Remove {b['name']}"), DONE],
        ["cart*"],
    )


@template("shop.checkout", "shop", 4, max_steps=20)
def checkout(rng, s):
    p = _product(rng, s)
    name, address, ship = pick(rng, NAMES), pick(rng, ADDRESSES), pick(rng, ["Standard", "Express"])
    total = round(p["price"] + (9.99 if ship == "Express" else 0), 2)
    return Spec(
        f"Buy one {p['name']} with {ship} shipping for {name}, {address}.",
        [
            G("orders[0].items[0].product", p["id"]),
            G("orders[0].items[0].qty", 1),
            G("orders[0].shipping", ship),
            G("orders[0].address", address, "ieq"),
            G("orders[0].name", name, "ieq"),
            G("orders[0].total", total, "approx"),
        ],
        [
            *_add(p),
            click("link", "~Cart"),
            click("button", "Checkout"),
            fill("textbox", "Full name", name),
            fill("textbox", "Shipping address", address),
            select("Shipping method", ship),
            click("button", "Place order"),
            DONE,
        ],
        ["cart*", "orders*", f"products[id={p['id']}].stock"],
    )


@template("shop.price", "shop", 1)
def price(rng, s):
    p = pick(rng, s["products"])
    return Spec(
        f"How much does the {p['name']} cost? Answer with the number in the field `price`.",
        [G("answer.price", p["price"], "approx")],
        [fill("searchbox", "Search products", p["name"]), answer(price=f"{p['price']:.2f}"), DONE],
        answer_fields=["price"],
    )


@template("shop.cheapest", "shop", 3)
def cheapest(rng, s):
    cat = pick(rng, sorted({p["category"] for p in s["products"]}))
    best = min((p for p in s["products"] if p["category"] == cat), key=lambda p: p["price"])
    return Spec(
        f"Which is the cheapest product in the {cat} category? Answer with its name in the field `product`.",
        [G("answer.product", best["name"], "ieq")],
        [click("link", cat), answer(product=best["name"]), DONE],
        answer_fields=["product"],
    )


@template("shop.stock", "shop", 2, split="test")
def stock(rng, s):
    p = pick(rng, s["products"])
    return Spec(
        f"How many {quote(p['name'])} are in stock? Answer in the field `stock` (0 if it is sold out).",
        [G("answer.stock", str(p["stock"]), "ieq")],
        [fill("searchbox", "Search products", p["name"]), answer(stock=p["stock"]), DONE],
        answer_fields=["stock"],
    )


@template("shop.search_add", "shop", 2)
def search_add(rng, s):
    p = _product(rng, s)
    return Spec(
        f"Search the shop for {quote(p['name'])} and add it to the cart.",
        [G(f"cart[product={p['id']}].qty", 1)],
        [fill("searchbox", "Search products", p["name"]), click("button", f"Add {p['name']} to cart"), DONE],
        ["cart*"],
    )
