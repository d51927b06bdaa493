//! The docs that list what the crate has stay true to it (issue 36, item 16): the feature
//! tables of `src/lib.rs` and the README against `Cargo.toml`'s features, and the guide's page
//! lists (`src/guide.rs`, the crate docs in `src/lib.rs`, the README) against the pages in
//! `src/guide/`.

use std::collections::BTreeSet;
use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).expect(rel)
}

/// `Cargo.toml`'s features (without `default`), each with the features of this crate it turns
/// on.
fn features() -> Vec<(String, BTreeSet<String>)> {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml");
    let table = manifest["features"].as_table().expect("[features]");
    table
        .iter()
        .filter(|(name, _)| *name != "default")
        .map(|(name, enables)| {
            let enables = enables
                .as_array()
                .expect("a list")
                .iter()
                .filter_map(|e| e.as_str())
                .filter(|e| table.contains_key(*e))
                .map(str::to_owned)
                .collect();
            (name.clone(), enables)
        })
        .collect()
}

/// The rows of the feature table in `text` (lines starting with `prefix` then `|`): each
/// feature named at the start of a row, with the rest of the row.
fn feature_rows(text: &str, prefix: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.strip_prefix(prefix))
        .filter_map(|row| row.trim_start().strip_prefix("| `"))
        .filter_map(|row| row.split_once('`'))
        .map(|(name, rest)| (name.to_owned(), rest.to_owned()))
        .collect()
}

fn check_feature_table(doc: &str, rows: &[(String, String)]) {
    let documented: BTreeSet<&str> = rows.iter().map(|(name, _)| name.as_str()).collect();
    let features = features();
    let defined: BTreeSet<&str> = features.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        documented, defined,
        "{doc}: the feature table against Cargo.toml"
    );
    for (name, enables) in &features {
        let (_, row) = rows.iter().find(|(n, _)| n == name).expect("documented");
        // The rest of the row, before the next column of figures (the README's last column).
        for enabled in enables {
            assert!(
                row.contains(&format!("`{enabled}`")),
                "{doc}: the row of `{name}` does not name `{enabled}`, which it turns on: {row}"
            );
        }
    }
}

#[test]
fn the_feature_tables_list_every_feature_and_what_it_turns_on() {
    check_feature_table("src/lib.rs", &feature_rows(&read("src/lib.rs"), "//!"));
    check_feature_table("README.md", &feature_rows(&read("README.md"), ""));
}

/// The pages in `src/guide/`, by name (`contract` for `contract.md`).
fn guide_pages() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/guide");
    std::fs::read_dir(&dir)
        .expect("src/guide")
        .filter_map(|entry| {
            let name = entry.expect("entry").file_name();
            name.to_str()?.strip_suffix(".md").map(str::to_owned)
        })
        .collect()
}

#[test]
fn every_guide_page_is_listed_where_the_guide_is_listed() {
    let pages = guide_pages();
    assert!(pages.contains("contract"), "{pages:?}");
    let guide = read("src/guide.rs");
    let lib = read("src/lib.rs");
    let readme = read("README.md");
    for page in &pages {
        assert!(
            guide.contains(&format!("include_str!(\"guide/{page}.md\")")),
            "src/guide.rs does not include the page `{page}`"
        );
        assert!(
            guide.contains(&format!("- [`{page}`]")),
            "src/guide.rs's list of pages misses `{page}`"
        );
        assert!(
            lib.contains(&format!("(guide::{page})")),
            "the crate docs' list of guide pages (src/lib.rs) misses `{page}`"
        );
        assert!(
            readme.contains(&format!("/guide/{page}/index.html")),
            "the README's table of guide pages misses `{page}`"
        );
    }
}
