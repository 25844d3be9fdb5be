//! Variables ACLs: policies, tokens, and the order Nomad matches a (namespace, path) against
//! path rules.
//!
//! Source: contract C.1–C.3 (`acl/policy.go`, `acl/acl.go`, `ryanuber/go-glob`):
//! - capabilities `list`, `read`, `write`, `destroy`, `deny`; per rule, `read` adds `list`,
//!   `write` and `destroy` add nothing, and `deny` reduces the rule to `deny` alone;
//! - rules with the same namespace and path from several policies are unioned, with no special
//!   treatment of `deny` (`deny` + `read` still allows read);
//! - lookup: the exact rule; else, for a workload identity on Read/List in its own namespace,
//!   `{read, list}` on exactly `nomad/jobs`, `nomad/jobs/<job>`, `nomad/jobs/<job>/<group>`,
//!   `nomad/jobs/<job>/<group>/<task>`; else the closest glob over the key
//!   `namespace + "\0" + path` (`*` matches any run of bytes including `/` and the separator),
//!   smallest `len(key) - len(glob) + count('*')`, ties to the byte-wise greatest glob (what
//!   Go's stable sort with a `<=` comparator yields for up to 20 matching globs);
//! - management tokens and disabled ACLs allow everything.
//!
//! Policies are given as Rust values rather than HCL; [`Policy::validate`] applies the parse
//! checks of C.1 (namespace name pattern, non-empty path not starting with `/`, at least one
//! path in a variables block).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::faults::{Fault, Faults};

/// A variables path capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// List metadata.
    List,
    /// Read items (implies list).
    Read,
    /// Create, update, lock (implies nothing else).
    Write,
    /// Delete.
    Destroy,
    /// Deny: the rule grants nothing.
    Deny,
}

impl Capability {
    fn bit(self) -> u8 {
        match self {
            Self::List => 1,
            Self::Read => 2,
            Self::Write => 4,
            Self::Destroy => 8,
            Self::Deny => 16,
        }
    }

    /// Nomad's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::List => "list",
            Self::Read => "read",
            Self::Write => "write",
            Self::Destroy => "destroy",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Capability {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        match text {
            "list" => Ok(Self::List),
            "read" => Ok(Self::Read),
            "write" => Ok(Self::Write),
            "destroy" => Ok(Self::Destroy),
            "deny" => Ok(Self::Deny),
            other => Err(Error::InvalidPolicy {
                policy: String::new(),
                reason: format!("invalid variable capability '{other}'"),
            }),
        }
    }
}

/// A `path "<spec>" { capabilities = [...] }` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRule {
    /// Path spec, may contain `*`.
    pub path: String,
    /// Capabilities as written (expanded when compiled).
    pub capabilities: Vec<Capability>,
}

/// A `namespace "<name>" { variables { ... } }` block (only the variables part matters here:
/// namespace-level `policy`/`capabilities` grant no variables access, C.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceRule {
    /// Namespace name, may contain `*`.
    pub name: String,
    /// The `variables` block; `Some(vec![])` is invalid, as in Nomad.
    pub variables: Option<Vec<PathRule>>,
}

/// An ACL policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Policy name, referenced by tokens.
    pub name: String,
    /// Namespace blocks.
    pub namespaces: Vec<NamespaceRule>,
}

impl Policy {
    /// An empty policy.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            namespaces: Vec::new(),
        }
    }

    /// Adds a path rule to the namespace block named `namespace` (creating the block).
    pub fn path(mut self, namespace: &str, path: &str, capabilities: &[Capability]) -> Self {
        let rule = PathRule {
            path: path.to_string(),
            capabilities: capabilities.to_vec(),
        };
        match self.namespaces.iter_mut().find(|ns| ns.name == namespace) {
            Some(block) => block.variables.get_or_insert_with(Vec::new).push(rule),
            None => self.namespaces.push(NamespaceRule {
                name: namespace.to_string(),
                variables: Some(vec![rule]),
            }),
        }
        self
    }

    /// Like [`Policy::path`] with capabilities spelled as Nomad spells them.
    pub fn path_str(
        self,
        namespace: &str,
        path: &str,
        capabilities: &[&str],
    ) -> Result<Self, Error> {
        let caps = capabilities
            .iter()
            .map(|c| {
                c.parse::<Capability>().map_err(|err| match err {
                    Error::InvalidPolicy { reason, .. } => Error::InvalidPolicy {
                        policy: self.name.clone(),
                        reason: format!("{reason} in namespace {namespace}"),
                    },
                    other => other,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.path(namespace, path, &caps))
    }

    /// The parse-time checks of Nomad's `acl.Parse` for variables rules, in its order.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |reason: String| Error::InvalidPolicy {
            policy: self.name.clone(),
            reason,
        };
        for ns in &self.namespaces {
            check_namespace_name(&ns.name).map_err(invalid)?;
            let Some(paths) = &ns.variables else { continue };
            if paths.is_empty() {
                return Err(invalid(no_variable_paths(&ns.name)));
            }
            for rule in paths {
                check_variable_path(&ns.name, &rule.path).map_err(invalid)?;
            }
        }
        Ok(())
    }
}

