// rubricgym view: a little vanilla JS. The live dashboard re-reads its charts; an exported episode table filters
// its own rows (an exported page has no server to ask).
(function () {
  var charts = document.getElementById("charts");
  if (charts && charts.dataset.poll) {
    setInterval(function () {
      fetch(charts.dataset.poll, {cache: "no-store"}).then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) charts.innerHTML = html; }).catch(function () {});
    }, 5000);
  }
  var form = document.getElementById("filters");
  if (form && form.dataset.static) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var f = new FormData(form), shown = 0;
      var lo = parseFloat(f.get("min_total")), hi = parseFloat(f.get("max_total"));
      document.querySelectorAll("#episodes tr.ep").forEach(function (tr) {
        var d = tr.dataset, ok = true, total = parseFloat(d.total);
        if (f.get("entry") && d.entry !== f.get("entry")) ok = false;
        var o = f.get("outcome");
        if (o === "unsolved" ? d.solved === "yes" : (o && d.outcome !== o)) ok = false;
        var c = f.get("criterion");
        if (c && (" " + (f.get("state") === "met" ? d.met : d.unmet) + " ").indexOf(" " + c + " ") < 0) ok = false;
        if (!isNaN(lo) && !(total >= lo)) ok = false;
        if (!isNaN(hi) && !(total <= hi)) ok = false;
        if (f.get("parse_errors") === "yes" && d.parse === "0") ok = false;
        if (f.get("parse_errors") === "no" && d.parse !== "0") ok = false;
        tr.style.display = ok ? "" : "none";
        if (ok) shown++;
      });
      document.getElementById("count").textContent = shown + " episode(s) on this page match";
    });
  }
})();
