//! Comments anchored to plan lines from the CLI (issue 23, item 5): `decide --reject --comment
//! LINE:TEXT` (repeatable) and `c LINE TEXT` at the prompt. The model receives each comment with
//! the line it quotes; `pending` and the next revision's prompt show them again; a line outside
//! the plan is refused (exit 2) and changes nothing.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::Output;

use crate::common::cli::snapshots::{same, scrubbed};
use crate::common::cli::{self, SHIPPED, pending_plan, text};

/// The scripted plan of "Add dark mode", as the prompt numbers it with `c`.
const LINE_4: &str = "1. Read the code this change touches.";
#[cfg(feature = "diff")]
const LINE_6: &str = "3. Add tests for it and run the whole suite.";

fn bin(ws: &Path, args: &[&str], input: &str) -> Output {
    cli::bin(ws, args, input)
}

/// The session's history of decisions, from the file store.
fn history(ws: &Path, session: &str) -> Vec<serde_json::Value> {
    for suffix in ["pending.json", "json", "running.json"] {
        let path = ws.join("st").join(format!("{session}.{suffix}"));
        if let Ok(text) = std::fs::read_to_string(path) {
            let record: serde_json::Value = serde_json::from_str(&text).expect("json");
            return record["history"].as_array().cloned().unwrap_or_default();
        }
    }
    panic!("no record of {session}");
}

