//! A fast reader for the shape mode configs are written in: top-level `defaultModeId` and
//! `plansDir`, then `[[modes]]` tables of strings, booleans and arrays of strings, each with an
//! optional `[modes.metadata]` table of strings and booleans, with comments.
//!
//! The full TOML parser builds a document tree before serde walks it, which costs about 7 ms per
//! 1,000 modes. This reader makes the same [`RawConfig`] (values and spans) in one pass. It is
//! conservative: anything outside the subset, and anything the full parser would reject or read
//! differently (an unknown key, a duplicate key, a wrong type, a missing `id`, CRLF line ends, an
//! escape other than the common ones, a nested table or a number in metadata, ...), makes it
//! return `None`,
//! and the full parser then reads the text and reports its errors exactly as before. The unit
//! tests check that both readers agree, spans included, on every fixture and on generated
//! configs.

use std::borrow::Cow;

use toml::Spanned;

use super::{RawConfig, RawMode};

/// Reads `text` when it stays inside the subset; `None` hands it to the full TOML parser.
pub(super) fn parse(text: &str) -> Option<RawConfig<'_>> {
    // CR (CRLF files) and a byte-order mark are left to the full parser.
    if text.as_bytes().contains(&b'\r') || text.starts_with('\u{feff}') {
        return None;
    }
    Reader { text, pos: 0 }.document()
}

/// A string value: borrowed from the text unless it has escapes.
type Str<'a> = Spanned<Cow<'a, str>>;

/// The value of one `key = value` line.
enum Value<'a> {
    Str(Str<'a>),
    Bool(Spanned<bool>),
    Strings(Spanned<Vec<Str<'a>>>),
}

impl<'a> Value<'a> {
    fn string(self) -> Option<Str<'a>> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    fn owned_string(self) -> Option<String> {
        self.string().map(|s| s.into_inner().into_owned())
    }
}

/// A `[[modes]]` table being read: every field optional until the table ends.
#[derive(Default)]
struct ModeFields<'a> {
    id: Option<Str<'a>>,
    name: Option<String>,
    description: Option<String>,
    instructions: Option<String>,
    default: Option<Spanned<bool>>,
    transitions_to: Option<Str<'a>>,
    available_tools: Option<Spanned<Vec<Str<'a>>>>,
    default_model_id: Option<String>,
    metadata: Option<toml::Table>,
}

impl<'a> ModeFields<'a> {
    /// Sets one key; `None` for an unknown key, a wrong type or a key set twice.
    fn set(&mut self, key: &str, value: Value<'a>) -> Option<()> {
        fn once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
            if slot.is_some() {
                return None;
            }
            *slot = Some(value?);
            Some(())
        }
        match key {
            "id" => once(&mut self.id, value.string()),
            "name" => once(&mut self.name, value.owned_string()),
            "description" => once(&mut self.description, value.owned_string()),
            "instructions" => once(&mut self.instructions, value.owned_string()),
            "default" => once(
                &mut self.default,
                match value {
                    Value::Bool(b) => Some(b),
                    _ => None,
                },
            ),
            "transitionsTo" => once(&mut self.transitions_to, value.string()),
            "availableTools" => once(
                &mut self.available_tools,
                match value {
                    Value::Strings(list) => Some(list),
                    _ => None,
                },
            ),
            "defaultModelId" => once(&mut self.default_model_id, value.owned_string()),
            _ => None,
        }
    }

    fn finish(self) -> Option<RawMode<'a>> {
        Some(RawMode {
            id: self.id?,
            name: self.name,
            description: self.description,
            instructions: self.instructions,
            default: self.default,
            transitions_to: self.transitions_to,
            available_tools: self.available_tools,
            default_model_id: self.default_model_id,
            metadata: self.metadata,
        })
    }
}

struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn rest(&self) -> &[u8] {
        &self.text.as_bytes()[self.pos..]
    }

    /// Steps over the line end at `pos`.
    fn newline(&mut self) {
        self.pos += 1;
    }

    /// Steps over bytes for which `keep` holds; returns the first other byte (`None` at the end).
    fn scan(&mut self, keep: impl Fn(u8) -> bool) -> Option<u8> {
        let bytes = &self.text.as_bytes()[self.pos..];
        let n = bytes.iter().position(|&b| !keep(b)).unwrap_or(bytes.len());
        self.pos += n;
        bytes.get(n).copied()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// Skips a comment up to (not including) its line end; control characters make it fail.
    fn comment(&mut self) -> Option<()> {
        match self.scan(|b| !is_control(b)) {
            None | Some(b'\n') => Some(()),
            Some(_) => None,
        }
    }

    /// After a value or header: blanks, an optional comment, then a line end (consumed) or the end.
    fn end_of_line(&mut self) -> Option<()> {
        self.skip_blanks();
        if self.peek() == Some(b'#') {
            self.comment()?;
        }
        match self.peek() {
            None => Some(()),
            Some(b'\n') => {
                self.newline();
                Some(())
            }
            Some(_) => None,
        }
    }

    fn document(mut self) -> Option<RawConfig<'a>> {
        let mut config = RawConfig {
            default_mode_id: None,
            plans_dir: None,
            modes: Vec::new(),
        };
        let mut mode: Option<ModeFields<'a>> = None;
        // Whether the keys being read belong to the current mode's `[modes.metadata]`.
        let mut in_metadata = false;
        loop {
            self.skip_blanks();
            match self.peek() {
                None => break,
                Some(b'\n') => self.newline(),
                Some(b'#') => self.comment()?,
                Some(b'[') if self.rest().starts_with(b"[[modes]]") => {
                    self.pos += "[[modes]]".len();
                    self.end_of_line()?;
                    if let Some(done) = mode.replace(ModeFields::default()) {
                        config.modes.push(done.finish()?);
                    }
                    in_metadata = false;
                }
                Some(b'[') if self.rest().starts_with(b"[modes.metadata]") => {
                    self.pos += "[modes.metadata]".len();
                    self.end_of_line()?;
                    // Only once per mode, and only after a `[[modes]]` header.
                    let fields = mode.as_mut()?;
                    if fields.metadata.is_some() {
                        return None;
                    }
                    fields.metadata = Some(toml::Table::new());
                    in_metadata = true;
                }
                Some(b'[') => return None,
                Some(_) if in_metadata => {
                    let key = self.bare_key()?;
                    self.skip_blanks();
                    if self.peek() != Some(b'=') {
                        return None;
                    }
                    self.pos += 1;
                    self.skip_blanks();
                    let value = match self.value()? {
                        Value::Str(s) => toml::Value::String(s.into_inner().into_owned()),
                        Value::Bool(b) => toml::Value::Boolean(b.into_inner()),
                        Value::Strings(_) => return None,
                    };
                    self.end_of_line()?;
                    let table = mode.as_mut()?.metadata.as_mut()?;
                    if table.insert(key.to_owned(), value).is_some() {
                        return None;
                    }
                }
                Some(_) => {
                    let key = self.bare_key()?;
                    self.skip_blanks();
                    if self.peek() != Some(b'=') {
                        return None;
                    }
                    self.pos += 1;
                    self.skip_blanks();
                    let value = self.value()?;
                    self.end_of_line()?;
                    match &mut mode {
                        Some(fields) => fields.set(key, value)?,
                        None => match key {
                            "defaultModeId" if config.default_mode_id.is_none() => {
                                config.default_mode_id = Some(value.string()?);
                            }
                            "plansDir" if config.plans_dir.is_none() => {
                                config.plans_dir = Some(value.owned_string()?);
                            }
                            _ => return None,
                        },
                    }
                }
            }
        }
        if let Some(done) = mode {
            config.modes.push(done.finish()?);
        }
        Some(config)
    }

    /// A bare key (`A-Za-z0-9_-`); quoted and dotted keys are left to the full parser.
    fn bare_key(&mut self) -> Option<&'a str> {
        let start = self.pos;
        self.scan(is_bare_key_byte);
        if self.pos == start {
            return None;
        }
        let end = self.pos;
        self.skip_blanks();
        if self.peek() == Some(b'.') {
            return None;
        }
        Some(&self.text[start..end])
    }

    fn value(&mut self) -> Option<Value<'a>> {
        let start = self.pos;
        match self.peek()? {
            b'"' | b'\'' => self.string().map(Value::Str),
            b'[' => self.strings().map(Value::Strings),
            b't' | b'f' => {
                let value = if self.rest().starts_with(b"true") {
                    true
                } else if self.rest().starts_with(b"false") {
                    false
                } else {
                    return None;
                };
                self.pos += if value { 4 } else { 5 };
                // `trueish` is not a boolean.
                if matches!(self.peek(), Some(b) if b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    return None;
                }
                Some(Value::Bool(Spanned::new(start..self.pos, value)))
            }
            _ => None,
        }
    }

    /// An array of strings, with line ends, comments and a trailing comma allowed.
    fn strings(&mut self) -> Option<Spanned<Vec<Str<'a>>>> {
        let start = self.pos;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_array_space()?;
            if self.peek()? == b']' {
                break;
            }
            items.push(self.string()?);
            self.skip_array_space()?;
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => break,
                _ => return None,
            }
        }
        self.pos += 1;
        Some(Spanned::new(start..self.pos, items))
    }

    fn skip_array_space(&mut self) -> Option<()> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => self.pos += 1,
                Some(b'\n') => self.newline(),
                Some(b'#') => self.comment()?,
                _ => return Some(()),
            }
        }
    }

    /// A basic (`"..."`), multi-line basic (`"""..."""`) or literal (`'...'`) string.
    fn string(&mut self) -> Option<Str<'a>> {
        let start = self.pos;
        let value = if self.rest().starts_with(b"\"\"\"") {
            self.pos += 3;
            // A line end right after the opening quotes is not part of the string.
            if self.peek() == Some(b'\n') {
                self.newline();
            }
            self.basic_body(true)?
        } else if self.rest().starts_with(b"'''") {
            return None;
        } else if self.peek() == Some(b'\'') {
            self.pos += 1;
            let body = self.pos;
            if self.scan(|b| b != b'\'' && !is_control(b))? != b'\'' {
                return None;
            }
            let value = Cow::Borrowed(&self.text[body..self.pos]);
            self.pos += 1;
            value
        } else if self.peek() == Some(b'"') {
            self.pos += 1;
            self.basic_body(false)?
        } else {
            return None;
        };
        Some(Spanned::new(start..self.pos, value))
    }

    /// The body of a basic string after its opening quotes, up to and past the closing ones;
    /// borrowed from the text when it has no escapes.
    fn basic_body(&mut self, multi_line: bool) -> Option<Cow<'a, str>> {
        let text = self.text;
        let start = self.pos;
        // Set at the first escape: the text up to there, then every byte from `run` on.
        let mut owned: Option<String> = None;
        let mut run = self.pos;
        loop {
            self.pos += plain_run(&text.as_bytes()[self.pos..]);
            match self.peek()? {
                b'"' => {
                    let closing = if multi_line {
                        if !self.rest().starts_with(b"\"\"\"") {
                            self.pos += 1;
                            continue;
                        }
                        // Quotes right before the closing ones belong to the string: leave
                        // that case to the full parser.
                        if self.rest().get(3) == Some(&b'"') {
                            return None;
                        }
                        3
                    } else {
                        1
                    };
                    let end = self.pos;
                    self.pos += closing;
                    return Some(match owned {
                        None => Cow::Borrowed(&text[start..end]),
                        Some(mut value) => {
                            value.push_str(&text[run..end]);
                            Cow::Owned(value)
                        }
                    });
                }
                b'\\' => {
                    let value = owned.get_or_insert_with(String::new);
                    value.push_str(&text[run..self.pos]);
                    self.escape(value)?;
                    run = self.pos;
                }
                b'\n' if multi_line => self.newline(),
                _ => return None,
            }
        }
    }

    /// One escape sequence at `\`; only the common ones (others go to the full parser).
    fn escape(&mut self, out: &mut String) -> Option<()> {
        let code = *self.rest().get(1)?;
        self.pos += 2;
        let c = match code {
            b'"' => '"',
            b'\\' => '\\',
            b'n' => '\n',
            b't' => '\t',
            b'r' => '\r',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'u' | b'U' => {
                let len = if code == b'u' { 4 } else { 8 };
                let hex = self.text.get(self.pos..self.pos + len)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                self.pos += len;
                char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
            }
            _ => return None,
        };
        out.push(c);
        Some(())
    }
}

