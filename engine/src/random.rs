//! Random tokens (a case's token, canary keys, temp names), as lowercase hex.

/// `bytes` random bytes from the OS, as lowercase hex.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(std::io::Error::other)?;
    Ok(hex(&buffer))
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random UUID v4.
pub fn random_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}
