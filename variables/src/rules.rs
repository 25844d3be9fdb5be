//! ACL policy rules as Nomad's policy API takes them (`Rules`, HCL), read into a [`Policy`].
//!
//! Source: contract C.1 and `acl/policy.go` (`Parse`): a policy holds `namespace "<name>"`
//! blocks; a namespace block's `variables` block holds `path "<spec>" { capabilities = [...] }`
//! rules. Only the variables part matters here: a namespace's `policy` or `capabilities`
//! grant no variables access (C.1), and other top-level blocks (`node`, `agent`, `operator`,
//! `quota`, `host_volume`, `plugin`, `node_pool`) are read and ignored.
//!
//! The reader takes the HCL that people and tools write for policies: blocks with quoted
//! labels, `key = value` attributes with strings, numbers, booleans and lists, and `#`, `//`
//! and `/* */` comments. It is not a general HCL parser (no heredocs, no expressions).

use crate::acl::{Capability, NamespaceRule, PathRule, Policy};

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

/// Reads `rules` into the policy `name`. With `lenient`, unknown capabilities are dropped
/// instead of refused (a faulty server's behaviour).
pub(crate) fn parse(name: &str, rules: &str, lenient: bool) -> Result<Policy, String> {
    let mut reader = Reader {
        text: rules,
        toks: tokens(rules)?,
        at: 0,
    };
    let items = reader.body(false)?;
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
            let paths = block.variables.get_or_insert_with(Vec::new);
            for rule in vars {
                let Item::Block { kind, labels, body } = rule else {
                    continue;
                };
                if kind != "path" {
                    continue;
                }
                let [spec] = labels.as_slice() else {
                    return Err(format!(
                        "a path block in namespace {ns} needs exactly one path"
                    ));
                };
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
                        match text.parse::<Capability>() {
                            Ok(cap) => capabilities.push(cap),
                            Err(_) if lenient => {}
                            Err(_) => {
                                return Err(format!(
                                    "Invalid variable capability '{text}' in namespace {ns}"
                                ));
                            }
                        }
                    }
                }
                paths.push(PathRule {
                    path: spec.clone(),
                    capabilities,
                });
            }
        }
        policy.namespaces.push(block);
    }
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Capability::*;

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
        let policy = parse("p", rules, false).unwrap();
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
    fn refuses_what_nomad_refuses() {
        let bad_cap =
            r#"namespace "default" { variables { path "a" { capabilities = ["sudo"] } } }"#;
        assert!(parse("p", bad_cap, false).unwrap_err().contains("sudo"));
        assert_eq!(
            parse("p", bad_cap, true).unwrap(),
            Policy::new("p").path("default", "a", &[])
        );
        let slash =
            r#"namespace "default" { variables { path "/a" { capabilities = ["read"] } } }"#;
        assert!(parse("p", slash, false).unwrap().validate().is_err());
        let empty = r#"namespace "default" { variables { } }"#;
        assert!(parse("p", empty, false).unwrap().validate().is_err());
        for broken in [
            "namespace \"x\" {",
            "namespace \"x\" { variables { path \"a\" { capabilities = [\"read\" } } }",
            "namespace \"unterminated",
            "namespace \"x\" { = }",
            "@",
        ] {
            assert!(parse("p", broken, false).is_err(), "{broken}");
        }
    }
}
