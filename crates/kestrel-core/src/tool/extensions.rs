//! A typed map on the tool context: what a layer above the tools (delegation, background
//! tasks, a user's own integration) hands to the tools it runs, without the context naming it.

use std::any::{Any, TypeId};
use std::sync::Arc;

/// Values by type, one per type. Cloning shares the values.
#[derive(Clone, Default)]
pub struct Extensions {
    // A handful of entries at most: a list searched in order beats hashing type ids.
    map: Vec<(TypeId, Arc<dyn Any + Send + Sync>)>,
}

impl Extensions {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the value of type `T`, replacing any before it.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        let value: Arc<dyn Any + Send + Sync> = Arc::new(value);
        match self.map.iter_mut().find(|(key, _)| *key == id) {
            Some(entry) => entry.1 = value,
            None => self.map.push((id, value)),
        }
    }

    /// The value of type `T`, if one was set.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.map
            .iter()
            .find(|(key, _)| *key == id)
            .and_then(|(_, value)| value.downcast_ref::<T>())
    }

    /// Whether no value is set.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.map.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn one_value_per_type() {
        let mut extensions = Extensions::new();
        assert!(extensions.is_empty());
        assert_eq!(extensions.get::<u32>(), None);
        extensions.insert(1u32);
        extensions.insert("name");
        extensions.insert(2u32);
        assert_eq!(extensions.get::<u32>(), Some(&2));
        assert_eq!(extensions.get::<&str>(), Some(&"name"));
        let shared = extensions.clone();
        assert_eq!(shared.get::<u32>(), Some(&2));
    }
}
