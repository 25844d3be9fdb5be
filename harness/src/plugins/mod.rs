//! How to talk to a plugin of each kind: faithful transport and timing, no assertions.
pub mod csi;
pub mod dhv;
pub mod driver;
pub mod lock;
