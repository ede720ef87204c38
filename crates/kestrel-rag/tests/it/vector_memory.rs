//! The vector store conformance suite on the memory backend.

kestrel_rag::vector_store_tests!(kestrel_rag::testing::memory);
