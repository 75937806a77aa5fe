//! `cargo +nightly fuzz run leaky_bucket_differential`: see `harness::leaky_bucket_differential` for what is checked.
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::leaky_bucket_differential(data));
