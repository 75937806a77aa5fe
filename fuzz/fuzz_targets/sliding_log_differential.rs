//! `cargo +nightly fuzz run sliding_log_differential`: see `limitcore_testkit::fuzz::sliding_log_differential` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::sliding_log_differential(data));
