/* Calendar: an agenda of upcoming events, today's schedule, event details, add/edit/delete.
 * State: {today: "YYYY-MM-DD", events: [{id, title, date, start: "HH:MM", duration (min), location}]}
 * The agenda (the start page) lists the events in order by title and place only: an event's date and time are on
 * its card, and today's times on the Today page (tasks ask for them). */
"use strict";
let S = { today: "2024-05-20", events: [] };
const { esc } = RG;
const side = document.getElementById("side"), main = document.getElementById("main");
const DURATIONS = ["15", "30", "45", "60", "90", "120"];

function render() {
  const [view = "agenda", arg] = RG.route();
  side.innerHTML = `<button class="primary" data-act="add" style="width:100%;margin-bottom:10px">New event</button>` +
    RG.nav([["/agenda", "Agenda", S.events.length], ["/today", "Today"]], "/" + view);
  if (view === "event") return detail(S.events.find((e) => e.id === arg));
  if (view === "edit" || view === "add") return edit(S.events.find((e) => e.id === arg));
  const shown = S.events.filter((e) => view !== "today" || e.date === S.today)
    .sort((a, b) => (a.date + a.start).localeCompare(b.date + b.start));
  const today = view === "today";
  main.innerHTML = `<h2>${today ? "Today, " + esc(S.today) : "Agenda"}</h2>` + (shown.length ? `<ul class="list" aria-label="Events">` +
    shown.map((e) => `<li><button class="row" data-act="open" data-arg="${e.id}">
      ${today ? `<span style="width:60px">${esc(e.start)}</span>` : ""}<span class="grow">${esc(e.title)}</span><span class="muted">${esc(e.location)}</span></button></li>`).join("") +
    "</ul>" : '<p class="muted">No events</p>');
}

function detail(e) {
  if (!e) { main.innerHTML = "<h2>Event not found</h2>"; return; }
  main.innerHTML = `<section class="card" aria-label="Event details"><h2>${esc(e.title)}</h2><dl>
    <dt>Date</dt><dd>${esc(e.date)}</dd><dt>Time</dt><dd>${esc(e.start)} (${esc(e.duration)} min)</dd><dt>Location</dt><dd>${esc(e.location) || "—"}</dd></dl></section>
    <div class="actions"><button data-act="edit" data-arg="${e.id}">Edit event</button><button class="danger" data-act="delete" data-arg="${e.id}">Delete event</button>
    <button data-act="agenda">Back to agenda</button></div>`;
}

function edit(e) {
  const v = e || { title: "", date: S.today, start: "09:00", duration: "30", location: "" };
  main.innerHTML = `<h2>${e ? "Edit event" : "New event"}</h2><form class="form card" data-form="save" data-id="${e ? e.id : ""}">
    <label for="title">Title</label><input id="title" name="title" value="${esc(v.title)}" required>
    <label for="date">Date</label><input id="date" name="date" type="date" value="${esc(v.date)}" required>
    <label for="start">Start time</label><input id="start" name="start" type="time" value="${esc(v.start)}" required>
    <label for="duration">Duration (minutes)</label><select id="duration" name="duration">${RG.options(DURATIONS, String(v.duration))}</select>
    <label for="location">Location</label><input id="location" name="location" value="${esc(v.location)}">
    <div class="actions"><button class="primary" type="submit">Save event</button><button type="button" data-act="agenda">Cancel</button></div></form>`;
}

RG.onClick({
  add: () => RG.go("/add"),
  agenda: () => RG.go("/agenda"),
  open: (id) => RG.go("/event/" + id),
  edit: (id) => RG.go("/edit/" + id),
  delete: (id) => { S.events = S.events.filter((e) => e.id !== id); RG.toast("Event deleted"); RG.go("/agenda"); },
});
RG.onSubmit({
  save(v, form) {
    const id = form.dataset.id;
    v.duration = parseInt(v.duration, 10);
    if (id) Object.assign(S.events.find((e) => e.id === id), v);
    else S.events.push({ id: RG.nextId("e", S.events), ...v });
    RG.toast("Event saved"); RG.go("/agenda");
  },
});
RG.register({ get: () => S, set: (s) => { S = s; }, render });
