// A static bundle's pages (fieldcheck view --bundle), opened from file:// with no server: the
// run page's item table searched, filtered and sorted from items.js as GET /api/runs/{id}/items
// does it; the Runs page's sort and its Compare button (the bundle's Compare pages, or
// unavailable.html for runs it did not compare); the address a link wanted on unavailable.html,
// with the command that serves a comparison. No data goes through innerHTML (textContent only).
"use strict";
(() => {
  const missing = (v) => v === null || v === undefined;

  function itemTable(data, table) {
    const form = document.getElementById("items-filter");
    const count = document.getElementById("items-count");
    const names = data.columns.map((c) => c.name);
    const state = { sort: "seq", order: "asc" };
    const own = new Set(["failed", "model", "turn", "error_type"]);

    function valueOf(row, name) {
      return own.has(name) ? row[name] : row.values[names.indexOf(name) - 1];
    }

    // The filters as the route reads them: a tag (field, topic) with failed means failed there.
    function kept(row, asked, q) {
      if (q) {
        row.lower = row.lower || row.text.toLowerCase();
        if (!row.key.toLowerCase().includes(q.key) && !row.lower.includes(q.json)) return false;
      }
      for (const [name, wanted] of asked) {
        if (name === data.tag) {
          if (!row.tags.includes(wanted)) return false;
          if (asked.has("failed") && row.failed_tags.includes(wanted) !== (asked.get("failed") === "true")) {
            return false;
          }
        } else if (name === "failed" && asked.has(data.tag)) {
          continue;
        } else {
          const value = valueOf(row, name);
          if (missing(value) || String(value) !== wanted) return false;
        }
      }
      return true;
    }

    // The route's order: the column's sort value, nulls last, then seq.
    function ordered(rows) {
      const at = names.indexOf(state.sort) - 1;
      const key = (r) => (state.sort === "seq" ? r.seq : state.sort === "key" ? r.key : r.order[at]);
      return rows.sort((x, y) => {
        const a = key(x);
        const b = key(y);
        if (missing(a) || missing(b)) {
          return missing(a) === missing(b) ? x.seq - y.seq : missing(a) ? 1 : -1;
        }
        let c = typeof a === "number" && typeof b === "number" ? a - b : a < b ? -1 : a > b ? 1 : 0;
        if (state.order === "desc") c = -c;
        return c || x.seq - y.seq;
      });
    }

    function rowOf(row) {
      const tr = document.createElement("tr");
      tr.dataset.key = row.key;
      if (row.failed) tr.className = "failed";
      const first = document.createElement("td");
      first.className = "key";
      const link = document.createElement("a");
      link.href = row.href;
      link.textContent = row.shown;
      first.append(link);
      tr.append(first);
      data.columns.slice(1).forEach((c, i) => {
        const td = document.createElement("td");
        td.dataset.column = c.name;
        td.className = c.kind === "number" || c.kind === "count" ? "num" : "value " + c.kind;
        td.textContent = row.cells[i];
        tr.append(td);
      });
      return tr;
    }

    function update() {
      const asked = new Map();
      for (const select of form.querySelectorAll("select")) {
        if (select.value !== "") asked.set(select.name, select.value);
      }
      const text = form.querySelector("#items-q").value.toLowerCase();
      const q = text ? { key: text, json: JSON.stringify(text).slice(1, -1) } : null;
      const shown = ordered(data.rows.filter((row) => kept(row, asked, q)));
      table.tBodies[0].replaceChildren(...shown.map(rowOf));
      for (const th of table.tHead.rows[0].cells) {
        const button = th.querySelector("button");
        const label = data.columns[th.cellIndex].label;
        const current = th.dataset.column === state.sort;
        button.textContent = current ? `${label} ${state.order === "desc" ? "▼" : "▲"}` : label;
        if (current) th.setAttribute("aria-sort", state.order === "desc" ? "descending" : "ascending");
        else th.removeAttribute("aria-sort");
      }
      const sorted = data.columns.find((c) => c.name === state.sort);
      count.textContent =
        `${shown.length} of ${data.rows.length} item(s) match` +
        (sorted ? ` · sorted by ${sorted.label} ${state.order === "desc" ? "descending" : "ascending"}` : "");
    }

    table.tHead.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-sort]");
      if (!button) return;
      const again = state.sort === button.dataset.sort && state.order === "asc";
      state.sort = button.dataset.sort;
      state.order = again ? "desc" : "asc";
      update();
    });
    form.addEventListener("input", update);
    form.addEventListener("submit", (event) => event.preventDefault());
    form.addEventListener("reset", () => setTimeout(update));
    update();
  }

  // The Runs page: a heading sorts the rows here (the server's sort is a query), and the runs
  // ticked open the bundle's Compare page of them.
  function runsList(table) {
    const body = table.tBodies[0];
    for (const th of table.querySelectorAll("th[data-sort]")) {
      th.querySelector("a").addEventListener("click", (event) => {
        event.preventDefault();
        const descending = th.getAttribute("aria-sort") === "ascending";
        const numeric = th.classList.contains("num") || th.dataset.sort === "metric";
        const value = (tr) => {
          const cell = tr.cells[th.cellIndex];
          const time = cell.querySelector("time");
          if (time) return time.getAttribute("datetime");
          const text = cell.textContent.trim();
          if (!numeric) return text;
          const n = parseFloat(text.replace(/[$,]/g, ""));
          return Number.isNaN(n) ? null : n;
        };
        const rows = [...body.rows].filter((tr) => tr.dataset.run);
        rows.sort((x, y) => {
          const a = value(x);
          const b = value(y);
          if (missing(a) || missing(b)) return missing(a) === missing(b) ? 0 : missing(a) ? 1 : -1;
          const c = a < b ? -1 : a > b ? 1 : 0;
          return descending ? -c : c;
        });
        body.append(...rows);
        for (const other of table.querySelectorAll("th[data-sort]")) {
          other.removeAttribute("aria-sort");
          other.querySelectorAll("span[aria-hidden]").forEach((s) => s.remove());
        }
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      });
    }
    const form = document.getElementById("compare-form");
    const button = document.getElementById("compare-selected");
    const said = document.getElementById("compare-count");
    const holder = document.getElementById("bundle-compares");
    const pages = holder ? JSON.parse(holder.dataset.pages) : {};
    const picked = () => [...form.querySelectorAll("input[data-compare]:checked")].map((b) => b.value);
    const pageOf = (ids) => {
      const wanted = [...ids].sort().join(",");
      const found = Object.keys(pages).find((k) => k.split(",").sort().join(",") === wanted);
      return found === undefined ? null : pages[found];
    };
    form.addEventListener("change", () => {
      const ids = picked();
      const ticked = form.querySelectorAll("input[data-compare]:checked");
      const systems = new Set([...ticked].map((b) => b.dataset.system));
      const held = pageOf(ids) !== null;
      button.disabled = systems.size > 1 || (ids.length < 2 && !held);
      said.textContent = !ids.length
        ? "tick the runs to compare"
        : systems.size > 1
          ? "runs of different systems cannot be compared"
          : held
            ? `${ids.length} run${ids.length === 1 ? "" : "s"} ticked`
            : ids.length < 2
              ? "this bundle has no comparison of this run"
              : "this bundle has no comparison of these runs: Compare says how to get it";
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const ids = picked();
      window.location.assign(pageOf(ids) ?? `unavailable.html#/compare?runs=${ids.join(",")}`);
    });
  }

  const items = document.getElementById("items");
  if (window.fieldcheckItems && items) itemTable(window.fieldcheckItems, items);
  const runs = document.getElementById("runs");
  if (runs) runsList(runs);
  const wanted = document.getElementById("wanted");
  if (wanted) {
    try {
      wanted.textContent = decodeURIComponent(window.location.hash.slice(1));
    } catch {
      wanted.textContent = window.location.hash.slice(1);
    }
    const compared = /^\/compare\?runs=([^&]+)$/.exec(wanted.textContent);
    if (compared) {
      document.getElementById("compare-command").textContent = `fieldcheck view ${compared[1].split(",").join(" ")}`;
      document.getElementById("compare-hint").hidden = false;
    }
  }
})();
