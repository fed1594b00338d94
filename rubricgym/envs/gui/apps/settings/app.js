/* Settings: switches, choices and a profile, in sections like a phone's settings.
 * State: {settings: {wifi, bluetooth, airplane_mode, dark_mode, notifications, location, auto_update: bool,
 *         language, font_size, timezone: str, brightness: int, device_name: str}} */
"use strict";
let S = { settings: {} };
const { esc } = RG;
const side = document.getElementById("side"), main = document.getElementById("main");
const CHOICES = {
  language: ["English", "Español", "Français", "Deutsch", "Italiano", "Português"],
  font_size: ["Small", "Medium", "Large", "Extra large"],
  timezone: ["UTC", "Europe/London", "Europe/Paris", "America/New_York", "America/Los_Angeles", "Asia/Tokyo"],
};
const SECTIONS = {
  network: ["Network", [["wifi", "Wi-Fi"], ["bluetooth", "Bluetooth"], ["airplane_mode", "Airplane mode"]]],
  display: ["Display", [["dark_mode", "Dark mode"]], [["font_size", "Font size"]], true],
  system: ["System", [["notifications", "Notifications"], ["location", "Location services"], ["auto_update", "Automatic updates"]],
    [["language", "Language"], ["timezone", "Time zone"]]],
  about: ["About", [], [], false, true],
};

function render() {
  const [view = "network"] = RG.route();
  side.innerHTML = RG.nav(Object.entries(SECTIONS).map(([k, [label]]) => ["/" + k, label]), "/" + view);
  const [label, switches, selects = [], brightness, about] = SECTIONS[view] || SECTIONS.network;
  const s = S.settings;
  main.innerHTML = `<h2>${esc(label)}</h2><div class="card">` +
    switches.map(([k, name]) => `<div class="switch"><span id="l-${k}">${esc(name)}</span>
      <button role="switch" aria-checked="${!!s[k]}" aria-labelledby="l-${k}" data-act="toggle" data-arg="${k}"></button></div>`).join("") +
    selects.map(([k, name]) => `<div class="switch"><label for="${k}">${esc(name)}</label>
      <select id="${k}" data-key="${k}">${RG.options(CHOICES[k], s[k])}</select></div>`).join("") +
    (brightness ? `<div class="switch"><label for="brightness">Brightness (%)</label>
      <input id="brightness" type="number" min="0" max="100" step="5" value="${esc(s.brightness)}" data-key="brightness"></div>` : "") +
    (about ? `<form class="form" data-form="rename"><label for="device_name">Device name</label>
      <input id="device_name" name="device_name" value="${esc(s.device_name)}"><div class="actions"><button class="primary" type="submit">Rename device</button></div></form>
      <p class="muted">Model: RubricPhone 3 · Storage: 128 GB</p>` : "") + "</div>";
}

RG.onClick({
  toggle(k) {
    S.settings[k] = !S.settings[k];
    if (k === "airplane_mode" && S.settings[k]) { S.settings.wifi = false; S.settings.bluetooth = false; }
    render();
  },
});
/* Choices save on change; the brightness field saves as it is typed in (and on change). */
for (const type of ["input", "change"]) document.addEventListener(type, (e) => {
  const k = e.target.dataset.key;
  if (!k || (type === "input" && k !== "brightness")) return;
  S.settings[k] = k === "brightness" ? Math.max(0, Math.min(100, parseInt(e.target.value, 10) || 0)) : e.target.value;
  if (type === "change") RG.toast("Saved");
});
RG.onSubmit({ rename(v) { S.settings.device_name = v.device_name; RG.toast("Device renamed"); render(); } });
RG.register({ get: () => S, set: (s) => { S = s; }, render });
