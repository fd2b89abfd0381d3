// report.html's behaviour: verdict filters with counts, and the detail panel of a matrix cell.
// Everything from the report is inserted with textContent, never as markup.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var order = ["pass", "non-strict", "informational", "skipped", "xfail", "xpass", "untestable", "error", "fail"];
  var rows = Array.prototype.slice.call(document.querySelectorAll("table.matrix tr.case"));

  // Control characters (a host's escape sequences, NUL, ...) shown as \u{..}, as in the terminal.
  function visible(text) {
    return String(text).replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/g, function (c) {
      return "\\u{" + c.charCodeAt(0).toString(16) + "}";
    });
  }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = visible(text);
    return node;
  }

  function verdictsOf(row) {
    return Array.prototype.map.call(row.querySelectorAll("td.v"), function (cell) {
      return cell.getAttribute("data-verdict");
    });
  }

  function differs(row) {
    var seen = verdictsOf(row).filter(function (v) { return v !== "none"; });
    return seen.some(function (v) { return v !== seen[0]; });
  }

  // Counts of cells per verdict, from the embedded data (the matrix's source of truth).
  var counts = {};
  var cells = 0;
  data.suites.forEach(function (suite) {
    suite.cases.forEach(function (result) {
      counts[result.verdict] = (counts[result.verdict] || 0) + 1;
      cells += 1;
    });
  });
  var differing = rows.filter(differs).length;

  var filters = document.getElementById("filters");
  var shown = document.getElementById("shown");
  var active = "all";

  function matches(row, filter) {
    if (filter === "all") return true;
    if (filter === "differs") return differs(row);
    return verdictsOf(row).indexOf(filter) >= 0;
  }

  function apply(filter) {
    active = filter;
    var visible = 0;
    rows.forEach(function (row) {
      var show = matches(row, filter);
      row.hidden = !show;
      if (show) visible += 1;
    });
    Array.prototype.forEach.call(document.querySelectorAll("table.matrix tbody"), function (group) {
      group.hidden = !group.querySelector("tr.case:not([hidden])");
    });
    Array.prototype.forEach.call(filters.querySelectorAll("button"), function (button) {
      button.setAttribute("aria-pressed", String(button.getAttribute("data-filter") === filter));
    });
    shown.textContent = "Showing " + visible + " of " + rows.length + " cases (" + cells + " results).";
    shown.setAttribute("data-visible", String(visible));
  }

  function addFilter(filter, label, count) {
    var button = element("button", "filter");
    button.type = "button";
    if (order.indexOf(filter) >= 0) button.appendChild(element("span", "swatch v-" + filter));
    button.appendChild(document.createTextNode(label + " "));
    button.setAttribute("data-filter", filter);
    var number = element("span", "n", count);
    number.id = "count-" + filter;
    button.appendChild(number);
    button.addEventListener("click", function () { apply(active === filter ? "all" : filter); });
    filters.appendChild(button);
  }

  addFilter("all", "all cases", rows.length);
  order.forEach(function (verdict) {
    if (counts[verdict]) addFilter(verdict, verdict, counts[verdict]);
  });
  addFilter("differs", "differs between columns", differing);

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
    words.push("--case", shellWord(result.id), "--verbose");
    return words.join(" ");
  }

  function open(cell) {
    var suite = data.suites[Number(cell.getAttribute("data-suite"))];
    var result = suite && suite.cases[Number(cell.getAttribute("data-index"))];
    if (!result) return;
    if (opened) opened.classList.remove("open");
    opened = cell;
    cell.classList.add("open");
    body.textContent = "";
    var heading = element("h3", null, result.id);
    body.appendChild(heading);
    var badge = element("p", "badge v-" + result.verdict, result.verdict);
    body.appendChild(badge);
    var facts = element("dl");
    field(facts, "host", suite.host.name + " (" + suite.host.command.join(" ") + ")");
    field(facts, "runtime variant", suite.runtime_variant);
    field(facts, "summary", result.summary);
    field(facts, "spec sections", result.spec);
    field(facts, "rules", result.rules);
    field(facts, "failing rule", result.rule);
    field(facts, "why", result.why);
    field(facts, "blame", result.blame === "none" ? null : result.blame);
    field(facts, "interpretation", result.interpretation);
    field(facts, "flaky (verdicts seen)", result.flaky);
    field(facts, "duration", result.duration_ms + " ms");
    body.appendChild(facts);
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
    if (window.history && history.replaceState) {
      history.replaceState(null, "", "#" + cell.id);
    }
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

  document.querySelector("table.matrix").addEventListener("click", function (event) {
    var cell = event.target.closest("td.v[data-suite]");
    if (cell) open(cell);
  });
  document.querySelector("table.matrix").addEventListener("keydown", function (event) {
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

  apply("all");
  // A link to one cell (#cell-<suite>-<index>) opens its details; the browser scrolls to it.
  var linked = /^#cell-\d+-\d+$/.test(location.hash) && document.getElementById(location.hash.slice(1));
  if (linked) open(linked);
  document.body.setAttribute("data-cells", String(cells));
  document.body.setAttribute("data-js", "ready");
})();
