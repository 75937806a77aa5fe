//! `cargo +nightly fuzz run sliding_window_differential`: see `harness::sliding_window_differential` for what is checked.
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::sliding_window_differential(data));
