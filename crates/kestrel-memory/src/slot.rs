//! Where a [`Memory`](crate::Memory)'s store is: given when it was built, or its instance's.
//!
//! A memory built without a store (`Memory::default()`, `Memory::builder().build()`) takes the
//! storage of the instance its agent joins (`Kestrel::builder().storage(..)`), once; the memory
//! and every tool and processor it made share one slot, so all of them see the store from then
//! on.

use std::sync::{Arc, OnceLock};

use kestrel_core::memory::MemoryError;
use kestrel_core::store::Stores;
use kestrel_storage::Storage;

use crate::error::Error;

/// A memory's store, shared by the memory and what it made. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct StoreSlot {
    bound: Arc<OnceLock<Bound>>,
}

struct Bound {
    storage: Arc<dyn Storage>,
    /// Given to the memory itself: it stands over any instance's.
    own: bool,
}

impl StoreSlot {
    /// A slot holding the memory's own store.
    pub(crate) fn own(storage: Arc<dyn Storage>) -> Self {
        let bound = OnceLock::new();
        // A fresh lock: the set cannot fail.
        let _ = bound.set(Bound { storage, own: true });
        Self {
            bound: Arc::new(bound),
        }
    }

    /// The store, once there is one.
    pub(crate) fn get(&self) -> Option<&Arc<dyn Storage>> {
        self.bound.get().map(|bound| &bound.storage)
    }

    /// The store, or [`Error::NoStorage`].
    pub(crate) fn require(&self) -> Result<&Arc<dyn Storage>, Error> {
        self.get().ok_or(Error::NoStorage)
    }

    /// Takes the store `stores` were made from when there is none yet. A store of the
    /// memory's own stays; a store taken from one instance refuses another instance's.
    pub(crate) fn attach(&self, stores: &Stores) -> Result<(), MemoryError> {
        let Some(storage) = stores.backend::<Arc<dyn Storage>>() else {
            return Ok(());
        };
        let bound = self.bound.get_or_init(|| Bound {
            storage: Arc::clone(storage),
            own: false,
        });
        if bound.own || same(&bound.storage, storage) {
            Ok(())
        } else {
            Err(MemoryError::new(format!(
                "it already uses another instance's storage ({}); give each instance its own \
                 memory, or give the memory a store of its own (Memory::builder().storage(..))",
                bound.storage.backend()
            )))
        }
    }
}

/// Whether `a` and `b` are the same store (compared by address, not by vtable).
fn same(a: &Arc<dyn Storage>, b: &Arc<dyn Storage>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}
