//! The spec tree: a driver's `hclspec.Spec` converted the way Nomad's
//! `hclspecutils.Convert` converts it, with the same things rejected.

use std::collections::BTreeMap;
use std::fmt;

use nomad_conform_proto::nomad::hclspec as proto;
use proto::spec::Block as Kind;

use crate::types::Type;
use crate::value::Value;

/// One node of a converted hclspec (mirrors `hcldec.Spec`).
#[derive(Clone, Debug, PartialEq)]
pub enum SpecTree {
    /// An object whose attributes are decoded from the same body (`hcldec.ObjectSpec`).
    Object(BTreeMap<String, SpecTree>),
    /// A tuple whose elements are decoded from the same body (`hcldec.TupleSpec`).
    Array(Vec<SpecTree>),
    /// One attribute, converted to `ty` (`hcldec.AttrSpec`).
    Attr {
        /// Attribute name in the body.
        name: String,
        /// Type the value is converted to.
        ty: Type,
        /// Whether the attribute must be present.
        required: bool,
    },
    /// At most one block, decoded with `nested`; null when absent (`hcldec.BlockSpec`).
    Block {
        /// Block type name.
        name: String,
        /// Whether the block must be present.
        required: bool,
        /// Spec for the block's body.
        nested: Box<SpecTree>,
    },
    /// One block whose attributes form a `map(element_type)` (`hcldec.BlockAttrsSpec`).
    BlockAttrs {
        /// Block type name.
        name: String,
        /// Type of each attribute value.
        element_type: Type,
        /// Whether the block must be present.
        required: bool,
    },
    /// Every block of a type, as a list (`hcldec.BlockListSpec`).
    BlockList {
        /// Block type name.
        name: String,
        /// Fewest blocks allowed.
        min_items: u64,
        /// Most blocks allowed; 0 means no limit.
        max_items: u64,
        /// Spec for each block's body.
        nested: Box<SpecTree>,
    },
    /// Every block of a type, as a set (`hcldec.BlockSetSpec`).
    BlockSet {
        /// Block type name.
        name: String,
        /// Fewest blocks allowed.
        min_items: u64,
        /// Most blocks allowed; 0 means no limit.
        max_items: u64,
        /// Spec for each block's body.
        nested: Box<SpecTree>,
    },
    /// Labelled blocks, as nested maps keyed by the labels (`hcldec.BlockMapSpec`).
    BlockMap {
        /// Block type name.
        name: String,
        /// Label names, outermost map first (at least one).
        labels: Vec<String>,
        /// Spec for each block's body.
        nested: Box<SpecTree>,
    },
    /// `primary`, or `default` when `primary` decodes to null (`hcldec.DefaultSpec`).
    Default {
        /// The spec tried first.
        primary: Box<SpecTree>,
        /// The spec used when the primary value is null.
        default: Box<SpecTree>,
    },
    /// A constant value (`hcldec.LiteralSpec`).
    Literal {
        /// The HCL expression as the plugin sent it.
        source: String,
        /// Its value.
        value: Value,
    },
}

/// A reason Nomad's `hclspecutils.Convert` rejects a spec (or would crash on it).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// No spec at all (`TaskConfigSchemaResponse.spec` unset).
    #[error("no spec was given (Nomad: \"nil spec given\")")]
    NilSpec,
    /// A `Spec` message with no member of its `block` oneof set.
    #[error("{path}: the spec has none of its kinds set (Nomad: \"Invalid spec block\")")]
    EmptySpec {
        /// Where in the spec.
        path: String,
    },
    /// A named spec kind without a name (and no object key to imply one).
    #[error("{path}: {kind} spec has no name (Nomad: \"Missing name in {kind} spec\")")]
    MissingName {
        /// Where in the spec.
        path: String,
        /// `attribute`, `block_attrs`, `block_list`, `block_set` or `block_map`.
        kind: &'static str,
    },
    /// A block spec without its nested spec.
    #[error("{path}: {kind} spec has no nested spec (Nomad: \"Missing spec block\")")]
    MissingNested {
        /// Where in the spec.
        path: String,
        /// `block`, `block_list`, `block_set` or `block_map`.
        kind: &'static str,
    },
    /// A `block_map` with no labels.
    #[error("{path}: block_map spec has no labels (Nomad: \"Invalid block label name list\")")]
    NoLabels {
        /// Where in the spec.
        path: String,
    },
    /// An `Attr.type` / `BlockAttrs.type` that is not a type expression.
    #[error("{path}: unknown type expression {expr:?}: {reason}")]
    BadType {
        /// Where in the spec.
        path: String,
        /// The type string as sent.
        expr: String,
        /// Why it is not a type.
        reason: String,
    },
    /// A `Literal.value` that does not parse or evaluate.
    #[error("{path}: literal {expr:?} does not evaluate: {reason}")]
    BadLiteral {
        /// Where in the spec.
        path: String,
        /// The expression as sent.
        expr: String,
        /// Why it fails.
        reason: String,
    },
    /// A `Default` without `primary` or `default`: Nomad dereferences it and panics.
    #[error("{path}: default spec has no {which} spec (Nomad's Convert panics on this)")]
    MissingDefaultPart {
        /// Where in the spec.
        path: String,
        /// `primary` or `default`.
        which: &'static str,
    },
}

