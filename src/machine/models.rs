//! The models a session may be switched to by hand, and the rule of a choice: the
//! controller's own model (when the host names it) and each mode's `defaultModelId`, each once;
//! choosing the model the mode runs with anyway ends the choice, any other offered id is kept
//! until the mode changes ([`crate::Session::choose_model`]).

use crate::mode::{ModeGraph, ModeId};

use super::change::{Change, Config};
use super::error::SessionError;

/// The models offered, in order: `own` (the controller's model, when named), then every
/// mode's `defaultModelId` in the modes' order, each id once.
pub(crate) fn offered(graph: &ModeGraph, own: Option<&str>) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let modes = graph.modes().iter().filter_map(|m| m.default_model_id());
    for id in own.into_iter().chain(modes) {
        if !ids.iter().any(|known| known == id) {
            ids.push(id.to_owned());
        }
    }
    ids
}

/// The model `mode` runs with when nothing is chosen: its `defaultModelId`, else `own`; `None`
/// when neither names one.
pub(crate) fn mode_model<'a>(
    graph: &'a ModeGraph,
    mode: ModeId,
    own: Option<&'a str>,
) -> Option<&'a str> {
    graph.mode(mode).default_model_id().or(own)
}

/// What choosing model `id` in `mode` keeps as the session's chosen model: `None` for the
/// model the mode runs with anyway, else the id.
///
/// # Errors
/// [`SessionError::UnknownModel`] when `id` is not offered ([`offered`]).
pub(crate) fn choice(
    config: &Config<'_>,
    mode: ModeId,
    id: &str,
) -> Result<Option<String>, SessionError> {
    let offered = offered(config.graph, config.own_model);
    if !offered.iter().any(|known| known == id) {
        let listed = if offered.is_empty() {
            "no model is offered (no mode names a defaultModelId and the host names no model)"
                .to_owned()
        } else {
            let names: Vec<String> = offered.iter().map(|m| format!("`{m}`")).collect();
            format!("the models offered are {}", names.join(", "))
        };
        return Err(SessionError::UnknownModel {
            model: id.to_owned(),
            reason: format!("it is not offered: {listed}"),
        });
    }
    let own = mode_model(config.graph, mode, config.own_model);
    Ok((own != Some(id)).then(|| id.to_owned()))
}

impl Change<'_> {
    /// The host chooses model `id` for the current mode: kept as the session's chosen model
    /// until the mode changes (`enter_mode` clears it), or, for the mode's own model, the
    /// choice ends.
    ///
    /// # Errors
    /// [`SessionError::UnknownModel`] when `id` is not offered; nothing changes.
    pub(crate) fn choose_model(&mut self, id: &str) -> Result<(), SessionError> {
        self.state.model_id = choice(&self.config, self.state.mode, id)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::input::Input;
    use crate::machine::rig::Rig;

    const MODES: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
defaultModelId = "planner"

[[modes]]
id = "build"
default = true

[[modes]]
id = "review"
defaultModelId = "planner"
"#;

    fn graph() -> ModeGraph {
        crate::config::parse(MODES, "modes.toml").expect("config")
    }

    #[test]
    fn the_offer_is_the_own_model_then_each_modes_once() {
        let graph = graph();
        assert_eq!(offered(&graph, Some("main")), ["main", "planner"]);
        assert_eq!(offered(&graph, Some("planner")), ["planner"]);
        assert_eq!(offered(&graph, None), ["planner"]);
        let build = graph.get("build").expect("build");
        assert_eq!(mode_model(&graph, build, Some("main")), Some("main"));
        assert_eq!(mode_model(&graph, build, None), None);
    }

    #[test]
    fn a_choice_is_kept_a_modes_own_ends_it_and_one_not_offered_is_refused() {
        let mut rig = Rig::with_graph(graph());
        rig.own_model = Some("main".to_owned());
        let refused = rig.handle(Input::ChooseModel("gpt-9".to_owned()));
        assert!(
            matches!(refused, Err(SessionError::UnknownModel { ref reason, .. }) if reason.contains("`main`, `planner`")),
            "{refused:?}"
        );
        rig.handle(Input::ChooseModel("planner".to_owned()))
            .expect("offered");
        assert_eq!(
            rig.state.model_id.as_deref(),
            Some("planner"),
            "build's own is main"
        );
        rig.handle(Input::ChooseModel("main".to_owned()))
            .expect("offered");
        assert_eq!(rig.state.model_id, None, "build's own: the choice ends");
    }
}
