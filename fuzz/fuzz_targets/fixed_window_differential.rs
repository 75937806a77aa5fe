//! `cargo +nightly fuzz run fixed_window_differential`: see `harness::fixed_window_differential` for what is checked.
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fixed_window_differential(data));
