//! `cargo +nightly fuzz run sliding_window_differential`: see `limitcore_testkit::fuzz::sliding_window_differential` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::sliding_window_differential(data));
