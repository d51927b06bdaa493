//! The OpenAPI 3.1 document of `serve` (`GET /v1/openapi.json`). The request and answer bodies
//! the library defines are described by the library's own JSON Schemas
//! ([`agent_controller::schema`]: the decision JSON, a `pending --json` entry, a decision's audit
//! record), which OpenAPI 3.1 takes as they are.

use serde_json::{Value, json};

use super::{BODY_LIMIT, BODY_TIMEOUT};

/// The document.
pub(crate) fn document() -> Value {
    let error = json!({ "$ref": "#/components/schemas/Error" });
    let answer = |description: &str| json!({ "description": description, "content": { "application/json": { "schema": error } } });
    let refusals = json!({
        "401": answer("No token, or not one of this server's."),
        "404": answer("No such session or decision (an id that is no id is not looked up)."),
        "409": answer("The decision was taken already, expired, or pins other content (sha256); the session is busy; or the config the server would carry the session on under lets its modes do more than the one it ran under."),
        "408": answer(&format!("The body did not all come within {} seconds; the connection is closed.", BODY_TIMEOUT.as_secs())),
        "413": { "description": format!("The body is over {BODY_LIMIT} bytes.") },
        "422": answer("The body is not JSON, or not what the route takes."),
    });
    let json_of =
        |schema: Value| json!({ "content": { "application/json": { "schema": schema } } });
    let session_view = json!({ "$ref": "#/components/schemas/SessionView" });
    let session_id = json!({ "name": "sessionId", "in": "path", "required": true, "schema": { "type": "string" } });
    let decision_id = json!({ "name": "decisionId", "in": "path", "required": true, "schema": { "type": "string" } });
    let events = json!({
        "200": { "description": "Server-Sent Events: each `data:` one event as `--json` prints it (or `decision_waiting` / `decision_settled` for what another process did, `events_missed` when some are gone: the server itself missed them, or a reconnecting client missed more than the server keeps (this one first, without an `id:`); read the state again), each with an `id:`. A client that falls 1,024 events behind gets the end of its stream: reconnect with `Last-Event-ID` to get what was missed, as far as the server keeps it.", "content": { "text/event-stream": {} } },
        "401": refusals["401"],
    });
    let mut session_events = events.clone();
    session_events["404"] = refusals["404"].clone();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "agent-controller serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Decide what waits in a session store (plans, tool calls, questions), start sessions, and follow their events. Every route but /healthz takes `Authorization: Bearer TOKEN`."
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "Decision": agent_controller::schema::decision(),
                "PendingEntry": agent_controller::schema::pending_entry(),
                "DecidedRecord": agent_controller::schema::decided_record(),
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": { "error": { "type": "object", "required": ["kind", "message"], "properties": { "kind": { "type": "string" }, "message": { "type": "string" } } } }
                },
                "SessionView": {
                    "type": "object",
                    "required": ["sessionId", "modeId", "pending", "workspace", "version"],
                    "properties": {
                        "sessionId": { "type": "string" },
                        "modeId": { "type": "string" },
                        "runId": { "type": "string" },
                        "runState": { "type": "string", "enum": ["running", "suspended", "completed", "aborted", "failed"] },
                        "pending": { "type": "array", "items": { "type": "object" } },
                        "workspace": { "type": "string" },
                        "version": { "type": "integer", "minimum": 0 },
                        "allowancesInForce": { "type": "array", "items": { "type": "object" }, "description": "The allowances in force in the session's mode (GET /v1/sessions/{sessionId} only)." },
                        "planReport": { "type": "object", "description": "The report of the session's last run of an approved plan (as `agent-controller report --json` prints it and the `plan_report` event carries it: the steps approved, done and not done, the files written inside the plan's files, the writes outside it, the declared files never touched, whether the plan file changed since approval); absent before such a run ended (GET /v1/sessions/{sessionId} only)." }
                    }
                },
                "DecisionTaken": {
                    "type": "object",
                    "required": ["sessionId", "decisionId", "modeId", "pending"],
                    "properties": {
                        "sessionId": { "type": "string" },
                        "decisionId": { "type": "string" },
                        "decision": { "$ref": "#/components/schemas/DecidedRecord" },
                        "modeId": { "type": "string" },
                        "pending": { "type": "array", "items": { "type": "object" } }
                    }
                }
            }
        },
        "security": [ { "bearer": [] } ],
        "paths": {
            "/healthz": { "get": { "security": [], "summary": "Whether the server answers.", "responses": { "200": { "description": "ok", "content": { "text/plain": {} } } } } },
            "/v1/pending": { "get": {
                "summary": "Every pending decision of the store, oldest first, a page at a time.",
                "parameters": [
                    { "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 1000, "default": 100 } },
                    { "name": "cursor", "in": "query", "description": "The `nextCursor` of the previous page (`UPDATED_AT.SESSION_ID.DECISION_ID`); any other text is 422.", "schema": { "type": "string" } }
                ],
                "responses": {
                    "200": json_of(json!({ "type": "object", "required": ["pending"], "properties": { "pending": { "type": "array", "items": { "allOf": [ { "$ref": "#/components/schemas/PendingEntry" }, { "type": "object", "required": ["shown"], "properties": { "shown": { "type": "object", "description": "The entry's texts as a person must read them (`PendingSummary::shown`): every hidden or control character as its escape, nothing cut." } } } ] } }, "nextCursor": { "type": "string" }, "unreadable": { "type": "array", "description": "The stored records that cannot be read which this page met, as `pending --json` says them: `sessionId`, `location`, `reason`, and `shown`, the same three as a person must read them (every hidden or control character as its escape).", "items": { "type": "object" } } } })),
                    "401": refusals["401"], "422": refusals["422"]
                }
            } },
            "/v1/sessions": { "post": {
                "summary": "Start a session and its first run (in the background).",
                "requestBody": json_of(json!({ "type": "object", "required": ["message"], "properties": { "modeId": { "type": "string" }, "message": { "type": "string" }, "workspace": { "type": "string" } }, "additionalProperties": false })),
                "responses": { "201": json_of(session_view.clone()), "401": refusals["401"], "408": refusals["408"], "409": refusals["409"], "413": refusals["413"], "422": refusals["422"] }
            } },
            "/v1/sessions/{sessionId}": { "get": {
                "summary": "The session's mode, latest run and what waits, the allowances in force and the last plan report (planReport).",
                "parameters": [session_id],
                "responses": { "200": json_of(session_view.clone()), "401": refusals["401"], "404": refusals["404"], "409": refusals["409"] }
            } },
            "/v1/sessions/{sessionId}/messages": { "post": {
                "summary": "Send a message: a run starts in the background.",
                "parameters": [session_id],
                "requestBody": json_of(json!({ "type": "object", "required": ["message"], "properties": { "message": { "type": "string" } }, "additionalProperties": false })),
                "responses": { "202": json_of(session_view), "401": refusals["401"], "404": refusals["404"], "408": refusals["408"], "409": refusals["409"], "413": refusals["413"], "422": refusals["422"] }
            } },
            "/v1/sessions/{sessionId}/cancel": { "post": {
                "summary": "Cancel the session's run in progress (or its next run).",
                "parameters": [session_id],
                "responses": { "200": json_of(json!({ "type": "object", "properties": { "wasRunning": { "type": "boolean" } } })), "401": refusals["401"], "404": refusals["404"], "409": refusals["409"] }
            } },
            "/v1/sessions/{sessionId}/decisions/{decisionId}": { "post": {
                "summary": "Decide: approve (pinned by sha256, with a target, an edited plan, comments), reject with feedback, or answer. Answers once the decision is saved; the run goes on in the background.",
                "parameters": [session_id, decision_id],
                "requestBody": json_of(json!({ "$ref": "#/components/schemas/Decision" })),
                "responses": { "200": json_of(json!({ "$ref": "#/components/schemas/DecisionTaken" })), "401": refusals["401"], "404": refusals["404"], "408": refusals["408"], "409": refusals["409"], "413": refusals["413"], "422": answer("The body is not JSON, or not a decision, or an approval without `sha256` (the plan's sha256, or the tool call's argsSha256, as GET /v1/pending lists them).") }
            } },
            "/v1/sessions/{sessionId}/events": { "get": {
                "summary": "The session's events, as Server-Sent Events.",
                "parameters": [session_id, { "name": "Last-Event-ID", "in": "header", "schema": { "type": "string" } }],
                "responses": session_events
            } },
            "/v1/events": { "get": {
                "summary": "Every session's events, as Server-Sent Events.",
                "parameters": [{ "name": "Last-Event-ID", "in": "header", "schema": { "type": "string" } }],
                "responses": events
            } },
            "/v1/openapi.json": { "get": { "summary": "This document.", "responses": { "200": { "description": "The OpenAPI document.", "content": { "application/json": {} } }, "401": refusals["401"] } } }
        }
    })
}
