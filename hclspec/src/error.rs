//! Errors from decoding configuration against a spec.

/// One reason a configuration does not decode against a spec (an hcldec error diagnostic).
///
/// `path` says where: `config` for the body itself, `image`, `port_map.http`, `mount[1].target`,
/// `service["web"].port`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The text is not HCL (or JSON) at all.
    #[error("failed to parse the configuration as {syntax}: {message}")]
    Syntax {
        /// `HCL` or `JSON`.
        syntax: &'static str,
        /// The parser's message.
        message: String,
    },
    /// An attribute the spec does not name (hcldec: "Unsupported argument").
    #[error("{path}: unsupported argument: no argument named {name:?} is expected here{hint}")]
    UnsupportedArgument {
        /// Where.
        path: String,
        /// The attribute's name.
        name: String,
        /// A suggestion, or empty.
        hint: String,
    },
    /// A block the spec does not name (hcldec: "Unsupported block type").
    #[error("{path}: unsupported block type: blocks of type {name:?} are not expected here{hint}")]
    UnsupportedBlock {
        /// Where.
        path: String,
        /// The block's type.
        name: String,
        /// A suggestion, or empty.
        hint: String,
    },
    /// A required attribute is absent (hcldec: "Missing required argument").
    #[error("{path}: missing required argument: expected an attribute, found none")]
    MissingAttribute {
        /// The attribute's path.
        path: String,
    },
    /// A required block is absent (hcldec: "Missing X block").
    #[error("{path}: missing required block: expected one block of this type, found none")]
    MissingBlock {
        /// The block's path.
        path: String,
    },
    /// An attribute given twice.
    #[error("{path}: duplicate argument: the attribute is set more than once")]
    DuplicateAttribute {
        /// The attribute's path.
        path: String,
    },
    /// A second block where only one is allowed, or a repeated block-map label.
    #[error("{path}: duplicate block: {detail}")]
    DuplicateBlock {
        /// The block's path.
        path: String,
        /// What was repeated.
        detail: String,
    },
    /// A value that does not convert to the attribute's type.
    #[error("{path}: expected {expected}, got {found} ({reason})")]
    IncorrectType {
        /// Where, down to the element that failed.
        path: String,
        /// The wanted type, as an HCL type expression.
        expected: String,
        /// What was seen.
        found: String,
        /// go-cty's reason.
        reason: String,
    },
    /// An expression that does not evaluate (unknown variable or function, bad operands).
    #[error("{path}: expression does not evaluate: {message}")]
    Expression {
        /// The attribute's path.
        path: String,
        /// The evaluator's message.
        message: String,
    },
    /// Fewer blocks than `min_items`.
    #[error("{path}: expected at least {min} block(s), found {found}")]
    TooFewBlocks {
        /// The block type's path.
        path: String,
        /// `min_items`.
        min: u64,
        /// How many there were.
        found: usize,
    },
    /// More blocks than `max_items`.
    #[error("{path}: expected at most {max} block(s), found {found}")]
    TooManyBlocks {
        /// The block type's path.
        path: String,
        /// `max_items`.
        max: u64,
        /// How many there were.
        found: usize,
    },
    /// A block with the wrong number of labels.
    #[error("{path}: expected {expected} label(s) ({names}), found {found}")]
    WrongLabels {
        /// The block's path.
        path: String,
        /// How many labels the spec wants.
        expected: usize,
        /// Their names.
        names: String,
        /// How many the block has.
        found: usize,
    },
    /// JSON that does not have the shape HCL's JSON syntax needs there.
    #[error("{path}: incorrect JSON value type: {message}")]
    IncorrectJson {
        /// Where.
        path: String,
        /// What was expected.
        message: String,
    },
    /// A nested block inside a `block_attrs` block.
    #[error(
        "{path}: blocks are not allowed here: expected only attributes, found a {name:?} block"
    )]
    BlocksNotAllowed {
        /// The enclosing block's path.
        path: String,
        /// The nested block's type.
        name: String,
    },
    /// Blocks of one type whose values have types that do not unify.
    #[error(
        "{path}: corresponding attributes in all blocks of this type must have the same type: {reason}"
    )]
    InconsistentBlocks {
        /// The block type's path.
        path: String,
        /// Which block and why.
        reason: String,
    },
    /// A spec that Nomad accepts but whose decoding makes Nomad's hcldec panic.
    #[error("{path}: {reason} (Nomad's hcldec panics on this spec instead of decoding)")]
    NomadPanics {
        /// Where in the configuration.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Every problem found decoding one configuration.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("failed to decode the configuration: {}", join(.0))]
pub struct DecodeErrors(pub Vec<DecodeError>);

fn join(errs: &[DecodeError]) -> String {
    errs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The path of a child: `name` under the root, `parent.name` below it.
pub(crate) fn child_path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// A path for messages: the root body is `config`.
pub(crate) fn shown(path: &str) -> String {
    if path.is_empty() {
        "config".to_string()
    } else {
        path.to_string()
    }
}