/// Every problem found in one spec.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("failed to convert the hclspec: {}", join(.0))]
pub struct SpecErrors(pub Vec<SpecError>);

fn join(errs: &[SpecError]) -> String {
    errs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Attributes and blocks a body may hold at one level (`hcl.BodySchema`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct BodySchema {
    /// `(name, required)` of each attribute.
    pub attrs: Vec<(String, bool)>,
    /// `(type name, label names)` of each block type.
    pub blocks: Vec<(String, Vec<String>)>,
}

impl BodySchema {
    pub(crate) fn attr(&self, name: &str) -> bool {
        self.attrs.iter().any(|(n, _)| n == name)
    }

    pub(crate) fn block(&self, name: &str) -> Option<&[String]> {
        self.blocks
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, l)| l.as_slice())
    }
}

impl SpecTree {
    /// Converts a spec as Nomad's `hclspecutils.Convert` does, collecting every problem.
    pub fn from_proto(spec: &proto::Spec) -> Result<SpecTree, SpecErrors> {
        let mut errs = Vec::new();
        let tree = convert(spec, "", &mut Path::default(), &mut errs);
        match tree {
            Some(t) if errs.is_empty() => Ok(t),
            _ => Err(SpecErrors(errs)),
        }
    }

    /// Like [`SpecTree::from_proto`] for an optional spec, as `TaskConfigSchema` returns it;
    /// an absent spec is [`SpecError::NilSpec`].
    pub fn from_optional(spec: Option<&proto::Spec>) -> Result<SpecTree, SpecErrors> {
        match spec {
            Some(s) => SpecTree::from_proto(s),
            None => Err(SpecErrors(vec![SpecError::NilSpec])),
        }
    }

    /// The type a decode produces (`hcldec.ImpliedType`).
    pub fn implied_type(&self) -> Type {
        match self {
            SpecTree::Object(m) => Type::Object(
                m.iter()
                    .map(|(k, s)| (k.clone(), s.implied_type()))
                    .collect(),
            ),
            SpecTree::Array(v) => Type::Tuple(v.iter().map(SpecTree::implied_type).collect()),
            SpecTree::Attr { ty, .. } => ty.clone(),
            SpecTree::Block { nested, .. } => nested.implied_type(),
            SpecTree::BlockAttrs { element_type, .. } => Type::Map(Box::new(element_type.clone())),
            SpecTree::BlockList { nested, .. } => Type::List(Box::new(nested.implied_type())),
            SpecTree::BlockSet { nested, .. } => Type::Set(Box::new(nested.implied_type())),
            SpecTree::BlockMap { labels, nested, .. } => labels
                .iter()
                .fold(nested.implied_type(), |t, _| Type::Map(Box::new(t))),
            SpecTree::Default { primary, .. } => primary.implied_type(),
            SpecTree::Literal { value, .. } => value.ty(),
        }
    }

    /// The schema of the body this spec reads (`hcldec.ImpliedSchema`).
    pub(crate) fn schema(&self) -> BodySchema {
        let mut schema = BodySchema::default();
        self.collect_schema(&mut schema);
        schema
    }

