//! `cargo +nightly fuzz run token_bucket_differential`: see `limitcore_testkit::fuzz::token_bucket_differential` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::token_bucket_differential(data));
