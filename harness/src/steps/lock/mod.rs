//! Step definitions of the singleton lock client suite.
