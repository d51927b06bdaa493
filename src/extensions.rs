//! [`Extensions`]: a host's own state, one value per type, carried by a session to its tools and
//! its model (like `http::Extensions` on a request).

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A typed map of host state: at most one value per type, reachable from tools
/// ([`crate::tool::ToolContext::extensions`]) and models
/// ([`crate::model::ModelRequest::extensions`]).
///
/// Set it per session with [`crate::SessionOptions::extension`]. Values are shared, not copied,
/// between the session and the calls that see them; put an `Arc<Mutex<..>>` in for state a tool
/// changes. A session's subagents (children started by its `subagent` calls) see the session's
/// extensions too: they run in the same host. Extensions live in memory only: they are not persisted (use
/// [`crate::SessionOptions::metadata`] for data that must survive a restore).
///
/// # Examples
/// ```
/// use agent_controller::extensions::Extensions;
///
/// #[derive(Debug, PartialEq)]
/// struct UserId(u64);
///
/// let mut extensions = Extensions::new();
/// assert!(extensions.insert(UserId(7)).is_none());
/// assert_eq!(extensions.get::<UserId>(), Some(&UserId(7)));
/// assert_eq!(extensions.get::<String>(), None);
/// assert_eq!(extensions.insert(UserId(8)).map(|old| old.0), Some(7));
/// ```
#[derive(Clone, Default)]
pub struct Extensions {
    values: BTreeMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.values.len())
            .finish_non_exhaustive()
    }
}

impl Extensions {
    /// An empty map.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::extensions::Extensions;
    /// let extensions = Extensions::new();
    /// assert!(extensions.is_empty());
    /// ```
    pub const fn new() -> Self {
        Self {
            values: BTreeMap::new(),
        }
    }

    /// Stores `value`, replacing (and returning) the value of the same type, if any.
    ///
    /// Returns `None` as well when the old value is still shared with a running call.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::extensions::Extensions;
    /// #[derive(Debug, PartialEq)]
    /// struct TenantId(&'static str);
    /// let mut extensions = Extensions::new();
    /// assert_eq!(extensions.insert(TenantId("acme")), None);
    /// assert_eq!(extensions.insert(TenantId("globex")), Some(TenantId("acme")), "one value per type");
    /// ```
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) -> Option<T> {
        let old = self.values.insert(TypeId::of::<T>(), Arc::new(value))?;
        Arc::downcast::<T>(old)
            .ok()
            .and_then(|old| Arc::try_unwrap(old).ok())
    }

    /// The value of type `T`, if one was inserted.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::extensions::Extensions;
    /// struct TenantId(&'static str);
    /// let mut extensions = Extensions::new();
    /// extensions.insert(TenantId("acme"));
    /// assert_eq!(extensions.get::<TenantId>().map(|t| t.0), Some("acme"));
    /// assert!(extensions.get::<String>().is_none());
    /// ```
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
    }

    /// Whether a value of type `T` is stored.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::extensions::Extensions;
    /// let mut extensions = Extensions::new();
    /// extensions.insert(42u32);
    /// assert!(extensions.contains::<u32>());
    /// assert!(!extensions.contains::<u64>());
    /// ```
    pub fn contains<T: Send + Sync + 'static>(&self) -> bool {
        self.values.contains_key(&TypeId::of::<T>())
    }

    /// How many values are stored.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::extensions::Extensions;
    /// let mut extensions = Extensions::new();
    /// extensions.insert(1u8);
    /// extensions.insert("two");
    /// assert_eq!(extensions.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no value is stored.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::extensions::Extensions;
    /// let mut extensions = Extensions::new();
    /// assert!(extensions.is_empty());
    /// extensions.insert(1u8);
    /// assert!(!extensions.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// An empty map, for contexts built outside a session (tests of a single tool).
pub(crate) static EMPTY: Extensions = Extensions::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_per_type() {
        let mut extensions = Extensions::new();
        extensions.insert(1u32);
        extensions.insert("text");
        assert_eq!(extensions.get::<u32>(), Some(&1));
        assert_eq!(extensions.get::<&str>(), Some(&"text"));
        assert_eq!(extensions.insert(2u32), Some(1));
        assert_eq!(extensions.len(), 2);
        assert!(!extensions.contains::<u64>());
    }
}