    fn collect_schema(&self, schema: &mut BodySchema) {
        match self {
            SpecTree::Object(m) => m.values().for_each(|s| s.collect_schema(schema)),
            SpecTree::Array(v) => v.iter().for_each(|s| s.collect_schema(schema)),
            SpecTree::Attr { name, required, .. } => {
                schema.attrs.push((name.clone(), *required));
            }
            SpecTree::Block { name, .. }
            | SpecTree::BlockAttrs { name, .. }
            | SpecTree::BlockList { name, .. }
            | SpecTree::BlockSet { name, .. } => {
                schema.blocks.push((name.clone(), Vec::new()));
            }
            SpecTree::BlockMap { name, labels, .. } => {
                schema.blocks.push((name.clone(), labels.clone()));
            }
            SpecTree::Default { primary, default } => {
                primary.collect_schema(schema);
                default.collect_schema(schema);
            }
            SpecTree::Literal { .. } => {}
        }
    }

    /// The kind's name as used in messages (`attribute`, `block_list`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            SpecTree::Object(_) => "object",
            SpecTree::Array(_) => "array",
            SpecTree::Attr { .. } => "attribute",
            SpecTree::Block { .. } => "block",
            SpecTree::BlockAttrs { .. } => "block_attrs",
            SpecTree::BlockList { .. } => "block_list",
            SpecTree::BlockSet { .. } => "block_set",
            SpecTree::BlockMap { .. } => "block_map",
            SpecTree::Default { .. } => "default",
            SpecTree::Literal { .. } => "literal",
        }
    }
}

/// Where in a spec: node descriptions from the root down.
#[derive(Clone, Debug, Default)]
struct Path(Vec<String>);

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("root spec")
        } else {
            f.write_str(&self.0.join(": "))
        }
    }
}

impl Path {
    fn with<T>(&mut self, seg: String, f: impl FnOnce(&mut Path) -> T) -> T {
        self.0.push(seg);
        let out = f(self);
        self.0.pop();
        out
    }
}

fn kind_name(spec: &proto::Spec) -> &'static str {
    match &spec.block {
        None => "spec",
        Some(Kind::Object(_)) => "object",
        Some(Kind::Array(_)) => "array",
        Some(Kind::Attr(_)) => "attribute",
        Some(Kind::BlockValue(_)) => "block",
        Some(Kind::BlockAttrs(_)) => "block_attrs",
        Some(Kind::BlockList(_)) => "block_list",
        Some(Kind::BlockSet(_)) => "block_set",
        Some(Kind::BlockMap(_)) => "block_map",
        Some(Kind::Default(_)) => "default",
        Some(Kind::Literal(_)) => "literal",
    }
}

fn pick_name(own: &str, implied: &str) -> String {
    if own.is_empty() { implied } else { own }.to_string()
}

