//! Deterministic models: [`ScriptedModel`] plays a planner from the conversation alone (the CLI's
//! built-in model), [`ReplayModel`] replays canned replies and records what it was asked (tests).

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::json;

use super::{LanguageModel, Message, ModelError, ModelRequest, ModelResponse};
use crate::tool::ToolCall;
use crate::tool::submit_plan::{APPROVED_RESULT, REJECTED_WITH_FEEDBACK_PREFIX, SUBMIT_PLAN};

const WRITE_PLAN: &str = "write_plan";
const ASK_USER: &str = "ask_user";

/// A model that acts out the plan -> approve -> build cycle deterministically.
///
/// Its reply depends only on the request: in a planning mode it writes a plan for the user's
/// prompt with `write_plan` (when offered) and submits it, or submits the file given with
/// [`ScriptedModel::with_plan_path`] as is. A refused file is reported and the run ends. After a
/// rejection with feedback it revises and resubmits once. After approval it says what it does in
/// the new mode. In other modes it answers in one line.
///
/// A prompt that starts with `ask me` makes it ask first, with `ask_user` when the mode offers it
/// ([`ScriptedModel::question_for`] reads the question and its options from the prompt), so the
/// question flow can be tried without a provider; once answered it carries on as above (plans,
/// or says what it was told).
#[derive(Debug, Clone, Default)]
pub struct ScriptedModel {
    plan_path: Option<String>,
}

impl ScriptedModel {
    /// A model that writes its own plans (with `write_plan`).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// assert_eq!(payload.submission.title, "Add dark mode", "the scripted model planned for the prompt");
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// A model that submits the plan file at `path` (relative to the workspace) as is.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{LanguageModel, ModelRequest, model::Message, model::scripted::ScriptedModel};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_controller::ModelError> {
    /// let model = ScriptedModel::with_plan_path("docs/plan.md");
    /// let messages = [Message::User { content: "go".into() }];
    /// # let tools = [agent_controller::tool::ToolSpec { name: "submit_plan".into(), description: String::new(), input_schema: serde_json::json!({}), access: agent_controller::tool::ToolAccess::Plans }];
    /// let reply = model.generate(ModelRequest::new(&messages).with_tools(&tools)).await?;
    /// assert_eq!(reply.tool_calls[0].name, "submit_plan");
    /// assert_eq!(reply.tool_calls[0].args["path"], "docs/plan.md");
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_plan_path(path: impl Into<String>) -> Self {
        Self {
            plan_path: Some(path.into()),
        }
    }

    /// The plan the model writes for `prompt`, with the feedback it was given so far.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::scripted::ScriptedModel;
    /// let plan = ScriptedModel::plan_for("Add dark mode", &[]);
    /// assert!(plan.starts_with("# Add dark mode"));
    /// let revised = ScriptedModel::plan_for("Add dark mode", &["cover settings"]);
    /// assert!(revised.contains("cover settings"));
    /// ```
    pub fn plan_for(prompt: &str, feedback: &[&str]) -> String {
        let title = prompt.lines().next().unwrap_or("").trim();
        let title = if title.is_empty() { "Plan" } else { title };
        let mut plan = format!(
            "# {title}\n\n## Steps\n1. Read the code this change touches.\n2. Make the change in small steps.\n3. Add tests for it and run the whole suite.\n"
        );
        if !feedback.is_empty() {
            plan.push_str("\n## Revisions\n");
            for f in feedback {
                plan.push_str(&format!("- Addressed: {f}\n"));
            }
        }
        plan
    }

