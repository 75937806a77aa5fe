//! `cargo +nightly fuzz run leaky_bucket_differential`: see `limitcore_testkit::fuzz::leaky_bucket_differential` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| limitcore_testkit::fuzz::leaky_bucket_differential(data));
