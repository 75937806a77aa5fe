//! `cargo +nightly fuzz run budget_differential`: see `limitcore_testkit::fuzz::budget_differential` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::budget_differential(data));
