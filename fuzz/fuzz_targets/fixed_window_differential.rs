//! `cargo +nightly fuzz run fixed_window_differential`: see `limitcore_testkit::fuzz::fixed_window_differential` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::fixed_window_differential(data));
