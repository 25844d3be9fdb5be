//! Step definitions of the Variables server suite.
