//! The conformance suite on the memory backend.

kestrel_storage::conformance_tests!(kestrel_storage::testing::memory);
