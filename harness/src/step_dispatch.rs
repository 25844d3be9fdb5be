//! Finding the definition of a step, for every kind's World.
//!
//! cucumber finds a step's definition by trying every pattern of the World's keyword against
//! the step's text, with capture slots for each: about 80 patterns per step in the CSI suite,
//! a tenth of the harness's CPU in a run. Here cucumber is handed one catch-all definition per
//! keyword, and the catch-all finds the step's definition itself: a pattern anchored at the
//! start of the text is tried only when the text begins with one of the literal beginnings
//! every match of it has (all the suites' patterns are anchored), so a step costs a few byte
//! comparisons per pattern and one or two regex searches.
//!
//! What a step sees is what cucumber would give it: the same definition runs, with the same
//! captures. A step that no definition matches, or more than one, fails with a
//! [`StepFault`] payload, which the recorder turns into an Error verdict (a fault of the
//! harness, not of the plugin).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use cucumber::codegen::{LocalBoxFuture, Regex, StepConstructor, WorldInventory};
use cucumber::step::{Collection, Context, Location};
use regex_syntax::hir::Look;
use regex_syntax::hir::literal::Extractor;

/// Why no step definition could run: the payload the catch-all fails the step with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepFault {
    /// No definition matches the step's text (keyword and text).
    Undefined(String),
    /// More than one matches: the step and the patterns with where each is defined.
    Ambiguous(String, Vec<String>),
}

impl fmt::Display for StepFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepFault::Undefined(step) => {
                write!(f, "no step definition in this harness matches: {step}")
            }
            StepFault::Ambiguous(step, patterns) => write!(
                f,
                "more than one step definition in this harness matches: {step}\n  {}",
                patterns.join("\n  ")
            ),
        }
    }
}

/// One step definition of a World.
struct Definition<W> {
    regex: Regex,
    /// Every match of `regex` begins the text with one of these; `None` when that is not known
    /// (the pattern is not anchored at the start, or its beginnings are not a finite set).
    starts: Option<Vec<Vec<u8>>>,
    /// For a pattern anchored at both ends whose every match is one of a few literals (no
    /// pattern part that is not spelled out): those texts. Such a pattern matches a text only
    /// when the text is one of them, which is told without running the regex.
    whole: Option<Vec<Vec<u8>>>,
    run: cucumber::Step<W>,
    location: Location,
}

impl<W> fmt::Debug for Definition<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.regex.as_str(), self.location)
    }
}

impl<W> Definition<W> {
    fn new((location, regex, run): (Location, fn() -> Regex, cucumber::Step<W>)) -> Self {
        let regex = regex();
        let Literals { starts, whole } = literals(regex.as_str());
        Definition {
            regex,
            starts,
            whole,
            run,
            location,
        }
    }

    /// The captures of the pattern in `text` in cucumber's shape: every group by name (or
    /// `None`), the whole match first, an unmatched optional group as "".
    fn matches(&self, text: &str) -> Option<Vec<(Option<String>, String)>> {
        if !self.may_match(text) {
            return None;
        }
        if let Some(whole) = &self.whole {
            if !whole.iter().any(|w| w.as_slice() == text.as_bytes()) {
                return None;
            }
            if self.regex.captures_len() == 1 {
                return Some(vec![(None, text.to_owned())]);
            }
        }
        let caps = self.regex.captures(text)?;
        Some(
            self.regex
                .capture_names()
                .zip(caps.iter())
                .map(|(name, m)| {
                    (
                        name.map(str::to_owned),
                        m.map_or("", |m| m.as_str()).to_owned(),
                    )
                })
                .collect(),
        )
    }

    fn may_match(&self, text: &str) -> bool {
        self.starts.as_ref().is_none_or(|starts| {
            starts
                .iter()
                .any(|s| text.as_bytes().starts_with(s.as_slice()))
        })
    }
}

