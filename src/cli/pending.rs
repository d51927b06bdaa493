//! `pending`: lists the plans and tool calls waiting for a decision, and the interrupted runs.

use std::time::SystemTime;

use agent_controller::deadline::{self, deadline_text};
use agent_controller::display::{
    arguments_line, json_line, neutralize_line, neutralize_line_within,
};
use agent_controller::event::OnTimeout;
use agent_controller::rules::where_paths_lead;
use agent_controller::store::{
    InterruptedRun, PendingEntry, PendingKind, PendingSummary, display_spec,
};

use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{open_existing, runtime};
use crate::cli::text::{PENDING_ARGS_MAX_CHARS, short_sha256, targets_text};

/// The most characters `pending` shows of an option's description (its start and end around
/// `… (N characters not shown) …`): every option of a question is listed, whatever their
/// descriptions (trial 5 L12: one long description hid the options after it).
const DESCRIPTION_MAX_CHARS: usize = 80;

/// The most characters `pending` shows of a field of a question (its text, its options).
const FIELD_MAX_CHARS: usize = 10_000;

/// `pending`: the readable plans on stdout, one `warning:` line on stderr per record that
/// cannot be read (with `--json`, also an `{"unreadable": {...}}` line on stdout), and exit 6
/// when there was any.
pub(crate) fn pending(spec: &str, json: bool) -> Outcome {
    let store = open_existing(spec)?;
    let mut listing = runtime()?
        .block_on(async {
            // Plans past their deadline expire first (each once, whoever looks first).
            let now = SystemTime::now();
            let (expired, listing) = deadline::expire_due_then_list(&*store, now).await?;
            for e in &expired {
                // A plan, a tool call that waited for approval, or a question (not answered).
                let aborted = e.run_state == agent_controller::event::RunState::Aborted;
                let so = deadline::expired_outcome(
                    e.decision
                        .tool_name
                        .as_deref()
                        .map(neutralize_line)
                        .as_deref(),
                    e.decision.suspension_kind,
                    aborted,
                );
                note!(
                    "expired: session {} decision {}: no decision by {}, so {so}",
                    neutralize_line(&e.session_id),
                    neutralize_line(&e.decision.decision_id),
                    neutralize_line(e.decision.decided_at.as_deref().unwrap_or("its deadline"))
                );
            }
            Ok::<_, agent_controller::store::StoreError>(listing)
        })
        .map_err(Failure::runtime)?;
    // The allowances in force, read in one batch for the whole listing.
    let entries = runtime()?.block_on(agent_controller::session::pending_entries(
        &*store,
        std::mem::take(&mut listing.pending),
    ));
    for unread in &entries.unread_allowances {
        note!(
            "warning: the allowances of session {} cannot be read, not listed: {}",
            neutralize_line(&unread.session_id),
            neutralize_line(&unread.reason)
        );
    }
    for entry in &entries.pending {
        say!("{}", listed_line(entry, json)?);
    }
    for run in &listing.interrupted {
        say!("{}", interrupted_line(run, spec, json)?);
    }
    for record in &listing.unreadable {
        warn_unreadable(&record.session_id, Some(&record.location), &record.reason);
        if json {
            let line = json_line(&serde_json::json!({ "unreadable": record }))
                .map_err(Failure::runtime)?;
            say!("{line}");
        }
    }
    if listing.is_healthy() {
        if !json && entries.pending.is_empty() && listing.interrupted.is_empty() {
            note!("nothing pending: no plan, tool call or question waits");
        }
        Ok(Exit::Done)
    } else {
        Ok(Exit::Unreadable)
    }
}

/// A pending decision as `pending` lists it ([`pending_line`]) with the allowances in force for
/// its session: the field `allowances in force: ID (SCOPE): TOOL [PATTERN] in mode `MODE`; ...`
/// last, or `allowancesInForce` (each an allowance object) with `--json`; nothing without them.
fn listed_line(entry: &PendingEntry, json: bool) -> Result<String, Failure> {
    let (p, in_force) = (&entry.summary, &entry.allowances_in_force);
    if in_force.is_empty() {
        return pending_line(p, json);
    }
    if json {
        return json_line(entry).map_err(Failure::runtime);
    }
    let each: Vec<String> = in_force.iter().map(ToString::to_string).collect();
    Ok(format!(
        "{}\tallowances in force: {}",
        pending_line(p, false)?,
        neutralize_line(&each.join("; "))
    ))
}

