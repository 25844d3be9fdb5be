//! How to talk to a Variables server (Nomad's agent API or the reference server): one recorded
//! HTTP exchange at a time, nothing judged.

pub mod api;

pub use api::{Call, Credential, Endpoint, Exchange, encode_path, encode_query, send};