fn convert(
    spec: &proto::Spec,
    implied: &str,
    path: &mut Path,
    errs: &mut Vec<SpecError>,
) -> Option<SpecTree> {
    let here = |path: &Path| path.to_string();
    match spec.block.as_ref() {
        None => {
            errs.push(SpecError::EmptySpec { path: here(path) });
            None
        }
        Some(Kind::Object(obj)) => {
            let mut keys: Vec<&String> = obj.attributes.keys().collect();
            keys.sort();
            let mut out = BTreeMap::new();
            let mut ok = true;
            for key in keys {
                let child = &obj.attributes[key];
                let seg = format!("{} {key:?}", kind_name(child));
                match path.with(seg, |p| convert(child, key, p, errs)) {
                    Some(t) => {
                        out.insert(key.clone(), t);
                    }
                    None => ok = false,
                }
            }
            ok.then_some(SpecTree::Object(out))
        }
        Some(Kind::Array(arr)) => {
            let mut out = Vec::with_capacity(arr.values.len());
            for (i, child) in arr.values.iter().enumerate() {
                let seg = format!("element {i} ({})", kind_name(child));
                out.push(path.with(seg, |p| convert(child, "", p, errs)));
            }
            out.into_iter()
                .collect::<Option<Vec<_>>>()
                .map(SpecTree::Array)
        }
        Some(Kind::Attr(a)) => {
            let ty = parse_type(&a.r#type, path, errs);
            let name = pick_name(&a.name, implied);
            if name.is_empty() {
                errs.push(SpecError::MissingName {
                    path: here(path),
                    kind: "attribute",
                });
                return None;
            }
            Some(SpecTree::Attr {
                name,
                ty: ty?,
                required: a.required,
            })
        }
        Some(Kind::BlockValue(b)) => {
            // Nomad checks no name here: an unnamed block in an array is accepted (and never
            // matches anything in HCL syntax).
            let nested = convert_nested(b.nested.as_deref(), "block", path, errs)?;
            Some(SpecTree::Block {
                name: pick_name(&b.name, implied),
                required: b.required,
                nested: Box::new(nested),
            })
        }
        Some(Kind::BlockAttrs(b)) => {
            let ty = parse_type(&b.r#type, path, errs);
            let name = pick_name(&b.name, implied);
            if name.is_empty() {
                errs.push(SpecError::MissingName {
                    path: here(path),
                    kind: "block_attrs",
                });
                return None;
            }
            Some(SpecTree::BlockAttrs {
                name,
                element_type: ty?,
                required: b.required,
            })
        }
        Some(Kind::BlockList(b)) => {
            let nested = convert_nested(b.nested.as_deref(), "block_list", path, errs);
            let name = named(&b.name, implied, "block_list", path, errs)?;
            Some(SpecTree::BlockList {
                name,
                min_items: b.min_items,
                max_items: b.max_items,
                nested: Box::new(nested?),
            })
        }
        Some(Kind::BlockSet(b)) => {
            let nested = convert_nested(b.nested.as_deref(), "block_set", path, errs);
            let name = named(&b.name, implied, "block_set", path, errs)?;
            Some(SpecTree::BlockSet {
                name,
                min_items: b.min_items,
                max_items: b.max_items,
                nested: Box::new(nested?),
            })
        }
        Some(Kind::BlockMap(b)) => {
            let nested = convert_nested(b.nested.as_deref(), "block_map", path, errs);
            let name = named(&b.name, implied, "block_map", path, errs)?;
            if b.labels.is_empty() {
                errs.push(SpecError::NoLabels { path: here(path) });
                return None;
            }
            Some(SpecTree::BlockMap {
                name,
                labels: b.labels.clone(),
                nested: Box::new(nested?),
            })
        }
        Some(Kind::Default(d)) => {
            // Nomad converts `primary` without an implied name and stops at its errors
            // before looking at `default`.
            let Some(primary) = d.primary.as_deref() else {
                errs.push(SpecError::MissingDefaultPart {
                    path: here(path),
                    which: "primary",
                });
                return None;
            };
            let seg = format!("primary {}", kind_name(primary));
            let primary = path.with(seg, |p| convert(primary, "", p, errs))?;
            let Some(default) = d.default.as_deref() else {
                errs.push(SpecError::MissingDefaultPart {
                    path: here(path),
                    which: "default",
                });
                return None;
            };
            let seg = format!("default {}", kind_name(default));
            let default = path.with(seg, |p| convert(default, "", p, errs))?;
            Some(SpecTree::Default {
                primary: Box::new(primary),
                default: Box::new(default),
            })
        }
        Some(Kind::Literal(l)) => match crate::eval::eval_source(&l.value) {
            Ok(value) => Some(SpecTree::Literal {
                source: l.value.clone(),
                value,
            }),
            Err(reason) => {
                errs.push(SpecError::BadLiteral {
                    path: here(path),
                    expr: l.value.clone(),
                    reason,
                });
                None
            }
        },
    }
}

fn parse_type(src: &str, path: &Path, errs: &mut Vec<SpecError>) -> Option<Type> {
    match Type::parse(src) {
        Ok(t) => Some(t),
        Err(reason) => {
            errs.push(SpecError::BadType {
                path: path.to_string(),
                expr: src.to_string(),
                reason,
            });
            None
        }
    }
}

fn named(
    own: &str,
    implied: &str,
    kind: &'static str,
    path: &Path,
    errs: &mut Vec<SpecError>,
) -> Option<String> {
    let name = pick_name(own, implied);
    if name.is_empty() {
        errs.push(SpecError::MissingName {
            path: path.to_string(),
            kind,
        });
        return None;
    }
    Some(name)
}

fn convert_nested(
    nested: Option<&proto::Spec>,
    kind: &'static str,
    path: &mut Path,
    errs: &mut Vec<SpecError>,
) -> Option<SpecTree> {
    let Some(nested) = nested else {
        errs.push(SpecError::MissingNested {
            path: path.to_string(),
            kind,
        });
        return None;
    };
    let seg = format!("nested {}", kind_name(nested));
    path.with(seg, |p| convert(nested, "", p, errs))
}
