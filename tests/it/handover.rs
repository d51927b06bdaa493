//! Every hand-over edge of every shipped config is exercised: a plan submitted in each planning
//! mode and approved (to each target it lists) lands in that target, with one `mode_changed` exactly when the target
//! differs.

use crate::common;

use agent_controller::model::scripted::ReplayModel;
use agent_controller::{Decision, Event, RunOutcome, event::ModeChangeReason};
use common::{Recorder, Workspace, controller, fixture, replay};
use serde_json::json;

fn shipped_configs() -> Vec<(String, String)> {
    let mut configs = vec![(
        "config/modes.toml".to_owned(),
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml"))
            .expect("shipped config"),
    )];
    let mut names: Vec<_> = std::fs::read_dir(fixture("configs/valid"))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n != "expected.toml"))
        .collect();
    names.sort();
    for path in names {
        configs.push((
            path.display().to_string(),
            std::fs::read_to_string(&path).expect("read"),
        ));
    }
    configs
}

#[tokio::test]
async fn every_handover_edge_of_every_shipped_config_is_exercised() {
    let mut exercised = 0;
    for (name, text) in shipped_configs() {
        let ws = Workspace::new();
        let path = ws.plan("edge.md", "# Edge\n\n1. step\n");
        let probe = controller(&text, &ws, replay(vec![]));
        let edges: Vec<(String, String)> = probe
            .modes()
            .transition_edges()
            .map(|(from, to)| {
                (
                    probe.modes().mode(from).id().to_owned(),
                    probe.modes().mode(to).id().to_owned(),
                )
            })
            .collect();
        // The one fixture without a planning mode is about tool approvals.
        if name.ends_with("require-approval-all.toml") {
            assert!(edges.is_empty(), "{name} has no planning mode");
            continue;
        }
        assert!(!edges.is_empty(), "{name} has at least one planning mode");
        for (from, to) in edges {
            let model = replay(vec![
                ReplayModel::call("c1", "submit_plan", json!({ "path": path })),
                ReplayModel::text("carrying on"),
            ]);
            let controller = controller(&text, &ws, model.clone());
            let recorder = Recorder::default();
            let mut session = controller
                .start_session(recorder.options().mode(from.clone()))
                .await
                .expect("session");
            let RunOutcome::Suspended {
                run_id,
                tool_call_id,
                payload,
            } = session.send_message("plan").await.expect("run")
            else {
                panic!("{name}: {from} must suspend");
            };
            // The targets are fixed at submit time: the plain approval's first, then every
            // other one the user may choose (`Decision::to`).
            assert!(
                payload.target_mode_ids.iter().any(|t| **t == *to),
                "{name}: {to} listed in {:?}",
                payload.target_mode_ids
            );
            assert_eq!(payload.target_mode_ids[0], payload.target_mode_id, "{name}");
            let decision = if *payload.target_mode_id == *to {
                Decision::approve()
            } else {
                Decision::approve().to(to.clone())
            };
            session
                .resume(&run_id, &tool_call_id, decision)
                .await
                .expect("approve");
            assert_eq!(session.mode().id(), to, "{name}: {from} -> {to}");
            let changes: Vec<Event> = recorder
                .take()
                .into_iter()
                .filter(|e| matches!(e, Event::ModeChanged { .. }))
                .collect();
            if from == to {
                assert!(
                    changes.is_empty(),
                    "{name}: no switch when the target is the mode itself"
                );
            } else {
                assert_eq!(
                    changes,
                    vec![Event::ModeChanged {
                        session_id: session.id().into(),
                        mode_id: to.as_str().into(),
                        previous_mode_id: from.as_str().into(),
                        reason: ModeChangeReason::PlanApproved
                    }],
                    "{name}"
                );
            }
            assert_eq!(
                model.requests()[1].mode_id,
                to,
                "{name}: the next call runs in the target mode"
            );
            exercised += 1;
        }
    }
    println!("hand-over edges exercised: {exercised}");
    assert!(
        exercised >= 11,
        "all edges of all shipped configs: {exercised}"
    );
}