/// Control characters TOML allows in neither strings nor comments (tab is allowed).
fn is_bare_key_byte(b: u8) -> bool {
    matches!(b, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-')
}

fn is_control(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// Bytes a basic string holds as they are: not a quote, a backslash or a control character.
fn is_plain(b: u8) -> bool {
    b != b'"' && b != b'\\' && !is_control(b)
}

/// How many bytes at the start of `bytes` are [plain](is_plain). Strings are most of a config's
/// text, so this looks at eight bytes at a time while none of them can be special (a quote, a
/// backslash, DEL, or a byte below 0x20; a tab also stops the fast loop, then the byte loop
/// takes it as plain).
fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Non-zero when some byte of `x` is zero (exact for "some", as the classic bit trick is).
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut plain = 0;
    for chunk in bytes.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let special = has_zero(w ^ (ONES * u64::from(b'"')))
            | has_zero(w ^ (ONES * u64::from(b'\\')))
            | has_zero(w ^ (ONES * 0x7f))
            // Some byte below 0x20 (bytes of 0x80 and above never match).
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH);
        if special != 0 {
            break;
        }
        plain += 8;
    }
    plain
        + bytes[plain..]
            .iter()
            .position(|&b| !is_plain(b))
            .unwrap_or(bytes.len() - plain)
}

