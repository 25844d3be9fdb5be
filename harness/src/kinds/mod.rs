//! One module per plugin kind: turns the kind's options into a run (validation, capability
//! probe, rerun command) and hands it to the generic runner.
pub mod csi;
pub mod dhv;
pub mod driver;
pub mod lock;
pub mod variables;
