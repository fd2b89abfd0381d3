//! The session store's writes are atomic: concurrent writers and readers never see a partial
//! file, and a leftover temp file from a crash mid-write changes nothing.

use dsh_host::session_store::{CompatibilityKey, SessionMapping, SessionStore, RUNTIME_ID};

fn key(conversation: &str, model: &str) -> CompatibilityKey {
    CompatibilityKey {
        conversation_id: conversation.into(),
        project_id: "proj-1".into(),
        cwd: "/work/project".into(),
        runtime_id: RUNTIME_ID.into(),
        provider: "deepseek-official".into(),
        // A long member makes each write span many bytes, so a torn write would show.
        model: model.repeat(2000),
        executable: "/usr/local/bin/dsh".into(),
        version_family: "0.1".into(),
        profile: "open-design".into(),
        protocol_generation: 1,
        plugin_version: "0.1.0".into(),
        compatibility_generation: None,
    }
}

#[test]
fn concurrent_writes_never_expose_a_partial_mapping() {
    let temp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let store = SessionStore::new(temp.path());
    store
        .save(&SessionMapping {
            session_id: "od-0".into(),
            key: key("c1", "m"),
        })
        .unwrap_or_else(|e| panic!("save: {e}"));
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let store = store.clone();
            scope.spawn(move || {
                for round in 0..50 {
                    let mapping = SessionMapping {
                        session_id: format!("od-{writer}-{round}"),
                        key: key("c1", if writer % 2 == 0 { "a" } else { "b" }),
                    };
                    store.save(&mapping).unwrap_or_else(|e| panic!("save: {e}"));
                }
            });
        }
        let reader = store.clone();
        scope.spawn(move || {
            for _ in 0..400 {
                let lookup = reader.load("c1");
                assert!(
                    lookup.warning.is_none(),
                    "a reader saw a torn file: {:?}",
                    lookup.warning
                );
                assert!(lookup.mapping.is_some());
            }
        });
    });
    let leftovers: Vec<_> = std::fs::read_dir(store.dir())
        .map(|dir| dir.flatten().map(|entry| entry.file_name()).collect())
        .unwrap_or_default();
    assert_eq!(
        leftovers.len(),
        1,
        "only the mapping file remains: {leftovers:?}"
    );
}

#[test]
fn a_temp_file_left_by_a_crash_mid_write_is_ignored() {
    let temp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let store = SessionStore::new(temp.path());
    let mapping = SessionMapping {
        session_id: "od-1".into(),
        key: key("c1", "m"),
    };
    store.save(&mapping).unwrap_or_else(|e| panic!("save: {e}"));
    let target = store.file_of("c1");
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    std::fs::write(
        store.dir().join(format!(".{name}.99999-0.tmp")),
        b"{\"v\":1,\"session_id\":\"od-2",
    )
    .unwrap_or_else(|e| panic!("leftover: {e}"));
    assert_eq!(store.load("c1").mapping, Some(mapping));
}
