//! ACL policy rules as Nomad's policy API takes them (`Rules`, HCL), read into a [`Policy`].
//!
//! Source: contract C.1 and `acl/policy.go` (`Parse`): a policy holds `namespace "<name>"`
//! blocks; a namespace block's `variables` block holds `path "<spec>" { capabilities = [...] }`
//! rules. Only the variables part matters here: a namespace's `policy` or `capabilities`
//! grant no variables access (C.1), and the other top-level blocks (`node`, `agent`,
//! `operator`, `quota`, `host_volume`, `plugin`, `node_pool`, `sentinel`) are read and
//! ignored. Unknown top-level keys, and second copies of a top-level block other than
//! `namespace`, `node_pool` and `host_volume`, are refused as Nomad's strict parse refuses
//! them; unknown keys inside blocks are ignored, as Nomad's decoder ignores them.
//!
//! The reader takes the HCL that people and tools write for policies: blocks with quoted
//! labels, `key = value` attributes with strings, numbers, booleans and lists, and `#`, `//`
//! and `/* */` comments. It is not a general HCL parser (no heredocs, no expressions).

use crate::acl::{
    NamespaceRule, PathRule, Policy, check_namespace_name, check_variable_capability,
    check_variable_path, no_variable_paths,
};

/// One HCL body item.
#[derive(Clone, Debug, PartialEq)]
enum Item {
    Block {
        kind: String,
        labels: Vec<String>,
        body: Vec<Item>,
    },
    Attribute {
        name: String,
        value: Value,
    },
}

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Text(String),
    Other,
    List(Vec<Value>),
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Text(String),
    Number,
    Open,
    Close,
    ListOpen,
    ListClose,
    Equals,
    Comma,
}

fn tokens(text: &str) -> Result<Vec<(Tok, usize)>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let line_of = |at: usize| text[..at].bytes().filter(|b| *b == b'\n').count() + 1;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'#' => i = text[i..].find('\n').map_or(bytes.len(), |n| i + n),
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = text[i..].find('\n').map_or(bytes.len(), |n| i + n)
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..]
                    .find("*/")
                    .map(|n| i + 2 + n + 2)
                    .ok_or_else(|| format!("line {}: unterminated comment", line_of(start)))?;
            }
            b'{' => (out.push((Tok::Open, start)), i += 1).1,
            b'}' => (out.push((Tok::Close, start)), i += 1).1,
            b'[' => (out.push((Tok::ListOpen, start)), i += 1).1,
            b']' => (out.push((Tok::ListClose, start)), i += 1).1,
            b'=' => (out.push((Tok::Equals, start)), i += 1).1,
            b',' => (out.push((Tok::Comma, start)), i += 1).1,
            b'"' => {
                let mut value = String::new();
                let mut chars = text[i + 1..].char_indices();
                loop {
                    let Some((n, ch)) = chars.next() else {
                        return Err(format!("line {}: unterminated string", line_of(start)));
                    };
                    match ch {
                        '"' => {
                            i = i + 1 + n + 1;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, 't')) => value.push('\t'),
                            Some((_, other)) => value.push(other),
                            None => {
                                return Err(format!(
                                    "line {}: unterminated string",
                                    line_of(start)
                                ));
                            }
                        },
                        '\n' => {
                            return Err(format!("line {}: unterminated string", line_of(start)));
                        }
                        other => value.push(other),
                    }
                }
                out.push((Tok::Text(value), start));
            }
            c if c.is_ascii_digit() || c == b'-' => {
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || b".-+".contains(&bytes[i]))
                {
                    i += 1;
                }
                out.push((Tok::Number, start));
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || b"_-".contains(&bytes[i]))
                {
                    i += 1;
                }
                out.push((Tok::Ident(text[start..i].to_string()), start));
            }
            _ => {
                return Err(format!(
                    "line {}: unexpected character {:?}",
                    line_of(start),
                    text[start..].chars().next().unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

struct Reader<'a> {
    text: &'a str,
    toks: Vec<(Tok, usize)>,
    at: usize,
}

impl Reader<'_> {
    fn line(&self) -> usize {
        let offset = self.toks.get(self.at).map_or(self.text.len(), |t| t.1);
        self.text[..offset].bytes().filter(|b| *b == b'\n').count() + 1
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).map(|t| t.0.clone());
        self.at += 1;
        t
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.0)
    }

    fn body(&mut self, nested: bool) -> Result<Vec<Item>, String> {
        let mut items = Vec::new();
        loop {
            let line = self.line();
            match self.next() {
                None if nested => return Err(format!("line {line}: missing }}")),
                None => return Ok(items),
                Some(Tok::Close) if nested => return Ok(items),
                Some(Tok::Ident(name)) => items.push(self.item(name)?),
                Some(other) => return Err(format!("line {line}: unexpected {other:?}")),
            }
        }
    }

    fn item(&mut self, name: String) -> Result<Item, String> {
        let mut labels = Vec::new();
        loop {
            let line = self.line();
            match self.next() {
                Some(Tok::Equals) if labels.is_empty() => {
                    let value = self.value()?;
                    return Ok(Item::Attribute { name, value });
                }
                Some(Tok::Text(label)) => labels.push(label),
                Some(Tok::Open) => {
                    let body = self.body(true)?;
                    return Ok(Item::Block {
                        kind: name,
                        labels,
                        body,
                    });
                }
                other => return Err(format!("line {line}: unexpected {other:?} after {name}")),
            }
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        let line = self.line();
        match self.next() {
            Some(Tok::Text(t)) => Ok(Value::Text(t)),
            Some(Tok::Number) | Some(Tok::Ident(_)) => Ok(Value::Other),
            Some(Tok::ListOpen) => {
                let mut values = Vec::new();
                loop {
                    if self.peek() == Some(&Tok::ListClose) {
                        self.next();
                        return Ok(Value::List(values));
                    }
                    values.push(self.value()?);
                    match self.next() {
                        Some(Tok::Comma) => {}
                        Some(Tok::ListClose) => return Ok(Value::List(values)),
                        other => {
                            return Err(format!(
                                "line {}: expected , or ] in a list, found {other:?}",
                                self.line()
                            ));
                        }
                    }
                }
            }
            other => Err(format!("line {line}: expected a value, found {other:?}")),
        }
    }
}

