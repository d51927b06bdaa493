//! The bearer tokens of `serve`: `AGENT_CONTROLLER_TOKEN` (one, unnamed),
//! `AGENT_CONTROLLER_TOKENS` (`alice=TOKEN1,bob=TOKEN2`: the name is who decided, `decidedBy`),
//! or one generated at start and shown once on stderr. Compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The shortest token taken from the environment: a short one is guessed.
const MIN_TOKEN_CHARS: usize = 16;

/// One token: its SHA-256 (compared, so every comparison takes the same time whatever the
/// lengths) and the name of whoever holds it.
struct Token {
    digest: [u8; 32],
    name: Option<String>,
}

/// The tokens the server takes.
pub(crate) struct Tokens {
    tokens: Vec<Token>,
    /// The generated token, shown once at start.
    generated: Option<String>,
}

impl Tokens {
    /// The tokens the environment gives, else one generated now.
    ///
    /// # Errors
    /// A message when `AGENT_CONTROLLER_TOKENS` is not `NAME=TOKEN,...`, a name repeats, or a
    /// token is shorter than 16 characters.
    pub(crate) fn from_env() -> Result<Self, String> {
        Self::from_values(
            std::env::var("AGENT_CONTROLLER_TOKEN").ok(),
            std::env::var("AGENT_CONTROLLER_TOKENS").ok(),
        )
    }

    fn from_values(single: Option<String>, named: Option<String>) -> Result<Self, String> {
        let mut tokens = Vec::new();
        if let Some(token) = single.filter(|t| !t.is_empty()) {
            check_token(&token, "AGENT_CONTROLLER_TOKEN")?;
            tokens.push(Token {
                digest: digest(&token),
                name: None,
            });
        }
        for entry in named.iter().flat_map(|list| list.split(',')) {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let Some((name, token)) = entry.split_once('=') else {
                return Err(
                    "AGENT_CONTROLLER_TOKENS takes NAME=TOKEN pairs separated by commas".to_owned(),
                );
            };
            let name = name.trim();
            let valid = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c));
            if !valid {
                return Err(format!(
                    "AGENT_CONTROLLER_TOKENS: a name is 1 to 64 ASCII letters, digits, `-`, `_`, `.` or `@`, not `{}`",
                    agent_controller::display::neutralize_line(name)
                ));
            }
            if tokens.iter().any(|t| t.name.as_deref() == Some(name)) {
                return Err(format!("AGENT_CONTROLLER_TOKENS names `{name}` twice"));
            }
            check_token(token, &format!("the token of `{name}`"))?;
            tokens.push(Token {
                digest: digest(token),
                name: Some(name.to_owned()),
            });
        }
        if !tokens.is_empty() {
            return Ok(Self {
                tokens,
                generated: None,
            });
        }
        let token = generate()?;
        Ok(Self {
            tokens: vec![Token {
                digest: digest(&token),
                name: None,
            }],
            generated: Some(token),
        })
    }

    /// Whether the token was generated here (none came from the environment).
    pub(crate) fn generated(&self) -> bool {
        self.generated.is_some()
    }

    /// The generated token, to show once.
    pub(crate) fn shown_once(&self) -> Option<&str> {
        self.generated.as_deref()
    }

    /// Who holds the token of `header` (an `Authorization` value, `Bearer TOKEN`, the scheme in
    /// any case): `Some(name)`
    /// (`None` inside for an unnamed token), or `None` when it is no token of the server's.
    /// Every token is compared, each in constant time.
    pub(crate) fn holder(&self, header: Option<&str>) -> Option<Option<&str>> {
        // The scheme is case-insensitive (RFC 9110, 11.1): `bearer TOKEN` is the same.
        let (scheme, given) = header?.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let given = given.trim();
        let given = digest(given);
        let mut found = None;
        for token in &self.tokens {
            if bool::from(token.digest[..].ct_eq(&given[..])) {
                found = Some(token.name.as_deref());
            }
        }
        found
    }
}

fn check_token(token: &str, what: &str) -> Result<(), String> {
    if token.chars().count() < MIN_TOKEN_CHARS || token.chars().any(char::is_whitespace) {
        return Err(format!(
            "{what} must be at least {MIN_TOKEN_CHARS} characters, without spaces"
        ));
    }
    Ok(())
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// 32 random bytes as hex.
fn generate() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("cannot generate a token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_tokens_name_their_holder_and_others_are_refused() {
        let tokens = Tokens::from_values(
            None,
            Some("alice=aaaaaaaaaaaaaaaa1,bob=bbbbbbbbbbbbbbbb2".into()),
        )
        .expect("as expected");
        assert!(!tokens.generated());
        assert_eq!(
            tokens.holder(Some("Bearer aaaaaaaaaaaaaaaa1")),
            Some(Some("alice"))
        );
        assert_eq!(
            tokens.holder(Some("Bearer bbbbbbbbbbbbbbbb2")),
            Some(Some("bob"))
        );
        assert_eq!(tokens.holder(Some("Bearer aaaaaaaaaaaaaaaa")), None);
        assert_eq!(tokens.holder(Some("aaaaaaaaaaaaaaaa1")), None);
        assert_eq!(
            tokens.holder(Some("bearer aaaaaaaaaaaaaaaa1")),
            Some(Some("alice"))
        );
        assert_eq!(tokens.holder(Some("Basic aaaaaaaaaaaaaaaa1")), None);
        assert_eq!(tokens.holder(None), None);
    }

    #[test]
    fn a_short_token_or_a_malformed_list_is_refused() {
        assert!(Tokens::from_values(Some("short".into()), None).is_err());
        assert!(Tokens::from_values(None, Some("alice".into())).is_err());
        assert!(Tokens::from_values(None, Some("a b=cccccccccccccccccc".into())).is_err());
        let twice = "x=cccccccccccccccccc,x=dddddddddddddddddd";
        assert!(Tokens::from_values(None, Some(twice.into())).is_err());
    }

    #[test]
    fn without_the_environment_a_token_is_generated() {
        let tokens = Tokens::from_values(None, None).expect("as expected");
        let token = tokens.shown_once().expect("as expected").to_owned();
        assert_eq!(token.len(), 64);
        assert_eq!(tokens.holder(Some(&format!("Bearer {token}"))), Some(None));
    }
}
