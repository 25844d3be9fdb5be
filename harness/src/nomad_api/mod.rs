//! The Nomad HTTP API client, one for the whole project: `fleet collect` reads allocations and
//! their files with it, the lock suite's proxy forwards clients' requests through it to a real
//! Nomad (`lock --nomad-addr`) and the harness's own lock holder calls through it, and the
//! Variables suite checks a server with it (`variables --nomad-addr`).
//!
//! - [`address`]: `http://`, `https://` and `unix://` addresses, as `NOMAD_ADDR` takes them;
//! - [`tls`]: rustls for `https://` (a CA file or directory or the system's store, a client
//!   certificate, a server name, no verification), and one sentence per failed handshake;
//! - [`client`]: one exchange on a fresh connection ([`call`], [`exchange`]);
//! - [`settings`]: flags, `NOMAD_CONFORM_*`, nomad-conform.toml and the nomad CLI's own
//!   variables resolved into [`ApiSettings`];
//! - [`api`]: reading the API as one caller (token, namespace, region) with Nomad's errors.
//!
//! The token is sent as `X-Nomad-Token` and registered with [`crate::secrets`]; a client key
//! is read by rustls and never shown (only its path is, in the report's subject).

pub mod address;
pub mod api;
pub mod client;
pub mod settings;
pub mod tls;

pub use address::{Address, Upstream};
pub use api::{ApiError, NomadApi, encode};
pub use client::{Answer, CallError, Target, call, exchange};
pub use settings::{AddrFallback, ApiSettings};
pub use tls::{TlsClient, TlsSettings};
