//! `cargo +nightly fuzz run sliding_log_differential`: see `harness::sliding_log_differential` for what is checked.
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::sliding_log_differential(data));
