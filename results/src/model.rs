//! The results model every output is rendered from: one [`SuiteReport`] per host x runtime variant.

use serde::{Deserialize, Serialize};

/// A case's verdict. Which verdicts fail a run: [`Verdict::is_failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every expectation held.
    Pass,
    /// The right outcome status with another error code.
    NonStrict,
    /// An expectation did not hold; `rule` and `why` say which.
    Fail,
    /// The case needs a capability the driver did not claim.
    Skipped,
    /// The case failed, but it tests an ambiguous spec point (`interpretation` set).
    Informational,
    /// Failed, as the host's expectations file says it does.
    Xfail,
    /// Passed although the expectations file says it fails: the entry must go.
    Xpass,
    /// The host could not meet a prerequisite of a capability it claimed.
    Untestable,
    /// The kit itself failed (invalid fixture, harness error): blamed on the kit.
    Error,
    /// The run was stopped (Ctrl-C, SIGTERM) while the case was in flight: no verdict.
    Interrupted,
}

impl Verdict {
    /// Whether this verdict makes `dsh-conformance run` exit 1.
    pub fn is_failure(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::Xpass | Verdict::Untestable)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::NonStrict => "non-strict",
            Verdict::Fail => "fail",
            Verdict::Skipped => "skipped",
            Verdict::Informational => "informational",
            Verdict::Xfail => "xfail",
            Verdict::Xpass => "xpass",
            Verdict::Untestable => "untestable",
            Verdict::Error => "error",
            Verdict::Interrupted => "interrupted",
        }
    }
}

/// Which side a verdict blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Blame {
    None,
    /// The host under test (its replies, its runtime handling, its processes).
    Host,
    /// The kit: an invalid fixture or a harness fault.
    Kit,
}

/// One case's result against one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub id: String,
    pub summary: String,
    /// Spec sections the case exercises.
    pub spec: Vec<String>,
    /// Rule ids the case covers (from `fixtures/rules.json`).
    pub rules: Vec<String>,
    pub verdict: Verdict,
    pub blame: Blame,
    /// The rule whose expectation failed (for fail, non-strict, informational, untestable, error).
    pub rule: Option<String>,
    /// One line: what was expected and what happened.
    pub why: Option<String>,
    /// The interpretation entry, for informational cases.
    pub interpretation: Option<String>,
    pub duration_ms: u64,
    /// Bounded excerpt of what happened (driver replies, journal lines), for reports and `--verbose`.
    pub transcript: Vec<String>,
    /// With `--verify N`: the verdicts of every repetition when they differed (a flaky case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<Verdict>,
    /// Every other rule the case broke besides `rule` (one entry per rule and strictness, in the
    /// order first broken), so one systemic deviation hides none of a host's other findings.
    /// Absent in reports of kits that named only the first broken rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_broken: Vec<BrokenRule>,
}

/// A rule a case broke besides the one its verdict names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokenRule {
    pub rule: String,
    /// One line: what was expected and what happened (the first time the rule broke).
    pub why: String,
    /// The interpretation entry the broken expectation rests on: the finding is informational.
    /// Absent: it breaks a spec sentence (strict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpretation: Option<String>,
}

impl BrokenRule {
    /// `strict`, or `informational` when the expectation rests on an interpretation.
    pub fn strictness(&self) -> &'static str {
        match self.interpretation {
            None => "strict",
            Some(_) => "informational",
        }
    }

    /// `rule (strict)` or `rule (informational, I-..)`.
    pub fn label(&self) -> String {
        match &self.interpretation {
            None => format!("{} (strict)", self.rule),
            Some(entry) => format!("{} (informational, {entry})", self.rule),
        }
    }

    /// `rule (strict): why`.
    pub fn line(&self) -> String {
        format!("{}: {}", self.label(), self.why)
    }
}

impl CaseResult {
    /// A case that was in flight when the run was interrupted: whatever it saw after `killed`
    /// (`its driver`, `the client`) was killed says nothing about the host or client.
    pub fn mark_interrupted(&mut self, killed: &str) {
        self.verdict = Verdict::Interrupted;
        self.blame = Blame::None;
        self.rule = None;
        self.interpretation = None;
        self.why = Some(format!(
            "the run was interrupted while this case was in flight ({killed} was killed); run it again"
        ));
    }
}

/// The host a suite ran against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// A short name (`reference`, or the config's name).
    pub name: String,
    /// The command line that started the driver.
    pub command: Vec<String>,
    /// The driver's handshake reply, as sent (null when it never answered).
    pub handshake: serde_json::Value,
}

