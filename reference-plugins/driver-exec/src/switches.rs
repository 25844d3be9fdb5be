//! Named command-line switches: the machinery shared by `--fault NAME` ([`crate::faults`]) and
//! `--variant NAME` ([`crate::variants`]).
//!
//! Each switch is an enum variant with a kebab-case name and one sentence saying what it
//! changes. [`switches!`] writes the enum, its list, its names and its parsing from one table,
//! so the table in `faults.rs` or `variants.rs` is the only place a switch is described.

use std::collections::BTreeSet;
use std::fmt;

/// Declares a switch enum from a table of `Variant = "name": "what it changes",`.
macro_rules! switches {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($kind:literal) {
            $($variant:ident = $text:literal : $rule:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($variant,)+
        }

        impl $name {
            /// Every switch, in the order `--help` lists them.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The name given on the command line.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// What switching it on changes.
            pub fn rule(self) -> &'static str {
                match self {
                    $($name::$variant => $rule,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(name: &str) -> Result<Self, Self::Err> {
                $name::ALL.iter().copied().find(|s| s.name() == name).ok_or_else(|| {
                    let known: Vec<&str> = $name::ALL.iter().map(|s| s.name()).collect();
                    format!("unknown {} '{name}'; known: {}", $kind, known.join(", "))
                })
            }
        }
    };
}

pub(crate) use switches;

/// The switches of one kind that are on for this run; empty for the default plugin.
#[derive(Clone, Debug)]
pub struct Set<T: Ord>(BTreeSet<T>);

impl<T: Ord> Default for Set<T> {
    fn default() -> Self {
        Set(BTreeSet::new())
    }
}

impl<T: Ord + Copy + fmt::Display> Set<T> {
    pub fn new(switches: impl IntoIterator<Item = T>) -> Self {
        Set(switches.into_iter().collect())
    }

    /// Whether `switch` is on.
    pub fn has(&self, switch: T) -> bool {
        self.0.contains(&switch)
    }
}

impl<T: Ord + fmt::Display> fmt::Display for Set<T> {
    /// The names, comma-separated; "none" for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&names.join(", "))
    }
}

/// One `--help` section: a heading, then each switch's name and what it changes.
pub fn help_section(heading: &str, entries: &[(&str, &str)]) -> String {
    let mut text = format!("{heading}\n");
    for (name, rule) in entries {
        text.push_str(&format!("  {name:<34} {rule}\n"));
    }
    text
}