/// A namespace name of a policy: `^[a-zA-Z0-9-*]{1,128}$` (acl/policy.go, `Parse`).
pub(crate) fn check_namespace_name(name: &str) -> Result<(), String> {
    let ok = (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'*');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid namespace name '{name}'"))
    }
}

/// acl/policy.go (`Parse`): a `variables` block without any `path`.
pub(crate) fn no_variable_paths(namespace: &str) -> String {
    format!("Invalid variable policy: no variable paths in namespace {namespace}")
}

/// acl/policy.go (`Parse`): a path rule's spec is not empty and has no leading `/`. The text
/// keeps the stray backtick of Nomad's format string.
pub(crate) fn check_variable_path(namespace: &str, spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err(format!(
            "Invalid missing variable path in namespace {namespace}"
        ));
    }
    if spec.starts_with('/') {
        return Err(format!(
            "Invalid variable path {spec:?} in namespace {namespace}: cannot start with a leading '/'`"
        ));
    }
    Ok(())
}

/// acl/policy.go (`isPathCapabilityValid`): a capability a variables path rule may name.
pub(crate) fn check_variable_capability(
    namespace: &str,
    capability: &str,
) -> Result<Capability, String> {
    capability
        .parse::<Capability>()
        .map_err(|_| format!("Invalid variable capability '{capability}' in namespace {namespace}"))
}

/// The workload a workload-identity token stands for. `job` is the parent job ID for
/// dispatched and periodic children (contract C.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadClaim {
    /// Namespace of the job.
    pub namespace: String,
    /// Job ID (the parent's for dispatched or periodic jobs).
    pub job: String,
    /// Task group name.
    pub group: String,
    /// Task name.
    pub task: String,
}

/// What a token is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// Management token: everything is allowed, locks are visible.
    Management,
    /// Client token with named policies.
    Client { policies: Vec<String> },
    /// Workload identity (e.g. `NOMAD_TOKEN` with `identity { env = true }`), with the
    /// policies attached to its job/group/task.
    Workload {
        claim: WorkloadClaim,
        policies: Vec<String>,
    },
}

/// A token the server accepts in `X-Nomad-Token` or `Authorization: Bearer`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The secret sent by clients.
    pub secret_id: String,
    /// Kind and attached policies.
    pub kind: TokenKind,
}

impl Token {
    /// A management token.
    pub fn management(secret: &str) -> Self {
        Self {
            secret_id: secret.to_string(),
            kind: TokenKind::Management,
        }
    }

    /// A client token with policies.
    pub fn client(secret: &str, policies: &[&str]) -> Self {
        Self {
            secret_id: secret.to_string(),
            kind: TokenKind::Client {
                policies: policies.iter().map(|p| p.to_string()).collect(),
            },
        }
    }

    /// A workload identity token with policies attached to its workload.
    pub fn workload(secret: &str, claim: WorkloadClaim, policies: &[&str]) -> Self {
        Self {
            secret_id: secret.to_string(),
            kind: TokenKind::Workload {
                claim,
                policies: policies.iter().map(|p| p.to_string()).collect(),
            },
        }
    }
}

/// The whole ACL configuration of the server; replaceable while it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AclConfig {
    /// When false every request is allowed and treated as management.
    pub enabled: bool,
    /// Policies by name.
    pub policies: Vec<Policy>,
    /// Known tokens.
    pub tokens: Vec<Token>,
    /// Policies of the anonymous token (requests without a token).
    pub anonymous_policies: Vec<String>,
}