/// One run of the selected corpus against one host and one runtime variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteReport {
    pub kit_version: String,
    /// SHA-256 over the selected fixture files (sorted by id), hex.
    pub corpus_hash: String,
    pub host: HostInfo,
    /// The runtime variant (`default`, or a named fake-dsh variant such as `dsh-0.1.8-untested`).
    pub runtime_variant: String,
    pub cases: Vec<CaseResult>,
    pub duration_ms: u64,
    /// The flags besides `--host`, `--variant` and `--case` that re-run a case the same way
    /// (`--fixtures DIR`, `--time-scale F`, `--expectations FILE`, `--variant-env K=V`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rerun_args: Vec<String>,
    /// Which corpus the run judged (absent in reports of kits before 0.1.0's gate hardening).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<CorpusInfo>,
    /// The client surface a client-corpus run judged (`sdk`, `headless`); absent for a host run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
    /// The dialect the host was judged by (`run --dialect`, docs/dialects.md) when it is not
    /// `opendesign` (generation 1 as the spec states it, what an absent member means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
    /// How a re-run line starts when not `dsh-conformance run --host HOST` (`cargo xtask suite`
    /// passes `--rerun-as "cargo xtask suite"`); said on the terminal only, never stored.
    #[serde(skip)]
    pub rerun_as: Option<String>,
}

/// Which corpus a run judged: where it came from, the hash and size of the whole corpus (before
/// any selection), and whether that is exactly the corpus embedded in this kit, so a green gate
/// over a swapped-in easy corpus cannot pass for a green gate over the kit's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusInfo {
    /// Where the cases came from: `embedded`, or the directory and what named it.
    pub source: String,
    /// SHA-256 over every case file of the corpus (sorted by id), hex.
    pub hash: String,
    /// Every case in the corpus.
    pub cases: usize,
    /// The corpus is byte for byte the one embedded in this kit.
    pub embedded: bool,
}

impl CorpusInfo {
    /// One line naming the corpus: source, short hash, case count.
    pub fn line(&self) -> String {
        format!(
            "corpus: {} ({} cases, sha256 {})",
            self.source,
            self.cases,
            short_hash(&self.hash)
        )
    }

    /// The loud note every output carries when the corpus is not the kit's own.
    pub fn warning(&self) -> Option<String> {
        (!self.embedded).then(|| {
            format!(
                "WARNING: NOT the kit's embedded corpus: {} ({} cases, sha256 {}); a pass says \
                 nothing about the standard corpus",
                self.source,
                self.cases,
                short_hash(&self.hash)
            )
        })
    }
}

/// The abbreviated corpus hash reports print: its first 12 characters (all of a shorter one).
pub fn short_hash(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

impl SuiteReport {
    /// `, judged by the NAME dialect` for a host judged by another dialect than `opendesign`.
    pub fn dialect_note(&self) -> String {
        self.dialect
            .as_deref()
            .map(|name| format!(", judged by the {name} dialect"))
            .unwrap_or_default()
    }

    /// How many cases got this verdict.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.cases
            .iter()
            .filter(|case| case.verdict == verdict)
            .count()
    }
    /// Count of cases per verdict, in [`Verdict`] order.
    pub fn totals(&self) -> Vec<(Verdict, usize)> {
        let mut totals: Vec<(Verdict, usize)> = Vec::new();
        for case in &self.cases {
            match totals
                .iter_mut()
                .find(|(verdict, _)| *verdict == case.verdict)
            {
                Some((_, count)) => *count += 1,
                None => totals.push((case.verdict, 1)),
            }
        }
        totals.sort();
        totals
    }
    pub fn has_failures(&self) -> bool {
        self.cases.iter().any(|case| case.verdict.is_failure())
    }

    /// What the run judged, so a green run never overstates conformance: per area (a case id's
    /// first segment) how many cases were judged and skipped, and whether error codes were
    /// compared (the host's declared vocabulary).
    pub fn judged_lines(&self) -> Vec<String> {
        let mut areas: Vec<(&str, usize, usize)> = Vec::new();
        for case in &self.cases {
            let area = case.id.split('.').next().unwrap_or(&case.id);
            let skipped = usize::from(case.verdict == Verdict::Skipped);
            match areas.iter_mut().find(|(name, _, _)| *name == area) {
                Some((_, judged, skips)) => {
                    *judged += 1 - skipped;
                    *skips += skipped;
                }
                None => areas.push((area, 1 - skipped, skipped)),
            }
        }
        areas.sort_by_key(|(area, _, _)| *area);
        let judged: Vec<String> = areas
            .iter()
            .map(|(area, judged, skipped)| match skipped {
                0 => format!("{area} {judged}"),
                _ => format!("{area} {judged} ({skipped} skipped)"),
            })
            .collect();
        let judged = format!("judged per area: {}", judged.join(", "));
        if self.surface.is_some() {
            // A client run: no handshake, no error-code vocabulary.
            return vec![judged];
        }
        let vocabulary = crate::codes::Vocabulary::from_handshake(&self.host.handshake)
            .ok()
            .flatten();
        vec![judged, crate::codes::describe(vocabulary.as_ref())]
    }
}
