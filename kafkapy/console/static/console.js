// kafkapy web console: live tail of the message browser and sortable tables. No framework.
"use strict";

function cell(tag, text, cls) {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  el.textContent = text;
  return el;
}

function tailRow(r) {
  const tr = document.createElement("tr");
  tr.className = "new";
  tr.appendChild(cell("td", String(r.offset), "num"));
  tr.appendChild(cell("td", r.time, "nowrap"));
  const key = document.createElement("td"); key.appendChild(cell("pre", r.key, r.key_kind)); tr.appendChild(key);
  const value = document.createElement("td"); value.appendChild(cell("pre", r.value, r.value_kind)); tr.appendChild(value);
  const headers = document.createElement("td");
  for (const h of r.headers) {
    const div = cell("div", "", "header");
    div.appendChild(cell("b", h.key)); div.appendChild(document.createTextNode(": " + h.value));
    headers.appendChild(div);
  }
  tr.appendChild(headers);
  return tr;
}

function setupTail() {
  const button = document.getElementById("tail");
  if (!button) return;
  let timer = null;
  let next = Number(button.dataset.next);
  const body = document.querySelector("#messages tbody");
  async function poll() {
    try {
      const response = await fetch(button.dataset.url + "&offset=" + next + "&limit=200");
      const page = await response.json();
      if (!response.ok) { button.textContent = "Live tail: " + page.error; return stop(); }
      for (const placeholder of body.querySelectorAll("tr.placeholder")) placeholder.remove();
      for (const r of page.records) body.appendChild(tailRow(r));
      next = page.next_offset;
      button.dataset.next = String(next);
    } catch (err) {
      button.textContent = "Live tail (broker unreachable)";
    }
    if (timer !== null) timer = setTimeout(poll, 1000);
  }
  function stop() { clearTimeout(timer); timer = null; button.classList.remove("on"); }
  button.addEventListener("click", () => {
    if (timer === null) { button.classList.add("on"); button.textContent = "Stop tail"; timer = setTimeout(poll, 0); }
    else { stop(); button.textContent = "Live tail"; }
  });
}

function setupSort() {
  for (const table of document.querySelectorAll("table.sortable")) {
    table.querySelectorAll("th").forEach((th, index) => th.addEventListener("click", () => {
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const asc = th.dataset.sort !== "asc";
      th.dataset.sort = asc ? "asc" : "desc";
      const key = (row) => {
        const c = row.cells[index];
        if (!c) return "";
        const v = c.dataset.value !== undefined ? c.dataset.value : c.textContent.trim();
        return isNaN(Number(v)) ? v : Number(v);
      };
      rows.sort((a, b) => (key(a) > key(b) ? 1 : key(a) < key(b) ? -1 : 0) * (asc ? 1 : -1));
      for (const row of rows) body.appendChild(row);
    }));
  }
}

setupTail();
setupSort();
