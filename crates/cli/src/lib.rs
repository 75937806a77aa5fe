//! The library behind the `limitcore` command: what each of limitcore's limiters would have
//! done to real traffic, and how evenly its pacer spaces a load generator's sends.
//!
//! - [`trace`]: access logs (NASA-HTTP TSV, SEC EDGAR CSV, Apache/nginx combined log format)
//!   parsed into per-client requests at nanosecond times, malformed lines counted with their
//!   line numbers; and a deterministic synthetic trace.
//! - [`engine`]: a trace replayed through one algorithm, sharded by client, checked against
//!   the algorithm's reference model and against its per-client window promise.
//! - [`report`]: the replay's table, JSON and SVG plot.
//! - [`pace`]: an open-loop load generator paced by limitcore's `LeakyBucket`, beside the
//!   same run paced by governor's `until_ready`, and the figures of both.
//! - [`copy`]: a file copied through limitcore's paced writer on a `Budget`, with the rate it
//!   achieved and the most bytes written in any 1 s window.
//! - [`lanes`]: priority lanes over one byte budget on real files (`limitcore lanes`).
//! - [`scale`]: how each limiter scales from one thread to every core, beside its peers and
//!   the floor of a bare atomic add (`limitcore bench`).
//!
//! The command line (`src/main.rs`, binary `limitcore`) is a thin layer over these modules:
//! `limitcore replay [LOG] [--quota 10/s] ...`, `limitcore pace [--rate R] ...`,
//! `limitcore copy SRC DST --rate 64MiB/s ...`, `limitcore lanes [--rate 64MiB/s] ...` and
//! `limitcore bench [--threads 1,2,4] [--seconds 1] ...`.
//!
//! # Layers
//!
//! Each layer uses only the ones below it, without a cycle; no module imports through
//! this file, which only re-exports (`tests/layers.rs` of the workspace checks it, with
//! the layers, on the source: `cargo test -p limitcore --test layers`):
//! the traces ([`trace`]); the tools ([`engine`], [`pace`], [`lanes`], [`copy`], [`scale`]);
//! the reports ([`report`], from the engine's outcomes).
//!
//! # Examples
//!
//! Replay a small log through GCRA at one request per second per client:
//!
//! ```
//! use limitcore_cli::engine::{self, Algorithm, Settings};
//! use limitcore_cli::trace;
//!
//! let log = "\
//! 10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET / HTTP/1.0\" 200 1
//! 10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET / HTTP/1.0\" 200 1
//! 10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET / HTTP/1.0\" 200 1
//! ";
//! let trace = trace::read(log.as_bytes(), |_bytes| {})?;
//! let settings = Settings { quota: "1/s".parse()?, global: None, threads: 1 };
//! let outcome = engine::replay(&trace, Algorithm::Gcra, &settings)?;
//! // Three requests logged in one second (spread 1/3 s apart): GCRA at 1/s admits the first.
//! assert_eq!(outcome.admitted, vec![true, false, false]);
//! assert_eq!(outcome.differing, 0); // the reference model agrees
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod copy;
pub mod engine;
pub mod lanes;
pub mod pace;
pub mod report;
pub mod scale;
pub mod trace;
