//! The headless profile's `error: unknown option '--X'` line and, when a known option is close,
//! the second line the real launcher's option parser (commander.js) adds: `(Did you mean
//! --help?)` (observed on 0.1.5 and 0.2.1). The suggestion is commander's: only for a `--`
//! option, among the long options the profile lists (its help), by the optimal string alignment
//! distance (at most 3, similarity above 0.4), the closest ones sorted, `one of A, B` when several
//! tie.

/// The most edits a suggestion may be away.
const MAX_DISTANCE: usize = 3;
/// The least similarity (`(longer length - distance) / longer length`) a suggestion needs.
const MIN_SIMILARITY: f64 = 0.4;

/// The usage error for `option` given the profile's long options (`--json`, `--help`, ...).
pub fn message(option: &str, long_options: &[&str]) -> String {
    format!(
        "error: unknown option '{option}'{}",
        suggestion(option, long_options)
    )
}

/// `\n(Did you mean --X?)`, `\n(Did you mean one of --X, --Y?)`, or nothing.
fn suggestion(option: &str, long_options: &[&str]) -> String {
    let Some(word) = option.strip_prefix("--") else {
        return String::new();
    };
    let word: Vec<char> = word.chars().collect();
    let mut best = MAX_DISTANCE;
    let mut similar: Vec<&str> = Vec::new();
    for candidate in long_options {
        let name: Vec<char> = candidate.trim_start_matches("--").chars().collect();
        if name.len() <= 1 {
            continue;
        }
        let distance = edit_distance(&word, &name);
        let length = word.len().max(name.len()) as f64;
        if (length - distance as f64) / length <= MIN_SIMILARITY {
            continue;
        }
        if distance < best {
            best = distance;
            similar = vec![candidate];
        } else if distance == best {
            similar.push(candidate);
        }
    }
    similar.sort_unstable();
    match similar.as_slice() {
        [] => String::new(),
        [one] => format!("\n(Did you mean {one}?)"),
        several => format!("\n(Did you mean one of {}?)", several.join(", ")),
    }
}

/// The optimal string alignment distance (insertions, deletions, substitutions, adjacent
/// transpositions); words whose lengths differ by more than [`MAX_DISTANCE`] are the longer
/// length apart, as commander counts them.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    if a.len().abs_diff(b.len()) > MAX_DISTANCE {
        return a.len().max(b.len());
    }
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for j in 1..=b.len() {
        for i in 1..=a.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines the real 0.2.1rc2 and 0.1.5rc1 printed (observed).
    #[test]
    fn suggestions_are_the_real_launchers() {
        let v021 = ["--json", "--session-id", "--help"];
        let v015 = ["--help"];
        let hel = "error: unknown option '--hel'\n(Did you mean --help?)";
        assert_eq!(message("--hel", &v021), hel);
        assert_eq!(message("--hel", &v015), hel);
        assert_eq!(
            message("--help2", &v015),
            "error: unknown option '--help2'\n(Did you mean --help?)"
        );
        assert_eq!(
            message("--jsn", &v021),
            "error: unknown option '--jsn'\n(Did you mean --json?)"
        );
        assert_eq!(message("--jsn", &v015), "error: unknown option '--jsn'");
        for none in ["--bogus", "--verbose", "-x"] {
            assert_eq!(
                message(none, &v021),
                format!("error: unknown option '{none}'")
            );
        }
        assert_eq!(
            suggestion("--jsoo", &["--json", "--jsox"]),
            "\n(Did you mean one of --json, --jsox?)"
        );
        let chars = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(edit_distance(&chars("hlep"), &chars("help")), 1);
        assert_eq!(edit_distance(&chars("x"), &chars("session-id")), 10);
    }
}
