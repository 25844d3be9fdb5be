//! Step definitions, one module per plugin kind.
pub mod dhv;