/// The `warning:` line of a record `pending` cannot read.
pub(crate) fn warn_unreadable(session_id: &str, location: Option<&str>, reason: &str) {
    let location = location.map_or(String::new(), |l| format!(" ({})", neutralize_line(l)));
    note!(
        "warning: session `{}`{location} cannot be read, not listed: {}",
        neutralize_line(session_id),
        neutralize_line(reason)
    );
}

/// One interrupted run as `pending` prints it: `{"interrupted": {...}}`, or tab-separated fields
/// ending in the command that carries it on.
pub(crate) fn interrupted_line(
    run: &InterruptedRun,
    spec: &str,
    json: bool,
) -> Result<String, Failure> {
    if json {
        return json_line(&serde_json::json!({ "interrupted": run })).map_err(Failure::runtime);
    }
    Ok(format!(
        "{}\t{}\tinterrupted\t{}\towner {}{}\tcontinue with: agent-controller continue --store {} {}",
        neutralize_line(&run.session_id),
        neutralize_line(&run.run_id),
        neutralize_line(&run.mode_id),
        neutralize_line(run.owner.as_deref().unwrap_or("unknown")),
        run.workspace.as_ref().map_or(String::new(), |w| format!(
            "\tworkspace {}",
            neutralize_line(&w.display().to_string())
        )),
        neutralize_line(&display_spec(spec)),
        neutralize_line(&run.session_id),
    ))
}

