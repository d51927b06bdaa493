//! Leaving planning without approving from the prompt (issue 23, item 3): `s MODE` at a plan's
//! question switches by hand (`Session::switch_mode`), so the plan counts as not approved and the
//! model is told, the same rule `agent-controller switch` follows. Driven through the binary
//! with stdin.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::Output;

use crate::common::cli::snapshots::{same, scrubbed, shown};
use crate::common::cli::{self, NOT_APPROVED, SHIPPED, pending_plan};

/// The binary in `ws` with `args`, `input` on stdin.
fn bin(ws: &Path, args: &[&str], input: &str) -> Output {
    cli::bin(ws, args, input)
}

fn run(ws: &Path, extra: &[&str], input: &str) -> Output {
    let mut args = vec!["run", "--config", SHIPPED, "--mode", "plan"];
    args.extend_from_slice(extra);
    args.push("Add dark mode");
    bin(ws, &args, input)
}

/// The text of every record in the file store `st`.
fn records(ws: &Path) -> String {
    cli::records(ws).into_iter().map(|(_, text)| text).collect()
}

#[test]
fn s_mode_at_the_prompt_switches_without_approving() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = run(ws.path(), &[], "s\ns nope\nswitch Build\ns build\n");
    // The help line names the key and the modes a switch may go to (not the current one);
    // `s` alone, an unknown mode and a mode id in the wrong case ask again (mode ids are typed
    // exactly, as at `--to`, with the hint); the plan is cancelled (not approved) before the
    // mode changes.
    same(
        scrubbed(shown(&out, &[]), ws.path(), ""),
        snapbox::str![[r##"
exit 3
--- stdout
session [SESSION] started in mode plan
[run_1] started in mode plan
tool write_plan {"path": "add-dark-mode.md", "content": "# Add dark mode\n\n## Steps\n1. Read the code this change touches.\n2. Make the change in small steps.\n3. Add tests for it and run the whole suite.\n"}
tool write_plan ok: .agent/plans/add-dark-mode.md
tool submit_plan {"path": ".agent/plans/add-dark-mode.md"}
plan submitted: "Add dark mode" (.agent/plans/add-dark-mode.md), sha256 [SHA256]; waiting for a decision
[run_1] ended: suspended
[run_1] resumed in mode plan
submit_plan cancelled (mode_switch): not approved
[run_1] ended: aborted
mode changed: plan -> build (manual)
mode: build
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
> switch to which mode? type s and one of build (the plan is then not approved)
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> `nope` is not a mode to switch to: type s and one of build (the plan is then not approved), or answer the plan
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> `Build` is not a mode to switch to (did you mean `build`? (mode ids are case-sensitive)): type s and one of build (the plan is then not approved), or answer the plan
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> mode plan -> build (switched by hand at the prompt)
  the plan decision_1 (Add dark mode) counts as not approved; the model is told when the session runs next

"##]],
    );
}

#[test]
fn a_switch_at_the_prompt_of_a_stored_run_is_saved_and_the_model_is_told() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = run(ws.path(), &["--store", "st"], "s build\n");
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{}", cli::text(&out));
    let stored = records(ws.path());
    assert!(
        stored.contains("Plan not approved: the user switched mode by hand."),
        "{stored}"
    );
    assert!(stored.contains("\"modeId\":\"build\""), "{stored}");
    let listed = bin(ws.path(), &["pending", "--store", "st"], "");
    same(
        shown(&listed, &[]),
        snapbox::str![[r#"
exit 0
--- stdout
--- stderr
nothing pending: no plan, tool call or question waits

"#]],
    );
}

#[test]
fn decide_at_the_prompt_can_switch_instead() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let out = bin(
        ws.path(),
        &["decide", "--store", "st", "--config", SHIPPED, &session],
        "s build\n",
    );
    same(
        scrubbed(shown(&out, &[]), ws.path(), &session),
        snapbox::str![[r#"
exit 3
--- stdout
[run_1] resumed in mode plan
submit_plan cancelled (mode_switch): not approved
[run_1] ended: aborted
mode changed: plan -> build (manual)
mode: build
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
> mode plan -> build (switched by hand at the prompt)
  the plan decision_1 (Add dark mode) counts as not approved; the model is told when the session runs next

"#]],
    );
    let late = bin(
        ws.path(),
        &[
            "decide",
            "--store",
            "st",
            "--config",
            SHIPPED,
            &session,
            "--approve",
        ],
        "",
    );
    // Nothing is left to approve.
    same(
        scrubbed(shown(&late, &[]), ws.path(), &session),
        snapbox::str![[r#"
exit 5
--- stdout
--- stderr
error: session [SESSION] has nothing pending (already decided?)

"#]],
    );
    assert!(
        records(ws.path()).contains("Plan not approved: the user switched mode by hand."),
        "saved"
    );
}

// The revision prompt shows a diff: the `diff` feature.
#[cfg(feature = "diff")]
#[test]
fn switch_followed_by_a_sentence_is_still_feedback() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = run(ws.path(), &[], "switch steps 2 and 3 around\nn\n");
    // Sent as feedback: no mode changed.
    same(
        scrubbed(shown(&out, &[]), ws.path(), ""),
        snapbox::str![[r##"
exit 3
--- stdout
session [SESSION] started in mode plan
[run_1] started in mode plan
tool write_plan {"path": "add-dark-mode.md", "content": "# Add dark mode\n\n## Steps\n1. Read the code this change touches.\n2. Make the change in small steps.\n3. Add tests for it and run the whole suite.\n"}
tool write_plan ok: .agent/plans/add-dark-mode.md
tool submit_plan {"path": ".agent/plans/add-dark-mode.md"}
plan submitted: "Add dark mode" (.agent/plans/add-dark-mode.md), sha256 [SHA256]; waiting for a decision
[run_1] ended: suspended
[run_1] resumed in mode plan
tool submit_plan ok: Plan rejected. Feedback from the user: switch steps 2 and 3 around
  Revise the plan to address this feedback, then call submit_plan again with the revised plan.
tool write_plan {"path": "add-dark-mode.md", "content": "# Add dark mode\n\n## Steps\n1. Read the code this change touches.\n2. Make the cha… (43 characters not shown) …d run the whole suite.\n\n## Revisions\n- Addressed: switch steps 2 and 3 around\n"} (not shown: 43 characters of the arguments; `--json` shows them whole)
tool write_plan ok: .agent/plans/add-dark-mode.md
tool submit_plan {"path": ".agent/plans/add-dark-mode.md"}
plan submitted: "Add dark mode" (.agent/plans/add-dark-mode.md), sha256 [SHA256]; waiting for a decision
[run_1] ended: suspended
[run_1] resumed in mode plan
tool submit_plan ok: Plan rejected. Stop here and wait for the user's next message before doing anything else.
[run_1] ended: completed
mode: plan
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
+- Addressed: switch steps 2 and 3 around
(plan file .agent/plans/add-dark-mode.md, sha256 [SHA12]...)
workspace: [WORKSPACE] (where an approval carries the run on)
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [p] show the whole plan  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [y 1-3,5] approve only those steps  [s MODE] switch to build, not approving
> 
"##]],
    );
}
