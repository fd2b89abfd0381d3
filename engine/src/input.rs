//! Reading the files a user names as input (reports for `merge`, `summary` and `diff`,
//! `--expectations`, `report --config`, `model-server --script`), bounded: whatever the path is
//! (a huge file, `/dev/zero`, a pipe), at most the bound plus one byte is read, and the error
//! names the file and the bound. Callers exit 2 on it.

use std::io::Read;
use std::path::Path;

/// A small configuration file: `--expectations`, `report --config`, a model-server script.
pub const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// A stored report: `report.json`, a `run --json` suite, a shard for `merge`.
pub const MAX_REPORT_BYTES: u64 = 256 * 1024 * 1024;

/// Reads `path` as UTF-8 text of at most `max` bytes; `what` names the file's role in errors
/// (`"the expectations file"`).
pub fn read_bounded(path: &Path, what: &str, max: u64) -> Result<String, String> {
    let cannot = |error: std::io::Error| format!("{}: cannot read {what}: {error}", path.display());
    let over = || {
        format!(
            "{}: {what} is over the {max}-byte bound ({} MiB); not read",
            path.display(),
            max / (1024 * 1024)
        )
    };
    let file = std::fs::File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    // A regular file says its size: refuse a large one unread, read a small one in one allocation.
    if meta.is_file() && meta.len() > max {
        return Err(over());
    }
    let expected = if meta.is_file() { meta.len() + 1 } else { 0 };
    let mut bytes = Vec::with_capacity(expected as usize);
    file.take(max + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > max {
        return Err(over());
    }
    String::from_utf8(bytes).map_err(|error| {
        format!(
            "{}: {what} is not UTF-8 (byte {})",
            path.display(),
            error.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_within_the_bound_is_read_and_one_beyond_is_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.json");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read_bounded(&file, "the input", 10).unwrap(), "0123456789");
        let error = read_bounded(&file, "the input", 9).unwrap_err();
        assert!(
            error.contains("in.json") && error.contains("9-byte bound"),
            "{error}"
        );
        let missing = read_bounded(&dir.path().join("nope"), "the input", 9).unwrap_err();
        assert!(missing.contains("nope: cannot read the input"), "{missing}");
        std::fs::write(&file, b"ok\xff").unwrap();
        assert!(read_bounded(&file, "the input", 9)
            .unwrap_err()
            .contains("not UTF-8 (byte 2)"));
    }

    #[test]
    fn a_huge_regular_file_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sparse.json");
        std::fs::File::create(&file)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let error = read_bounded(&file, "the report", MAX_REPORT_BYTES).unwrap_err();
        assert!(
            error.contains("sparse.json: the report is over the 268435456-byte bound (256 MiB)"),
            "{error}"
        );
    }

    #[test]
    fn an_endless_device_stops_at_the_bound() {
        let error = read_bounded(Path::new("/dev/zero"), "the script", 4096).unwrap_err();
        assert!(
            error.contains("/dev/zero") && error.contains("4096-byte bound"),
            "{error}"
        );
    }
}
