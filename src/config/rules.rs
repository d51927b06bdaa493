//! A mode's `rules` list as written, and its checks: what [`crate::rules`] evaluates comes out
//! of here only valid (each rule one kind, its pattern compiled, its tool offered, none that can
//! never decide).

use std::ops::Range;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::{ConfigError, ConfigErrorKind, Location, Owner, Source, did_you_mean, listed};
use crate::mode::ModeGraph;
use crate::rules::RulePlace;
use crate::rules::{DEFAULT_PATH_ARG, Glob, Matcher, Pattern, Rule, RuleAction, Rules};
use crate::tool::{SUBMIT_PLAN, ToolRegistry};

/// One rule as written: `{ tool = "write_file", path = "src/**", action = "allow" }`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(
    feature = "schema",
    schemars(
        rename = "Rule",
        extend("dependencies" = { "glob": ["arg"], "regex": ["arg"] })
    )
)]
pub(super) struct RawRule {
    /// The tool whose calls the rule is on; the mode must offer it.
    #[cfg_attr(feature = "schema", schemars(with = "String", length(min = 1)))]
    tool: Spanned<String>,
    /// The argument the rule reads: with `glob` or `regex`, its canonical value (a string as it
    /// is, another value as its RFC 8785 text); with `path`, the path it holds (default `path`).
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>", length(min = 1)))]
    arg: Option<Spanned<String>>,
    /// A glob the path argument must fit as the workspace jail resolved it (`.`, `..` and
    /// symlinks applied): `*` and `?` within one folder, `**` across folders.
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    path: Option<Spanned<String>>,
    /// A glob the argument's canonical value must fit, whole (`*` matches any text).
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    glob: Option<Spanned<String>>,
    /// A regex the argument's canonical value must match, whole (anchored at both ends).
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    regex: Option<Spanned<String>>,
    /// What a matching call gets: `allow` (runs), `ask` (waits for the user) or `deny` (is
    /// refused, and the model told why). Of the rules that match, `deny` beats `ask`, which
    /// beats `allow`; `availableTools` outranks them all.
    #[cfg_attr(feature = "schema", schemars(with = "RuleAction"))]
    action: Spanned<RuleAction>,
    /// Negates the pattern: the rule matches the calls whose value does *not* fit it (`path =
    /// "src/**"` with `not = true`: every path outside `src/`). A path in doubt still matches
    /// a `deny` or `ask` rule and no `allow` rule. Needs a pattern.
    #[cfg_attr(feature = "schema", schemars(with = "Option<bool>"))]
    not: Option<Spanned<bool>>,
    /// With `action = "ask"`: how many approvals by distinct people a call the rule holds
    /// needs before it runs (1 to 16; default 1, or the mode's `approvers` when higher). A
    /// rejection by any one of them rejects.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<u8>", range(min = 1, max = 16))
    )]
    approvers: Option<Spanned<i64>>,
}

