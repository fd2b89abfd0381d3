//! Where a case's credential went: the key canary the client gets in `DEEPSEEK_API_KEY`, looked
//! for in its raw form, in every encoded form the host corpus's redaction knows
//! (`dsh_protocol::needles`: base64 in both alphabets and all alignments, hex, percent- and
//! JSON-escaped), reversed, in UTF-16 (either byte order), and split apart: any [`FRAGMENT`]
//! characters of its random part, in each of those forms too (a key cut in two leaves one piece
//! at least that long, and the base64 of a piece holds the base64 of each of its 12-character
//! windows). Gzip streams in what is searched are inflated (bounded: [`GZIP_STREAMS`] streams of
//! at most [`GZIP_BYTES`] each per text) and searched as well. Every form is one literal pattern
//! of one Aho-Corasick automaton, so a search stays linear in what is read, whatever the number
//! of forms; a gzip stream is read once more, inflated, within its bound.
//!
//! - [`walk`]: the bounded scans of a directory tree (the case's, and what changed in the temp
//!   dirs every process shares): file contents, names, link targets and extended attributes.
//! - [`processes`]: the command lines and names of the client's processes, sampled while it runs.
//!
//! By design out of reach (docs/sdk-clients.md, "What the canary cannot see"): a key sent over
//! the network, written outside the case's directory and the shared temp dirs, cut into pieces
//! shorter than [`FRAGMENT`], encrypted, hashed, or encoded some other way (another compression,
//! another alphabet), or held by a process for less than the sampling interval.

pub mod processes;
pub mod walk;

use aho_corasick::AhoCorasick;
use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The length of a piece of the key's random part that counts as the key (48 bits of it).
pub const FRAGMENT: usize = 12;

/// The gzip streams inflated in one text (a file, an output) at most.
pub const GZIP_STREAMS: usize = 8;
/// The bytes one gzip stream is inflated to at most.
pub const GZIP_BYTES: u64 = 16 << 20;

/// A gzip member's first bytes: the magic and the deflate method.
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// How much a tree scan reads at most.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Directory entries looked at.
    pub entries: usize,
    /// Bytes read from one file.
    pub file_bytes: u64,
    /// Bytes read in all.
    pub total_bytes: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            entries: 20_000,
            file_bytes: 64 << 20,
            total_bytes: 256 << 20,
        }
    }
}

/// The key's forms, ready to be looked for.
pub struct Canary {
    matcher: AhoCorasick,
    /// What each pattern is (`base64`, `a piece of it`, ...), by pattern index.
    labels: Vec<&'static str>,
    longest: usize,
}

/// What a tree scan found.
#[derive(Debug, Default)]
pub struct TreeScan {
    /// Each place holding the key.
    pub found: Vec<Found>,
    /// Why the scan did not read everything (a bound or the deadline), if it did not.
    pub incomplete: Option<String>,
}

/// One place a scan found the key: an entry (its path under the scan's root, or absolute for
/// the shared temp dirs), what of it held the key, and in which form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub place: Place,
    pub form: &'static str,
}

/// What of a directory entry held the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A regular file's bytes (a gzip stream in them inflated).
    Content,
    /// The entry's name (a file's, a directory's, a link's).
    Name,
    /// A symbolic link's target (a dangling one too).
    LinkTarget,
    /// An extended attribute: its name (given) or its value.
    Attribute(String),
}

impl Found {
    /// `the file work/key (raw)`, `the name of tmp/x (a piece of it)`, with `note` after the form
    /// when given.
    pub fn describe(&self, note: Option<&str>) -> String {
        let path = self.path.display();
        let what = match &self.place {
            Place::Content => format!("the file {path}"),
            Place::Name => format!("the name of {path}"),
            Place::LinkTarget => format!("the target of the link {path}"),
            Place::Attribute(name) => format!("the extended attribute {name} of {path}"),
        };
        match note {
            Some(note) => format!("{what} ({note}, {})", self.form),
            None => format!("{what} ({})", self.form),
        }
    }
}

/// How a read of a text ended, besides what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// There was more than the limit.
    Bound,
    /// The deadline passed.
    Deadline,
}

