//! Nomad's hclspec for the harness: a driver's plugin and task configuration, exactly as
//! Nomad handles it, with no gRPC or process code.
//!
//! 1. [`SpecTree::from_proto`] converts a `ConfigSchema` / `TaskConfigSchema` spec the way
//!    Nomad's `hclspecutils.Convert` does and rejects what it rejects ([`SpecError`]).
//! 2. [`decode_hcl`] / [`decode_json`] decode configuration against the spec the way hcldec
//!    does (required attributes, type conversion, `Default`, `Literal`, blocks, no unknown
//!    names) into a [`Value`]. `${...}` interpolation of variables is not supported: write the
//!    final values.
//! 3. [`encode_cty`] writes the bytes Nomad sends (go-cty msgpack); [`encode_plain`] the
//!    go-msgpack map Nomad's own driver tests send.
//! 4. [`read_json`] / [`read_rmpv`] read such bytes back, as a driver would.
//! 5. [`config_strategy`] generates valid configurations; [`config_to_hcl`] prints one.
//!
//! # Fidelity
//!
//! Reproduced from Nomad / hcldec / go-cty: what `hclspecutils.Convert` rejects (including
//! an `Attr` inside `Default` or `Array`, which gets no implied name); the body schema
//! (unknown attributes and blocks are errors, with hcl's "did you mean" hints); required
//! attributes and blocks; go-cty's conversions (string↔number, string↔bool with `"1"`/`"0"`,
//! tuple→list/set, object→map/object, unification for `any` element types); `Default` applying
//! only to a null primary (an absent block list is an empty list, not null); `Literal` values
//! keeping their own type; block counts, labels and duplicates; sets deduplicated and ordered
//! as `cty.Set` iterates; HCL's JSON syntax for blocks (object, array of objects, labels as
//! nested keys, `null` for none, `"//"` comments, strings as templates); number encoding from
//! exact decimals. Spec shapes on which Nomad panics (a `Default` missing a part, a
//! `block_map` over `any`, `block_attrs` values of different types) are reported as errors.
//!
//! Left out: `${...}` interpolation of variables (`${NOMAD_TASK_DIR}`, `${attr.*}`): Nomad
//! fills those in from the task environment, and a harness writes final values instead.
//! Nomad's stdlib functions are approximated (by characters, not grapheme clusters). HCL
//! numbers are read through hcl-rs, so a literal with more than 17 significant digits (or an
//! integer beyond `u64`) loses precision; JSON numbers go through `serde_json`, the same.
//! go-cty's unification is simplified (nulls are ignored when choosing a common type).
//!
//! Note: Nomad itself turns a jobspec's `config {}` into a Go map (numbers as Go `int` or
//! `float64`) and decodes that map's JSON with `hcl/json`. [`decode_json`] follows that path;
//! [`decode_hcl`] applies hcldec to native syntax directly, which is stricter: Nomad's JSON
//! detour also lets `port_map = { http = 80 }` stand for a `port_map { ... }` block.
//!
//! ```
//! use nomad_conform_hclspec::{SpecTree, Type, decode_hcl, encode_cty};
//! use std::collections::BTreeMap;
//!
//! let spec = SpecTree::Object(BTreeMap::from([(
//!     "command".to_string(),
//!     SpecTree::Attr { name: "command".into(), ty: Type::String, required: true },
//! )]));
//! let value = decode_hcl(&spec, "command = \"/bin/sh\"").unwrap();
//! // fixmap(1), fixstr "command", fixstr "/bin/sh"
//! assert_eq!(encode_cty(&value)[..9], [0x81, 0xa7, b'c', b'o', b'm', b'm', b'a', b'n', b'd']);
//! ```

#![warn(missing_docs)]

mod body;
mod convert;
mod decode;
mod error;
mod eval;
mod generate;
mod hcl_input;
mod json_input;
mod msgpack;
mod number;
mod print;
mod read;
mod spec;
mod types;
mod value;

pub use decode::{decode_hcl, decode_hcl_body, decode_json, decode_json_str};
pub use error::{DecodeError, DecodeErrors};
pub use generate::{config_strategy, value_strategy};
pub use msgpack::{encode_cty, encode_plain};
pub use number::{Number, WireNumber};
pub use print::{config_to_hcl, is_identifier, quote, value_to_hcl};
pub use read::{ReadError, read_json, read_rmpv, rmpv_to_json};
pub use spec::{SpecError, SpecErrors, SpecTree};
pub use types::Type;
pub use value::Value;