/// The rules of `owner` (which offers `offered`, `None`: every tool), each checked; errors go
/// to `errors` and the rule in error is left out. A subagent type's `allow` rule is an error.
pub(super) fn rules_of(
    raw: Option<Spanned<Vec<Spanned<RawRule>>>>,
    owner: Owner<'_>,
    offered: Option<&[Arc<str>]>,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> Rules {
    let Some(raw) = raw else {
        return Rules::default();
    };
    let named = owner.to_string();
    let id = named.as_str();
    let mut rules: Vec<(usize, Range<usize>, Rule)> = Vec::new();
    for (i, entry) in raw.into_inner().into_iter().enumerate() {
        let number = i + 1;
        let span = entry.span();
        let raw = entry.into_inner();
        if !owner.may_allow() && *raw.action.get_ref() == RuleAction::Allow {
            errors.push(ConfigError::at(
                ConfigErrorKind::InvalidRule,
                source,
                raw.action.span(),
                format!("rule {number} of {id} allows, but a subagent type's rules can only narrow what its parent's mode allows (a child never does more than its parent): make it `deny` or `ask`, or leave it out"),
            ));
            continue;
        }
        if let Some(rule) = rule_of(raw, number, id, offered, source, errors) {
            rules.push((number, span, rule));
        }
    }
    shadowed(&rules, id, source, errors);
    Rules::new(rules.into_iter().map(|(_, _, rule)| rule).collect())
}

fn rule_of(
    raw: RawRule,
    number: usize,
    id: &str,
    offered: Option<&[Arc<str>]>,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<Rule> {
    let err =
        |kind, span: Range<usize>, message: String| ConfigError::at(kind, source, span, message);
    let tool: &str = raw.tool.get_ref();
    if tool == SUBMIT_PLAN {
        errors.push(err(
            ConfigErrorKind::InvalidRule,
            raw.tool.span(),
            format!("rule {number} of {id} is on `{SUBMIT_PLAN}`, whose plan always waits for a decision: leave it out"),
        ));
        return None;
    }
    // A rule on `SERVER__*` (every tool of an MCP server) or on one of its tools is on what a
    // listed wildcard offers.
    if let Some(offered) = offered
        && !offered
            .iter()
            .any(|t| &**t == tool || crate::tool::mcp::wildcard_covers(t, tool))
    {
        let hint = match did_you_mean(tool, offered.iter().map(|t| &**t)) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!("add `{tool}` to availableTools or leave the rule out"),
        };
        errors.push(err(
            ConfigErrorKind::RuleToolNotOffered,
            raw.tool.span(),
            format!(
                "rule {number} of {id} is on `{tool}`, which the mode does not offer (its availableTools: {}), so it could never apply: {hint}",
                if offered.is_empty() { "none".to_owned() } else { listed(offered.iter().map(|t| &**t)) },
            ),
        ));
        return None;
    }
    let pattern_error = |key: &str, span: Range<usize>, text: &str, why: String| {
        err(
            ConfigErrorKind::InvalidPattern,
            span,
            format!("rule {number} of {id} has {key} `{text}`, which is not valid: {why}"),
        )
    };
    let arg = raw.arg.as_ref().map(|a| a.get_ref().as_str());
    if let Some(a) = &raw.arg
        && a.get_ref().is_empty()
    {
        errors.push(err(
            ConfigErrorKind::InvalidRule,
            a.span(),
            format!("rule {number} of {id} has an empty arg: name the argument the rule reads"),
        ));
        return None;
    }
    let given: Vec<(&str, &Spanned<String>)> = [
        ("path", &raw.path),
        ("glob", &raw.glob),
        ("regex", &raw.regex),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.as_ref().map(|v| (key, v)))
    .collect();
    let matcher = match (given.as_slice(), arg) {
        ([], None) => Matcher::Any,
        ([], Some(_)) => {
            let span = raw.arg.as_ref().map_or(0..0, Spanned::span);
            errors.push(err(
                ConfigErrorKind::InvalidRule,
                span,
                format!("rule {number} of {id} names arg `{}` but no pattern for it: add `path`, `glob` or `regex`, or leave arg out to match every call", arg.unwrap_or_default()),
            ));
            return None;
        }
        ([(key, value)], arg) => {
            let text = value.get_ref().as_str();
            let compiled = match *key {
                "path" => Glob::path(text).map(|glob| Matcher::Path {
                    arg: Arc::from(arg.unwrap_or(DEFAULT_PATH_ARG)),
                    glob,
                }),
                other => {
                    let Some(arg) = arg else {
                        errors.push(err(
                            ConfigErrorKind::InvalidRule,
                            value.span(),
                            format!("rule {number} of {id} has a {other} but no arg: name the argument it reads (`arg = \"command\"`), or use `path` for a path"),
                        ));
                        return None;
                    };
                    if arg == DEFAULT_PATH_ARG && *raw.action.get_ref() == RuleAction::Allow {
                        errors.push(err(
                            ConfigErrorKind::InvalidRule,
                            value.span(),
                            format!("rule {number} of {id} allows by a {other} on arg `path`, which reads the text as sent and lets `..` walk out of it (`src/../.env` fits `src/*`): use `path = \"...\"`, which reads the path the workspace jail resolved"),
                        ));
                        return None;
                    }
                    let arg = Arc::from(arg);
                    if other == "glob" {
                        Glob::text(text).map(|glob| Matcher::Glob { arg, glob })
                    } else {
                        Pattern::new(text).map(|regex| Matcher::Regex { arg, regex })
                    }
                }
            };
            match compiled {
                Ok(matcher) => matcher,
                Err(why) => {
                    errors.push(pattern_error(key, value.span(), text, why.to_string()));
                    return None;
                }
            }
        }
        ([.., (key, value)], _) => {
            errors.push(err(
                ConfigErrorKind::InvalidRule,
                value.span(),
                format!(
                    "rule {number} of {id} sets both {} and `{key}`: a rule has one pattern, so write one rule for each",
                    given[..given.len() - 1].iter().map(|(k, _)| format!("`{k}`")).collect::<Vec<_>>().join(" and ")
                ),
            ));
            return None;
        }
    };
    let at = |span: Range<usize>| {
        let p = source.position(span);
        (p.location.line, p.location.column, p.snippet())
    };
    let arg_span = raw
        .arg
        .as_ref()
        .or(given.first().map(|(_, v)| *v))
        .map_or_else(|| raw.tool.span(), Spanned::span);
    let place = RulePlace {
        number,
        tool: at(raw.tool.span()),
        arg: at(arg_span),
    };
    let mut rule = Rule::new(tool, matcher, *raw.action.get_ref()).placed(place);
    if let Some(approvers) = &raw.approvers {
        let n = *approvers.get_ref();
        if *raw.action.get_ref() != RuleAction::Ask {
            errors.push(err(
                ConfigErrorKind::InvalidApprovers,
                approvers.span(),
                format!("rule {number} of {id} sets approvers on a `{}` rule: only an `ask` rule's calls wait for approvals", raw.action.get_ref()),
            ));
            return None;
        }
        match u8::try_from(n).ok().filter(|n| (1..=16).contains(n)) {
            Some(n) => rule = rule.approvers(n),
            None => {
                errors.push(err(
                    ConfigErrorKind::InvalidApprovers,
                    approvers.span(),
                    format!("rule {number} of {id} has approvers = {n}: use a number from 1 to 16"),
                ));
                return None;
            }
        }
    }
    match &raw.not {
        Some(not) if *not.get_ref() && matches!(rule.matcher(), Matcher::Any) => {
            errors.push(err(
                ConfigErrorKind::InvalidRule,
                not.span(),
                format!("rule {number} of {id} sets `not` without a pattern, so it would match no call: add `path`, `glob` or `regex`, or leave `not` out"),
            ));
            None
        }
        Some(not) if *not.get_ref() => Some(rule.negated()),
        _ => Some(rule),
    }
}

/// Whether rule `a` matches every call rule `b` matches: on the same tool, `a` matches every
/// call, or reads the same argument with the same pattern.
fn covers(a: &Rule, b: &Rule) -> bool {
    (a.tool() == b.tool() || crate::tool::mcp::wildcard_covers(a.tool(), b.tool()))
        && (matches!(a.matcher(), Matcher::Any)
            || (a.matcher() == b.matcher() && a.is_negated() == b.is_negated()))
}

/// An error at each rule that can never decide a call: another rule matches every call it
/// matches and wins over it (a stronger action, or the same action listed first).
fn shadowed(
    rules: &[(usize, Range<usize>, Rule)],
    id: &str,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) {
    for (j, (number, span, rule)) in rules.iter().enumerate() {
        let winner = rules.iter().enumerate().find(|(i, (_, _, other))| {
            *i != j
                && covers(other, rule)
                && (other.action() > rule.action() || (*i < j && other.action() == rule.action()))
        });
        let Some((_, (other_number, _, other))) = winner else {
            continue;
        };
        let why = if other.action() == rule.action() {
            "and comes first: leave one of them out".to_owned()
        } else {
            let mut why = format!("and {} beats {}", other.action(), rule.action());
            if matches!(other.matcher(), Matcher::Any) && other.action() == RuleAction::Ask {
                why.push_str(&format!(
                    ": to ask about the calls no rule allows, list `{}` in requireApproval and leave rule {other_number} out",
                    other.tool()
                ));
            }
            why
        };
        errors.push(ConfigError::at(
            ConfigErrorKind::ShadowedRule,
            source,
            span.clone(),
            format!(
                "rule {number} of {id} ({rule}) can never decide a call: rule {other_number} ({other}) matches every call it matches, {why}"
            ),
        ));
    }
}

impl ModeGraph {
    /// The errors of the graph's rules against a controller's `tools`: a rule on a tool the
    /// controller lacks (in a mode without `availableTools`; with it, the mode's list is
    /// checked when the config is read), and a rule on an argument the tool's input schema does
    /// not declare (when it declares its `properties`). Sorted by position; empty when every
    /// rule can apply. [`crate::controller::AgentControllerBuilder::build`] refuses a graph with any.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{config::ConfigErrorKind, ToolRegistry};
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", arg = \"pth\", path = \"src/**\", action = \"allow\" }]\n",
    ///     "modes.toml",
    /// )?;
    /// let errors = graph.rule_errors(&ToolRegistry::with_workspace_tools());
    /// assert_eq!(errors[0].kind(), ConfigErrorKind::UnknownArgument);
    /// assert!(errors[0].to_string().starts_with("modes.toml:3:39: rule 1 of mode `build` reads argument `pth`"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn rule_errors(&self, tools: &ToolRegistry) -> Vec<ConfigError> {
        rule_errors(self, tools)
            .into_iter()
            .map(|e| self.placed(e))
            .collect()
    }
}

