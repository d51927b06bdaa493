//! The order in which a [`FileStore`](super::FileStore) first saved each workspace allowance.
//!
//! A workspace allowance is the file `allowances/<id>.json`, replaced whole when saved again,
//! so its file keeps no place in a list. Each id gets an empty marker `<n>-<id>` in
//! `.allowance-order/` the first time it is saved (`n` one more than the largest there), and
//! the listing goes by `n`, as SQLite and PostgreSQL go by the row's first insertion: one
//! order in every store, and so the same allowance credited first wherever a session runs.
//! An allowance saved before markers existed has none and comes first (by its `decidedAt`,
//! then id). A marker names no file to open: a hostile or broken one changes an order, never
//! what is allowed.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::path::Path;

/// The folder of the markers, in the store directory.
pub(super) const ORDER_DIR: &str = ".allowance-order";

/// Each allowance id's place: the smallest `n` of its markers in `dir` (none when `dir` is
/// missing or unreadable, or a name is not `<n>-<id>`).
pub(super) fn places(dir: &Path) -> HashMap<String, u64> {
    let mut places = HashMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return places;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((n, id)) = name.to_str().and_then(|name| name.split_once('-')) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        places
            .entry(id.to_owned())
            .and_modify(|m: &mut u64| *m = (*m).min(n))
            .or_insert(n);
    }
    places
}

/// Gives `id` the next place in `dir` unless it has one: creates `dir` if missing and the
/// marker with `create_new`. A marker that cannot be written leaves the allowance without a
/// place (listed first, by time), never unsaved.
pub(super) fn take_place(dir: &Path, id: &str) {
    if !super::real_dir(dir).unwrap_or(false) {
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                tracing::warn!(error = %e, "the allowance order folder is not created");
                return;
            }
        }
        if !super::real_dir(dir).unwrap_or(false) {
            return;
        }
    }
    let places = places(dir);
    if places.contains_key(id) {
        return;
    }
    let next = places.values().max().map_or(1, |n| n.saturating_add(1));
    if let Err(e) = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(format!("{next}-{id}")))
    {
        tracing::warn!(error = %e, "an allowance's place in the order is not kept");
    }
}

/// Forgets every place of `id` in `dir` (after its revoke).
pub(super) fn drop_place(dir: &Path, id: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name
            .to_str()
            .and_then(|name| name.split_once('-'))
            .is_some_and(|(n, marked)| marked == id && n.parse::<u64>().is_ok())
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
