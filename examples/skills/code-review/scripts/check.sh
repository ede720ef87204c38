#!/bin/sh
# The checks a reviewer runs before reading the change.
set -e
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
