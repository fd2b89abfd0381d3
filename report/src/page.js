// report.html's behaviour: a search over case ids and summaries, a host chooser (show, hide,
// "only"), verdict filters whose counts follow the hosts shown and the search, the failing rows
// first, the detail panel of a matrix cell, and deep links to a cell (#cell-<suite>-<index>) or
// a row (#case-<id>) that show it whatever the view.
// Everything from the report is inserted with textContent, never as markup, and with its hidden
// characters shown (visible). A malformed link names nothing and says so; it never stops the page.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var order = ["pass", "non-strict", "informational", "skipped", "interrupted", "xfail", "xpass", "untestable", "error", "fail"];
  var flagged = ["fail", "xpass", "untestable", "error"];
  var table = document.querySelector("table.matrix");
  var rows = Array.prototype.slice.call(table.querySelectorAll("tr.case"));
  var groups = {};
  Array.prototype.forEach.call(table.querySelectorAll("tbody[data-group]"), function (group) {
    groups[group.getAttribute("data-group")] = group;
  });
  var state = { search: "", filter: "all", failuresFirst: true, hidden: {} };

  // Hidden characters shown as \u{..}, as in the terminal: controls (a host's escape sequences,
  // NUL, ...; tab and newline kept), line/paragraph separators, bidi controls (U+202E would reorder
  // what a reviewer reads), zero-width and other invisible format characters, Unicode tags. The
  // same set as html.rs's is_hidden.
  var hiddenChars = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb\u{1d173}-\u{1d17a}\u{e0000}-\u{e007f}]/gu;
  function visible(text) {
    return String(text).replace(hiddenChars, function (c) {
      return "\\u{" + c.codePointAt(0).toString(16) + "}";
    });
  }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = visible(text);
    return node;
  }

  function each(selector, action) {
    Array.prototype.forEach.call(document.querySelectorAll(selector), action);
  }

  // ---- what is shown: hosts, search, verdict filter -------------------------------------------

  function shownCells(row) {
    return Array.prototype.filter.call(row.querySelectorAll("td.v"), function (cell) {
      return !state.hidden[cell.getAttribute("data-host")];
    });
  }

  function verdictsOf(row) {
    return shownCells(row).map(function (cell) { return cell.getAttribute("data-verdict"); });
  }

  function flaggedIn(row) {
    return verdictsOf(row).filter(function (v) { return flagged.indexOf(v) >= 0; }).length;
  }

  function differs(row) {
    var seen = verdictsOf(row).filter(function (v) { return v !== "none"; });
    return seen.some(function (v) { return v !== seen[0]; });
  }

  function searched(row) {
    if (!state.search) return true;
    var text = (row.getAttribute("data-case") + " " + row.querySelector("th.case").textContent).toLowerCase();
    return state.search.split(/\s+/).every(function (word) { return text.indexOf(word) >= 0; });
  }

  function filtered(row, filter) {
    if (filter === "all") return true;
    if (filter === "failing") return flaggedIn(row) > 0;
    if (filter === "differs") return differs(row);
    return verdictsOf(row).indexOf(filter) >= 0;
  }

  // Moves each row into the failing group (most flagged cells first) or back to its section.
  function regroup() {
    var failing = [];
    var home = [];
    rows.forEach(function (row) {
      var n = state.failuresFirst ? flaggedIn(row) : 0;
      (n > 0 ? failing : home).push({ row: row, n: n, order: Number(row.getAttribute("data-order")) });
    });
    failing.sort(function (a, b) { return b.n - a.n || a.order - b.order; });
    home.sort(function (a, b) { return a.order - b.order; });
    failing.forEach(function (entry) { groups.failing.appendChild(entry.row); });
    home.forEach(function (entry) { groups[entry.row.getAttribute("data-section")].appendChild(entry.row); });
  }

  function applyColumns() {
    each("table.matrix [data-host]", function (node) {
      node.hidden = Boolean(state.hidden[node.getAttribute("data-host")]);
    });
    var width = table.querySelectorAll("th.variant:not([hidden])").length + 1;
    each("table.matrix tr.section th", function (th) { th.colSpan = width; });
  }

  function apply() {
    applyColumns();
    regroup();
    var shown = 0;
    rows.forEach(function (row) {
      var show = searched(row) && filtered(row, state.filter);
      row.hidden = !show;
      if (show) shown += 1;
    });
    Object.keys(groups).forEach(function (name) {
      var group = groups[name];
      var n = group.querySelectorAll("tr.case:not([hidden])").length;
      group.hidden = n === 0;
      group.querySelector("tr.section .count").textContent = "(" + n + (n === 1 ? " case)" : " cases)");
    });
    renderFilters();
    renderHosts();
    var info = document.getElementById("shown");
    var hosts = hostNames();
    var hostsShown = hosts.filter(function (host) { return !state.hidden[host]; }).length;
    info.textContent = "Showing " + shown + " of " + rows.length + " cases (" + cellCount() + " results) for " +
      hostsShown + " of " + hosts.length + (hosts.length === 1 ? " host." : " hosts.");
    info.setAttribute("data-visible", String(shown));
  }

  function cellCount() {
    return rows.reduce(function (sum, row) {
      return sum + shownCells(row).filter(function (cell) { return cell.hasAttribute("data-suite"); }).length;
    }, 0);
  }

  // ---- the verdict filters: counts over the hosts shown and the rows the search keeps ----------

  var filters = document.getElementById("filters");

  function addFilter(filter, label, count) {
    var button = element("button", "filter");
    button.type = "button";
    if (order.indexOf(filter) >= 0) button.appendChild(element("span", "swatch v-" + filter));
    button.appendChild(document.createTextNode(label + " "));
    button.setAttribute("data-filter", filter);
    button.setAttribute("aria-pressed", String(state.filter === filter));
    var number = element("span", "n", count);
    number.id = "count-" + filter;
    button.appendChild(number);
    button.addEventListener("click", function () {
      state.filter = state.filter === filter ? "all" : filter;
      apply();
    });
    filters.appendChild(button);
  }

  function renderFilters() {
    var kept = rows.filter(searched);
    var counts = {};
    kept.forEach(function (row) {
      verdictsOf(row).forEach(function (v) { counts[v] = (counts[v] || 0) + 1; });
    });
    filters.textContent = "";
    addFilter("all", "all cases", kept.length);
    addFilter("failing", "failing somewhere", kept.filter(function (row) { return flaggedIn(row) > 0; }).length);
    order.forEach(function (verdict) {
      if (counts[verdict] || state.filter === verdict) addFilter(verdict, verdict, counts[verdict] || 0);
    });
    addFilter("differs", "differs between columns", kept.filter(differs).length);
  }

  // ---- the host chooser: hosts sorted by flagged cells, each shown/hidden, or "only" ----------

  var hostBar = document.getElementById("hosts");
  var hostFailures = {};
  each("table.matrix td.v[data-suite]", function (cell) {
    var host = cell.getAttribute("data-host");
    hostFailures[host] = (hostFailures[host] || 0) + (flagged.indexOf(cell.getAttribute("data-verdict")) >= 0 ? 1 : 0);
  });

  function hostNames() {
    var names = [];
    each("table.matrix th.host", function (th) { names.push(th.getAttribute("data-host")); });
    return names.sort(function (a, b) { return (hostFailures[b] || 0) - (hostFailures[a] || 0); });
  }

  function only(host) {
    hostNames().forEach(function (name) { state.hidden[name] = name !== host; });
  }

  function hostChip(host, onlyThis) {
    var chip = element("span", "host-chip");
    chip.setAttribute("data-host-chip", host);
    var label = element("label");
    var box = element("input");
    box.type = "checkbox";
    box.checked = !state.hidden[host];
    box.addEventListener("change", function () { state.hidden[host] = !box.checked; apply(); });
    label.appendChild(box);
    label.appendChild(document.createTextNode(" " + visible(host) + " "));
    var n = hostFailures[host] || 0;
    label.appendChild(element("span", n ? "n bad" : "n", n + " failing"));
    chip.appendChild(label);
    var button = element("button", null, "only");
    button.type = "button";
    button.setAttribute("aria-pressed", String(onlyThis));
    button.addEventListener("click", function () { only(host); apply(); });
    chip.appendChild(button);
    return chip;
  }

  function renderHosts() {
    var names = hostNames();
    var shown = names.filter(function (host) { return !state.hidden[host]; });
    hostBar.textContent = "";
    hostBar.appendChild(element("span", "muted", "Hosts (most failing first):"));
    var all = element("button", null, "all hosts");
    all.type = "button";
    all.id = "hosts-all";
    all.setAttribute("aria-pressed", String(shown.length === names.length));
    all.addEventListener("click", function () { state.hidden = {}; apply(); });
    hostBar.appendChild(all);
    names.forEach(function (host) {
      hostBar.appendChild(hostChip(host, shown.length === 1 && shown[0] === host && names.length > 1));
    });
  }

  var search = document.getElementById("search");
  search.addEventListener("input", function () {
    state.search = search.value.trim().toLowerCase();
    apply();
  });
  var failuresFirst = document.getElementById("failures-first");
  failuresFirst.addEventListener("change", function () {
    state.failuresFirst = failuresFirst.checked;
    apply();
  });

  // ---- the detail panel -----------------------------------------------------------------------

  var panel = document.getElementById("detail");
  var body = document.getElementById("detail-body");
  var opened = null;

  function field(list, name, value) {
    if (value === undefined || value === null || value === "" || (value.length === 0)) return;
    list.appendChild(element("dt", null, name));
    list.appendChild(element("dd", null, Array.isArray(value) ? value.join(", ") : value));
  }

  function shellWord(word) {
    return /^[A-Za-z0-9_.\/:=@%+,-]+$/.test(word) ? word : "'" + word.replace(/'/g, "'\\''") + "'";
  }

  // The command that re-runs this cell's case with its transcript (as `run` takes it).
  function rerun(suite, result) {
    var host = suite.host.command.map(shellWord).join(" ");
    var words = ["dsh-conformance", "run", "--host", "'" + host.replace(/'/g, "'\\''") + "'"];
    if (suite.runtime_variant !== "default") {
      words.push("--variant", shellWord(suite.runtime_variant));
      var variant = data.variants.filter(function (v) { return v.name === suite.runtime_variant; })[0];
      Object.keys((variant && variant.env) || {}).forEach(function (name) {
        words.push("--variant-env", shellWord(name + "=" + variant.env[name]));
      });
    }
    (suite.rerun_args || []).forEach(function (word) { words.push(shellWord(word)); });
    words.push("--case", shellWord(result.id), "--verbose");
    return words.join(" ");
  }

  function facts(suite, result) {
    var list = element("dl");
    field(list, "host", suite.host.name + " (" + suite.host.command.join(" ") + ")");
    field(list, "runtime variant", suite.runtime_variant);
    field(list, "summary", result.summary);
    field(list, "spec sections", result.spec);
    field(list, "rules", result.rules);
    field(list, "failing rule", result.rule);
    field(list, "why", result.why);
    field(list, "blame", result.blame === "none" ? null : result.blame);
    field(list, "interpretation", result.interpretation);
    field(list, "flaky (verdicts seen)", result.flaky);
    field(list, "duration", result.duration_ms + " ms");
    return list;
  }

  function open(cell) {
    var suite = data.suites[Number(cell.getAttribute("data-suite"))];
    var result = suite && suite.cases[Number(cell.getAttribute("data-index"))];
    if (!result) return;
    if (opened) opened.classList.remove("open");
    opened = cell;
    cell.classList.add("open");
    body.textContent = "";
    body.appendChild(element("h3", null, result.id));
    body.appendChild(element("p", "badge v-" + result.verdict, result.verdict));
    body.appendChild(facts(suite, result));
    // Every rule the case broke besides the failing one (reports of older kits have none).
    var also = result.also_broken || [];
    if (also.length) {
      body.appendChild(element("h4", null, "Also broken (" + also.length + (also.length === 1 ? " rule)" : " rules)")));
      var list = element("ul", "also-broken");
      also.forEach(function (broken) {
        var strictness = broken.interpretation ? "informational, " + broken.interpretation : "strict";
        list.appendChild(element("li", null, broken.rule + " (" + strictness + "): " + broken.why));
      });
      body.appendChild(list);
    }
    var link = element("a", "permalink", "Link to this cell");
    link.href = "#" + cell.id;
    body.appendChild(link);
    body.appendChild(element("h4", null, "Re-run this case"));
    body.appendChild(element("pre", "rerun", rerun(suite, result)));
    if (result.transcript.length) {
      body.appendChild(element("h4", null, "Transcript (" + result.transcript.length + " lines)"));
      body.appendChild(element("pre", "transcript", result.transcript.join("\n")));
    } else {
      body.appendChild(element("p", "muted", "No transcript lines."));
    }
    panel.hidden = false;
    panel.setAttribute("data-case", result.id);
    if (window.history && history.replaceState) history.replaceState(null, "", "#" + cell.id);
  }

  function close() {
    panel.hidden = true;
    if (window.history && history.replaceState) history.replaceState(null, "", "#matrix");
    if (opened) {
      opened.classList.remove("open");
      opened.focus();
      opened = null;
    }
  }

  table.addEventListener("click", function (event) {
    var cell = event.target.closest("td.v[data-suite]");
    if (cell) open(cell);
  });
  table.addEventListener("keydown", function (event) {
    var cell = event.target.closest("td.v[data-suite]");
    if (cell && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      open(cell);
    }
  });
  document.getElementById("detail-close").addEventListener("click", close);
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && !panel.hidden) close();
  });

  // ---- deep links: #cell-<suite>-<index> shows the cell whatever the view, opens and marks it --

  // A note above the matrix naming a link that names no case (malformed or unknown); null clears it.
  function linkNote(hash) {
    var note = document.getElementById("link-note");
    if (!hash) {
      if (note) note.remove();
      return;
    }
    if (!note) {
      note = element("p", "link-note");
      note.id = "link-note";
      note.setAttribute("role", "status");
      var controls = document.getElementById("controls");
      controls.parentNode.insertBefore(note, controls);
    }
    note.textContent = visible("The link " + hash + " names no case of this report.");
  }

  // The row a #case-<id> link names: null (with a note) when the fragment is not valid
  // percent-encoding (decodeURIComponent throws URIError) or names no row.
  function linkedRow() {
    if (!/^#case-/.test(location.hash)) return null;
    var target = null;
    try {
      target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    } catch (error) {
      target = null;
    }
    linkNote(target ? null : location.hash);
    return target;
  }

  // A link to a row (#case-<id>, as the coverage table has) shows it even if the view hid it.
  function showLinkedRow() {
    var target = linkedRow();
    if (!target || !target.hidden) return;
    state.search = "";
    search.value = "";
    state.filter = "all";
    apply();
    target.scrollIntoView({ block: "center" });
  }

  function openLinked() {
    showLinkedRow();
    var cell = /^#cell-\d+-\d+$/.test(location.hash) && document.getElementById(location.hash.slice(1));
    if (!cell) return;
    var row = cell.closest("tr.case");
    delete state.hidden[cell.getAttribute("data-host")];
    if (!searched(row)) { state.search = ""; search.value = ""; }
    if (!filtered(row, state.filter)) state.filter = "all";
    apply();
    each("td.v.linked", function (other) { other.classList.remove("linked"); });
    cell.classList.add("linked");
    open(cell);
    cell.scrollIntoView({ block: "center", inline: "center" });
  }

  window.addEventListener("hashchange", openLinked);
  apply();
  openLinked();
  document.body.setAttribute("data-cells", String(cellCount()));
  document.body.setAttribute("data-js", "ready");
})();
