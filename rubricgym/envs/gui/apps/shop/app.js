/* Shop: a catalogue with categories and search, a cart with quantities, checkout and past orders.
 * State: {products: [{id, name, price, category, stock}], cart: [{product, qty}],
 *         orders: [{id, items: [{product, qty}], total, name, address, shipping}]}
 * The start page shows the categories and a search box, no product: products, prices and stock are on a
 * category's page, All products and search results (tasks ask for them). */
"use strict";
let S = { products: [], cart: [], orders: [] };
let query = "";
const { esc } = RG;
const side = document.getElementById("side"), main = document.getElementById("main");
const SHIPPING = { Standard: 0, Express: 9.99 };
const money = (x) => "$" + x.toFixed(2);
const product = (id) => S.products.find((p) => p.id === id);
const cartTotal = () => Math.round(S.cart.reduce((t, i) => t + product(i.product).price * i.qty, 0) * 100) / 100;

function render() {
  const [view = "home", arg] = RG.route();
  const cats = [...new Set(S.products.map((p) => p.category))].sort();
  side.innerHTML = RG.nav([["/home", "Shop home"], ["/all", "All products"], ...cats.map((c) => ["/cat/" + encodeURIComponent(c), c]),
    ["/cart", "Cart", S.cart.reduce((n, i) => n + i.qty, 0)], ["/orders", "Orders", S.orders.length]],
    "/" + view + (view === "cat" ? "/" + arg : ""));
  if (view === "cart") return cart();
  if (view === "checkout") return checkout();
  if (view === "orders") return orders();
  const home = view !== "all" && view !== "cat";
  const cat = view === "cat" ? decodeURIComponent(arg) : null;
  const search = `<input type="search" id="q" aria-label="Search products" placeholder="Search products" value="${esc(query)}" style="width:100%;padding:8px;margin-bottom:12px">`;
  const shown = S.products.filter((p) => (!cat || p.category === cat) && p.name.toLowerCase().includes(query.toLowerCase()));
  if (home && !query) {
    main.innerHTML = `<h2>Welcome to the shop</h2>${search}<p class="muted">Search for a product, or pick a category or All products in the navigation.</p>`;
  } else {
    main.innerHTML = `<h2>${esc(cat || (home ? "Search results" : "All products"))}</h2>${search}
    <div class="grid">${shown.map((p) => `<article class="card" aria-label="${esc(p.name)}"><h3 style="margin:0 0 6px">${esc(p.name)}</h3>
    <p class="muted" style="margin:0">${esc(p.category)}</p><p><strong>${money(p.price)}</strong> · ${p.stock ? p.stock + " in stock" : "Out of stock"}</p>
    <button class="primary" data-act="add" data-arg="${p.id}" aria-label="Add ${esc(p.name)} to cart"${p.stock ? "" : " disabled"}>Add to cart</button></article>`).join("") ||
    '<p class="muted">No products</p>'}</div>`;
  }
  document.getElementById("q").addEventListener("input", (e) => { query = e.target.value; render(); document.getElementById("q").focus(); });
}

function cart() {
  main.innerHTML = `<h2>Cart</h2>` + (S.cart.length ? `<ul class="list" aria-label="Cart items">${S.cart.map((i) => {
    const p = product(i.product);
    return `<li style="display:flex;gap:12px;align-items:center;padding:10px 14px"><span class="grow">${esc(p.name)}</span>
      <label>Qty <input type="number" min="1" max="${p.stock}" value="${i.qty}" data-qty="${p.id}" aria-label="Quantity of ${esc(p.name)}" style="width:60px"></label>
      <span>${money(p.price * i.qty)}</span><button class="danger" data-act="remove" data-arg="${p.id}" aria-label="Remove ${esc(p.name)}">Remove</button></li>`;
  }).join("")}</ul><p><strong>Subtotal: ${money(cartTotal())}</strong></p><button class="primary" data-act="checkout">Checkout</button>`
    : '<p class="muted">Your cart is empty</p>');
}

function checkout() {
  main.innerHTML = `<h2>Checkout</h2><form class="form card" data-form="order">
    <label for="name">Full name</label><input id="name" name="name" required>
    <label for="address">Shipping address</label><input id="address" name="address" required>
    <label for="shipping">Shipping method</label><select id="shipping" name="shipping">${RG.options(Object.keys(SHIPPING), "Standard")}</select>
    <p>Items: ${money(cartTotal())}</p><div class="actions"><button class="primary" type="submit">Place order</button><button type="button" data-act="cart">Back to cart</button></div></form>`;
}

function orders() {
  main.innerHTML = `<h2>Orders</h2>` + (S.orders.map((o) => `<section class="card" aria-label="Order ${o.id}"><h3 style="margin:0">Order ${esc(o.id)}</h3>
    <p>${o.items.map((i) => `${i.qty} × ${esc(product(i.product).name)}`).join(", ")}</p><p class="muted">${esc(o.shipping)} to ${esc(o.address)} · Total ${money(o.total)}</p></section>`).join("") ||
    '<p class="muted">No orders yet</p>');
}

RG.onClick({
  add(id) {
    const p = product(id), item = S.cart.find((i) => i.product === id);
    if (item) item.qty = Math.min(p.stock, item.qty + 1); else S.cart.push({ product: id, qty: 1 });
    RG.toast(p.name + " added to cart"); render();
  },
  remove: (id) => { S.cart = S.cart.filter((i) => i.product !== id); render(); },
  checkout: () => RG.go("/checkout"),
  cart: () => RG.go("/cart"),
});
/* Quantities update as they are typed; the cart re-renders (new totals) on change. */
for (const type of ["input", "change"]) document.addEventListener(type, (e) => {
  const id = e.target.dataset.qty;
  if (!id) return;
  const item = S.cart.find((i) => i.product === id);
  item.qty = Math.max(1, Math.min(product(id).stock, parseInt(e.target.value, 10) || 1));
  if (type === "change") render();
});
RG.onSubmit({
  order(v) {
    if (!S.cart.length) { RG.toast("Your cart is empty"); return; }
    const total = Math.round((cartTotal() + SHIPPING[v.shipping]) * 100) / 100;
    for (const i of S.cart) product(i.product).stock -= i.qty;
    S.orders.push({ id: RG.nextId("o", S.orders), items: S.cart, total, name: v.name, address: v.address, shipping: v.shipping });
    S.cart = [];
    RG.toast("Order placed"); RG.go("/orders");
  },
});
RG.register({ get: () => S, set: (s) => { S = s; query = ""; }, render });
