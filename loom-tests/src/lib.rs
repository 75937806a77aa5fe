//! Loom models of limitcore's CAS protocols live in `tests/`; see the README there.
