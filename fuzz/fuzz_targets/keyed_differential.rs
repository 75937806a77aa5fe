//! `cargo +nightly fuzz run keyed_differential`: see `limitcore_testkit::fuzz::keyed_differential` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::keyed_differential(data));