impl Canary {
    /// The forms of `secret`; its random part is what follows its last `-`.
    pub fn new(secret: &str) -> Canary {
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut labels = Vec::new();
        let mut push = |bytes: Vec<u8>, label: &'static str| {
            if !bytes.is_empty() && !patterns.contains(&bytes) {
                patterns.push(bytes);
                labels.push(label);
            }
        };
        for form in dsh_protocol::needles::encoded_forms(secret) {
            push(form.bytes, form.encoding);
        }
        for (bytes, label) in transformed(secret.as_bytes(), false) {
            push(bytes, label);
        }
        let random = secret.rsplit('-').next().unwrap_or(secret);
        if random.len() > FRAGMENT {
            for start in 0..=random.len() - FRAGMENT {
                let Some(piece) = random.get(start..start + FRAGMENT) else {
                    continue;
                };
                for form in dsh_protocol::needles::encoded_forms(piece) {
                    push(form.bytes, piece_label(form.encoding));
                }
                for (bytes, label) in transformed(piece.as_bytes(), true) {
                    push(bytes, label);
                }
            }
        }
        let longest = patterns.iter().map(Vec::len).max().unwrap_or(0);
        // The leftmost match, the first listed form winning at one position: the whole key is
        // named as such, not as a piece of it.
        let matcher = AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build(&patterns)
            .expect("literal patterns always build");
        Canary {
            matcher,
            labels,
            longest,
        }
    }

    /// The form of the key `haystack` holds, if any (the first one found): in the text itself,
    /// or in a gzip stream inside it, inflated within its bounds.
    pub fn find(&self, haystack: &[u8]) -> Option<&'static str> {
        if let Some(found) = self.find_plain(haystack) {
            return Some(found);
        }
        gzip_offsets(haystack)
            .into_iter()
            .take(GZIP_STREAMS)
            .find_map(|at| {
                let inflated = flate2::read::GzDecoder::new(&haystack[at..]);
                self.find_inflated(inflated, far()).0
            })
    }

    /// The form of the key in `haystack` itself (no gzip inflated).
    fn find_plain(&self, haystack: &[u8]) -> Option<&'static str> {
        self.matcher
            .find(haystack)
            .map(|found| self.labels[found.pattern().as_usize()])
    }

    /// The key in a gzip stream being inflated, read up to [`GZIP_BYTES`]: labelled
    /// `gzip-compressed` whatever its form inside; whether the stream went past the bound (or
    /// the deadline passed).
    fn find_inflated(
        &self,
        mut inflated: impl Read,
        deadline: Instant,
    ) -> (Option<&'static str>, Option<Cut>) {
        let (found, cut) = self.find_in_reader(&mut inflated, GZIP_BYTES, deadline, None);
        (found.map(|_| "gzip-compressed"), cut)
    }

    /// Reads at most `limit` bytes of `reader` in chunks (a form cut across two chunks is still
    /// found); the form found, and whether the reader had more than `limit` bytes or the deadline
    /// passed. Where gzip streams start is added to `gzip_at` (their offsets in the reader, up to
    /// [`GZIP_STREAMS`]), for the caller to inflate.
    fn find_in_reader(
        &self,
        reader: &mut impl Read,
        limit: u64,
        deadline: Instant,
        mut gzip_at: Option<&mut Vec<u64>>,
    ) -> (Option<&'static str>, Option<Cut>) {
        let mut buffer = vec![0u8; 1 << 20];
        let mut window: Vec<u8> = Vec::new();
        let mut read_so_far: u64 = 0;
        loop {
            if Instant::now() >= deadline {
                return (None, Some(Cut::Deadline));
            }
            let room =
                usize::try_from(limit.saturating_sub(read_so_far).min(1 << 20)).unwrap_or(1 << 20);
            if room == 0 {
                // One byte more says whether the text goes on past the bound.
                let mut probe = [0u8; 1];
                return match reader.read(&mut probe) {
                    Ok(0) | Err(_) => (None, None),
                    Ok(_) => (None, Some(Cut::Bound)),
                };
            }
            let read = match reader.read(&mut buffer[..room]) {
                Ok(0) => return (None, None),
                Ok(read) => read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return (None, None),
            };
            read_so_far += read as u64;
            window.extend_from_slice(&buffer[..read]);
            if let Some(form) = self.find_plain(&window) {
                return (Some(form), None);
            }
            let window_start = read_so_far - window.len() as u64;
            if let Some(offsets) = gzip_at.as_deref_mut() {
                for at in gzip_offsets(&window) {
                    let at = window_start + at as u64;
                    if offsets.len() < GZIP_STREAMS && offsets.last().is_none_or(|last| at > *last)
                    {
                        offsets.push(at);
                    }
                }
            }
            let keep = self
                .longest
                .max(GZIP_MAGIC.len())
                .saturating_sub(1)
                .min(window.len());
            window.drain(..window.len() - keep);
        }
    }
}