impl AclConfig {
    /// ACLs off: everything allowed.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// ACLs on with no policies or tokens yet.
    pub fn enabled() -> Self {
        Self {
            enabled: true,
            ..Self::default()
        }
    }

    /// Adds a policy (builder style).
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.upsert_policy(policy);
        self
    }

    /// Adds a token (builder style).
    pub fn with_token(mut self, token: Token) -> Self {
        self.upsert_token(token);
        self
    }

    /// Adds or replaces a policy by name.
    pub fn upsert_policy(&mut self, policy: Policy) {
        self.policies.retain(|p| p.name != policy.name);
        self.policies.push(policy);
    }

    /// Adds or replaces a token by secret.
    pub fn upsert_token(&mut self, token: Token) {
        self.tokens.retain(|t| t.secret_id != token.secret_id);
        self.tokens.push(token);
    }

    /// Checks every policy.
    pub fn validate(&self) -> Result<(), Error> {
        self.policies.iter().try_for_each(Policy::validate)
    }

    /// Resolves the secret sent with a request (`""` = anonymous). `None` means the token is
    /// unknown, which Nomad answers with 403 "Permission denied".
    pub(crate) fn resolve(&self, secret: &str, faults: &Faults) -> Option<Caller> {
        if !self.enabled {
            return Some(Caller::all());
        }
        let (policies, claim) = if secret.is_empty() {
            (&self.anonymous_policies, None)
        } else {
            let token = self.tokens.iter().find(|t| t.secret_id == secret)?;
            match &token.kind {
                TokenKind::Management => return Some(Caller::all()),
                TokenKind::Client { policies } => (policies, None),
                TokenKind::Workload { claim, policies } => (policies, Some(claim.clone())),
            }
        };
        let chosen: Vec<&Policy> = policies
            .iter()
            .filter_map(|name| self.policies.iter().find(|p| &p.name == name))
            .collect();
        Some(Caller {
            acl: Some(CompiledAcl::compile(&chosen, faults)),
            claim,
        })
    }

    /// Whether a secret names a known token (the Task API socket refuses unknown ones).
    pub(crate) fn knows(&self, secret: &str) -> bool {
        self.tokens.iter().any(|t| t.secret_id == secret)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CapSet(u8);

impl CapSet {
    fn has(self, cap: Capability) -> bool {
        self.0 & cap.bit() != 0
    }

    /// Per-rule expansion, changed by the capability faults.
    fn expand_with(caps: &[Capability], faults: &Faults) -> Self {
        if faults.is_empty() {
            return Self::expand(caps);
        }
        let caps: Vec<Capability> = if faults.has(Fault::DenyFallsThrough) {
            caps.iter()
                .copied()
                .filter(|c| *c != Capability::Deny)
                .collect()
        } else {
            caps.to_vec()
        };
        if caps.contains(&Capability::Deny) {
            return Self(Capability::Deny.bit());
        }
        let mut set = caps.iter().fold(0, |acc, c| acc | c.bit());
        let has = |set: u8, c: Capability| set & c.bit() != 0;
        if has(set, Capability::Read) && !faults.has(Fault::ReadNotList) {
            set |= Capability::List.bit();
        }
        if has(set, Capability::Read) && faults.has(Fault::ReadGrantsWrite) {
            set |= Capability::Write.bit();
        }
        if has(set, Capability::Write) && faults.has(Fault::WriteImpliesRead) {
            set |= Capability::Read.bit() | Capability::List.bit();
        }
        Self(set)
    }

    /// Per-rule expansion (`expandVariablesCapabilities`).
    fn expand(caps: &[Capability]) -> Self {
        if caps.contains(&Capability::Deny) {
            return Self(Capability::Deny.bit());
        }
        let mut set = caps.iter().fold(0, |acc, c| acc | c.bit());
        if set & Capability::Read.bit() != 0 {
            set |= Capability::List.bit();
        }
        Self(set)
    }
}

const WORKLOAD_SET: CapSet = CapSet(1 | 2);

/// Policies compiled for one request.
#[derive(Clone, Debug, Default)]
pub(crate) struct CompiledAcl {
    exact: HashMap<String, CapSet>,
    /// Glob rules keyed by `ns\0path`, walked in byte order like Nomad's radix tree.
    globs: BTreeMap<String, CapSet>,
    /// Misbehaviours of a faulty server (none on a reference server).
    faults: Faults,
}

impl CompiledAcl {
    fn compile(policies: &[&Policy], faults: &Faults) -> Self {
        let mut acl = Self {
            faults: faults.clone(),
            ..Self::default()
        };
        for policy in policies {
            for ns in &policy.namespaces {
                for rule in ns.variables.iter().flatten() {
                    let key = format!("{}\0{}", ns.name, rule.path);
                    let set = CapSet::expand_with(&rule.capabilities, faults);
                    if set.0 == 0 && faults.has(Fault::DenyFallsThrough) {
                        continue; // the rule only denied: it no longer matches
                    }
                    let target = if ns.name.contains('*') || rule.path.contains('*') {
                        acl.globs.entry(key).or_default()
                    } else {
                        acl.exact.entry(key).or_default()
                    };
                    target.0 |= set.0;
                }
            }
        }
        acl
    }

    fn matching_set(
        &self,
        namespace: &str,
        path: &str,
        claim: Option<&WorkloadClaim>,
    ) -> Option<CapSet> {
        let key = format!("{namespace}\0{path}");
        let faults = &self.faults;
        if faults.has(Fault::GlobsBeforeExact)
            && let Some(set) = self.closest_glob(&key)
        {
            return Some(set);
        }
        if let Some(set) = self.exact.get(&key) {
            return Some(*set);
        }
        if let Some(claim) = claim
            && claim.namespace == namespace
            && (workload_path(claim, path)
                || (faults.has(Fault::WorkloadPrefix)
                    && path.starts_with(&format!("nomad/jobs/{}/", claim.job))))
        {
            return Some(WORKLOAD_SET);
        }
        self.closest_glob(&key)
    }

    /// `findClosestMatchingGlob` (or what the glob faults make of it).
    fn closest_glob(&self, key: &str) -> Option<CapSet> {
        let no_slash = self.faults.has(Fault::GlobNoSlash);
        let mut matching = self.globs.iter().filter(|(glob, _)| {
            if no_slash {
                glob_match_no_slash(glob.as_bytes(), key.as_bytes())
            } else {
                glob_match(glob, key)
            }
        });
        if self.faults.has(Fault::FirstGlobWins) {
            return matching.next().map(|(_, set)| *set);
        }
        matching
            .map(|(glob, set)| {
                let stars = glob.bytes().filter(|b| *b == b'*').count() as i64;
                (key.len() as i64 - glob.len() as i64 + stars, glob, *set)
            })
            // smallest difference; among ties the byte-wise greatest glob
            .min_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)))
            .map(|(_, _, set)| set)
    }
}

