//! End-to-end test of report.html in a real browser: headless Chromium (Debian's `chromium`)
//! loads the page from a temp dir, its script runs, and the rendered DOM must show the matrix's
//! counts and, for a linked cell, the detail panel. A screenshot is kept under the target dir.
//! Without Chromium the test prints why it is skipped and passes.

mod report_support;

use dsh_conformance::report::config::{HostSpec, MatrixConfig, VariantSpec};
use dsh_conformance::report::document::ReportDocument;
use dsh_conformance::report::{build_document, run_matrix, write_report_files};
use report_support::{passing_suite, sample_suite, RULES_JSON};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Chromium: `/usr/bin/chromium`, else `chromium` on `PATH`.
fn find_chromium() -> Option<PathBuf> {
    let fixed = PathBuf::from("/usr/bin/chromium");
    if fixed.is_file() {
        return Some(fixed);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("chromium"))
        .find(|candidate| candidate.is_file())
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
        hosts: vec![
            HostSpec {
                name: "reference".to_string(),
                command: vec!["dsh-host-driver".to_string()],
                expectations: None,
            },
            HostSpec {
                name: "node".to_string(),
                command: vec!["node".to_string(), "driver.js".to_string()],
                expectations: None,
            },
        ],
        variants: vec![variant("dsh-0.1.7-rc.1"), variant("dsh-0.1.8")],
    };
    let (suites, errors) = run_matrix(&config, &mut |host, variant| match (
        host.name.as_str(),
        variant.name.as_str(),
    ) {
        ("node", "dsh-0.1.8") => Err("driver exited during handshake".to_string()),
        (_, "dsh-0.1.7-rc.1") => Ok(passing_suite()),
        _ => Ok(sample_suite()),
    });
    build_document(&config, suites, errors, fixtures)
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

#[test]
fn report_html_renders_its_matrix_in_chromium() {
    let Some(binary) = find_chromium() else {
        println!("skipped: chromium not installed (apt-get install chromium to run this test)");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let fixtures = work.path().join("fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(fixtures.join("rules.json"), RULES_JSON).unwrap();
    let document = sample_document(&fixtures);
    let out = work.path().join("report");
    write_report_files(&document, &out).unwrap();
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
        "Showing 12 of 12 cases (36 results)."
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
