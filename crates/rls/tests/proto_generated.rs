//! The generated xDS resource types (`src/pb/`) are those of the `.proto` (`proto/`): the
//! file is compiled here as the crate's types were made, without protoc (protox, the
//! pure-Rust compiler, then prost-build), and the output must equal the committed file.
//!
//! After a change to the `.proto`, regenerate the committed file with
//! `LIMITCORE_RLS_REGENERATE=1 cargo test -p limitcore-rls --test proto_generated`.

use std::path::Path;

/// The `.proto` files, relative to `proto/`, and the generated file of their package.
const PROTOS: &[&str] = &["ratelimit/config/ratelimit/v3/rls_conf.proto"];
const GENERATED: &str = "ratelimit.config.ratelimit.v3.rs";

#[test]
fn the_committed_types_are_those_the_proto_generates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = protox::compile(PROTOS, [root.join("proto")]).expect("the .proto compiles");
    let out = tempfile::tempdir().expect("a temporary directory");
    prost_build::Config::new()
        // `google.protobuf.Struct` is envoy-types' own, as in every other message the
        // service handles (prost-types', prost-build's default, would be a second,
        // incompatible type): the well-known types are not taken as prost-types', and
        // their package is envoy-types'.
        .compile_well_known_types()
        .extern_path(".google.protobuf", "::envoy_types::pb::google::protobuf")
        .out_dir(out.path())
        .compile_fds(files)
        .expect("prost-build generates the types");
    let generated = std::fs::read_to_string(out.path().join(GENERATED)).expect("generated");
    let committed_path = root.join("src/pb").join(GENERATED);
    if std::env::var_os("LIMITCORE_RLS_REGENERATE").is_some() {
        std::fs::write(&committed_path, &generated).expect("write the generated file");
    }
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} differs from what {} generates: regenerate it with \
         `LIMITCORE_RLS_REGENERATE=1 cargo test -p limitcore-rls --test proto_generated`",
        committed_path.display(),
        PROTOS.join(", ")
    );
}
