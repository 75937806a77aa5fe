//! `cargo +nightly fuzz run quota_parse`: see `harness::quota_parse` for what is checked.
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::quota_parse(data));