// The revision prompt shows a diff: the `diff` feature.
#[cfg(feature = "diff")]
#[test]
fn decide_reject_with_comments_sends_each_with_its_line_and_shows_them_again() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let out = bin(
        ws.path(),
        &[
            "decide",
            "--store",
            "st",
            "--config",
            SHIPPED,
            &session,
            "--reject",
            "--comment",
            "4:staging first",
            "--comment",
            "6: and the docs ",
        ],
        "",
    );
    // The revision waits again (exit 4): comments ask for a revision as feedback does; the
    // model got each comment with its line.
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(text(&out).contains(&format!("- line 4 \"{LINE_4}\": staging first")));
    same(
        scrubbed(cli::snapshots::shown(&out, &[]), ws.path(), &session),
        snapbox::str![[r##"
exit 4
--- stdout
[run_1] resumed in mode plan
tool submit_plan ok: Plan rejected. Feedback from the user: see the comments on lines of the plan below.
  Comments from the user on lines of the plan:
  - line 4 "1. Read the code this change touches.": staging first
  - line 6 "3. Add tests for it and run the whole suite.": and the docs
  Revise the plan to address this feedback, then call submit_plan again with the revised plan.
tool write_plan {"path": "add-dark-mode.md", "content": "# Add dark mode\n\n## Steps\n1. Read the code this change touches.\n2. Make the cha… (60 characters not shown) …uite.\n\n## Revisions\n- Addressed: see the comments on lines of the plan below.\n"} (not shown: 60 characters of the arguments; `--json` shows them whole)
tool write_plan ok: .agent/plans/add-dark-mode.md
tool submit_plan {"path": ".agent/plans/add-dark-mode.md"}
plan submitted: "Add dark mode" (.agent/plans/add-dark-mode.md), sha256 [SHA256]; waiting for a decision
[run_1] ended: suspended
suspended: session [SESSION] run run_1 decision decision_2
--- stderr
the plan stays pending; decide later with: agent-controller decide --store st [SESSION] --decision decision_2 (--approve [--to MODE] | --reject) [--feedback TEXT]

"##]],
    );
    let decided = history(ws.path(), &session);
    let comments = &decided[0]["comments"];
    assert_eq!(
        comments,
        &serde_json::json!([
            { "line": 4, "text": "staging first", "quote": LINE_4 },
            { "line": 6, "text": "and the docs", "quote": LINE_6 },
        ]),
        "the audit record keeps them"
    );
    assert!(decided[0]["sha256"].as_str().is_some_and(|s| s.len() == 64));
    let listed = text(&bin(ws.path(), &["pending", "--store", "st"], ""));
    same(
        scrubbed(listed, ws.path(), &session),
        snapbox::str![[r#"
[SESSION]	run_1	decision_2	plan -> build	[SHA12]	Add dark mode	workspace [WORKSPACE]	comments on the last revision: line 4 "1. Read the code this change touches.": staging first; line 6 "3. Add tests for it and run the whole suite.": and the docs

"#]],
    );
    let json = text(&bin(ws.path(), &["pending", "--store", "st", "--json"], ""));
    assert!(json.contains("\"comments\":[{\"line\":4"), "{json}");
    // The next revision's prompt shows them beside its diff.
    let out = bin(
        ws.path(),
        &["decide", "--store", "st", "--config", SHIPPED, &session],
        "n\n",
    );
    let prompt = text(&out);
    assert!(
        prompt.contains(&format!(
            "your comments on revision 1:\n  line 4: {LINE_4}\n    staging first\n"
        )),
        "{prompt}"
    );
    same(
        scrubbed(prompt, ws.path(), &session),
        snapbox::str![[r#"
[run_1] resumed in mode plan
tool submit_plan ok: Plan rejected. Stop here and wait for the user's next message before doing anything else.
[run_1] ended: completed
mode: plan

revision 2 of the plan:

# Add dark mode

## Steps
1. Read the code this change touches.
2. Make the change in small steps.
3. Add tests for it and run the whole suite.

## Revisions
- Addressed: see the comments on lines of the plan below.

changes since revision 1 (sha256 [SHA12]...), which was not shown here:
--- revision 1
+++ revision 2
@@ -4,3 +4,6 @@
 1. Read the code this change touches.
 2. Make the change in small steps.
 3. Add tests for it and run the whole suite.
+
+## Revisions
+- Addressed: see the comments on lines of the plan below.
(plan file .agent/plans/add-dark-mode.md, sha256 [SHA12]...)
workspace: [WORKSPACE] (where an approval carries the run on)
your comments on revision 1:
  line 4: 1. Read the code this change touches.
    staging first
  line 6: 3. Add tests for it and run the whole suite.
    and the docs
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> 
"#]],
    );
}

#[test]
fn a_comment_outside_the_plan_or_without_text_is_refused_and_changes_nothing() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let decide = |extra: &[&str]| {
        let mut args = vec!["decide", "--store", "st", "--config", SHIPPED, &session];
        args.extend_from_slice(extra);
        bin(ws.path(), &args, "")
    };
    let mut all = String::new();
    for extra in [
        &["--reject", "--comment", "0:x"][..],
        &["--reject", "--comment", "7:x"][..],
        &["--reject", "--comment", "4:  "][..],
        &["--reject", "--comment", "four:x"][..],
        &["--approve", "--comment", "4:x"][..],
    ] {
        let out = decide(extra);
        all.push_str(&format!(
            "$ decide {}\n{}\n",
            extra.join(" "),
            cli::snapshots::shown(&out, &[])
        ));
    }
    same(
        scrubbed(all, ws.path(), &session),
        snapbox::str![[r#"
$ decide --reject --comment 0:x
exit 2
--- stdout
--- stderr
error: the plan comment is refused: line 0 is not a line of the plan shown (lines 1 to 6)

$ decide --reject --comment 7:x
exit 2
--- stdout
--- stderr
error: the plan comment is refused: line 7 is not a line of the plan shown (lines 1 to 6)

$ decide --reject --comment 4:  
exit 2
--- stdout
--- stderr
error: invalid value '4:  ' for '--comment <LINE:TEXT>': the comment on line 4 has no text: a comment is LINE:TEXT, a line number of the plan and what to say about it (4:"staging first")

For more information, try '--help'.

$ decide --reject --comment four:x
exit 2
--- stdout
--- stderr
error: invalid value 'four:x' for '--comment <LINE:TEXT>': a comment is LINE:TEXT, a line number of the plan and what to say about it (4:"staging first")

For more information, try '--help'.

$ decide --approve --comment 4:x
exit 2
--- stdout
--- stderr
error: --comment goes with --reject of a plan, not with --approve: nothing was decided


"#]],
    );
    assert!(
        history(ws.path(), &session).is_empty(),
        "nothing was decided"
    );
    let listed = text(&bin(ws.path(), &["pending", "--store", "st"], ""));
    same(
        scrubbed(listed, ws.path(), &session),
        snapbox::str![[r#"
[SESSION]	run_1	decision_1	plan -> build	[SHA12]	Add dark mode	workspace [WORKSPACE]

"#]],
    );
}

#[test]
fn c_at_the_prompt_numbers_the_lines_and_n_rejects_with_the_comments() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let out = bin(
        ws.path(),
        &["decide", "--store", "st", "--config", SHIPPED, &session],
        "c\nc 7 past the end\nc 4 staging first\ny\nn\n",
    );
    // The revision waits (exit 4); `c` numbered the lines, a line past the end and `y` while a
    // comment is held asked again, `n` sent the comment; the prompt then shows the revision
    // and asks about it, as `run` does (trial 5 L4), and the end of input leaves it pending.
    same(
        scrubbed(cli::snapshots::shown(&out, &[]), ws.path(), &session),
        snapbox::str![[r##"
exit 4
--- stdout
[run_1] resumed in mode plan
tool submit_plan ok: Plan rejected. Feedback from the user: see the comments on lines of the plan below.
  Comments from the user on lines of the plan:
  - line 4 "1. Read the code this change touches.": staging first
  Revise the plan to address this feedback, then call submit_plan again with the revised plan.
tool write_plan {"path": "add-dark-mode.md", "content": "# Add dark mode\n\n## Steps\n1. Read the code this change touches.\n2. Make the cha… (60 characters not shown) …uite.\n\n## Revisions\n- Addressed: see the comments on lines of the plan below.\n"} (not shown: 60 characters of the arguments; `--json` shows them whole)
tool write_plan ok: .agent/plans/add-dark-mode.md
tool submit_plan {"path": ".agent/plans/add-dark-mode.md"}
plan submitted: "Add dark mode" (.agent/plans/add-dark-mode.md), sha256 [SHA256]; waiting for a decision
[run_1] ended: suspended
suspended: session [SESSION] run run_1 decision decision_2
--- stderr

# Add dark mode

## Steps
1. Read the code this change touches.
2. Make the change in small steps.
3. Add tests for it and run the whole suite.
(plan file .agent/plans/add-dark-mode.md, sha256 [SHA12]...)
workspace: [WORKSPACE] (where an approval carries the run on)
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
>    1  # Add dark mode
   2  
   3  ## Steps
   4  1. Read the code this change touches.
   5  2. Make the change in small steps.
   6  3. Add tests for it and run the whole suite.
(type c LINE TEXT to comment on a line; n or feedback then rejects with your comments)
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> line 7 is not a line of the plan (lines 1 to 6): nothing is kept
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> comment 1 on line 4 (1. Read the code this change touches.): staging first
(n or feedback rejects with your comments; d drops them)
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> you hold 1 comment(s): comments go with a rejection, so type n (or feedback) to reject with them, or d to drop them and answer again
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> 
revision 2 of the plan "Add dark mode", changes since revision 1 (sha256 [SHA12]...):
--- revision 1
+++ revision 2
@@ -4,3 +4,6 @@
 1. Read the code this change touches.
 2. Make the change in small steps.
 3. Add tests for it and run the whole suite.
+
+## Revisions
+- Addressed: see the comments on lines of the plan below.
(plan file .agent/plans/add-dark-mode.md, sha256 [SHA12]...)
workspace: [WORKSPACE] (where an approval carries the run on)
your comments on revision 1:
  line 4: 1. Read the code this change touches.
    staging first
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [p] show the whole plan  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> 
end of input: the plan is not approved; the mode stays `plan`
the plan stays pending; decide later with: agent-controller decide --store st [SESSION] --decision decision_2 (--approve [--to MODE] | --reject) [--feedback TEXT]

"##]],
    );
    // What the prompt numbered is what the library quotes.
    let decided = history(ws.path(), &session);
    assert_eq!(decided[0]["outcome"], "rejected");
    assert_eq!(
        decided[0]["comments"],
        serde_json::json!([{ "line": 4, "text": "staging first", "quote": LINE_4 }])
    );
}
