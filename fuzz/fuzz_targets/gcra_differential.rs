//! `cargo +nightly fuzz run gcra_differential`: see `limitcore_testkit::fuzz::gcra_differential` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::gcra_differential(data));
