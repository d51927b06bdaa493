//! `diagram`: the pictures of mode graphs that `agent-controller graph` prints.

use std::path::{Path, PathBuf};

use agent_controller::diagram::{self, DiagramFormat};
use agent_controller::{ModeGraph, config};

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn valid_fixtures() -> Vec<(String, ModeGraph)> {
    let mut graphs: Vec<(String, ModeGraph)> =
        std::fs::read_dir(manifest("tests/fixtures/configs/valid"))
            .expect("read_dir")
            .map(|entry| entry.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml") && !p.ends_with("expected.toml"))
            .map(|p| (p.display().to_string(), config::load(&p).expect("load")))
            .collect();
    graphs.push((
        "config/modes.toml".to_owned(),
        config::load(manifest("config/modes.toml")).expect("load"),
    ));
    graphs.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(graphs.len() >= 8, "the fixtures are there");
    graphs
}

#[test]
fn the_shipped_config_as_mermaid() {
    let graph = config::load(manifest("config/modes.toml")).expect("load");
    assert_eq!(
        diagram::mermaid(&graph),
        r#"flowchart LR
    mode_plan("Plan (plan)<br/><i>planning</i>")
    mode_build(["Build (build)<br/><i>default</i>"])
    mode_plan -->|plan approved| mode_build
    classDef defaultMode stroke-width:3px
    classDef planning stroke-dasharray:5 3
    class mode_build defaultMode
    class mode_plan planning
    style mode_plan stroke:#3b82f6
    style mode_build stroke:#22c55e
"#
    );
}

#[test]
fn the_shipped_config_as_dot() {
    let graph = config::load(manifest("config/modes.toml")).expect("load");
    assert_eq!(
        diagram::render(&graph, DiagramFormat::Dot),
        r##"digraph modes {
    rankdir=LR;
    node [shape=box, style=rounded];
    "plan" [label="Plan\n(plan)\nplanning", style="rounded,dashed", color="#3b82f6"];
    "build" [label="Build\n(build)\ndefault", peripheries=2, color="#22c55e"];
    "plan" -> "build" [label="plan approved"];
}
"##
    );
}

