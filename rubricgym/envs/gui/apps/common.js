/* The JS contract every bundled app honours: state() -> JSON, load(state) resets the app to any state.
 * An app registers {get, set, render}; UI location lives in the URL hash so go_back works. */
(function () {
  "use strict";
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const KEY = "rubricgym-state:" + location.pathname;
  let app = null;
  const RG = {
    esc: (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ESC[c]),
    copy: (x) => JSON.parse(JSON.stringify(x)),
    /* The state survives reloads and visits to other pages of the app within the tab (sessionStorage). */
    register(a) {
      app = a;
      const render = a.render;
      app.render = () => { render(); RG.save(); };
      window.addEventListener("hashchange", () => app.render());
      window.addEventListener("pagehide", () => RG.save());
      document.addEventListener("DOMContentLoaded", () => {
        const saved = sessionStorage.getItem(KEY);
        if (saved) app.set(JSON.parse(saved));
        app.render();
      });
    },
    save() { try { sessionStorage.setItem(KEY, JSON.stringify(app.get())); } catch (e) { /* storage full or off */ } },
    state: () => RG.copy(app.get()),
    load(s) { app.set(RG.copy(s)); RG.toast(""); app.render(); return true; },
    route: () => (location.hash.slice(1) || "/").split("/").filter(Boolean),
    go(path) { if (location.hash.slice(1) === path) app.render(); else location.hash = path; },
    /* The next id "<prefix><n>" after every id in items. */
    nextId(prefix, items) {
      const n = items.map((x) => parseInt(String(x.id).slice(prefix.length), 10) || 0);
      return prefix + (Math.max(0, ...n) + 1);
    },
    /* Click handlers by data-act name: handler(arg, element, event). */
    onClick(handlers) {
      document.addEventListener("click", (e) => {
        const el = e.target.closest("[data-act]");
        if (el && handlers[el.dataset.act]) { e.preventDefault(); handlers[el.dataset.act](el.dataset.arg, el, e); }
      });
    },
    /* Form submit handlers by form data-form name: handler(values, form). */
    onSubmit(handlers) {
      document.addEventListener("submit", (e) => {
        const f = e.target;
        if (handlers[f.dataset.form]) {
          e.preventDefault();
          const values = {};
          for (const el of f.elements) if (el.name) values[el.name] = el.type === "checkbox" ? el.checked : el.value;
          handlers[f.dataset.form](values, f);
        }
      });
    },
    toast(text) {
      let t = document.querySelector(".toast");
      if (!text) { if (t) t.remove(); return; }
      if (!t) { t = document.createElement("div"); t.className = "toast"; t.setAttribute("role", "status"); document.body.append(t); }
      t.textContent = text;
    },
    nav(items, current) {
      return items.map(([href, label, count]) =>
        `<a href="#${href}" class="${href === current ? "active" : ""}"${href === current ? ' aria-current="page"' : ""}>` +
        `<span>${RG.esc(label)}</span>${count ? `<span class="badge">${count}</span>` : ""}</a>`).join("");
    },
    options: (values, selected) => values.map((v) =>
      `<option${v === selected ? " selected" : ""}>${RG.esc(v)}</option>`).join(""),
  };
  window.RG = RG;
  window.state = () => RG.state();
  window.load = (s) => RG.load(s);
})();
