/* Notes: folders, pinned notes, a search box, an editor. State: {folders: [..], notes: [{id, title, body, folder, pinned}]} */
"use strict";
let S = { folders: ["Personal", "Work", "Ideas"], notes: [] };
let query = "";
const { esc } = RG;
const side = document.getElementById("side"), main = document.getElementById("main");

function render() {
  const [view, arg] = RG.route();
  const folder = view === "folder" ? decodeURIComponent(arg) : null;
  side.innerHTML = `<button class="primary" data-act="new" style="width:100%;margin-bottom:10px">New note</button>` +
    RG.nav([["/", "All notes", S.notes.length], ...S.folders.map((f) => ["/folder/" + encodeURIComponent(f), f,
      S.notes.filter((n) => n.folder === f).length])], view === "folder" ? "/folder/" + arg : view ? "" : "/");
  if (view === "note" || view === "new") return editor(S.notes.find((n) => n.id === arg));
  const shown = S.notes.filter((n) => (!folder || n.folder === folder) &&
    (n.title + " " + n.body).toLowerCase().includes(query.toLowerCase()))
    .sort((a, b) => (b.pinned - a.pinned));
  main.innerHTML = `<h2>${esc(folder || "All notes")}</h2>
    <input type="search" aria-label="Search notes" placeholder="Search notes" value="${esc(query)}" id="q" style="width:100%;padding:8px;margin-bottom:12px">
    <ul class="list" aria-label="Notes">${shown.map((n) => `<li><button class="row" data-act="open" data-arg="${n.id}">
      <span class="grow">${n.pinned ? "📌 " : ""}${esc(n.title)}</span><span class="muted">${esc(n.folder)}</span></button></li>`).join("") ||
      '<li class="muted" style="padding:12px">No notes</li>'}</ul>`;
  document.getElementById("q").addEventListener("input", (e) => { query = e.target.value; render(); document.getElementById("q").focus(); });
}

function editor(note) {
  const n = note || { title: "", body: "", folder: S.folders[0], pinned: false };
  main.innerHTML = `<h2>${note ? "Edit note" : "New note"}</h2><form class="form card" data-form="save" data-id="${note ? note.id : ""}">
    <label for="t">Title</label><input id="t" name="title" value="${esc(n.title)}" required>
    <label for="b">Body</label><textarea id="b" name="body">${esc(n.body)}</textarea>
    <label for="f">Folder</label><select id="f" name="folder">${RG.options(S.folders, n.folder)}</select>
    <label><input type="checkbox" name="pinned"${n.pinned ? " checked" : ""}> Pinned</label>
    <div class="actions"><button class="primary" type="submit">Save</button><button type="button" data-act="back">Cancel</button>
    ${note ? `<button type="button" class="danger" data-act="delete" data-arg="${note.id}">Delete note</button>` : ""}</div></form>`;
}

RG.onClick({
  new: () => RG.go("/new"),
  open: (id) => RG.go("/note/" + id),
  back: () => RG.go("/"),
  delete: (id) => { S.notes = S.notes.filter((n) => n.id !== id); RG.toast("Note deleted"); RG.go("/"); },
});
RG.onSubmit({
  save(v, form) {
    const id = form.dataset.id;
    if (id) Object.assign(S.notes.find((n) => n.id === id), v);
    else S.notes.push({ id: RG.nextId("n", S.notes), ...v });
    RG.toast("Note saved"); RG.go("/");
  },
});
RG.register({ get: () => S, set: (s) => { S = s; query = ""; }, render });