fn workload_path(claim: &WorkloadClaim, path: &str) -> bool {
    let Some(rest) = path.strip_prefix("nomad/jobs") else {
        return false;
    };
    rest.is_empty()
        || rest == format!("/{}", claim.job)
        || rest == format!("/{}/{}", claim.job, claim.group)
        || rest == format!("/{}/{}/{}", claim.job, claim.group, claim.task)
}

/// A glob whose `*` does not match `/` (the `glob-no-slash` fault).
fn glob_match_no_slash(pattern: &[u8], subject: &[u8]) -> bool {
    match pattern.split_first() {
        None => subject.is_empty(),
        Some((b'*', rest)) => (0..=subject.len())
            .take_while(|&n| n == 0 || subject[n - 1] != b'/')
            .any(|n| glob_match_no_slash(rest, &subject[n..])),
        Some((c, rest)) => subject
            .split_first()
            .is_some_and(|(s, tail)| s == c && glob_match_no_slash(rest, tail)),
    }
}

/// `*` glob over bytes, anchored at both ends, `*` matching any run including empty.
pub(crate) fn glob_match(pattern: &str, subject: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = subject.strip_prefix(first) else {
        return false;
    };
    let middle: Vec<&str> = pieces.collect();
    let Some((last, between)) = middle.split_last() else {
        return rest.is_empty(); // no `*` at all: exact match
    };
    for piece in between {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Who is calling, for one request.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    /// `None` for management tokens and disabled ACLs.
    acl: Option<CompiledAcl>,
    claim: Option<WorkloadClaim>,
}

impl Caller {
    pub(crate) fn all() -> Self {
        Self {
            acl: None,
            claim: None,
        }
    }

    pub(crate) fn is_management(&self) -> bool {
        self.acl.is_none()
    }

    /// Whether the caller is a workload identity and `path` is one of its implicit paths in
    /// its namespace (used only by the `workload-locks` fault: Nomad grants these paths read
    /// and list, and to Read and List only).
    pub(crate) fn workload_owns(&self, namespace: &str, path: &str) -> bool {
        self.claim
            .as_ref()
            .is_some_and(|c| c.namespace == namespace && workload_path(c, path))
    }

    /// `AllowVariableOperation`; `with_claim` is true only for Read and List.
    pub(crate) fn allows(
        &self,
        namespace: &str,
        path: &str,
        cap: Capability,
        with_claim: bool,
    ) -> bool {
        let Some(acl) = &self.acl else { return true };
        let claim = if with_claim {
            self.claim.as_ref()
        } else {
            None
        };
        acl.matching_set(namespace, path, claim)
            .is_some_and(|set| set.has(cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Capability::*;

    fn caller(policies: &[Policy], claim: Option<WorkloadClaim>) -> Caller {
        let refs: Vec<&Policy> = policies.iter().collect();
        Caller {
            acl: Some(CompiledAcl::compile(&refs, &Faults::none())),
            claim,
        }
    }

    fn claim(ns: &str) -> WorkloadClaim {
        WorkloadClaim {
            namespace: ns.into(),
            job: "example".into(),
            group: "web".into(),
            task: "httpd".into(),
        }
    }

    #[test]
    fn glob_table() {
        let table = [
            ("*", "anything/at/all", true),
            ("*", "", true),
            ("nomad/jobs/*", "nomad/jobs/a/b/c", true),
            ("foo/*", "foo/", true),
            ("foo/*", "foo", false),
            ("foo?", "foo?", true),
            ("foo?", "fooo", false),
            ("*/bar", "foo/bar", true),
            ("a*b*c", "abcbc", true),
            ("ab*ba", "aba", false),
            ("*a*", "", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("default\0*", "default\0x/y", true),
            ("*\0system/*", "prod\0system/x", true),
        ];
        for (pattern, subject, want) in table {
            assert_eq!(
                glob_match(pattern, subject),
                want,
                "{pattern:?} vs {subject:?}"
            );
        }
    }

    #[test]
    fn expansion_table() {
        assert_eq!(CapSet::expand(&[Read]), CapSet(1 | 2));
        assert_eq!(CapSet::expand(&[Write]), CapSet(4), "write implies nothing");
        assert_eq!(CapSet::expand(&[Destroy]), CapSet(8));
        assert_eq!(CapSet::expand(&[Read, Write, Deny]), CapSet(16));
    }

    #[test]
    fn write_does_not_imply_read_or_list() {
        let c = caller(&[Policy::new("p").path("default", "a", &[Write])], None);
        assert!(c.allows("default", "a", Write, false));
        assert!(!c.allows("default", "a", Read, false));
        assert!(!c.allows("default", "a", List, false));
        assert!(!c.allows("default", "a", Destroy, false));
    }

    #[test]
    fn exact_rule_beats_globs_and_deny_unions() {
        let p = Policy::new("p")
            .path("default", "*", &[List])
            .path("default", "foo/*", &[Write])
            .path("default", "foo/bar", &[Read]);
        let c = caller(&[p], None);
        assert!(c.allows("default", "foo/bar", Read, false));
        assert!(
            !c.allows("default", "foo/bar", Write, false),
            "exact wins, no merge with globs"
        );
        // same exact key from two policies: union, deny does not win
        let deny = Policy::new("d").path("default", "x", &[Deny]);
        let read = Policy::new("r").path("default", "x", &[Read]);
        let c = caller(&[deny, read], None);
        assert!(c.allows("default", "x", Read, false));
    }

    #[test]
    fn closest_glob_table() {
        let p = Policy::new("p")
            .path("default", "*", &[List])
            .path("default", "system/*", &[Deny])
            .path("default", "*/bar", &[List])
            .path("default", "foo/*", &[Write]);
        let c = caller(&[p], None);
        // `*/bar` and `foo/*` tie at 3: prefix over suffix (greatest key wins)
        assert!(c.allows("default", "foo/bar", Write, false));
        assert!(!c.allows("default", "foo/bar", List, false));
        // more specific deny glob
        assert!(!c.allows("default", "system/x", List, false));
        assert!(c.allows("default", "other", List, false));
        // namespace globs take part in the same key
        let p = Policy::new("q")
            .path("*", "shared/*", &[Read])
            .path("prod", "shared/*", &[Write]);
        let c = caller(&[p], None);
        assert!(c.allows("prod", "shared/a", Write, false));
        assert!(!c.allows("prod", "shared/a", Read, false));
        assert!(c.allows("dev", "shared/a", Read, false));
        assert!(!c.allows("dev", "other", Read, false));
    }

    #[test]
    fn workload_claim_table() {
        // Doc example: `nomad/jobs` list and `nomad/jobs/*` deny for every namespace.
        let p =
            Policy::new("p")
                .path("*", "nomad/jobs", &[List])
                .path("*", "nomad/jobs/*", &[Deny]);
        let c = caller(&[p], Some(claim("prod")));
        let table = [
            ("prod", "nomad/jobs/example", Read, true, true),
            ("prod", "nomad/jobs/example/web", Read, true, true),
            ("prod", "nomad/jobs/example/web/httpd", List, true, true),
            ("prod", "nomad/jobs/example/x", Read, true, false),
            ("prod", "nomad/jobs/example/web/other", Read, true, false),
            ("prod", "nomad/jobs", List, true, true),
            ("prod", "nomad/jobs", Read, true, true),
            ("dev", "nomad/jobs/example", Read, true, false),
            // writes never use the claim
            ("prod", "nomad/jobs/example", Read, false, false),
            ("prod", "nomad/jobs/example", Write, true, false),
        ];
        for (ns, path, cap, with_claim, want) in table {
            assert_eq!(
                c.allows(ns, path, cap, with_claim),
                want,
                "{ns} {path} {cap} claim={with_claim}"
            );
        }
        // an exact deny beats the claim
        let p = Policy::new("p").path("prod", "nomad/jobs/example", &[Deny]);
        let c = caller(&[p], Some(claim("prod")));
        assert!(!c.allows("prod", "nomad/jobs/example", Read, true));
    }

    #[test]
    fn resolve_table() {
        let acl = AclConfig::enabled()
            .with_policy(Policy::new("rw").path("default", "a", &[Read, Write]))
            .with_policy(Policy::new("anon").path("default", "public", &[Read]))
            .with_token(Token::client("client", &["rw", "missing-policy"]))
            .with_token(Token::management("root"));
        let acl = AclConfig {
            anonymous_policies: vec!["anon".into()],
            ..acl
        };
        assert!(acl.resolve("unknown", &Faults::none()).is_none());
        assert!(
            acl.resolve("root", &Faults::none())
                .unwrap()
                .is_management()
        );
        let client = acl.resolve("client", &Faults::none()).unwrap();
        assert!(client.allows("default", "a", Write, false));
        assert!(!client.allows("default", "public", Read, false));
        let anon = acl.resolve("", &Faults::none()).unwrap();
        assert!(anon.allows("default", "public", Read, false));
        assert!(!anon.allows("default", "a", Read, false));
        assert!(
            AclConfig::disabled()
                .resolve("whatever", &Faults::none())
                .unwrap()
                .is_management()
        );
    }

    #[test]
    fn policy_validation_table() {
        let ok = Policy::new("ok").path("dev-1*", "project/*", &[Read]);
        assert!(ok.validate().is_ok());
        let bad = [
            Policy::new("b").path("bad name", "x", &[Read]),
            Policy::new("b").path("", "x", &[Read]),
            Policy::new("b").path("default", "", &[Read]),
            Policy::new("b").path("default", "/x", &[Read]),
            Policy {
                name: "b".into(),
                namespaces: vec![NamespaceRule {
                    name: "default".into(),
                    variables: Some(vec![]),
                }],
            },
        ];
        for policy in bad {
            assert!(policy.validate().is_err(), "{policy:?}");
        }
        assert!(
            Policy::new("s")
                .path_str("default", "x", &["read", "sudo"])
                .is_err()
        );
        assert_eq!(
            Policy::new("s")
                .path_str("default", "x", &["write"])
                .unwrap(),
            Policy::new("s").path("default", "x", &[Write])
        );
    }
}
