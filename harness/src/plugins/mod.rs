//! How to talk to a plugin of each kind: faithful transport and timing, no assertions.
pub mod csi;
pub mod dhv;
pub mod driver;
pub mod grpc;
pub mod lock;
pub mod variables;

/// Where our .proto files are, for the grpcurl commands in reproduce blocks (plugins rarely
/// serve gRPC reflection): the source tree the binary was built from while it is still there,
/// else where the Debian package installs them, else a placeholder the reader replaces. Looked
/// up once per run: every recorded call's reproduce line names it.
pub fn proto_dir() -> &'static str {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let built = concat!(env!("CARGO_MANIFEST_DIR"), "/../proto/proto");
        [built, INSTALLED_PROTOS]
            .iter()
            .find_map(|d| std::path::Path::new(d).canonicalize().ok())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "NOMAD_CONFORM_SOURCE/proto/proto".into())
    })
}

/// The Debian package's copy of proto/proto (harness/Cargo.toml, `[package.metadata.deb]`).
pub const INSTALLED_PROTOS: &str = "/usr/share/nomad-conform/proto";