/// A warning for each tool of `tools` that a path rule on an MCP server's `SERVER__*` wildcard
/// covers and whose input schema does not declare the rule's argument (its paths go by another
/// name: `paths`, `source`), at the rule's argument or pattern: a `deny` or `ask` rule then
/// matches every call of the tool (its path is in doubt), an `allow` rule none. In tool-name
/// order for each rule.
pub(crate) fn wildcard_rule_warnings(graph: &ModeGraph, tools: &ToolRegistry) -> Vec<ConfigError> {
    let mut warnings = Vec::new();
    for mode in graph.modes() {
        for rule in mode.rules().as_slice() {
            let (Some(place), Matcher::Path { arg, .. }) = (rule.place(), rule.matcher()) else {
                continue;
            };
            let mut covered: Vec<&str> = tools
                .names()
                .filter(|name| crate::tool::mcp::wildcard_covers(rule.tool(), name))
                .collect();
            covered.sort_unstable();
            for name in covered {
                let Some(schema) = tools.get(name).map(|tool| tool.input_schema()) else {
                    continue;
                };
                let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                    continue;
                };
                if properties.contains_key(&**arg) {
                    continue;
                }
                let declared: Vec<&str> = properties.keys().map(String::as_str).collect();
                let (line, column, snippet) = &place.arg;
                let effect = match rule.action() {
                    RuleAction::Allow => "never allows a call of it",
                    RuleAction::Ask | RuleAction::Deny => {
                        "matches every call of it (where it reads or writes is in doubt)"
                    }
                };
                let arguments = if declared.is_empty() {
                    "it declares none".to_owned()
                } else {
                    format!("its arguments: {}", listed(declared.iter().copied()))
                };
                warnings.push(ConfigError::placed_at(
                    ConfigErrorKind::WildcardRuleWithoutArg,
                    graph.origin(),
                    Location {
                        line: *line,
                        column: *column,
                    },
                    snippet.clone(),
                    format!(
                        "rule {} of mode `{}` ({rule}) is on `{name}`, which has no argument `{arg}` ({arguments}), so the rule {effect}: write a rule on `{name}` with `arg` naming its path",
                        place.number,
                        mode.id()
                    ),
                ));
            }
        }
    }
    warnings
}

