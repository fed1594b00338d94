/* Mail: folders, read/unread, stars, compose and reply.
 * State: {me, messages: [{id, from_name, from, to, subject, body, date, folder: inbox|archive|trash|sent, read, starred}]}
 * Lists show people by name (a mail client's display name): an address is on the opened message (tasks ask for it). */
"use strict";
let S = { me: "me@example.com", messages: [] };
const { esc } = RG;
const side = document.getElementById("side"), main = document.getElementById("main");
const FOLDERS = [["inbox", "Inbox"], ["starred", "Starred"], ["sent", "Sent"], ["archive", "Archive"], ["trash", "Trash"]];
/* A person's display name where a message from them gives one, else the address itself. */
const nameOf = (address) => (S.messages.find((m) => m.from === address && m.from_name) || { from_name: address }).from_name;
const inFolder = (f) => S.messages.filter((m) => (f === "starred" ? m.starred && m.folder !== "trash" : m.folder === f));

function render() {
  const [view = "inbox", arg] = RG.route();
  side.innerHTML = `<button class="primary" data-act="compose" style="width:100%;margin-bottom:10px">Compose</button>` +
    RG.nav(FOLDERS.map(([f, label]) => ["/" + f, label, f === "inbox" ? inFolder(f).filter((m) => !m.read).length : 0]),
      "/" + (view === "msg" ? "" : view));
  if (view === "msg") return message(S.messages.find((m) => m.id === arg));
  if (view === "compose") return compose(S.messages.find((m) => m.id === arg));
  const list = inFolder(view).sort((a, b) => b.date.localeCompare(a.date));
  const label = (FOLDERS.find(([f]) => f === view) || [0, "Inbox"])[1];
  main.innerHTML = `<h2>${esc(label)}</h2><ul class="list" aria-label="Messages">${list.map((m) => `<li>
    <button class="row${m.read ? "" : " unread"}" data-act="open" data-arg="${m.id}">
    <span style="width:220px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap">${esc(view === "sent" ? "To: " + nameOf(m.to) : nameOf(m.from))}</span><span class="grow">${esc(m.subject)}</span>
    <span class="muted">${m.starred ? "★ " : ""}${esc(m.date)}</span></button></li>`).join("") ||
    '<li class="muted" style="padding:12px">No messages</li>'}</ul>`;
}

function message(m) {
  if (!m) { main.innerHTML = "<h2>Message not found</h2>"; return; }
  if (!m.read) m.read = true;
  main.innerHTML = `<article class="card" aria-label="Message"><h2>${esc(m.subject)}</h2>
    <p class="muted">From: ${esc(m.from_name ? `${m.from_name} <${m.from}>` : m.from)}<br>To: ${esc(m.to)}<br>Date: ${esc(m.date)}</p><p style="white-space:pre-wrap">${esc(m.body)}</p></article>
    <div class="actions"><button data-act="reply" data-arg="${m.id}">Reply</button>
    <button data-act="star" data-arg="${m.id}" aria-pressed="${m.starred}">${m.starred ? "Unstar" : "Star"}</button>
    <button data-act="unread" data-arg="${m.id}">Mark as unread</button>
    ${m.folder === "archive" || m.folder === "trash" ? `<button data-act="inbox" data-arg="${m.id}">Move to Inbox</button>` : `<button data-act="archive" data-arg="${m.id}">Archive</button>`}
    ${m.folder !== "trash" ? `<button class="danger" data-act="trash" data-arg="${m.id}">Delete</button>` : ""}</div>`;
}

function compose(re) {
  const to = re ? re.from : "", subject = re ? "Re: " + re.subject : "";
  main.innerHTML = `<h2>New message</h2><form class="form card" data-form="send">
    <label for="to">To</label><input id="to" name="to" type="email" value="${esc(to)}" required>
    <label for="subject">Subject</label><input id="subject" name="subject" value="${esc(subject)}">
    <label for="body">Message</label><textarea id="body" name="body"></textarea>
    <div class="actions"><button class="primary" type="submit">Send</button><button type="button" data-act="discard">Discard</button></div></form>`;
}

const move = (folder, text) => (id) => { S.messages.find((m) => m.id === id).folder = folder; RG.toast(text); RG.go("/inbox"); };
RG.onClick({
  compose: () => RG.go("/compose"),
  discard: () => RG.go("/inbox"),
  open: (id) => RG.go("/msg/" + id),
  reply: (id) => RG.go("/compose/" + id),
  star: (id) => { const m = S.messages.find((x) => x.id === id); m.starred = !m.starred; render(); },
  unread: (id) => { S.messages.find((m) => m.id === id).read = false; RG.go("/inbox"); },
  archive: move("archive", "Conversation archived"),
  trash: move("trash", "Moved to Trash"),
  inbox: move("inbox", "Moved to Inbox"),
});
RG.onSubmit({
  send(v) {
    S.messages.push({ id: RG.nextId("m", S.messages), from: S.me, to: v.to, subject: v.subject, body: v.body,
      date: S.today || "2024-05-20", folder: "sent", read: true, starred: false });
    RG.toast("Message sent"); RG.go("/sent");
  },
});
RG.register({ get: () => S, set: (s) => { S = s; }, render });
