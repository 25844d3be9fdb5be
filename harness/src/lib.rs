//! nomad-conform: a conformance harness for HashiCorp Nomad plugins.
pub mod process;