/// A warning at each `requireApproval` entry and rule of a planning mode without
/// `availableTools` that is on a tool of `tools` the mode does not offer: such a mode offers
/// the read-only and plan tools ([`crate::tool::ToolAccess::is_offered_unlisted_in_planning_modes`])
/// and `submit_plan`, so an entry on a tool that writes could never apply. The same entries in
/// a mode that lists its tools are errors when the config is read; here the set depends on the
/// tools a host registers, so they are warnings. A `SERVER__*` rule is reported when none of
/// the tools it covers is offered.
pub(crate) fn implicit_offer_warnings(graph: &ModeGraph, tools: &ToolRegistry) -> Vec<ConfigError> {
    let implicit =
        |mode: &crate::mode::Mode| mode.is_planning() && mode.available_tools().is_none();
    let offered = |name: &str| {
        tools
            .get(name)
            .is_some_and(|tool| tool.access().is_offered_unlisted_in_planning_modes())
    };
    let set = || {
        // `submit_plan` once, last, whether a builder registered it or not.
        let mut names: Vec<&str> = tools
            .names()
            .filter(|name| offered(name) && *name != SUBMIT_PLAN)
            .collect();
        names.push(SUBMIT_PLAN);
        format!(
            "a planning mode without availableTools offers the read-only and plan tools: {}",
            listed(names.into_iter())
        )
    };
    let mut warnings = Vec::new();
    let source = graph.source();
    for r in graph.tool_refs() {
        let mode = graph.mode(r.mode);
        if !r.in_approval || !implicit(mode) || tools.get(&r.name).is_none() || offered(&r.name) {
            continue;
        }
        let at = source.position(r.span.clone());
        warnings.push(ConfigError::placed_at(
            ConfigErrorKind::ApprovalToolNotOffered,
            graph.origin(),
            at.location,
            at.snippet(),
            format!(
                "mode `{}` lists `{}` in requireApproval, but does not offer it ({}): list the mode's tools in availableTools, or leave it out of requireApproval",
                mode.id(),
                r.name,
                set()
            ),
        ));
    }
    for mode in graph.modes().iter().filter(|mode| implicit(mode)) {
        for rule in mode.rules().as_slice() {
            let Some(place) = rule.place() else { continue };
            let mut covered = tools.names().filter(|name| rule.is_on(name)).peekable();
            if covered.peek().is_none()
                || tools.names().any(|name| rule.is_on(name) && offered(name))
            {
                continue;
            }
            let (line, column, snippet) = &place.tool;
            warnings.push(ConfigError::placed_at(
                ConfigErrorKind::RuleToolNotOffered,
                graph.origin(),
                Location {
                    line: *line,
                    column: *column,
                },
                snippet.clone(),
                format!(
                    "rule {} of mode `{}` is on `{}`, which the mode does not offer ({}), so it could never apply: list the mode's tools in availableTools, or leave the rule out",
                    place.number,
                    mode.id(),
                    rule.tool(),
                    set()
                ),
            ));
        }
    }
    warnings
}

