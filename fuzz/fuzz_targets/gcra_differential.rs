//! `cargo +nightly fuzz run gcra_differential`: see `harness::gcra_differential` for what is checked.
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::gcra_differential(data));
