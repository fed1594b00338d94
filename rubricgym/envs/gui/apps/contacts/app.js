/* Contacts: a searchable list, favourites, a detail card, add/edit/delete.
 * State: {contacts: [{id, name, phone, email, company, favorite}]}
 * The list shows names only: phone, email and company are on a contact's card (tasks ask for them). */
"use strict";
let S = { contacts: [] };
let query = "";
const { esc } = RG;
const side = document.getElementById("side"), main = document.getElementById("main");

function render() {
  const [view = "all", arg] = RG.route();
  side.innerHTML = `<button class="primary" data-act="add" style="width:100%;margin-bottom:10px">Add contact</button>` +
    RG.nav([["/all", "All contacts", S.contacts.length], ["/favorites", "Favorites", S.contacts.filter((c) => c.favorite).length]], "/" + view);
  if (view === "contact") return detail(S.contacts.find((c) => c.id === arg));
  if (view === "edit" || view === "add") return edit(S.contacts.find((c) => c.id === arg));
  const shown = S.contacts.filter((c) => (view !== "favorites" || c.favorite) &&
    (c.name + " " + c.company + " " + c.email).toLowerCase().includes(query.toLowerCase()))
    .sort((a, b) => a.name.localeCompare(b.name));
  main.innerHTML = `<h2>${view === "favorites" ? "Favorites" : "Contacts"}</h2>
    <input type="search" id="q" aria-label="Search contacts" placeholder="Search contacts" value="${esc(query)}" style="width:100%;padding:8px;margin-bottom:12px">
    <ul class="list" aria-label="Contacts">${shown.map((c) => `<li><button class="row" data-act="open" data-arg="${c.id}">
    <span class="grow">${c.favorite ? "★ " : ""}${esc(c.name)}</span></button></li>`).join("") ||
    '<li class="muted" style="padding:12px">No contacts</li>'}</ul>`;
  document.getElementById("q").addEventListener("input", (e) => { query = e.target.value; render(); document.getElementById("q").focus(); });
}

function detail(c) {
  if (!c) { main.innerHTML = "<h2>Contact not found</h2>"; return; }
  main.innerHTML = `<section class="card" aria-label="Contact details"><h2>${esc(c.name)}</h2><dl>
    <dt>Phone</dt><dd>${esc(c.phone)}</dd><dt>Email</dt><dd>${esc(c.email)}</dd><dt>Company</dt><dd>${esc(c.company)}</dd></dl></section>
    <div class="actions"><button data-act="edit" data-arg="${c.id}">Edit</button>
    <button data-act="fav" data-arg="${c.id}" aria-pressed="${c.favorite}">${c.favorite ? "Remove from favorites" : "Add to favorites"}</button>
    <button class="danger" data-act="delete" data-arg="${c.id}">Delete contact</button><button data-act="list">Back to contacts</button></div>`;
}

function edit(c) {
  const v = c || { name: "", phone: "", email: "", company: "" };
  main.innerHTML = `<h2>${c ? "Edit contact" : "New contact"}</h2><form class="form card" data-form="save" data-id="${c ? c.id : ""}">
    <label for="name">Name</label><input id="name" name="name" value="${esc(v.name)}" required>
    <label for="phone">Phone</label><input id="phone" name="phone" type="tel" value="${esc(v.phone)}">
    <label for="email">Email</label><input id="email" name="email" type="email" value="${esc(v.email)}">
    <label for="company">Company</label><input id="company" name="company" value="${esc(v.company)}">
    <div class="actions"><button class="primary" type="submit">Save contact</button><button type="button" data-act="list">Cancel</button></div></form>`;
}

RG.onClick({
  add: () => RG.go("/add"),
  list: () => RG.go("/all"),
  open: (id) => RG.go("/contact/" + id),
  edit: (id) => RG.go("/edit/" + id),
  fav: (id) => { const c = S.contacts.find((x) => x.id === id); c.favorite = !c.favorite; render(); },
  delete: (id) => { S.contacts = S.contacts.filter((c) => c.id !== id); RG.toast("Contact deleted"); RG.go("/all"); },
});
RG.onSubmit({
  save(v, form) {
    const id = form.dataset.id;
    if (id) Object.assign(S.contacts.find((c) => c.id === id), v);
    else S.contacts.push({ id: RG.nextId("c", S.contacts), favorite: false, ...v });
    RG.toast("Contact saved"); RG.go("/contact/" + (id || S.contacts[S.contacts.length - 1].id));
  },
});
RG.register({ get: () => S, set: (s) => { S = s; query = ""; }, render });