/// How strictly [`parse`] reads: Nomad's [`Strictness::NOMAD`] on a reference server, less
/// with the policy faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Strictness {
    /// Apply `Parse`'s checks of namespace blocks (name, paths, capabilities); without them an
    /// unknown capability is dropped.
    pub rules: bool,
    /// Refuse unknown and repeated top-level keys.
    pub keys: bool,
}

#[cfg(test)]
impl Strictness {
    /// `acl.Parse` in strict mode, as the policy API calls it (`ACLPolicy.Validate`).
    pub(crate) const NOMAD: Strictness = Strictness {
        rules: true,
        keys: true,
    };
}

/// The blocks of a policy's top level (acl/policy.go, `Policy`'s `hcl` fields).
const POLICY_KEYS: [&str; 9] = [
    "namespace",
    "node_pool",
    "host_volume",
    "agent",
    "node",
    "operator",
    "sentinel",
    "quota",
    "plugin",
];

/// The top-level blocks that may repeat, each with a label.
const LABELLED_KEYS: [&str; 3] = ["namespace", "node_pool", "host_volume"];

/// The top-level keys Nomad refuses, sorted: HCL's `unusedKeys` (every key of every top-level
/// item, labels included, less one occurrence per policy field, matched case-insensitively),
/// without the repeated namespace, node_pool and host_volume blocks and their labels, which
/// `hclDecode` and `Parse` take out. What is left are unknown keys and extra copies of the
/// other blocks (`agent`, `node`, ...). Keys below the top level are never looked at.
fn extra_keys(items: &[Item]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for item in items {
        match item {
            Item::Block { kind, labels, .. } => {
                if LABELLED_KEYS.iter().any(|k| k.eq_ignore_ascii_case(kind)) {
                    continue;
                }
                keys.push(kind.clone());
                keys.extend(labels.iter().cloned());
            }
            Item::Attribute { name, .. } => keys.push(name.clone()),
        }
    }
    for known in POLICY_KEYS {
        if let Some(at) = keys.iter().position(|k| k.eq_ignore_ascii_case(known)) {
            keys.remove(at);
        }
    }
    keys.sort();
    keys
}