/// The spans a config's fields carry, for comparing both readers.
#[cfg(test)]
pub(super) fn spans(config: &RawConfig<'_>) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    if let Some(d) = &config.default_mode_id {
        spans.push(d.span());
    }
    for mode in &config.modes {
        spans.push(mode.id.span());
        if let Some(d) = &mode.default {
            spans.push(d.span());
        }
        if let Some(t) = &mode.transitions_to {
            spans.push(t.span());
        }
        if let Some(list) = &mode.available_tools {
            spans.push(list.span());
            spans.extend(list.get_ref().iter().map(Spanned::span));
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both readers agree whenever the fast one reads the text: same values, same spans.
    fn agree(text: &str) -> bool {
        let Some(fast) = parse(text) else {
            return false;
        };
        let full: RawConfig<'_> = match toml::from_str(text) {
            Ok(full) => full,
            Err(e) => panic!("the fast reader accepted text the full parser rejects: {e}\n{text}"),
        };
        assert_eq!(format!("{fast:?}"), format!("{full:?}"), "values\n{text}");
        assert_eq!(spans(&fast), spans(&full), "spans\n{text}");
        true
    }

    /// What a parse decides, in a comparable form: the modes, the default, the plans directory,
    /// and every tool reference as the error it would become (location and snippet).
    fn view(graph: Result<crate::ModeGraph, crate::ConfigError>) -> Result<String, String> {
        graph
            .map(|g| {
                format!(
                    "{:?} {:?} {:?} {:?}",
                    g.modes(),
                    g.default_mode_id(),
                    g.plans_dir(),
                    g.unknown_tools(|_| false)
                )
            })
            .map_err(|e| format!("{e:?}"))
    }

    fn same_result(text: &str) -> Result<String, String> {
        view(super::super::parse(text, "gen.toml"))
    }

    fn same_result_with_toml(text: &str) -> Result<String, String> {
        view(super::super::parse_with_toml(text, "gen.toml"))
    }

    fn fixtures() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("config/modes.toml")];
        for dir in [
            "tests/fixtures/configs/valid",
            "tests/fixtures/configs/invalid",
        ] {
            for entry in std::fs::read_dir(root.join(dir)).expect("fixtures") {
                files.push(entry.expect("entry").path());
            }
        }
        files
            .into_iter()
            .map(|p| {
                let text = std::fs::read_to_string(&p).expect("read fixture");
                (p.display().to_string(), text)
            })
            .collect()
    }

    #[test]
    fn both_readers_agree_on_every_fixture() {
        let mut read = 0;
        for (name, text) in fixtures() {
            assert_eq!(same_result(&text), same_result_with_toml(&text), "{name}");
            if agree(&text) {
                read += 1;
            } else {
                // The full parser gets it; fine, but the shipped config must take the fast path.
                assert!(!name.ends_with("config/modes.toml"), "{name}");
            }
        }
        assert!(read >= 10, "the fast reader reads most fixtures ({read})");
    }

    #[test]
    fn plain_runs_stop_at_the_first_special_byte() {
        let text = "abcdefghijklmnopqrstuvwxyz é 計画 0123456789";
        for special in ["\"", "\\", "\u{7f}", "\u{1}", "\n", "\t"] {
            for at in 0..text.len() {
                if !text.is_char_boundary(at) {
                    continue;
                }
                let probe = format!("{}{special}{}", &text[..at], &text[at..]);
                let expected = probe
                    .bytes()
                    .position(|b| !is_plain(b))
                    .unwrap_or(probe.len());
                assert_eq!(plain_run(probe.as_bytes()), expected, "{probe:?}");
            }
        }
        assert_eq!(plain_run(text.as_bytes()), text.len());
    }

    #[test]
    fn the_subset_is_read_exactly() {
        for text in [
            "",
            "# only a comment\n",
            "defaultModeId = \"b\" # trailing\nplansDir='plans'\n[[modes]]\nid = \"b\"\n",
            "[[modes]] # header comment\nid=\"a\"\ndefault=true\n[[modes]]\nid = 'b'\ndefault = false\n",
            "[[modes]]\nid = \"a\"\navailableTools = []\n",
            "[[modes]]\nid = \"a\"\n[modes.metadata]\ncolor = \"#3b82f6\" # blue\nshown = true\n\n[[modes]]\nid = \"b\"\n",
            "[[modes]]\nid = \"a\"\n[modes.metadata]\n",
            "[[modes]]\nid = \"a\"\navailableTools = [ \"x\" , 'y', ]\n",
            "[[modes]]\nid = \"a\"\navailableTools = [\n  \"x\", # why\n  # own line\n  \"y\"\n]\n",
            "[[modes]]\nid = \"a\"\ninstructions = \"\"\"\nline one\nline \"two\" \\\"q\\\"\n\"\"\"\n",
            "[[modes]]\nid = \"a\"\ninstructions = \"\"\"no leading newline\"\"\"\n",
            "[[modes]]\nid = \"a\"\nname = \"tab\\there \\u00e9 \\U0001F600 \\\\ \\n\"\n",
            "[[modes]]\nid = \"計画\"\nname = \"ünïcödé 計画\"\ndescription = 'lit \\n eral'\n",
            "\t [[modes]]\n\tid\t=\t\"a\"\t\n\n\n",
        ] {
            assert!(agree(text), "the fast reader reads\n{text}");
        }
    }

    #[test]
    fn everything_else_goes_to_the_full_parser() {
        for text in [
            "[[modes]]\r\nid = \"a\"\r\n",
            "\u{feff}[[modes]]\nid = \"a\"\n",
            "[modes.metadata]\ncolor = \"red\"\n",
            "[[modes]]\nid = \"a\"\n[modes.metadata]\ncolor = \"red\"\n[modes.metadata]\n",
            "[[modes]]\nid = \"a\"\n[modes.metadata]\nsize = 3\n",
            "[[modes]]\nid = \"a\"\n[modes.metadata]\ntags = [\"x\"]\n",
            "[[modes]]\nid = \"a\"\n[modes.metadata]\na = \"x\"\na = \"y\"\n",
            "[[modes]]\nid = \"a\"\n[modes.metadata.icons]\nsmall = \"x\"\n",
            "[[modes]]\nid = \"a\"\n[modes.metadata]\nicon.small = \"x\"\n",
            "[[ modes ]]\nid = \"a\"\n",
            "[[modes]]\nid = \"a\"\nid = \"b\"\n",
            "[[modes]]\nname = \"no id\"\n",
            "[[modes]]\nid = 1\n",
            "[[modes]]\nid = \"a\"\ndefault = \"yes\"\n",
            "[[modes]]\nid = \"a\"\ndefault = trueish\n",
            "[[modes]]\nid = \"a\"\ntransitionTo = \"b\"\n",
            "[[modes]]\n\"id\" = \"a\"\n",
            "[[modes]]\nmode.id = \"a\"\n",
            "[[modes]]\nid = \"a\" trailing\n",
            "[[modes]]\nid = \"a\nb\"\n",
            "[[modes]]\nid = \"\\e\"\n",
            "[[modes]]\nid = \"\\x41\"\n",
            "[[modes]]\nid = \"a\"\ninstructions = \"\"\"ends with quote\"\"\"\"\n",
            "[[modes]]\nid = \"a\"\ninstructions = '''literal'''\n",
            "[[modes]]\nid = \"a\"\ninstructions = \"\"\"line \\\n  joined\"\"\"\n",
            "[[modes]]\nid = \"a\"\navailableTools = [\"x\", 1]\n",
            "[[modes]]\nid = \"a\"\navailableTools = [\"x\",é \"y\"]\n",
            "[[modes]]\nid = \"a\"\navailableTools = [é]\n",
            "[[modes]]\nid = é\"a\"\n",
            "[[modes]]\nid = \"a\"\navailableTools = \"x\"\n",
            "[[modes]]\nid = \"a\"\nmetadata = { color = \"red\" }\n",
            "defaultModeId = \"a\"\ndefaultModeId = \"a\"\n[[modes]]\nid = \"a\"\n",
            "[[modes]]\nid = \"a\"\nplansDir = \"x\"\n",
            "[[modes]]\nid = \"a\" # bell \u{7}\n",
            "[[modes]]\nid = \"unterminated\n",
            "[[modes]]\nid = \"a\"\navailableTools = [\"x\"\n",
        ] {
            assert!(parse(text).is_none(), "the full parser reads\n{text:?}");
        }
    }

    /// Pieces configs are made of, valid and not, so generated texts hit both readers' edges.
    fn piece() -> impl Strategy<Value = String> {
        let string = prop_oneof![
            "[a-zA-Z0-9_ -]{0,8}".prop_map(|s| format!("\"{s}\"")),
            "[a-z ]{0,6}".prop_map(|s| format!("'{s}'")),
            Just("\"esc \\\" \\\\ \\t \\u00e9\"".to_owned()),
            Just("\"\"\"\nmulti\nline\n\"\"\"".to_owned()),
            Just("\"\"\"x\"\"\"".to_owned()),
            Just("\"bad \\q\"".to_owned()),
            Just("'''lit'''".to_owned()),
        ];
        let key = prop_oneof![
            Just("id"),
            Just("name"),
            Just("description"),
            Just("instructions"),
            Just("transitionsTo"),
            Just("defaultModelId"),
            Just("defaultModeId"),
            Just("plansDir"),
            Just("bogus"),
        ];
        prop_oneof![
            Just("[[modes]]".to_owned()),
            Just("[[modes]] # c".to_owned()),
            Just("[modes.metadata]".to_owned()),
            Just("# comment".to_owned()),
            Just(String::new()),
            (key, string.clone()).prop_map(|(k, v)| format!("{k} = {v}")),
            ("[a-z]{1,3}", string.clone()).prop_map(|(k, v)| format!("id = \"{k}\"  # {v}")),
            prop::bool::ANY.prop_map(|b| format!("default = {b}")),
            Just("default = 1".to_owned()),
            prop::collection::vec(string, 0..4)
                .prop_map(|items| format!("availableTools = [{}]", items.join(",\n  "))),
        ]
    }

    fn string_value() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-zA-Z0-9_ é-]{0,10}".prop_map(|s| format!("\"{s}\"")),
            1 => "[a-z .#]{0,8}".prop_map(|s| format!("'{s}'")),
            1 => Just("\"q \\\" b \\\\ t \\t n \\n u \\u00e9 U \\U0001F600\"".to_owned()),
            1 => "([a-z ]{1,3}\"{0,2}){0,4}".prop_map(|s| format!("\"\"\"\n{s}\nend\n\"\"\"")),
            1 => "[a-z ]{0,12}".prop_map(|s| format!("\"\"\"{s}\"\"\"")),
        ]
    }

    /// A mode table: `id` and a random subset of the other keys, in random order, with random
    /// spacing, comments and blank lines: mostly inside the subset.
    fn mode_table() -> impl Strategy<Value = String> {
        let keys = [
            "name",
            "description",
            "instructions",
            "default",
            "transitionsTo",
            "availableTools",
            "defaultModelId",
        ];
        let entry = (
            0..keys.len(),
            string_value(),
            prop::bool::ANY,
            prop::collection::vec(string_value(), 0..4),
            0..3usize,
        );
        (
            "[a-z]{1,4}",
            prop::collection::vec(entry, 0..7),
            prop::bool::ANY,
        )
            .prop_map(move |(id, entries, comment)| {
                let mut text = String::from(if comment {
                    "[[modes]] # mode\n"
                } else {
                    "[[modes]]\n"
                });
                text.push_str(&format!("id = \"{id}\"\n"));
                let mut seen = [false; 7];
                for (k, string, flag, list, style) in entries {
                    if std::mem::replace(&mut seen[k], true) {
                        continue;
                    }
                    let value = match keys[k] {
                        "default" => flag.to_string(),
                        "availableTools" => format!(
                            "[{}]",
                            list.join(if style == 1 { ",\n  # c\n  " } else { ", " })
                        ),
                        _ => string,
                    };
                    let eq = ["=", " = ", "\t=  "][style];
                    text.push_str(&format!(
                        "{}{eq}{value}{}\n",
                        keys[k],
                        if style == 2 { " # note" } else { "" }
                    ));
                    if style == 1 {
                        text.push('\n');
                    }
                }
                if comment {
                    text.push_str("[modes.metadata]\ncolor = \"#3b82f6\"\nshown = true\n");
                }
                text
            })
    }

    proptest! {
        #[test]
        fn both_readers_agree_on_generated_subset_configs(
            top in prop::option::of(string_value()),
            modes in prop::collection::vec(mode_table(), 0..5),
        ) {
            let mut text = top.map(|t| format!("defaultModeId = {t}\n\n")).unwrap_or_default();
            text.push_str(&modes.join("\n"));
            prop_assert!(agree(&text), "the fast reader reads generated subset configs\n{}", text);
            prop_assert_eq!(same_result(&text), same_result_with_toml(&text));
        }

        /// The shipped config with one character inserted, deleted or replaced anywhere: the
        /// fast reader never panics, and the result (graph or first error) is the toml path's.
        #[test]
        fn both_readers_agree_on_mangled_configs(
            at in 0usize..1000,
            edit in 0u8..3,
            c in prop_oneof![Just('"'), Just('\''), Just('['), Just(']'), Just(','), Just('\n'),
                Just('#'), Just('='), Just('\\'), Just('é'), Just(' '), Just('x'), Just('\t')],
        ) {
            let shipped = include_str!("../../config/modes.toml");
            let mut chars: Vec<char> = shipped.chars().collect();
            let at = at % (chars.len() + 1);
            match edit {
                0 => chars.insert(at, c),
                1 if at < chars.len() => { chars.remove(at); }
                _ if at < chars.len() => chars[at] = c,
                _ => chars.push(c),
            }
            let text: String = chars.into_iter().collect();
            if parse(&text).is_some() {
                agree(&text);
            }
            prop_assert_eq!(same_result(&text), same_result_with_toml(&text));
        }

        #[test]
        fn both_readers_agree_on_generated_configs(lines in prop::collection::vec(piece(), 0..16)) {
            let text = lines.join("\n");
            agree(&text);
            // Whatever either reader makes of it, the config parse result is the same.
            prop_assert_eq!(same_result(&text), same_result_with_toml(&text));
        }
    }
}