/// One pending plan or tool call as `pending` prints it: a JSON object, or tab-separated fields
/// (a tool call's arguments on one line: [`arguments_line`]).
pub(crate) fn pending_line(p: &PendingSummary, json: bool) -> Result<String, Failure> {
    if json {
        return json_line(p).map_err(Failure::runtime);
    }
    // The fields every line starts with, and the ones it ends with.
    let ids = format!(
        "{}\t{}\t{}\t{}",
        neutralize_line(&p.session_id),
        neutralize_line(&p.run_id),
        neutralize_line(&p.decision_id),
        neutralize_line(&p.mode_id),
    );
    let deadline = p.terms.deadline_at_ms.map_or(String::new(), |at| {
        let then = match p.terms.on_timeout {
            OnTimeout::Abort => " (onTimeout abort)",
            OnTimeout::Reject => "",
        };
        format!("\tdeadline {}{then}", deadline_text(at))
    });
    // Under a quorum: how many approvals it needs, and who has approved so far.
    let deadline = match p.terms.approvers_needed {
        Some(needed) => {
            let by: Vec<&str> = p.terms.approvals.iter().map(|a| a.by.as_str()).collect();
            let so_far = if by.is_empty() {
                "none yet".to_owned()
            } else {
                by.join(", ")
            };
            format!(
                "{deadline}\tapprovals {} of {needed}: {}",
                by.len(),
                neutralize_line(&so_far)
            )
        }
        None => deadline,
    };
    if matches!(p.kind, PendingKind::Question | PendingKind::Suspension) {
        let payload = p.payload.clone().unwrap_or_default();
        let what = if p.kind == PendingKind::Question {
            // The question and its options come from the model: every character shown, one line.
            // The fields are escaped each, then joined by a real tab (not an escaped one).
            let mut what = vec![format!(
                "question {}",
                serde_json::to_string(&payload["question"]).unwrap_or_default()
            )];
            if let Some(options) = payload["options"].as_array() {
                let each: Vec<String> = options
                    .iter()
                    .enumerate()
                    .map(|(k, o)| {
                        let label = serde_json::to_string(&o["label"]).unwrap_or_default();
                        // Each description is cut on its own, so every option is listed.
                        match o["description"].as_str() {
                            Some(d) => format!(
                                "{}. {label} ({})",
                                k + 1,
                                neutralize_line_within(
                                    &serde_json::to_string(d).unwrap_or_default(),
                                    DESCRIPTION_MAX_CHARS
                                )
                            ),
                            None => format!("{}. {label}", k + 1),
                        }
                    })
                    .collect();
                let mode = payload["selectionMode"].as_str().unwrap_or("single_select");
                what.push(format!("{mode}: {}", each.join("; ")));
            }
            what
        } else {
            vec![
                format!("suspension {}", p.tool_name.as_deref().unwrap_or_default()),
                arguments_line(&payload, PENDING_ARGS_MAX_CHARS, PENDING_WHOLE),
            ]
        };
        // A field is bounded at FIELD_MAX_CHARS: room for `ask_user`'s longest question, and
        // for its 20 options with their labels whole and each description cut on its own.
        let what: Vec<String> = what
            .iter()
            .map(|field| neutralize_line_within(field, FIELD_MAX_CHARS).into_owned())
            .collect();
        return Ok(format!(
            "{ids}\t{}{}\tsha256 {}{}{deadline}",
            what.join("\t"),
            subagent_field(p),
            neutralize_line(&p.sha256),
            workspace_field(p),
        ));
    }
    if p.kind == PendingKind::ToolCall {
        let args = p.args.as_ref().map_or(String::new(), |a| {
            arguments_line(a, PENDING_ARGS_MAX_CHARS, PENDING_WHOLE)
        });
        let allowed = if p.always_allowed.is_empty() {
            String::new()
        } else {
            format!(
                "\talways allowed: {}",
                neutralize_line(&p.always_allowed.join(", "))
            )
        };
        // Where a path leads, when elsewhere than it reads (a symlink in the workspace).
        let leads: String = where_paths_lead(&p.locations)
            .iter()
            .map(|line| format!("\twhere it acts: {line}"))
            .collect();
        // Why it waits, when it writes outside the approved plan's files.
        let drift = p.drift.as_ref().map_or(String::new(), |why| {
            format!("\tdrift: {}", neutralize_line(why))
        });
        let review = review_field(p);
        Ok(format!(
            "{ids}\ttool call {}\t{}{}{leads}{drift}{review}\targsSha256 {}{}{allowed}{deadline}",
            neutralize_line(p.tool_name.as_deref().unwrap_or_default()),
            args,
            subagent_field(p),
            neutralize_line(p.args_sha256.as_deref().unwrap_or(&p.sha256)),
            workspace_field(p),
        ))
    } else {
        Ok(format!(
            "{ids} -> {}\t{}\t{}{}{}{deadline}{}{}",
            neutralize_line(&targets_text(&p.target_mode_id, &p.target_mode_ids)),
            neutralize_line(short_sha256(&p.sha256)),
            title_field(&p.title),
            scope_field(p),
            workspace_field(p),
            comments_field(p),
            review_field(p),
        ))
    }
}

/// The field of what a reviewer said about a plan or a call (`reviewer critic: reject: no
/// tests`), none when no reviewer saw it.
pub(crate) fn review_field(p: &PendingSummary) -> String {
    p.review
        .as_ref()
        .map_or(String::new(), |r| format!("\t{}", r.shown()))
}

/// The field of a subagent's call that waits in its parent's session: which subagent made it
/// (`subagent explore (child s1.run_1.sub1_0, call call_1)`); none for the session's own.
pub(crate) fn subagent_field(p: &PendingSummary) -> String {
    p.subagent.as_ref().map_or(String::new(), |s| {
        format!(
            "\tsubagent {} (child {}, call {})",
            neutralize_line(&s.agent_type),
            neutralize_line(&s.child_id),
            neutralize_line(&s.tool_call_id),
        )
    })
}

/// Where a `pending` line's cut fields are shown whole.
const PENDING_WHOLE: &str = "`pending --json` shows them whole";