/// Reads `rules` into the policy `name` the way acl/policy.go (`Parse`) reads them, and gives
/// Nomad's error text for what it refuses, checked in Nomad's order: the HCL itself ("Failed
/// to parse ACL Policy: ..."), each namespace block in turn (its name, a variables block
/// without paths, then each path rule: a missing or leading-`/` path, an unknown capability),
/// then unknown or repeated top-level keys ("Invalid or duplicate policy keys: a, b").
/// Unknown keys inside namespace, variables and path blocks are ignored, as Nomad's decoder
/// ignores them.
pub(crate) fn parse(name: &str, rules: &str, strict: Strictness) -> Result<Policy, String> {
    let failed = |e: String| format!("Failed to parse ACL Policy: {e}");
    let mut reader = Reader {
        text: rules,
        toks: tokens(rules).map_err(failed)?,
        at: 0,
    };
    let items = reader.body(false).map_err(failed)?;
    let extra = extra_keys(&items);
    let mut policy = Policy::new(name);
    for item in items {
        let Item::Block { kind, labels, body } = item else {
            continue;
        };
        if kind != "namespace" {
            continue;
        }
        let [ns] = labels.as_slice() else {
            return Err("a namespace block needs exactly one name".into());
        };
        if strict.rules {
            check_namespace_name(ns)?;
        }
        let mut block = NamespaceRule {
            name: ns.clone(),
            variables: None,
        };
        for inner in body {
            let Item::Block {
                kind, body: vars, ..
            } = inner
            else {
                continue;
            };
            if kind != "variables" {
                continue;
            }
            let rules = read_paths(ns, vars, strict)?;
            if strict.rules && rules.is_empty() {
                return Err(no_variable_paths(ns));
            }
            block.variables.get_or_insert_with(Vec::new).extend(rules);
        }
        policy.namespaces.push(block);
    }
    if strict.keys && !extra.is_empty() {
        return Err(format!(
            "Invalid or duplicate policy keys: {}",
            extra.join(", ")
        ));
    }
    Ok(policy)
}