#[test]
fn a_chain_draws_every_hand_over_and_marks_each_planning_mode() {
    let graph = config::load(manifest("tests/fixtures/configs/valid/chain.toml")).expect("load");
    let chart = diagram::mermaid(&graph);
    assert!(
        chart.contains("mode_research -->|plan approved| mode_plan\n"),
        "{chart}"
    );
    assert!(
        chart.contains("mode_plan -->|plan approved| mode_build\n"),
        "{chart}"
    );
    assert!(
        chart.contains("class mode_research,mode_plan planning\n"),
        "{chart}"
    );
    let dot = diagram::dot(&graph);
    assert!(
        dot.contains(r#""research" -> "plan" [label="plan approved"];"#),
        "{dot}"
    );
    assert!(
        dot.contains(r#""plan" -> "build" [label="plan approved"];"#),
        "{dot}"
    );
}

#[test]
fn a_default_mode_that_is_also_planning_carries_both_marks_and_a_cycle_draws_both_ways() {
    let graph = config::load(manifest("tests/fixtures/configs/valid/cycle.toml")).expect("load");
    let chart = diagram::mermaid(&graph);
    assert!(
        chart.contains(r#"mode_build(["build (build)<br/><i>default, planning</i>"])"#),
        "{chart}"
    );
    assert!(
        chart.contains("mode_build -->|plan approved| mode_plan\n"),
        "{chart}"
    );
    assert!(
        chart.contains("mode_plan -->|plan approved| mode_build\n"),
        "{chart}"
    );
    let dot = diagram::dot(&graph);
    assert!(
        dot.contains(r#""build" [label="build\n(build)\ndefault, planning", peripheries=2, style="rounded,dashed"];"#),
        "{dot}"
    );
}

#[test]
fn a_planning_mode_without_target_hands_over_to_the_default() {
    let graph = config::load(manifest(
        "tests/fixtures/configs/valid/plan-without-target.toml",
    ))
    .expect("load");
    let chart = diagram::mermaid(&graph);
    assert!(
        chart.contains("mode_draft -->|plan approved| mode_build\n"),
        "{chart}"
    );
    assert!(
        chart.contains("mode_review -->|plan approved| mode_build\n"),
        "{chart}"
    );
}

#[test]
fn a_default_planning_mode_without_target_is_refused_before_it_can_be_drawn() {
    // Its approval would hand over to itself (issue 14, fault 7): the loader refuses it.
    let err = config::parse(
        "[[modes]]\nid = \"solo\"\navailableTools = [\"submit_plan\"]\n",
        "solo.toml",
    )
    .expect_err("a self hand-over");
    assert_eq!(
        err.kind(),
        agent_controller::config::ConfigErrorKind::SelfHandover
    );
}

#[test]
fn colours_names_and_odd_ids_are_drawn_safely() {
    let graph = config::parse(
        r##"
[[modes]]
id = "end"
name = "The \"end\" <b>#1</b>"
transitionsTo = "graph"
[modes.metadata]
color = "#3b82f6"

[[modes]]
id = "graph"
name = "計画"
[modes.metadata]
color = "red; stroke-width:99px"
"##,
        "odd.toml",
    )
    .expect("parse");
    let chart = diagram::mermaid(&graph);
    assert!(
        chart.contains(r#"mode_end(["The #quot;end#quot; #lt;b#gt;#35;1#lt;/b#gt; (end)<br/><i>default, planning</i>"])"#),
        "{chart}"
    );
    assert!(chart.contains(r#"mode_graph("計画 (graph)")"#), "{chart}");
    assert!(chart.contains("style mode_end stroke:#3b82f6\n"), "{chart}");
    assert!(
        !chart.contains("99px"),
        "only #rgb/#rrggbb colours are pasted: {chart}"
    );
    let dot = diagram::dot(&graph);
    assert!(
        dot.contains(r#"label="The \"end\" <b>#1</b>\n(end)\ndefault, planning""#),
        "{dot}"
    );
    assert!(dot.contains(r##"color="#3b82f6""##), "{dot}");
}

/// Every picture of every valid config draws exactly its hand-over edges and one node per mode.
#[test]
fn every_valid_config_draws_exactly_its_modes_and_hand_over_edges() {
    for (name, graph) in valid_fixtures() {
        let chart = diagram::mermaid(&graph);
        let dot = diagram::dot(&graph);
        let edges: Vec<_> = graph.transition_edges().collect();
        assert_eq!(
            chart.matches(" -->|").count(),
            edges.len(),
            "{name}\n{chart}"
        );
        assert_eq!(dot.matches(" -> ").count(), edges.len(), "{name}\n{dot}");
        for (from, to) in edges {
            let (from, to) = (graph.mode(from).id(), graph.mode(to).id());
            assert!(
                chart.contains(&format!("mode_{from} -->|")),
                "{name}: {from}"
            );
            assert!(
                dot.contains(&format!("\"{from}\" -> \"{to}\"")),
                "{name}: {from} -> {to}"
            );
        }
        let default = graph.default_mode().id();
        assert!(
            chart.contains(&format!("mode_{default}([\"")),
            "{name}: default is a stadium"
        );
        assert!(
            chart.contains(&format!("class mode_{default} defaultMode\n")),
            "{name}"
        );
        assert_eq!(
            dot.matches("peripheries=2").count(),
            1,
            "{name}: one default"
        );
        let planning = graph.planning_modes().count();
        assert_eq!(dot.matches("dashed").count(), planning, "{name}");
        for mode in graph.modes() {
            assert_eq!(
                chart.matches(&format!("    mode_{}(", mode.id())).count(),
                1,
                "{name}"
            );
        }
    }
}

#[test]
fn modes_whose_tool_calls_wait_for_the_user_are_marked() {
    let graph = agent_controller::config::parse(
        "[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\", \"<b>x</b>\"]\n[[modes]]\nid = \"careful\"\nrequireApproval = true\n[[modes]]\nid = \"free\"\n",
        "modes.toml",
    )
    .expect("parses");
    let chart = diagram::mermaid(&graph);
    assert!(
        chart.contains("<i>default, approval: write_file #lt;b#gt;x#lt;/b#gt;</i>"),
        "{chart}"
    );
    assert!(chart.contains("<i>approval: every tool</i>"), "{chart}");
    assert!(chart.contains(r#"mode_free("free (free)")"#), "{chart}");
    let dot = diagram::dot(&graph);
    assert!(dot.contains(r#"(careful)\napproval: every tool""#), "{dot}");
}
