//! `cargo +nightly fuzz run quota_parse`: see `limitcore_testkit::fuzz::quota_parse` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::quota_parse(data));