fn rule_errors(graph: &ModeGraph, tools: &ToolRegistry) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    for mode in graph.modes() {
        for rule in mode.rules().as_slice() {
            let Some(place) = rule.place() else { continue };
            let number = place.number;
            let error = |kind, (line, column, snippet): &(usize, usize, String), message| {
                let location = Location {
                    line: *line,
                    column: *column,
                };
                ConfigError::placed_at(kind, graph.origin(), location, snippet.clone(), message)
            };
            let covered = || tools.names().any(|name| rule.is_on(name));
            let Some(tool) = tools.get(rule.tool()) else {
                // A mode that lists its tools has its list checked, and its rules against it; a
                // `SERVER__*` rule is on the server's tools, each with its own arguments.
                if mode.available_tools().is_some() || (rule.tool().ends_with("__*") && covered()) {
                    continue;
                }
                let names: Vec<&str> = tools.names().collect();
                let hint = match did_you_mean(rule.tool(), names.iter().copied()) {
                    Some(near) => format!(": did you mean `{near}`?"),
                    None => String::new(),
                };
                errors.push(error(
                    ConfigErrorKind::UnknownTool,
                    &place.tool,
                    format!(
                        "rule {number} of mode `{}` is on unknown tool `{}`{hint}",
                        mode.id(),
                        rule.tool()
                    ),
                ));
                continue;
            };
            let Some(arg) = rule.matcher().arg() else {
                continue;
            };
            let schema = tool.input_schema();
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                continue;
            };
            if properties.contains_key(arg) {
                continue;
            }
            let declared: Vec<&str> = properties.keys().map(String::as_str).collect();
            let hint = match did_you_mean(arg, declared.iter().copied()) {
                Some(near) => format!("did you mean `{near}`?"),
                None if declared.is_empty() => "it declares none".to_owned(),
                None => format!("its arguments: {}", listed(declared.iter().copied())),
            };
            errors.push(error(
                ConfigErrorKind::UnknownArgument,
                &place.arg,
                format!(
                    "rule {number} of mode `{}` reads argument `{arg}`, which `{}` does not declare, so it could never match: {hint}",
                    mode.id(),
                    rule.tool()
                ),
            ));
        }
    }
    errors.extend(rule_test_tool_errors(graph, tools));
    errors.sort_by_key(ConfigError::location);
    errors
}

/// An error at each rule test (`[[tests]]`) on a tool neither `tools` has nor a mode lists.
fn rule_test_tool_errors(graph: &ModeGraph, tools: &ToolRegistry) -> Vec<ConfigError> {
    let listed = |name: &str| {
        graph.modes().iter().any(|mode| {
            mode.available_tools()
                .is_some_and(|list| list.iter().any(|t| &**t == name))
        })
    };
    graph
        .rule_tests()
        .iter()
        .filter(|test| tools.get(&test.tool).is_none() && !listed(&test.tool))
        .map(|test| {
            let hint = match did_you_mean(&test.tool, tools.names()) {
                Some(near) => format!(": did you mean `{near}`?"),
                None => String::new(),
            };
            let (line, column, snippet) = &test.tool_at;
            ConfigError::placed_at(
                ConfigErrorKind::InvalidRuleTest,
                graph.origin(),
                Location {
                    line: *line,
                    column: *column,
                },
                snippet.clone(),
                format!(
                    "rule test {} is on unknown tool `{}`{hint}",
                    test.number, test.tool
                ),
            )
        })
        .collect()
}
