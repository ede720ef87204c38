//! kestrel-otlp's tests: an instance's traces sent to a real OTLP receiver (oteltap), as JSON to
//! a local endpoint, and to endpoints that are down or stuck.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod oteltap;
