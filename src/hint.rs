//! "Did you mean" hints for a user's id that names nothing: the one helper the config loader
//! and every lookup of a mode id, target, provider or name use, so that a case-only or
//! near miss is hinted the same way everywhere. A leaf module: it names no other.

/// The candidate `name` is most likely a typo of, for a "did you mean" hint: one equal to it but
/// for case, else the nearest within two edits (case ignored) when no other is as near; `None`
/// when no candidate is near or `name` is itself a candidate.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    let mut tied = false;
    for candidate in candidates {
        if candidate == name {
            return None;
        }
        let distance = edit_distance(&lower, &candidate.to_lowercase());
        match best {
            Some((d, _)) if distance > d => {}
            Some((d, c)) if distance == d => tied |= c != candidate,
            _ => {
                best = Some((distance, candidate));
                tied = false;
            }
        }
    }
    match best {
        Some((0, candidate)) => Some(candidate),
        Some((distance, candidate))
            if distance <= 2 && !tied && distance < lower.chars().count() =>
        {
            Some(candidate)
        }
        _ => None,
    }
}

/// The Levenshtein distance between `a` and `b` in characters (insertions, deletions and
/// substitutions each count one), for "did you mean" hints on short names.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The hint for an unknown `name` among the ids or names a user could have meant
/// (`candidates`), as the config loader gives it: `did you mean `near`? (WHAT are
/// case-sensitive)` when `name` differs from `near` only in case, `did you mean `near`?` when
/// it is within two edits of one candidate ([`did_you_mean`]); `None` when no candidate is near.
/// `what` names the kind in the plural (`mode ids`, `tool names`). Only a candidate is quoted,
/// never `name`, so a hostile name adds nothing to the text.
pub(crate) fn hint<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    what: &str,
) -> Option<String> {
    let near = did_you_mean(name, candidates)?;
    Some(if near.to_lowercase() == name.to_lowercase() {
        format!("did you mean `{near}`? ({what} are case-sensitive)")
    } else {
        format!("did you mean `{near}`?")
    })
}

#[cfg(test)]
mod tests {
    /// The one hint every lookup of a user's id gives: case-only, near, or none (a tie, a
    /// far name, the name itself).
    #[test]
    fn the_hint_names_the_candidate_meant_and_says_when_only_case_differs() {
        let modes = ["plan", "build", "build-auto"];
        let hint = |name| super::hint(name, modes, "mode ids");
        assert_eq!(
            hint("Build-auto").as_deref(),
            Some("did you mean `build-auto`? (mode ids are case-sensitive)")
        );
        assert_eq!(hint("biuld").as_deref(), Some("did you mean `build`?"));
        assert_eq!(hint("nowhere"), None);
        assert_eq!(hint("build"), None, "a known name needs no hint");
        assert_eq!(
            super::hint("ab", ["aa", "bb"], "ids"),
            None,
            "a tie hints nothing"
        );
        assert_eq!(
            super::hint("x", ["y"], "ids"),
            None,
            "every character changed"
        );
    }
}