/// What a pattern's literals tell of the texts it can match.
#[derive(Debug, Default, PartialEq)]
struct Literals {
    /// Every match begins the text with one of these (the pattern is anchored at the start).
    starts: Option<Vec<Vec<u8>>>,
    /// Every match is the whole text and one of these.
    whole: Option<Vec<Vec<u8>>>,
}

fn literals(pattern: &str) -> Literals {
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return Literals::default();
    };
    let props = hir.properties();
    if !props.look_set_prefix().contains(Look::Start) {
        return Literals::default();
    }
    let seq = Extractor::new().extract(&hir);
    let Some(lits) = seq.literals() else {
        return Literals::default();
    };
    let bytes = || lits.iter().map(|l| l.as_bytes().to_vec()).collect();
    let whole = (props.look_set_suffix().contains(Look::End) && seq.is_exact()).then(bytes);
    Literals {
        starts: Some(bytes()),
        whole,
    }
}

/// A World's definitions, per keyword.
struct Table<W> {
    given: Vec<Definition<W>>,
    when: Vec<Definition<W>>,
    then: Vec<Definition<W>>,
}

impl<W: WorldInventory> Table<W> {
    fn from_inventory() -> Self {
        Table {
            given: definitions::<W, W::Given>(),
            when: definitions::<W, W::When>(),
            then: definitions::<W, W::Then>(),
        }
    }
}

/// The definitions of one keyword, as the step macros registered them.
fn definitions<W, K>() -> Vec<Definition<W>>
where
    K: cucumber::codegen::inventory::Collect + StepConstructor<W>,
{
    cucumber::codegen::inventory::iter::<K>
        .into_iter()
        .map(|d| Definition::new(d.inner()))
        .collect()
}

/// A found definition and the captures cucumber would hand it.
type Found<'t, W> = (&'t Definition<W>, Vec<(Option<String>, String)>);

/// The one definition among `defs` whose pattern matches `text`, with its captures; else every
/// definition that matches (none, or more than one).
fn find<'t, W>(
    defs: &'t [Definition<W>],
    text: &str,
) -> Result<Found<'t, W>, Vec<&'t Definition<W>>> {
    let mut hits = defs.iter().filter_map(|d| d.matches(text).map(|m| (d, m)));
    let Some(found) = hits.next() else {
        return Err(Vec::new());
    };
    let others: Vec<_> = hits.map(|(d, _)| d).collect();
    if !others.is_empty() {
        return Err(std::iter::once(found.0).chain(others).collect());
    }
    Ok(found)
}

/// The table of World `W`, built once per process.
fn table<W: WorldInventory + 'static>() -> &'static Table<W> {
    static TABLES: OnceLock<Mutex<HashMap<TypeId, &'static (dyn Any + Send + Sync)>>> =
        OnceLock::new();
    let mut tables = TABLES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let entry = *tables
        .entry(TypeId::of::<W>())
        .or_insert_with(|| Box::leak(Box::new(Table::<W>::from_inventory())));
    entry
        .downcast_ref::<Table<W>>()
        .expect("the table stored under W's type id is W's")
}

/// Run the definition of `ctx`'s step among `defs`, or fail the step with a [`StepFault`].
fn dispatch<'a, W>(
    defs: &[Definition<W>],
    world: &'a mut W,
    ctx: Context,
) -> LocalBoxFuture<'a, ()> {
    match find(defs, &ctx.step.value) {
        Ok((def, matches)) => (def.run)(
            world,
            Context {
                step: ctx.step,
                matches,
            },
        ),
        Err(many) => {
            let step = format!("{} {}", ctx.step.keyword.trim(), ctx.step.value);
            let fault = if many.is_empty() {
                StepFault::Undefined(step)
            } else {
                StepFault::Ambiguous(step, many.iter().map(|d| format!("{d:?}")).collect())
            };
            Box::pin(async move { std::panic::panic_any(fault) })
        }
    }
}

fn given<W: WorldInventory + 'static>(w: &mut W, ctx: Context) -> LocalBoxFuture<'_, ()> {
    dispatch(&table::<W>().given, w, ctx)
}

