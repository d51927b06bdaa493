//! Pictures of a [`ModeGraph`]: the modes and the hand-over edges an approval follows, as
//! [Mermaid](https://mermaid.js.org/) (renders on code hosts) or Graphviz DOT text.
//!
//! The default mode is marked `default` (and drawn as a rounded stadium in Mermaid, with a double
//! border in DOT); planning modes, where `submit_plan` is offered, are marked `planning` (dashed);
//! a mode whose tool calls wait for the user is marked `approval: write_file` (the tools its
//! `requireApproval` lists, or `approval: every tool`); a mode that offers MCP tools is marked
//! `mcp: fs__read_text_file fs__*` (the `SERVER__TOOL` names and wildcards it lists).
//! Every hand-over edge of [`ModeGraph::transition_edges`] is drawn, labelled `plan approved`
//! (`plan approved (chosen)` for a target of a `transitionsTo` list other than the first).
//! A `metadata.color` in `#rgb` / `#rrggbb` form colours the node's border. Mode names are shown
//! through [`neutralize_line`]: a control or invisible character in a name shows as its escape.

use std::fmt::Write as _;

use crate::display::neutralize_line;
use crate::mode::{Mode, ModeGraph, ModeId, RequireApproval};

/// The text formats [`render`] can draw a mode graph in.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[strum(parse_err_ty = crate::names::UnknownName, parse_err_fn = crate::names::UnknownName::of::<Self>)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(inline, schema_with = "crate::names::schema::<DiagramFormat>")
)]
#[non_exhaustive]
pub enum DiagramFormat {
    /// A Mermaid `flowchart LR`, for Markdown on code hosts.
    #[default]
    Mermaid,
    /// A Graphviz `digraph`, for `dot -Tsvg`.
    Dot,
}

impl DiagramFormat {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Draws `graph` in `format`; see [`mermaid`] and [`dot`].
///
/// # Examples
/// ```
/// use agent_controller::diagram::{DiagramFormat, render};
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n[[modes]]\nid = \"build\"\n",
///     "modes.toml",
/// )?;
/// assert!(render(&graph, DiagramFormat::Dot).contains("\"plan\" -> \"build\""));
/// assert!(render(&graph, DiagramFormat::Mermaid).contains("mode_plan -->|plan approved| mode_build"));
///
/// let graph = agent_controller::config::parse(
///     "[[mcpServers]]\nid = \"fs\"\ncommand = \"mcp-fs\"\n[[modes]]\nid = \"build\"\navailableTools = [\"fs__*\", \"read_file\"]\n",
///     "modes.toml",
/// )?;
/// assert!(render(&graph, DiagramFormat::Dot).contains("mcp: fs__*"));
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
pub fn render(graph: &ModeGraph, format: DiagramFormat) -> String {
    match format {
        DiagramFormat::Mermaid => mermaid(graph),
        DiagramFormat::Dot => dot(graph),
    }
}

/// The marks a mode carries in a picture: `default`, `planning`, `approval: TOOLS` (or
/// `approval: every tool`) for a mode whose tool calls wait for the user (`requireApproval`),
/// and `mcp: NAMES` for the MCP tools (`SERVER__TOOL`, `SERVER__*`) its `availableTools` lists.
/// Tool names are shown through [`neutralize_line`].
fn marks(graph: &ModeGraph, id: ModeId) -> Vec<String> {
    let mut marks = Vec::new();
    if id == graph.default_mode_id() {
        marks.push("default".to_owned());
    }
    if graph.mode(id).is_planning() {
        marks.push("planning".to_owned());
    }
    match graph.mode(id).require_approval() {
        RequireApproval::None => {}
        RequireApproval::All => marks.push("approval: every tool".to_owned()),
        RequireApproval::Tools(tools) => {
            let names: Vec<String> = tools
                .iter()
                .map(|t| neutralize_line(t).into_owned())
                .collect();
            marks.push(format!("approval: {}", names.join(" ")));
        }
    }
    let mcp: Vec<String> = graph
        .mode(id)
        .available_tools()
        .unwrap_or_default()
        .iter()
        .filter(|t| graph.is_mcp_ref(t))
        .map(|t| neutralize_line(t).into_owned())
        .collect();
    if !mcp.is_empty() {
        marks.push(format!("mcp: {}", mcp.join(" ")));
    }
    marks
}

/// The label of an approval edge: `plan approved` to the plain approval's target,
/// `plan approved (chosen)` to a target the user may choose instead.
fn edge_label(graph: &ModeGraph, from: ModeId, to: ModeId) -> &'static str {
    if to == graph.transition_target(from) {
        "plan approved"
    } else {
        "plan approved (chosen)"
    }
}