    /// The `ask_user` arguments the model asks with for `prompt`, when the prompt starts with
    /// `ask me` (any case): the rest up to a colon is the question (a `?` added), and the words
    /// after the colon, separated by commas or `or`, are the options. `(several)` in the
    /// question makes it a multi-select question. `None` for any other prompt.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::scripted::ScriptedModel;
    /// use serde_json::json;
    /// assert_eq!(
    ///     ScriptedModel::question_for("Ask me which database to use: Postgres, SQLite or MySQL"),
    ///     Some(json!({ "question": "Which database to use?", "options": [{ "label": "Postgres" }, { "label": "SQLite" }, { "label": "MySQL" }] })),
    /// );
    /// assert_eq!(
    ///     ScriptedModel::question_for("ask me which checks to run (several): lint, test")
    ///         .map(|q| q["selectionMode"].clone()),
    ///     Some(json!("multi_select")),
    /// );
    /// assert_eq!(
    ///     ScriptedModel::question_for("ask me for a name"),
    ///     Some(json!({ "question": "For a name?" })),
    /// );
    /// assert_eq!(ScriptedModel::question_for("Add dark mode"), None);
    /// ```
    pub fn question_for(prompt: &str) -> Option<serde_json::Value> {
        let text = prompt.trim_start();
        let rest = text
            .get(..6)
            .filter(|head| head.eq_ignore_ascii_case("ask me"))
            .map(|_| text[6..].trim())?;
        let (asked, offered) = rest.split_once(':').unwrap_or((rest, ""));
        let several = asked.contains("(several)");
        let asked = asked.replace("(several)", "");
        let asked = asked.trim().trim_end_matches('?').trim();
        let mut chars = asked.chars();
        let question = match chars.next() {
            Some(first) => format!("{}{}?", first.to_uppercase(), chars.as_str()),
            None => "What should I do?".to_owned(),
        };
        let mut labels: Vec<String> = Vec::new();
        for label in offered
            .split(',')
            .flat_map(|part| part.split(" or "))
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            if !labels.iter().any(|l| l == label) {
                labels.push(label.to_owned());
            }
        }
        let mut args = json!({ "question": question });
        if !labels.is_empty() {
            args["options"] = labels.iter().map(|l| json!({ "label": l })).collect();
            if several {
                args["selectionMode"] = json!("multi_select");
            }
        }
        Some(args)
    }

    /// The file name the model uses for `prompt`'s plan: a lower-case slug plus `.md`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::scripted::ScriptedModel;
    /// assert_eq!(ScriptedModel::plan_file_name("Add dark mode"), "add-dark-mode.md");
    /// ```
    pub fn plan_file_name(prompt: &str) -> String {
        let mut slug = String::new();
        for c in prompt.chars().flat_map(char::to_lowercase) {
            if c.is_ascii_alphanumeric() {
                slug.push(c);
            } else if !slug.ends_with('-') && !slug.is_empty() {
                slug.push('-');
            }
            if slug.len() >= 48 {
                break;
            }
        }
        let slug = slug.trim_end_matches('-');
        if slug.is_empty() {
            "plan.md".to_owned()
        } else {
            format!("{slug}.md")
        }
    }

    fn reply(&self, request: &ModelRequest<'_>) -> ModelResponse {
        let offers = |name: &str| request.tools.iter().any(|t| &*t.name == name);
        let turn_start = request
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }));
        let prompt = turn_start.map_or("", |i| match &request.messages[i] {
            Message::User { content } => content.as_str(),
            _ => "",
        });
        let turn = &request.messages[turn_start.map_or(0, |i| i + 1)..];
        let calls_so_far: usize = request
            .messages
            .iter()
            .map(|m| match m {
                Message::Assistant { tool_calls, .. } => tool_calls.len(),
                _ => 0,
            })
            .sum();
        // The id is formatted only when the reply is a call.
        let call = |name: &str, args: serde_json::Value| ModelResponse {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: format!("call_{}", calls_so_far + 1),
                name: name.to_owned(),
                args,
            }],
            ..ModelResponse::default()
        };
        let say = |text: String| ModelResponse {
            text,
            tool_calls: Vec::new(),
            ..ModelResponse::default()
        };
        let feedback: Vec<&str> = turn
            .iter()
            .filter_map(|m| match m {
                Message::Tool {
                    tool_name, content, ..
                } if tool_name == SUBMIT_PLAN => content
                    .strip_prefix(REJECTED_WITH_FEEDBACK_PREFIX)
                    .and_then(|rest| rest.trim_start().lines().next()),
                _ => None,
            })
            .collect();
        let approved = turn.iter().any(|m| {
            matches!(m, Message::Tool { tool_name, content, .. } if tool_name == SUBMIT_PLAN && content.starts_with(APPROVED_RESULT))
        });
        // The plan submitted last in this conversation, to resubmit when no other is at hand.
        let last_submitted = request.messages.iter().rev().find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .rev()
                .find(|c| c.name == SUBMIT_PLAN)
                .and_then(|c| c.args.get("path").and_then(|p| p.as_str())),
            _ => None,
        });
        let start_plan = |feedback: &[&str]| -> ModelResponse {
            if let Some(path) = &self.plan_path {
                call(SUBMIT_PLAN, json!({ "path": path }))
            } else if offers(WRITE_PLAN) {
                call(
                    WRITE_PLAN,
                    json!({ "path": Self::plan_file_name(prompt), "content": Self::plan_for(prompt, feedback) }),
                )
            } else if let (Some(path), false) = (last_submitted, feedback.is_empty()) {
                call(SUBMIT_PLAN, json!({ "path": path }))
            } else {
                say(format!(
                    "I cannot submit a plan in mode `{}`: no plan file was given and `write_plan` is not offered.",
                    request.mode_id
                ))
            }
        };
        let work = || {
            if approved {
                say(format!(
                    "Now in mode `{}`: implementing the approved plan for \"{prompt}\".",
                    request.mode_id
                ))
            } else {
                say(format!("In mode `{}`: {prompt}", request.mode_id))
            }
        };
        match request.messages.last() {
            None | Some(Message::User { .. }) => {
                if let (true, Some(question)) = (offers(ASK_USER), Self::question_for(prompt)) {
                    call(ASK_USER, question)
                } else if offers(SUBMIT_PLAN) {
                    start_plan(&[])
                } else {
                    work()
                }
            }
            Some(Message::Tool {
                tool_name,
                content,
                is_error,
                ..
            }) => match (tool_name.as_str(), *is_error) {
                (WRITE_PLAN, false) => call(SUBMIT_PLAN, json!({ "path": content })),
                (WRITE_PLAN, true) => say(format!("I could not write the plan: {content}")),
                (SUBMIT_PLAN, true) => say(format!("The plan was refused: {content}")),
                (SUBMIT_PLAN, false) if content.starts_with(APPROVED_RESULT) => work(),
                (SUBMIT_PLAN, false) if content.starts_with(REJECTED_WITH_FEEDBACK_PREFIX) => {
                    if feedback.len() >= 2 {
                        say("The revised plan was rejected too; tell me how to proceed.".to_owned())
                    } else {
                        start_plan(&feedback)
                    }
                }
                (SUBMIT_PLAN, false) => say("Waiting for your next message.".to_owned()),
                // Answered: plan in a planning mode, else say what the answer was.
                (ASK_USER, false) if offers(SUBMIT_PLAN) => start_plan(&[]),
                (ASK_USER, false) => say(format!("Noted. {content}")),
                (_, true) => say(format!("Tool `{tool_name}` failed: {content}")),
                (_, false) => work(),
            },
            Some(Message::System { .. }) => work(),
            Some(Message::Assistant { .. }) => say(String::new()),
        }
    }
}

