//! `cargo +nightly fuzz run keyed_differential`: see `harness::keyed_differential` for what is checked.
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::keyed_differential(data));
