//! End-to-end test of report.html in a real browser: headless Chromium (Debian's `chromium`)
//! loads the page from a temp dir, its script runs, and the rendered DOM must show the matrix's
//! counts and, for a linked cell, the detail panel. A malformed `#case-` fragment leaves the page
//! working (a note names it), and a host name with U+202E or zero-width characters is shown with
//! them written as `\u{..}`. A screenshot is kept under the target dir.
//! Without Chromium each test says `test-skipped: <name>: <why>` (`dsh_test_support::skip`) and
//! passes.

use crate::support;
use dsh_results::reporter::Silent;

use dsh_report::config::{HostSpec, MatrixConfig, VariantSpec};
use dsh_report::document::ReportDocument;
use dsh_report::html::csp_hash;
use dsh_report::{build_document, run_matrix, write_report_files};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{passing_suite, sample_suite, RULES_JSON};

/// Chromium: `/usr/bin/chromium`, else `chromium` on `PATH`; `None` after saying the test skips.
fn find_chromium() -> Option<PathBuf> {
    let fixed = PathBuf::from("/usr/bin/chromium");
    let found = fixed.is_file().then_some(fixed).or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join("chromium"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        dsh_test_support::skip(
            "chromium not installed (apt-get install chromium to run this test)",
        );
    }
    found
}

/// Kills the browser's whole process group and reaps it, however the test ends.
struct BrowserGuard(Child);

