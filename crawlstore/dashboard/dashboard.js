// The dashboard's panels: read from the JSON endpoints every 2 s, without reloading the page.
"use strict";

const REFRESH_MS = 2000;
const crawl = document.body.dataset.crawl;
const q = (path, extra) =>
  path + "?" + new URLSearchParams(Object.assign({ crawl: crawl }, extra || {}));

function number(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en");
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function when(seconds) {
  if (!seconds) return "–";
  const date = new Date(seconds * 1000);
  if (isNaN(date.getTime())) return "indefinitely";
  const today = date.toDateString() === new Date().toDateString();
  return today ? date.toLocaleTimeString() : date.toLocaleString();
}

// Rows of text cells; the cells at the indexes of ``numeric`` are numbers (right, unbroken).
function fillRows(id, rows, numeric) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      td.textContent = text;
      if ((numeric || []).includes(i)) td.className = "n";
      tr.appendChild(td);
    });
    return tr;
  }));
}

function showError(text) {
  const p = document.getElementById("error");
  p.textContent = text || "";
  p.hidden = !text;
}

async function read(path, extra) {
  const response = await fetch(q(path, extra), { cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function drawChart(rates) {
  const line = document.querySelector("#chart polyline");
  if (rates.length < 1) { line.setAttribute("points", ""); return; }
  const top = Math.max(1, ...rates.map((r) => r.rate));
  const first = rates[0].at, span = Math.max(1, rates[rates.length - 1].at - first);
  line.setAttribute("points", rates.map((r) =>
    ((r.at - first) / span * 600).toFixed(1) + "," + (118 - r.rate / top * 112).toFixed(1)
  ).join(" "));
  document.getElementById("rate").textContent = number(Math.round(rates[rates.length - 1].rate));
  document.getElementById("top").textContent = number(Math.round(top));
}

function fillQueues(id, rows, until) {
  fillRows(id, rows.map((row) => {
    const cells = [row.key, number(row.queued) + " queued", number(row.in_flight) + " in flight"];
    if (until) cells.push("until " + when(row.blocked_until));
    return cells;
  }), [1, 2]);
}

function fillRecent(recent) {
  fillRows("failures", recent.failures.map((f) => [when(f.at), f.url,
    [f.status, f.reason].filter((x) => x !== null).join(" ") || "(none)"]));
  document.getElementById("failures-none").hidden = recent.failures.length > 0;
  document.getElementById("window").textContent = number(recent.window);
  fillRows("reasons", recent.reasons.map((r) => [r.host, r.reason, number(r.count)]), [2]);
  document.getElementById("traps-blocked").textContent = number(recent.traps_blocked);
  fillRows("traps", recent.traps.map((t) => [t.prefix, t.reason, number(t.refused) + " refused"]),
    [2]);
  document.getElementById("revisits-due").textContent = number(recent.revisits.due);
  document.getElementById("revisits-overdue").textContent = number(recent.revisits.overdue);
}

async function refresh() {
  try {
    const summary = await read("/api/summary");
    for (const cell of document.querySelectorAll("[data-stat]")) {
      cell.textContent = number(summary.stats[cell.dataset.stat]);
    }
    drawChart(summary.rates);
    document.getElementById("points").textContent = String(summary.rates.length + 1);
    const store = summary.store;
    document.getElementById("format").textContent =
      store.format + " (fingerprint version " + store.fingerprint + ")";
    document.getElementById("size").textContent = bytes(store.file_bytes);
    document.getElementById("growth").textContent = store.growth_bytes_per_s === null
      ? "–" : bytes(Math.round(store.growth_bytes_per_s)) + "/s";
    const queues = await read("/api/queues");
    document.getElementById("scanned").textContent = queues.complete
      ? number(queues.scanned) + " queues"
      : "the first " + number(queues.scanned) + " queues";
    fillQueues("busiest", queues.busiest, false);
    fillQueues("blocked", queues.blocked, true);
    fillQueues("at_cap", queues.at_cap, false);
    fillRecent(await read("/api/recent"));
    document.getElementById("updated").textContent = "updated " + when(summary.at);
    showError("");
  } catch (err) {
    showError(String(err.message || err));
  }
}

document.getElementById("crawl").addEventListener("change", (event) => {
  location.search = "?" + new URLSearchParams({ crawl: event.target.value });
});

document.getElementById("lookup").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = document.getElementById("lookup-result");
  try {
    const found = await read("/api/url", { url: document.getElementById("lookup-url").value });
    const lines = [found.url + ": " + (found.state === "unknown" ? "unknown to this crawl" : found.state)];
    if (found.queue) lines.push("queue " + found.queue);
    if (found.outcome) {
      const o = found.outcome;
      lines.push("last outcome " + o.state + (o.status ? " " + o.status : "") +
        (o.reason ? " (" + o.reason + ")" : "") + " at " + when(o.at));
    }
    if (found.seed) lines.push("depth " + found.seed.depth + ", priority " + found.seed.priority);
    if (found.error) lines.push(found.error);
    out.replaceChildren(...lines.map((text) => {
      const p = document.createElement("p");
      p.textContent = text;
      return p;
    }));
    out.dataset.state = found.state;
  } catch (err) {
    out.textContent = String(err.message || err);
  }
});

refresh();
setInterval(refresh, REFRESH_MS);