/// The `path` rules of one `variables` block, checked in order unless `strict.rules` is off
/// (then an unknown capability is dropped).
fn read_paths(ns: &str, vars: Vec<Item>, strict: Strictness) -> Result<Vec<PathRule>, String> {
    let mut out = Vec::new();
    for rule in vars {
        let Item::Block { kind, labels, body } = rule else {
            continue;
        };
        if kind != "path" {
            continue;
        }
        let spec = match labels.as_slice() {
            [] => String::new(),
            [spec] => spec.clone(),
            _ => {
                return Err(format!(
                    "a path block in namespace {ns} needs exactly one path"
                ));
            }
        };
        if strict.rules {
            check_variable_path(ns, &spec)?;
        }
        let mut capabilities = Vec::new();
        for attr in body {
            let Item::Attribute {
                name,
                value: Value::List(values),
            } = attr
            else {
                continue;
            };
            if name != "capabilities" {
                continue;
            }
            for value in values {
                let Value::Text(text) = value else { continue };
                match check_variable_capability(ns, &text) {
                    Ok(cap) => capabilities.push(cap),
                    Err(_) if !strict.rules => {}
                    Err(message) => return Err(message),
                }
            }
        }
        out.push(PathRule {
            path: spec,
            capabilities,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::Capability::*;

    const LAX: Strictness = Strictness {
        rules: false,
        keys: true,
    };

    #[test]
    fn reads_the_documented_example() {
        let rules = r#"
            # full access below project/, read below system/
            namespace "dev" {
              policy       = "write"
              capabilities = ["alloc-node-exec"]
              variables {
                path "project/*" { capabilities = ["write", "read", "destroy", "list"] }
                // administrators' paths
                path "system/*" {
                  capabilities = ["read"]
                }
              }
            }
            node { policy = "read" }
            /* no variables here */
            namespace "prod" { policy = "read" }
        "#;
        let policy = parse("p", rules, Strictness::NOMAD).unwrap();
        let mut want = Policy::new("p")
            .path("dev", "project/*", &[Write, Read, Destroy, List])
            .path("dev", "system/*", &[Read]);
        want.namespaces.push(NamespaceRule {
            name: "prod".into(),
            variables: None,
        });
        assert_eq!(policy, want);
        assert!(policy.validate().is_ok());
    }

    #[test]
    fn refuses_what_nomad_refuses_with_its_text() {
        let bad_cap =
            r#"namespace "default" { variables { path "a" { capabilities = ["sudo"] } } }"#;
        assert_eq!(
            parse("p", bad_cap, Strictness::NOMAD).unwrap_err(),
            "Invalid variable capability 'sudo' in namespace default"
        );
        assert_eq!(
            parse("p", bad_cap, LAX).unwrap(),
            Policy::new("p").path("default", "a", &[])
        );
        let slash =
            r#"namespace "default" { variables { path "/a" { capabilities = ["sudo"] } } }"#;
        assert_eq!(
            parse("p", slash, Strictness::NOMAD).unwrap_err(),
            "Invalid variable path \"/a\" in namespace default: cannot start with a leading '/'`",
            "the path is checked before its capabilities"
        );
        let unlabelled = r#"namespace "ns" { variables { path { capabilities = ["read"] } } }"#;
        assert_eq!(
            parse("p", unlabelled, Strictness::NOMAD).unwrap_err(),
            "Invalid missing variable path in namespace ns"
        );
        let empty = r#"namespace "default" { variables { } }"#;
        assert_eq!(
            parse("p", empty, Strictness::NOMAD).unwrap_err(),
            "Invalid variable policy: no variable paths in namespace default"
        );
        assert!(parse("p", empty, LAX).unwrap().validate().is_err());
        for broken in [
            "namespace \"x\" {",
            "namespace \"x\" { variables { path \"a\" { capabilities = [\"read\" } } }",
            "namespace \"unterminated",
            "namespace \"x\" { = }",
            "@",
        ] {
            let err = parse("p", broken, Strictness::NOMAD).unwrap_err();
            assert!(
                err.starts_with("Failed to parse ACL Policy: "),
                "{broken}: {err}"
            );
        }
    }

    #[test]
    fn unknown_and_repeated_top_level_keys_table() {
        let ns = r#"namespace "default" { variables { path "a/*" { capabilities = ["read"] } } }"#;
        let table: [(&str, Option<&str>); 9] = [
            ("", None),
            ("bogus = \"x\"", Some("bogus")),
            ("zeta {}\nbogus = 1", Some("bogus, zeta")),
            // labels of unknown blocks are keys too
            ("extra \"lbl\" {}", Some("extra, lbl")),
            // repeated singleton blocks, once per extra copy
            (
                "agent { policy = \"read\" }\nagent { policy = \"read\" }\nagent {}",
                Some("agent, agent"),
            ),
            // acl/policy_test.go's mix, sorted byte-wise
            (
                "anotherbogus = 1\nbogus = 2\nagent {}\nagent {}\nnode {}\nnode {}\noperator {}\noperator {}\nplugin {}\nplugin {}\nquota {}\nquota {}",
                Some("agent, anotherbogus, bogus, node, operator, plugin, quota"),
            ),
            // namespaces, node pools and host volumes repeat freely
            (
                "namespace \"other\" {}\nnode_pool \"a\" {}\nnode_pool \"b\" {}\nhost_volume \"v\" {}\nhost_volume \"w\" {}",
                None,
            ),
            ("Agent {}\nagent {}", Some("agent")),
            ("Zed = 1\nalpha = 2", Some("Zed, alpha")),
        ];
        for (more, want) in table {
            let rules = format!("{ns}\n{more}");
            match (parse("p", &rules, Strictness::NOMAD), want) {
                (Ok(_), None) => {}
                (Err(e), Some(keys)) => {
                    assert_eq!(
                        e,
                        format!("Invalid or duplicate policy keys: {keys}"),
                        "{more}"
                    )
                }
                (got, want) => panic!("{more}: {got:?}, want {want:?}"),
            }
        }
        // Only with the key check off are they accepted.
        let off = Strictness {
            rules: true,
            keys: false,
        };
        assert!(parse("p", &format!("{ns}\nbogus = 1"), off).is_ok());
        // The namespace checks come first.
        let both = "bogus = 1\nnamespace \"default\" { variables { path \"/a\" { capabilities = [\"read\"] } } }";
        assert!(
            parse("p", both, Strictness::NOMAD)
                .unwrap_err()
                .starts_with("Invalid variable path")
        );
    }

    #[test]
    fn unknown_keys_inside_blocks_are_ignored() {
        let rules = r#"
            namespace "default" {
              bogus = "x"
              other { deeper = true }
              variables {
                bogus = "y"
                path "a/*" {
                  capabilities = ["read"]
                  bogus        = "z"
                }
              }
            }
        "#;
        assert_eq!(
            parse("p", rules, Strictness::NOMAD).unwrap(),
            Policy::new("p").path("default", "a/*", &[Read])
        );
    }
}