/// The key (or a piece of it, `piece`) reversed and in UTF-16 of both byte orders.
fn transformed(bytes: &[u8], piece: bool) -> Vec<(Vec<u8>, &'static str)> {
    let reversed: Vec<u8> = bytes.iter().rev().copied().collect();
    let utf16 = |little: bool| -> Vec<u8> {
        bytes
            .iter()
            .flat_map(|byte| if little { [*byte, 0] } else { [0, *byte] })
            .collect()
    };
    let labels = if piece {
        [
            "a piece of it, reversed",
            "a piece of it, UTF-16LE",
            "a piece of it, UTF-16BE",
        ]
    } else {
        ["reversed", "UTF-16LE", "UTF-16BE"]
    };
    vec![
        (reversed, labels[0]),
        (utf16(true), labels[1]),
        (utf16(false), labels[2]),
    ]
}

/// The label of a piece of the key in `encoding`.
fn piece_label(encoding: &str) -> &'static str {
    match encoding {
        "base64" => "a piece of it, base64",
        "hex" => "a piece of it, hex",
        "percent-encoded" => "a piece of it, percent-encoded",
        "JSON-escaped" => "a piece of it, JSON-escaped",
        _ => "a piece of it",
    }
}

/// Where gzip members may start in `bytes` (their magic and method).
fn gzip_offsets(bytes: &[u8]) -> Vec<usize> {
    bytes
        .windows(GZIP_MAGIC.len())
        .enumerate()
        .filter(|(_, window)| *window == GZIP_MAGIC)
        .map(|(at, _)| at)
        .take(GZIP_STREAMS)
        .collect()
}

/// A deadline no in-memory search reaches.
fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-dsh-conformance-0123456789abcdef0123456789abcdef";

    #[test]
    fn encoded_and_split_keys_are_found_and_noise_is_not() {
        let canary = Canary::new(KEY);
        assert_eq!(canary.find(KEY.as_bytes()), Some("raw"));
        let encoded = dsh_protocol::needles::base64(KEY.as_bytes());
        assert_eq!(
            canary.find(format!("x {encoded} y").as_bytes()),
            Some("base64")
        );
        for cut in 1..KEY.len() {
            let (head, tail) = KEY.split_at(cut);
            assert!(
                canary.find(format!("{head}\n...\n").as_bytes()).is_some()
                    || canary.find(format!("...{tail}").as_bytes()).is_some(),
                "the key cut at {cut}"
            );
        }
        assert_eq!(canary.find(b"sk-dsh-conformance- and 0123456789a"), None);
    }

    /// Each half base64-encoded on its own, the key reversed, in UTF-16 and gzip-compressed
    /// (issue 40 item 3): each is found, wherever the key is cut.
    #[test]
    fn halves_in_base64_reversed_utf16_and_gzip_forms_are_found() {
        use std::io::Write;
        let canary = Canary::new(KEY);
        for cut in 1..KEY.len() {
            let (head, tail) = KEY.split_at(cut);
            let halves = format!(
                "{}\n{}\n",
                dsh_protocol::needles::base64(head.as_bytes()),
                dsh_protocol::needles::base64(tail.as_bytes())
            );
            assert!(
                canary
                    .find(halves.as_bytes())
                    .is_some_and(|form| form.contains("base64")),
                "the halves cut at {cut}: {halves}"
            );
        }
        let reversed: String = KEY.chars().rev().collect();
        assert_eq!(
            canary.find(format!("[{reversed}]").as_bytes()),
            Some("reversed")
        );
        let utf16: Vec<u8> = KEY.encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert_eq!(canary.find(&utf16), Some("UTF-16LE"));
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gzip.write_all(format!("debug: key={KEY}\n").as_bytes())
            .unwrap();
        let mut output = b"starting\n".to_vec();
        output.extend(gzip.finish().unwrap());
        output.extend(b"\ndone\n");
        assert_eq!(canary.find(&output), Some("gzip-compressed"));
        let mut quiet = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        quiet.write_all(b"nothing to see").unwrap();
        assert_eq!(canary.find(&quiet.finish().unwrap()), None);
    }

    #[test]
    fn a_key_cut_across_reads_is_found_and_a_long_text_is_cut_at_its_bound() {
        let canary = Canary::new(KEY);
        let mut big = vec![b'.'; (1 << 20) - 10];
        big.extend_from_slice(KEY.as_bytes());
        let found = canary.find_in_reader(&mut &big[..], u64::MAX, far(), None);
        assert_eq!(found, (Some("raw"), None));
        let cut = canary.find_in_reader(&mut &big[..], 1024, far(), None);
        assert_eq!(cut, (None, Some(Cut::Bound)));
    }
}
