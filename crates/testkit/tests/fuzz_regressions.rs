//! The cargo-fuzz targets' drivers (`limitcore_testkit::fuzz`), run on stable by
//! `cargo test`: every committed input under `fuzz/regressions/<target>/` (at the
//! repository's root), then a fixed set of pseudo-random inputs. The fuzzing itself
//! (nightly, libFuzzer) is `.ci/fuzz.sh`.

use limitcore_testkit::fuzz as harness;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Pseudo-random inputs per target, on top of the committed ones.
const RANDOM_INPUTS: usize = 2_000;

/// The committed inputs of `target`, sorted by name. Fails if there are none, so that the
/// test cannot pass by finding nothing to run.
fn regression_inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.is_file())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "{} holds no regression inputs: the test would pass vacuously",
        dir.display()
    );
    files
}

/// Run `input` through `harness`, naming the input if it fails.
fn run_one(harness: fn(&[u8]), input: &[u8], name: &dyn Fn() -> String) {
    if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| harness(input))) {
        eprintln!("failing input: {}", name());
        panic::resume_unwind(panic);
    }
}

/// xorshift64*: a tiny fixed-seed generator, so the "random" inputs are the same on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Up to 1 KiB of bytes: short inputs are as common as long ones.
    fn input(&mut self) -> Vec<u8> {
        let len = match self.next() % 4 {
            0 => self.next() % 16,
            1 => self.next() % 128,
            _ => self.next() % 1024,
        } as usize;
        (0..len).map(|_| (self.next() >> 56) as u8).collect()
    }
}

fn run_target(target: &str, harness: fn(&[u8]), seed: u64) {
    let files = regression_inputs(target);
    for path in &files {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        run_one(harness, &data, &|| path.display().to_string());
    }
    let mut rng = XorShift(seed);
    for i in 0..RANDOM_INPUTS {
        let data = rng.input();
        run_one(harness, &data, &|| {
            format!("pseudo-random input #{i} (seed {seed:#x}): {data:02x?}")
        });
    }
}

#[test]
fn gcra_differential() {
    run_target(
        "gcra_differential",
        harness::gcra_differential,
        0x9e37_79b9_7f4a_7c15,
    );
}

#[test]
fn token_bucket_differential() {
    run_target(
        "token_bucket_differential",
        harness::token_bucket_differential,
        0xd1b5_4a32_d192_ed03,
    );
}

#[test]
fn budget_differential() {
    run_target(
        "budget_differential",
        harness::budget_differential,
        0x2545_f491_4f6c_dd1d,
    );
}

#[test]
fn quota_parse() {
    run_target("quota_parse", harness::quota_parse, 0x8cb9_2ba7_2f3d_8dd7);
}

#[test]
fn fixed_window_differential() {
    run_target(
        "fixed_window_differential",
        harness::fixed_window_differential,
        0x6a09_e667_f3bc_c908,
    );
}

#[test]
fn sliding_log_differential() {
    run_target(
        "sliding_log_differential",
        harness::sliding_log_differential,
        0xbb67_ae85_84ca_a73b,
    );
}

#[test]
fn sliding_window_differential() {
    run_target(
        "sliding_window_differential",
        harness::sliding_window_differential,
        0x3c6e_f372_fe94_f82b,
    );
}

#[test]
fn leaky_bucket_differential() {
    run_target(
        "leaky_bucket_differential",
        harness::leaky_bucket_differential,
        0xa54f_f53a_5f1d_36f1,
    );
}

#[test]
fn keyed_differential() {
    run_target(
        "keyed_differential",
        harness::keyed_differential,
        0x510e_527f_ade6_82d1,
    );
}
