//! `cargo xtask mutants`: runs the whole corpus against each deliberately buggy variant of the
//! reference host (`dsh-host-mutant-driver --mutant <name>`, built with the host's test-only
//! `mutants` feature), records which cases catch it in `docs/kill-matrix.json`,
//! and rewrites the kill matrix in docs/kill-matrix.md. `host-corpus/tests/it/mutants.rs` keeps the file honest.

use crate::kit::Kit;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The reference host with its mutants reachable (never a release binary).
pub const MUTANT_DRIVER: &str = "dsh-host-mutant-driver";

const MATRIX_START: &str = "<!-- kill-matrix:start -->";
const MATRIX_END: &str = "<!-- kill-matrix:end -->";

/// `(name, summary)` of every mutant, as the driver lists them.
fn list(host_driver: &Path) -> Result<Vec<(String, String)>, String> {
    let output = Command::new(host_driver)
        .arg("--list-mutants")
        .output()
        .map_err(|e| format!("{}: {e}", host_driver.display()))?;
    if !output.status.success() {
        return Err(format!("--list-mutants failed: {}", output.status));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(name, summary)| (name.to_string(), summary.to_string()))
        .collect())
}

fn failing_cases(kit: &Kit, mutant: &str, scratch: &Path) -> Result<Vec<String>, String> {
    let json_path = scratch.join(format!("{mutant}.json"));
    let status = kit
        .conformance_run()
        .arg(format!("--host-arg=--mutant={mutant}"))
        .arg("--json")
        .arg(&json_path)
        // Cases wait far more than they compute: overlap them, as `cargo xtask suite` does.
        .args(["--jobs", "8"])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("dsh-conformance: {e}"))?;
    let report: Value = serde_json::from_slice(
        &std::fs::read(&json_path).map_err(|e| format!("{mutant}: no JSON ({status}): {e}"))?,
    )
    .map_err(|e| format!("{mutant}: {e}"))?;
    let mut killers: Vec<String> = report["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|case| {
            matches!(
                case["verdict"].as_str(),
                Some("fail" | "untestable" | "xpass")
            )
        })
        .filter_map(|case| case["id"].as_str().map(str::to_string))
        .collect();
    killers.sort();
    Ok(killers)
}

/// `dsh-host-mutant-driver` next to `host_driver`.
fn mutant_driver(host_driver: &Path) -> PathBuf {
    host_driver.with_file_name(format!("{MUTANT_DRIVER}{}", std::env::consts::EXE_SUFFIX))
}

/// The kill matrix from `kit` with its host driver replaced by the mutant driver.
pub fn regenerate(kit: &Kit, root: &Path) -> Result<(), String> {
    let kit = Kit {
        host_driver: mutant_driver(&kit.host_driver),
        ..kit.clone()
    };
    let kit = &kit;
    let scratch = std::env::temp_dir().join(format!("dsh-mutants-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let mut mutants = Map::new();
    let mut rows = Vec::new();
    let mut survivors = Vec::new();
    for (name, summary) in list(&kit.host_driver)? {
        eprintln!("xtask: mutant {name}");
        let killers = failing_cases(kit, &name, &scratch);
        let killers = match killers {
            Ok(killers) => killers,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&scratch);
                return Err(error);
            }
        };
        if killers.is_empty() {
            survivors.push(name.clone());
        }
        let shown: Vec<String> = killers.iter().take(4).map(|id| format!("`{id}`")).collect();
        let more = killers.len().saturating_sub(shown.len());
        let more = if more > 0 {
            format!(" (+{more} more)")
        } else {
            String::new()
        };
        rows.push(format!(
            "| `{name}` | {summary} | {} | {}{more} |",
            killers.len(),
            shown.join(", ")
        ));
        mutants.insert(name, json!({"summary": summary, "killed_by": killers}));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let matrix = json!({"v": 1, "mutants": mutants});
    let text = serde_json::to_string_pretty(&matrix).map_err(|e| e.to_string())? + "\n";
    std::fs::write(root.join("docs/kill-matrix.json"), text).map_err(|e| e.to_string())?;
    let table = format!(
        "{MATRIX_START}\n| mutant | its bug | cases that catch it | e.g. |\n|---|---|---|---|\n{}\n{MATRIX_END}",
        rows.join("\n")
    );
    let readme_path = root.join("docs/kill-matrix.md");
    let readme = std::fs::read_to_string(&readme_path).map_err(|e| e.to_string())?;
    let (Some(start), Some(end)) = (readme.find(MATRIX_START), readme.find(MATRIX_END)) else {
        return Err(format!(
            "docs/kill-matrix.md lacks the {MATRIX_START} / {MATRIX_END} markers"
        ));
    };
    let updated = format!(
        "{}{table}{}",
        &readme[..start],
        &readme[end + MATRIX_END.len()..]
    );
    std::fs::write(&readme_path, updated).map_err(|e| e.to_string())?;
    if survivors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "no case catches {}: a hole in the corpus",
            survivors.join(", ")
        ))
    }
}