/// A plan's title as its `pending` field: on one line, bounded ([`neutralize_line`]); a title
/// cut for the screen says that `pending --json` shows it whole (issue 36, item 4).
fn title_field(title: &str) -> String {
    // A plan without a `# ` title line: a placeholder a reviewer can see, not an empty field.
    if title.trim().is_empty() {
        return "(untitled plan)".to_owned();
    }
    let shown = neutralize_line(title);
    if title.chars().count() <= agent_controller::display::LINE_MAX_CHARS {
        return shown.into_owned();
    }
    format!("{shown} (`pending --json` shows the whole title)")
}

/// The last field of a plan's `pending` line: the comments the rejection of the previous
/// revision made (`comments line 4 "2. Deploy..." staging first; ...`), none without them.
pub(crate) fn comments_field(p: &PendingSummary) -> String {
    if p.comments.is_empty() {
        return String::new();
    }
    let each: Vec<String> = p
        .comments
        .iter()
        .map(|c| {
            format!(
                "line {} {}: {}",
                c.line,
                serde_json::to_string(&c.quote).unwrap_or_default(),
                neutralize_line(&c.text)
            )
        })
        .collect();
    format!("\tcomments on the last revision: {}", each.join("; "))
}

/// The field of a plan's `pending` line after its title: what an approval grants the mode it
/// hands over to (``approving lets `build` write: src/theme.rs, src/ui/** (...)``); none for
/// a plan without a `## Files` section.
pub(crate) fn scope_field(p: &PendingSummary) -> String {
    p.scope.as_ref().map_or(String::new(), |scope| {
        format!(
            "\t{}",
            neutralize_line(&scope.grants(&p.target_mode_id, p.plan_scope))
        )
    })
}

/// The field of a `pending` line after the plan's title or the call's `argsSha256`:
/// `workspace PATH`, where the decision acts (none for a record from before workspaces were
/// recorded).
pub(crate) fn workspace_field(p: &PendingSummary) -> String {
    p.terms.workspace.as_ref().map_or(String::new(), |w| {
        format!("\tworkspace {}", neutralize_line(&w.display().to_string()))
    })
}

/// `pending --watch`: the plans pending now, then each new one as its save is committed, until
/// Ctrl-C (exit 0) or a closed stdout.
#[cfg(feature = "postgres")]
pub(crate) fn watch_pending(spec: &str, json: bool) -> Outcome {
    use crate::cli::output::stdout_failure;
    use agent_controller::store::StoreError;
    use agent_controller::store::postgres::{PostgresConfig, PostgresStore, is_postgres_url};
    use futures_util::StreamExt;

    if !is_postgres_url(spec) {
        return Err(Failure::invalid(format!(
            "--watch needs a postgres:// store: `{}` has no change notifications",
            neutralize_line(&display_spec(spec))
        )));
    }
    let config = PostgresConfig::from_url(spec).map_err(Failure::invalid)?;
    let store = PostgresStore::open(config).map_err(Failure::runtime)?;
    runtime()?.block_on(async {
        let plans = store.watch_pending(true).await.map_err(Failure::runtime)?;
        let mut plans = std::pin::pin!(plans);
        note!(
            "watching {} for pending plans (Ctrl-C to stop)",
            neutralize_line(&display_spec(spec))
        );
        loop {
            let plan = tokio::select! {
                plan = plans.next() => plan,
                _ = tokio::signal::ctrl_c() => return Ok(Exit::Done),
            };
            match plan {
                Some(Ok(plan)) => {
                    say!("{}", pending_line(&plan, json)?);
                    // Nobody reads any more: stop watching (main reports it).
                    if stdout_failure().is_some() {
                        return Ok(Exit::Done);
                    }
                }
                Some(Err(StoreError::Corrupt {
                    session_id,
                    message,
                })) => warn_unreadable(&session_id, None, &message),
                Some(Err(e)) => return Err(Failure::runtime(e)),
                None => return Ok(Exit::Done),
            }
        }
    })
}

#[cfg(not(feature = "postgres"))]
pub(crate) fn watch_pending(_: &str, _: bool) -> Outcome {
    Err(Failure::invalid(
        "--watch needs a postgres:// store, and this build has no PostgreSQL support: rebuild with `--features postgres`",
    ))
}
