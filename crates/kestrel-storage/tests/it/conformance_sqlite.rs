//! The conformance suite on the sqlite backend.

kestrel_storage::conformance_tests!(kestrel_storage::testing::sqlite);
