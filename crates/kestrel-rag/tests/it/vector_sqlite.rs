//! The vector store conformance suite on the sqlite backend.

kestrel_rag::vector_store_tests!(kestrel_rag::testing::sqlite);