fn when<W: WorldInventory + 'static>(w: &mut W, ctx: Context) -> LocalBoxFuture<'_, ()> {
    dispatch(&table::<W>().when, w, ctx)
}

fn then<W: WorldInventory + 'static>(w: &mut W, ctx: Context) -> LocalBoxFuture<'_, ()> {
    dispatch(&table::<W>().then, w, ctx)
}

/// The collection to hand cucumber for World `W`: one catch-all definition per keyword.
pub fn collection<W: WorldInventory + 'static>() -> Collection<W> {
    // Build the table now, not inside the first step.
    let _ = table::<W>();
    // Matches every text at its start, with nothing to capture: the cheapest search.
    let any = || Regex::new("^").expect("a valid pattern");
    Collection::new()
        .given(None, any(), given::<W>)
        .when(None, any(), when::<W>)
        .then(None, any(), then::<W>)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop(_: &mut (), _: Context) -> LocalBoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn def(pattern: &str, line: u32) -> Definition<()> {
        let Literals { starts, whole } = literals(pattern);
        Definition {
            regex: Regex::new(pattern).unwrap(),
            starts,
            whole,
            run: noop,
            location: Location {
                path: "test.rs",
                line,
                column: 1,
            },
        }
    }

    #[test]
    fn an_anchored_pattern_is_tried_only_on_a_text_with_its_beginning() {
        assert_eq!(
            literals(r"^the harness calls (\S+)$").starts,
            Some(vec![b"the harness calls ".to_vec()])
        );
        let both = literals(r"^the (?:plugin|harness) stops$").starts.unwrap();
        assert!(both.contains(&b"the plugin stops".to_vec()), "{both:?}");
        assert!(both.contains(&b"the harness stops".to_vec()), "{both:?}");
        // Not anchored at the start, or anchored at a line's start: always tried.
        assert_eq!(literals(r"the harness calls (\S+)$"), Literals::default());
        assert_eq!(literals(r"(?m)^the harness$"), Literals::default());
        assert_eq!(literals(r"^.*$"), Literals::default());
    }

    #[test]
    fn a_pattern_that_is_only_literals_is_matched_by_comparing_texts() {
        let plain = literals(r"^the harness calls NodeGetInfo$");
        assert_eq!(
            plain.whole,
            Some(vec![b"the harness calls NodeGetInfo".to_vec()])
        );
        assert!(literals(r"^the (?:plugin|harness) stops$").whole.is_some());
        // Not anchored at the end, or with a part that is not spelled out: the regex decides.
        assert_eq!(literals(r"^the harness calls NodeGetInfo").whole, None);
        assert_eq!(literals(r"^the harness calls (\S+)$").whole, None);
        let defs = vec![
            def(r"^the harness calls NodeGetInfo$", 1),
            def(r"^the (plugin|harness) stops$", 2),
        ];
        assert!(find(&defs, "the harness calls NodeGetInfo again").is_err());
        assert_eq!(
            find(&defs, "the harness calls NodeGetInfo").unwrap().1,
            vec![(None, "the harness calls NodeGetInfo".to_string())]
        );
        // A group in a literal-only pattern is still captured.
        assert_eq!(
            find(&defs, "the plugin stops").unwrap().1,
            vec![
                (None, "the plugin stops".to_string()),
                (None, "plugin".to_string())
            ]
        );
    }

    #[test]
    fn the_one_matching_definition_gets_cucumbers_captures() {
        let defs = vec![
            def(r"^the harness calls (?P<method>\S+)( again)?$", 1),
            def(r"^the harness waits (\d+) seconds$", 2),
            def(r"calls nothing", 3),
        ];
        let (d, matches) = find(&defs, "the harness calls Probe").unwrap();
        assert_eq!(d.location.line, 1);
        assert_eq!(
            matches,
            vec![
                (None, "the harness calls Probe".to_string()),
                (Some("method".to_string()), "Probe".to_string()),
                (None, String::new()),
            ]
        );
        let (d, matches) = find(&defs, "the harness waits 3 seconds").unwrap();
        assert_eq!(d.location.line, 2);
        assert_eq!(matches[1].1, "3");
        // An unanchored pattern matches anywhere, as cucumber's does.
        assert_eq!(
            find(&defs, "it calls nothing at all")
                .unwrap()
                .0
                .location
                .line,
            3
        );
    }

    #[test]
    fn no_match_and_two_matches_are_told_apart() {
        let defs = vec![def(r"^a volume$", 1), def(r"^a (\w+)$", 2)];
        assert!(find(&defs, "a snapshot of x").unwrap_err().is_empty());
        let many = find(&defs, "a volume").unwrap_err();
        assert_eq!(
            many.iter().map(|d| d.location.line).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn a_fault_says_which_step_and_which_patterns() {
        let text = StepFault::Ambiguous(
            "Given a volume".into(),
            vec![
                "^a volume$ (a.rs:1:1)".into(),
                "^a (\\w+)$ (a.rs:2:1)".into(),
            ],
        )
        .to_string();
        assert!(text.contains("Given a volume"), "{text}");
        assert!(text.contains("a.rs:2:1"), "{text}");
        assert_eq!(
            StepFault::Undefined("When x".into()).to_string(),
            "no step definition in this harness matches: When x"
        );
    }
}

/// Every step of the built-in specs finds exactly one definition, and finds the one trying
/// every pattern would.
#[cfg(test)]
mod builtin_specs {
    use super::*;
    use crate::specs::{SpecSource, parse, spec_files};
    use gherkin::StepType;

    fn steps(kind: &str) -> Vec<gherkin::Step> {
        let files = spec_files(kind, &SpecSource::Embedded).unwrap();
        let mut out = Vec::new();
        for f in parse(&files).unwrap() {
            let scenarios = f
                .scenarios
                .iter()
                .chain(f.rules.iter().flat_map(|r| r.scenarios.iter()));
            let backgrounds = f
                .background
                .iter()
                .chain(f.rules.iter().filter_map(|r| r.background.as_ref()));
            out.extend(backgrounds.flat_map(|b| b.steps.iter().cloned()));
            out.extend(scenarios.flat_map(|s| s.steps.iter().cloned()));
        }
        assert!(out.len() > 20, "{kind}: only {} steps", out.len());
        out
    }

    fn check<W: WorldInventory + 'static>(kind: &str) {
        let table = table::<W>();
        for step in steps(kind) {
            let defs = match step.ty {
                StepType::Given => &table.given,
                StepType::When => &table.when,
                StepType::Then => &table.then,
            };
            let every: Vec<u32> = defs
                .iter()
                .filter(|d| d.regex.is_match(&step.value))
                .map(|d| d.location.line)
                .collect();
            let found = find(defs, &step.value);
            assert_eq!(
                found.as_ref().map(|(d, _)| vec![d.location.line]).ok(),
                Some(every),
                "{kind}: {} {}",
                step.keyword,
                step.value
            );
            // The captures are the ones cucumber takes from the pattern.
            let (def, matches) = found.unwrap();
            let caps = def.regex.captures(&step.value).unwrap();
            let want: Vec<_> = def
                .regex
                .capture_names()
                .zip(caps.iter())
                .map(|(n, m)| {
                    (
                        n.map(str::to_owned),
                        m.map_or("", |m| m.as_str()).to_owned(),
                    )
                })
                .collect();
            assert_eq!(matches, want, "{kind}: {}", step.value);
        }
    }

    #[test]
    fn every_builtin_step_finds_the_one_definition_trying_every_pattern_finds() {
        check::<crate::steps::csi::CsiWorld>("csi");
        check::<crate::steps::dhv::DhvWorld>("dhv");
        check::<crate::steps::driver::DriverWorld>("driver");
        check::<crate::steps::lock::LockWorld>("lock");
        check::<crate::steps::variables::VariablesWorld>("variables");
    }
}