#[async_trait]
impl LanguageModel for ScriptedModel {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        Ok(self.reply(&request))
    }
}

/// What a [`ReplayModel`] saw in one call.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The mode id of the call.
    pub mode_id: String,
    /// The system prompt of the call.
    pub system_prompt: String,
    /// The names of the tools offered.
    pub tool_names: Vec<String>,
    /// The tool specs offered.
    pub tools: Vec<crate::tool::ToolSpec>,
    /// The conversation the call saw.
    pub messages: Vec<Message>,
}

/// A model that returns canned replies in order and records every request; when the replies run
/// out it returns a [`ModelError`].
#[derive(Debug, Default)]
pub struct ReplayModel {
    replies: Mutex<VecDeque<Result<ModelResponse, ModelError>>>,
    seen: Mutex<Vec<RecordedRequest>>,
}

impl ReplayModel {
    /// A model that returns `replies` one per call.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{LanguageModel, ModelRequest, model::scripted::ReplayModel};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let model = ReplayModel::new([ReplayModel::text("one"), ReplayModel::text("two")]);
    /// assert_eq!(model.generate(ModelRequest::new(&[])).await.unwrap().text, "one");
    /// assert_eq!(model.generate(ModelRequest::new(&[])).await.unwrap().text, "two");
    /// assert!(model.generate(ModelRequest::new(&[])).await.is_err(), "out of replies");
    /// # }
    /// ```
    pub fn new(replies: impl IntoIterator<Item = ModelResponse>) -> Self {
        Self {
            replies: Mutex::new(replies.into_iter().map(Ok).collect()),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Appends a reply (or an error) to the queue.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{LanguageModel, ModelError, ModelRequest, model::scripted::ReplayModel};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let model = ReplayModel::new([]);
    /// model.push(Err(ModelError::new("rate limited")));
    /// model.push(Ok(ReplayModel::text("fine now")));
    /// assert!(model.generate(ModelRequest::new(&[])).await.is_err());
    /// assert_eq!(model.generate(ModelRequest::new(&[])).await.unwrap().text, "fine now");
    /// # }
    /// ```
    pub fn push(&self, reply: Result<ModelResponse, ModelError>) {
        self.replies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push_back(reply);
    }

    /// Every request seen so far, oldest first.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// use agent_controller::model::scripted::ReplayModel;
    /// let model = Arc::new(ReplayModel::new([ReplayModel::text("hi")]));
    /// let mut session = controller.start_session(SessionOptions::new().mode("plan").model(model.clone())).await?;
    /// session.send_message("hello").await?;
    /// let requests = model.requests();
    /// assert_eq!(requests.len(), 1);
    /// assert_eq!(requests[0].mode_id, "plan");
    /// assert!(requests[0].tool_names.iter().any(|t| t == "submit_plan"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A reply with one tool call.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::scripted::ReplayModel;
    /// let reply = ReplayModel::call("call_1", "read_file", serde_json::json!({ "path": "a.txt" }));
    /// assert_eq!(reply.tool_calls[0].name, "read_file");
    /// assert!(reply.text.is_empty());
    /// ```
    pub fn call(id: &str, name: &str, args: serde_json::Value) -> ModelResponse {
        ModelResponse {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                args,
            }],
            ..ModelResponse::default()
        }
    }

    /// A text-only reply (the model is done).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::scripted::ReplayModel;
    /// let reply = ReplayModel::text("done");
    /// assert_eq!(reply.text, "done");
    /// assert!(reply.tool_calls.is_empty());
    /// ```
    pub fn text(text: &str) -> ModelResponse {
        ModelResponse {
            text: text.to_owned(),
            tool_calls: Vec::new(),
            ..ModelResponse::default()
        }
    }
}

#[async_trait]
impl LanguageModel for ReplayModel {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(RecordedRequest {
                mode_id: request.mode_id.to_owned(),
                system_prompt: request.system_prompt.to_owned(),
                tool_names: request.tools.iter().map(|t| t.name.to_string()).collect(),
                tools: request.tools.to_vec(),
                messages: request.messages.to_vec(),
            });
        self.replies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
            .unwrap_or_else(|| Err(ModelError::new("the replay script is exhausted")))
    }
}
