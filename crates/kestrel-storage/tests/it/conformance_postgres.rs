//! The conformance suite on the postgres backend.

kestrel_storage::conformance_tests!(kestrel_storage::testing::postgres);
