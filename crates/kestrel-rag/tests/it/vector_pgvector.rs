//! The vector store conformance suite on the pgvector backend.

kestrel_rag::vector_store_tests!(kestrel_rag::testing::pgvector);