/// A `metadata.color` that is safe to paste into a diagram: `#rgb` or `#rrggbb` only.
fn hex_color(mode: &Mode) -> Option<&str> {
    let color = mode.metadata().get("color")?.as_str()?;
    let digits = color.strip_prefix('#')?;
    ((digits.len() == 3 || digits.len() == 6) && digits.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(color)
}

/// Mermaid node ids: the mode id with a prefix, so ids such as `end` or `graph` (Mermaid
/// keywords) cannot break the chart. Mode ids are ASCII letters, digits, `-` and `_` already.
fn mermaid_id(mode: &Mode) -> String {
    format!("mode_{}", mode.id())
}

/// Label text for Mermaid: quotes and markup characters as entity codes.
fn mermaid_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '#' => out.push_str("#35;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Draws `graph` as a Mermaid flowchart, left to right.
///
/// Nodes are `mode_<id>` labelled `Name (id)` plus the marks; the default mode is a stadium with
/// the `defaultMode` class (thick border), others rounded boxes; planning modes get the
/// `planning` class (dashed border). Edges are the
/// approval hand-overs, in config order.
///
/// # Examples
/// ```
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\nname = \"Plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
///     "modes.toml",
/// )?;
/// let chart = agent_controller::diagram::mermaid(&graph);
/// assert!(chart.starts_with("flowchart LR\n"));
/// assert!(chart.contains(r#"mode_plan("Plan (plan)<br/><i>planning</i>")"#));
/// assert!(chart.contains(r#"mode_build(["build (build)<br/><i>default</i>"])"#));
/// assert!(chart.contains("class mode_build defaultMode\n"));
/// assert!(chart.contains("class mode_plan planning\n"));
/// assert!(chart.contains("mode_plan -->|plan approved| mode_build"));
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
pub fn mermaid(graph: &ModeGraph) -> String {
    let mut out = String::from("flowchart LR\n");
    for id in graph.ids() {
        let mode = graph.mode(id);
        let marks = marks(graph, id);
        let mut label = format!(
            "{} ({})",
            mermaid_text(&neutralize_line(mode.name())),
            mode.id()
        );
        if !marks.is_empty() {
            let marks: Vec<String> = marks.iter().map(|m| mermaid_text(m)).collect();
            let _ = write!(label, "<br/><i>{}</i>", marks.join(", "));
        }
        let (open, close) = if id == graph.default_mode_id() {
            ("([", "])")
        } else {
            ("(", ")")
        };
        let _ = writeln!(out, "    {}{open}\"{label}\"{close}", mermaid_id(mode));
    }
    for (from, to) in graph.transition_edges() {
        let label = edge_label(graph, from, to);
        let _ = writeln!(
            out,
            "    {} -->|{label}| {}",
            mermaid_id(graph.mode(from)),
            mermaid_id(graph.mode(to))
        );
    }
    out.push_str("    classDef defaultMode stroke-width:3px\n");
    out.push_str("    classDef planning stroke-dasharray:5 3\n");
    let _ = writeln!(
        out,
        "    class {} defaultMode",
        mermaid_id(graph.default_mode())
    );
    let planning: Vec<String> = graph
        .planning_modes()
        .map(|id| mermaid_id(graph.mode(id)))
        .collect();
    if !planning.is_empty() {
        let _ = writeln!(out, "    class {} planning", planning.join(","));
    }
    for mode in graph.modes() {
        if let Some(color) = hex_color(mode) {
            let _ = writeln!(out, "    style {} stroke:{color}", mermaid_id(mode));
        }
    }
    out
}

/// A DOT double-quoted string (quotes and backslashes escaped, line breaks as `\n`).
fn dot_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Draws `graph` as a Graphviz digraph, left to right.
///
/// Nodes are the mode ids, labelled `Name\n(id)` plus the marks; the default mode has a double
/// border, planning modes a dashed one.
///
/// # Examples
/// ```
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
///     "modes.toml",
/// )?;
/// let dot = agent_controller::diagram::dot(&graph);
/// assert!(dot.starts_with("digraph modes {\n"));
/// assert!(dot.contains(r#""build" [label="build\n(build)\ndefault", peripheries=2];"#));
/// assert!(dot.contains(r#""plan" -> "build" [label="plan approved"];"#));
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
pub fn dot(graph: &ModeGraph) -> String {
    let mut out =
        String::from("digraph modes {\n    rankdir=LR;\n    node [shape=box, style=rounded];\n");
    for id in graph.ids() {
        let mode = graph.mode(id);
        let marks = marks(graph, id);
        let mut label = format!("{}\n({})", neutralize_line(mode.name()), mode.id());
        if !marks.is_empty() {
            label.push('\n');
            label.push_str(&marks.join(", "));
        }
        let mut attrs = vec![format!("label={}", dot_string(&label))];
        if id == graph.default_mode_id() {
            attrs.push("peripheries=2".to_owned());
        }
        if mode.is_planning() {
            attrs.push("style=\"rounded,dashed\"".to_owned());
        }
        if let Some(color) = hex_color(mode) {
            attrs.push(format!("color={}", dot_string(color)));
        }
        let _ = writeln!(out, "    {} [{}];", dot_string(mode.id()), attrs.join(", "));
    }
    for (from, to) in graph.transition_edges() {
        let label = edge_label(graph, from, to);
        let _ = writeln!(
            out,
            "    {} -> {} [label={}];",
            dot_string(graph.mode(from).id()),
            dot_string(graph.mode(to).id()),
            dot_string(label)
        );
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mermaid_labels_cannot_break_out_of_their_quotes() {
        assert_eq!(
            mermaid_text(r#"a "b" <c> #d"#),
            "a #quot;b#quot; #lt;c#gt; #35;d"
        );
    }

    #[test]
    fn dot_strings_escape_quotes_and_backslashes() {
        assert_eq!(dot_string("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
    }
}