impl Drop for BrowserGuard {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// The bound on one browser run: generous, since a cold start on a loaded CI machine is slow.
const BROWSER_BOUND: Duration = Duration::from_secs(180);

/// Runs headless Chromium with `extra` arguments on `url`; returns its stdout.
fn chromium(binary: &Path, profile: &Path, extra: &[String], url: &str) -> String {
    let mut command = Command::new(binary);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut guard = BrowserGuard(command.spawn().expect("chromium starts"));
    let mut stdout = guard.0.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    loop {
        match guard.0.try_wait().expect("waiting for chromium") {
            Some(status) => {
                assert!(status.success(), "chromium exited with {status}");
                break;
            }
            None if started.elapsed() > BROWSER_BOUND => {
                panic!("chromium did not finish within {BROWSER_BOUND:?}: {extra:?} {url}")
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    drop(guard);
    reader.join().expect("the stdout reader does not panic")
}

fn sample_document(fixtures: &Path) -> ReportDocument {
    let variant = |name: &str| VariantSpec {
        name: name.to_string(),
        env: Default::default(),
    };
    let config = MatrixConfig {
        clients: Vec::new(),
        hosts: vec![
            HostSpec {
                name: "reference".to_string(),
                command: vec!["dsh-host-driver".to_string()],
                expectations: None,
                pass_env: Vec::new(),
                dialect: None,
            },
            HostSpec {
                name: "node".to_string(),
                command: vec!["node".to_string(), "driver.js".to_string()],
                expectations: None,
                pass_env: Vec::new(),
                dialect: None,
            },
        ],
        variants: vec![variant("dsh-0.1.7-rc.1"), variant("dsh-0.1.8")],
    };
    let (suites, errors) = run_matrix(
        &config,
        &mut |host, variant| match (host.name.as_str(), variant.name.as_str()) {
            ("node", "dsh-0.1.8") => Err("driver exited during handshake".to_string()),
            (_, "dsh-0.1.7-rc.1") => Ok(passing_suite()),
            _ => Ok(sample_suite()),
        },
        &Silent,
    );
    build_document(&config, suites, errors, fixtures, &Silent)
}

/// The text of the element whose opening tag contains `marker`, up to its next `<`.
fn text_after(dom: &str, marker: &str) -> String {
    let start = dom
        .find(marker)
        .unwrap_or_else(|| panic!("the DOM has no {marker:?}"));
    let open_end = start + dom[start..].find('>').expect("tag closes");
    let rest = &dom[open_end + 1..];
    rest[..rest.find('<').unwrap_or(rest.len())].to_string()
}

/// The case ids of the matrix rows, in the order the DOM holds them.
fn row_ids(dom: &str) -> Vec<&str> {
    const ROW: &str = "<tr class=\"case\" id=\"case-";
    dom.match_indices(ROW)
        .map(|(at, _)| {
            let rest = &dom[at + ROW.len()..];
            &rest[..rest.find('"').expect("the id attribute closes")]
        })
        .collect()
}

/// A temp dir with a fixtures dir (holding the rule catalog) and the report files `document`
/// makes of it, written to `<dir>/report`.
fn written_report(
    document: fn(&Path) -> ReportDocument,
) -> (tempfile::TempDir, ReportDocument, std::path::PathBuf) {
    let work = tempfile::tempdir().unwrap();
    let fixtures = work.path().join("fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(fixtures.join("rules.json"), RULES_JSON).unwrap();
    let document = document(&fixtures);
    let out = work.path().join("report");
    write_report_files(&document, &out).unwrap();
    (work, document, out)
}

#[test]
fn report_html_renders_its_matrix_in_chromium() {
    let Some(binary) = find_chromium() else {
        return;
    };
    let (work, document, out) = written_report(sample_document);
    let page = out.join("report.html");
    let url = format!("file://{}", page.display());
    let profile = work.path().join("chromium-profile");

    let dom = chromium(&binary, &profile, &["--dump-dom".to_string()], &url);
    assert!(
        dom.contains("data-js=\"ready\""),
        "the page's script ran to its end"
    );
    // 3 cells ran: reference x 2 variants (one clean, one the sample), node x the clean variant.
    assert_eq!(text_after(&dom, "id=\"count-all\""), "12");
    assert_eq!(text_after(&dom, "id=\"count-pass\""), "27");
    assert_eq!(text_after(&dom, "id=\"count-fail\""), "2");
    assert_eq!(text_after(&dom, "id=\"count-xpass\""), "1");
    assert_eq!(text_after(&dom, "id=\"count-differs\""), "9");
    assert!(dom.contains("data-cells=\"36\""));
    assert!(dom.contains("data-visible=\"12\""));
    assert_eq!(
        text_after(&dom, "id=\"shown\""),
        "Showing 12 of 12 cases (36 results) for 2 of 2 hosts."
    );
    assert_eq!(
        row_ids(&dom)[..5],
        [
            "framing.bom",
            "strict.session-before-content",
            "restart.session-survives",
            "cancel.grandchild-ignores-sigterm",
            "hygiene.canary-in-stderr"
        ],
        "the rows failing in some column come first, in section order"
    );
    assert!(
        dom.contains("<aside id=\"detail\" hidden=\"\""),
        "no panel open without a link"
    );

    let hostile = document.suites[1]
        .cases
        .iter()
        .position(|case| case.id == "strict.session-before-content")
        .unwrap();
    let linked = format!("{url}#cell-1-{hostile}");
    let dom = chromium(&binary, &profile, &["--dump-dom".to_string()], &linked);
    let panel_start = dom.find("<aside id=\"detail\"").expect("the detail panel");
    let panel = &dom[panel_start..panel_start + dom[panel_start..].find("</aside>").unwrap()];
    assert!(
        !panel.starts_with("<aside id=\"detail\" hidden"),
        "the linked cell's panel is open"
    );
    assert!(panel.contains("<h3>strict.session-before-content</h3>"));
    assert!(
        panel.contains("<dd>s6.session-before-content</dd>"),
        "the failing rule"
    );
    assert!(
        panel.contains("got &lt;script&gt;alert('x')&lt;/script&gt;"),
        "the why, as text"
    );
    assert!(
        panel.contains("&lt;/script&gt;&lt;img src=x&gt;"),
        "the transcript, as text"
    );
    assert!(panel.contains("--variant dsh-0.1.8 --case strict.session-before-content --verbose"));
    assert!(
        panel.contains("\\u{1b}[31mred"),
        "a host's escape sequence is shown, not passed on"
    );
    assert!(
        !dom.contains("<img src=\"x\""),
        "no report text became markup"
    );

    // Every other rule the case broke is in its panel, strict or informational, as text.
    let cancel = document.suites[1]
        .cases
        .iter()
        .position(|case| case.id == "cancel.grandchild-ignores-sigterm")
        .unwrap();
    let dom = chromium(
        &binary,
        &profile,
        &["--dump-dom".to_string()],
        &format!("{url}#cell-1-{cancel}"),
    );
    let panel_start = dom.find("<aside id=\"detail\"").expect("the detail panel");
    let panel = &dom[panel_start..panel_start + dom[panel_start..].find("</aside>").unwrap()];
    assert!(panel.contains("<h4>Also broken (2 rules)</h4>"), "{panel}");
    assert!(
        panel.contains(
            "<li>s10.process-tree-reaped (strict): run r1: the stdio process 4240 outlived the \
             outcome | &lt;b&gt;pipe&lt;/b&gt;</li>"
        ),
        "{panel}"
    );
    assert!(
        panel.contains("<li>s7.session-before-result (informational, I-07): "),
        "{panel}"
    );

    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report_browser");
    std::fs::create_dir_all(&shots).unwrap();
    let screenshot = shots.join("report.png");
    let _ = std::fs::remove_file(&screenshot);
    let extra = [
        format!("--screenshot={}", screenshot.display()),
        "--window-size=1400,1000".to_string(),
    ];
    chromium(&binary, &profile, &extra, &url);
    let png = std::fs::read(&screenshot).expect("chromium wrote the screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "the screenshot is a PNG");
    std::fs::copy(&page, shots.join("report.html")).unwrap();
    println!("screenshot: {}", screenshot.display());
}

/// Three hosts over one variant: `broken` fails every case, `reference` is the sample (five
/// flagged cells), `node` passes everything.
fn three_host_document(fixtures: &Path) -> ReportDocument {
    let host = |name: &str| HostSpec {
        name: name.to_string(),
        command: vec![name.to_string()],
        expectations: None,
        pass_env: Vec::new(),
        dialect: None,
    };
    let config = MatrixConfig {
        clients: Vec::new(),
        hosts: vec![host("reference"), host("node"), host("broken")],
        variants: vec![VariantSpec {
            name: "dsh-0.1.7-rc.1".to_string(),
            env: Default::default(),
        }],
    };
    let (suites, errors) = run_matrix(
        &config,
        &mut |host, _| {
            Ok(match host.name.as_str() {
                "reference" => sample_suite(),
                "node" => passing_suite(),
                _ => {
                    let mut suite = passing_suite();
                    for case in &mut suite.cases {
                        case.verdict = dsh_results::model::Verdict::Fail;
                        case.rule = Some("s6.session-before-content".to_string());
                        case.why = Some("the driver answered nothing".to_string());
                    }
                    suite
                }
            })
        },
        &Silent,
    );
    build_document(&config, suites, errors, fixtures, &Silent)
}

/// A probe run after the page's own script: it uses the page as a person would (search, host
/// chooser, scrolling, a link to a cell) and writes what it saw as JSON into `#probe-result`.
const PROBE: &str = r##"<script>
(function () {
  function q(selector) { return document.querySelector(selector); }
  function count(id) { var n = document.getElementById("count-" + id); return n ? Number(n.textContent) : null; }
  function snap() {
    return {
      visible: Number(q("#shown").getAttribute("data-visible")),
      failing: count("failing"), fail: count("fail"), pass: count("pass"),
      columns: document.querySelectorAll("table.matrix th.variant:not([hidden])").length,
      rows: Array.prototype.map.call(document.querySelectorAll("tr.case:not([hidden])"),
        function (row) { return row.getAttribute("data-case"); }),
      chips: Array.prototype.map.call(document.querySelectorAll("[data-host-chip]"), function (chip) {
        return chip.getAttribute("data-host-chip") + " " + chip.querySelector(".n").textContent;
      })
    };
  }
  function search(text) { var box = q("#search"); box.value = text; box.dispatchEvent(new Event("input")); }
  var out = { initial: snap() };
  var hide = q('[data-host-chip="broken"] input');
  hide.checked = false;
  hide.dispatchEvent(new Event("change"));
  out.without_broken = snap();
  q('[data-host-chip="node"] button').click();
  out.only_node = snap();
  q("#hosts-all").click();
  search("CANCEL");
  out.search_id = snap();
  search("deterministically");
  out.search_summary = snap();
  search("");
  var scroll = q(".matrix-scroll");
  scroll.scrollTop = scroll.scrollHeight;
  scroll.scrollLeft = scroll.scrollWidth;
  var box = scroll.getBoundingClientRect();
  var heads = document.querySelectorAll("tr.case:not([hidden]) th.case");
  var last = heads[heads.length - 1].getBoundingClientRect();
  out.sticky = {
    scrolled: scroll.scrollTop > 0 && scroll.scrollLeft > 0,
    head_offset: Math.round(q("table.matrix th.case-head").getBoundingClientRect().top - box.top - scroll.clientTop),
    variant_head_below_box_top: q("table.matrix th.variant").getBoundingClientRect().top >= box.top,
    first_column_offset: Math.round(last.left - box.left - scroll.clientLeft)
  };
  q('[data-host-chip="node"] button').click();
  history.replaceState(null, "", "#" + "LINKED");
  window.dispatchEvent(new HashChangeEvent("hashchange"));
  var cell = document.getElementById("LINKED");
  var at = cell.getBoundingClientRect();
  box = scroll.getBoundingClientRect();
  out.deep_link = {
    panel_open: !q("#detail").hidden, panel_case: q("#detail").getAttribute("data-case"),
    linked: cell.classList.contains("linked"), cell_shown: !cell.hidden,
    in_view: at.top >= box.top && at.bottom <= box.bottom && at.left >= box.left && at.right <= box.right,
    columns: document.querySelectorAll("table.matrix th.variant:not([hidden])").length
  };
  search("deterministically");
  history.replaceState(null, "", "#case-cancel.grandchild-ignores-sigterm");
  window.dispatchEvent(new HashChangeEvent("hashchange"));
  out.row_link = { shown: !document.getElementById("case-cancel.grandchild-ignores-sigterm").hidden,
    search: q("#search").value };
  var result = document.createElement("pre");
  result.id = "probe-result";
  result.textContent = JSON.stringify(out);
  document.body.appendChild(result);
})();
</script>"##;

/// The probe's JSON out of the dumped DOM.
fn probe_result(dom: &str) -> serde_json::Value {
    let text = text_after(dom, "id=\"probe-result\"");
    let json = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|error| panic!("probe JSON: {error}: {json}"))
}

#[test]
fn report_html_for_several_hosts_in_chromium() {
    let Some(binary) = find_chromium() else {
        return;
    };
    let (work, document, out) = written_report(three_host_document);
    let broken = document
        .suites
        .iter()
        .position(|suite| suite.host.name == "broken")
        .unwrap();
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let probe = PROBE.replace("LINKED", &format!("cell-{broken}-7"));
    // The page's CSP runs only scripts it knows by hash: the probe's is added for this test.
    let probe_text = &probe["<script>".len()..probe.len() - "</script>".len()];
    let probed = page
        .replace(
            "script-src ",
            &format!("script-src {} ", csp_hash(probe_text)),
        )
        .replace("</body>", &format!("{probe}</body>"));
    let probe_page = work.path().join("probe.html");
    std::fs::write(&probe_page, probed).unwrap();
    let url = format!("file://{}", probe_page.display());
    let profile = work.path().join("chromium-profile");
    let extra = [
        "--dump-dom".to_string(),
        "--window-size=520,420".to_string(),
    ];
    let dom = chromium(&binary, &profile, &extra, &url);
    let seen = probe_result(&dom);
    println!("{seen:#}");

    let initial = &seen["initial"];
    assert_eq!(
        initial["chips"],
        serde_json::json!(["broken 12 failing", "reference 5 failing", "node 0 failing"]),
        "hosts sorted by failures"
    );
    assert_eq!(initial["failing"], 12, "every row fails on the broken host");
    assert_eq!(initial["columns"], 3);
    assert_eq!(initial["visible"], 12);

    let without = &seen["without_broken"];
    assert_eq!(without["columns"], 2, "the broken host's column is hidden");
    assert_eq!(without["failing"], 5, "the failures of the other hosts");
    assert_eq!(without["fail"], 2, "verdict counts follow the hosts shown");
    assert_eq!(
        without["rows"].as_array().unwrap()[..5],
        [
            "framing.bom",
            "strict.session-before-content",
            "restart.session-survives",
            "cancel.grandchild-ignores-sigterm",
            "hygiene.canary-in-stderr"
        ],
        "the failing rows of the shown hosts come first"
    );

    let only = &seen["only_node"];
    assert_eq!(only["columns"], 1, "only host node");
    assert_eq!(only["failing"], 0);
    assert_eq!(
        only["fail"],
        serde_json::Value::Null,
        "no fail filter when none fails"
    );
    assert_eq!(only["pass"], 12);

    assert_eq!(
        seen["search_id"]["rows"],
        serde_json::json!(["cancel.grandchild-ignores-sigterm"]),
        "the search matches case ids, case-insensitively"
    );
    assert_eq!(seen["search_id"]["failing"], 1, "counts follow the search");
    assert_eq!(
        seen["search_summary"]["rows"],
        serde_json::json!(["strict.session-before-content"]),
        "the search matches summaries"
    );

    let sticky = &seen["sticky"];
    assert_eq!(sticky["scrolled"], true, "the matrix box scrolls both ways");
    assert_eq!(sticky["head_offset"], 0, "the header row stays at the top");
    assert_eq!(sticky["variant_head_below_box_top"], true);
    assert_eq!(
        sticky["first_column_offset"], 0,
        "the case column stays at the left"
    );

    let deep = &seen["deep_link"];
    assert_eq!(deep["panel_open"], true);
    assert_eq!(
        deep["panel_case"],
        document.suites[broken].cases[7].id.as_str()
    );
    assert_eq!(deep["linked"], true, "the linked cell is highlighted");
    assert_eq!(
        deep["cell_shown"], true,
        "a link shows its host's column again"
    );
    assert_eq!(deep["columns"], 2, "node and the linked host");
    assert_eq!(
        deep["in_view"], true,
        "the linked cell is scrolled into view"
    );
}

/// Two hosts, one named with a right-to-left override (it would read `spoofexe.png`), and a why
/// holding a zero-width space and a bidi isolate.
fn hostile_names_document(fixtures: &Path) -> ReportDocument {
    let host = |name: &str| HostSpec {
        name: name.to_string(),
        command: vec!["node".to_string(), format!("{name}.js")],
        expectations: None,
        pass_env: Vec::new(),
        dialect: None,
    };
    let config = MatrixConfig {
        clients: Vec::new(),
        hosts: vec![host("reference"), host(SPOOF)],
        variants: vec![VariantSpec {
            name: "dsh-0.1.7-rc.1".to_string(),
            env: Default::default(),
        }],
    };
    let (suites, errors) = run_matrix(
        &config,
        &mut |host, _| {
            let mut suite = passing_suite();
            if host.name == SPOOF {
                suite.cases[0].verdict = dsh_results::model::Verdict::Fail;
                suite.cases[0].rule = Some("s6.session-before-content".to_string());
                suite.cases[0].why = Some("got sess\u{200B}ion \u{2066}id\u{2069}".to_string());
            }
            Ok(suite)
        },
        &Silent,
    );
    build_document(&config, suites, errors, fixtures, &Silent)
}

const SPOOF: &str = "spoof\u{202E}gnp.exe";

/// The text a reader sees: the DOM without its tags (attributes such as `data-host` keep a name as
/// it is, for the script to match on) and without the embedded report data (JSON, likewise).
fn rendered_text(dom: &str) -> String {
    let start = dom
        .find("<script id=\"report-data\"")
        .expect("the data block");
    let end = start + dom[start..].find("</script>").expect("closes");
    let mut text = String::new();
    let mut in_tag = false;
    for c in dom[..start].chars().chain(dom[end..].chars()) {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

#[test]
fn report_html_survives_a_bad_fragment_and_shows_hidden_characters() {
    let Some(binary) = find_chromium() else {
        return;
    };
    let (work, document, out) = written_report(hostile_names_document);
    let url = format!("file://{}", out.join("report.html").display());
    let profile = work.path().join("chromium-profile");

    let dom = chromium(
        &binary,
        &profile,
        &["--dump-dom".to_string()],
        &format!("{url}#case-%E0%A4%A"),
    );
    assert!(
        dom.contains("data-js=\"ready\""),
        "the page's script ran to its end despite the malformed fragment"
    );
    assert_eq!(
        text_after(&dom, "id=\"link-note\""),
        "The link #case-%E0%A4%A names no case of this report."
    );
    assert_eq!(
        text_after(&dom, "id=\"count-all\""),
        "12",
        "the matrix rendered"
    );
    let text = rendered_text(&dom);
    assert!(
        !text.contains('\u{202E}'),
        "U+202E reached the page's text: {text}"
    );
    assert!(
        dom.contains("data-host=\"spoof\u{202E}gnp.exe\">spoof\\u{202e}gnp.exe</th>"),
        "the host's column header shows the override as text"
    );
    assert!(
        dom.contains(" spoof\\u{202e}gnp.exe <span"),
        "the host chooser shows it too"
    );

    let spoof = document
        .suites
        .iter()
        .position(|suite| suite.host.name == SPOOF)
        .unwrap();
    let linked = format!("{url}#cell-{spoof}-0");
    let dom = chromium(&binary, &profile, &["--dump-dom".to_string()], &linked);
    assert!(!dom.contains("id=\"link-note\""), "a good link has no note");
    let panel_start = dom.find("<aside id=\"detail\"").expect("the detail panel");
    let panel = &dom[panel_start..panel_start + dom[panel_start..].find("</aside>").unwrap()];
    assert!(panel.contains("<dd>spoof\\u{202e}gnp.exe ("), "{panel}");
    assert!(
        panel.contains("<dd>got sess\\u{200b}ion \\u{2066}id\\u{2069}</dd>"),
        "{panel}"
    );
    let text = rendered_text(&dom);
    for hidden in ['\u{202E}', '\u{200B}', '\u{2066}', '\u{2069}'] {
        assert!(!text.contains(hidden), "{hidden:?} reached the page's text");
    }
}
