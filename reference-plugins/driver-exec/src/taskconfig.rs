//! A task's `config {}` block: what to run.
//!
//! ```hcl
//! task "hello" {
//!   driver = "exec-reference"
//!   config {
//!     command = "/bin/sh"                 # required
//!     args    = ["-c", "echo hello"]      # optional
//!   }
//! }
//! ```
//!
//! TaskConfigSchema returns the schema; StartTask decodes `msgpack_driver_config` with
//! [`decode`] *before* anything is started, so a bad config leaves nothing behind.

use nomad_conform_proto::nomad::hclspec::Spec;

use crate::faults::{Fault, Faults};
use crate::hclspec::{attr, object};
use crate::msgpack::ConfigMap;

const COMMAND: &str = "command";
const ARGS: &str = "args";
const SCHEMA: &[&str] = &[ARGS, COMMAND];

/// What a task runs.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    pub command: String,
    /// None when `args` was not set; `Some(vec![])` for an explicit `args = []`.
    pub args: Option<Vec<String>>,
}

impl TaskSpec {
    /// `command` followed by `args`.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = vec![self.command.clone()];
        argv.extend(self.args.iter().flatten().cloned());
        argv
    }
}

/// The TaskConfigSchema answer.
pub fn schema(faults: &Faults) -> Spec {
    let command_type = if faults.has(Fault::BadTaskSchema) {
        "strng"
    } else {
        "string"
    };
    object(vec![
        (COMMAND, attr(COMMAND, command_type, true)),
        (ARGS, attr(ARGS, "list(string)", false)),
    ])
}

/// Decodes and validates `msgpack_driver_config`.
pub fn decode(bytes: &[u8], faults: &Faults) -> Result<TaskSpec, String> {
    let map = ConfigMap::decode(bytes, SCHEMA)?;
    if faults.has(Fault::CtyOnly)
        && let Some(name) = map.first_missing(SCHEMA)
    {
        return Err(format!("attribute {name:?} is missing (cty-only fault)"));
    }
    let command = map
        .string(COMMAND)?
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("the {COMMAND:?} attribute is required"))?;
    let args = map.strings(ARGS)?;
    Ok(TaskSpec { command, args })
}

#[cfg(test)]
mod tests {
    use rmpv::Value;

    use super::*;

    fn encode(pairs: Vec<(&str, Value)>) -> Vec<u8> {
        let map = Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect(),
        );
        let mut bytes = Vec::new();
        rmpv::encode::write_value(&mut bytes, &map).unwrap();
        bytes
    }

    #[test]
    fn command_is_required_and_args_optional() {
        let faults = Faults::default();
        let spec = decode(
            &encode(vec![("args", Value::Nil), ("command", "/bin/true".into())]),
            &faults,
        )
        .unwrap();
        assert_eq!(spec.argv(), vec!["/bin/true"]);
        assert_eq!(spec.args, None);
        let spec = decode(
            &encode(vec![
                ("command", "echo".into()),
                ("args", Value::Array(vec!["a".into(), "b".into()])),
            ]),
            &faults,
        )
        .unwrap();
        assert_eq!(spec.argv(), vec!["echo", "a", "b"]);
        for missing in [
            encode(vec![("args", Value::Nil), ("command", Value::Nil)]),
            encode(vec![("command", "".into())]),
            encode(vec![]),
        ] {
            let err = decode(&missing, &faults).unwrap_err();
            assert!(err.contains("required"), "{err}");
        }
    }

    #[test]
    fn an_explicit_empty_list_is_kept() {
        let spec = decode(
            &encode(vec![
                ("command", "x".into()),
                ("args", Value::Array(vec![])),
            ]),
            &Faults::default(),
        )
        .unwrap();
        assert_eq!(spec.args, Some(vec![]));
    }
}
