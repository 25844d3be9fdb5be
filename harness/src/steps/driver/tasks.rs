//! Task shapes: the few kinds of task the driver suite needs, whatever the driver runs.
//!
//! A driver runs commands, images or disks, so the user says how to make each shape in the
//! driver's own task configuration: `--tasks FILE` (HCL `shape "long" { config { ... } }`
//! blocks, or TOML `[shape.long.config]` tables), or `--task-command TEMPLATE` for drivers that
//! run a command (every shape is then a `/bin/sh -c` snippet put into the template's
//! `{command}` and `{args}`). What each shape must do:
//!
//! | shape | behaviour |
//! |---|---|
//! | `long` | runs until stopped |
//! | `exit` | exits with code `{code}` after about a second |
//! | `output` | prints `{stdout}` on stdout and `{stderr}` on stderr, prints `marker=` and the value of `NOMAD_CONFORM_TASK` (and, optionally, `dirs=$NOMAD_ALLOC_DIR\|$NOMAD_TASK_DIR\|$NOMAD_SECRETS_DIR`), writes a file `{file}` (content `{file}`) into `$NOMAD_ALLOC_DIR`, `$NOMAD_TASK_DIR` and `$NOMAD_SECRETS_DIR`, then exits 0 after about a second |
//! | `trap` | runs until a signal: exits 41 on SIGTERM, 42 on SIGINT, 43 on SIGUSR1; prints `ready` once its handlers are set |
//! | `stubborn` | ignores SIGTERM and starts a child that ignores it too; prints `ready` once both are so |
//!
//! Before it signals or stops a `trap` or `stubborn` task, the harness waits until the task is
//! ready: `ready` on its stdout, or its processes' signal dispositions in /proc. A signal sent
//! before a shell has set its trap kills it outright, whatever the driver does, so without the
//! wait a verdict would depend on how fast the task started.
//!
//! Placeholders are replaced in the text before it is parsed, then the configuration is
//! decoded against the driver's TaskConfigSchema and encoded as Nomad encodes it.

use std::collections::BTreeMap;
use std::path::Path;

use nomad_conform_hclspec::{SpecTree, Value, decode_hcl_body, decode_json, quote};

/// The shapes, as the specs tag them (`@shape-long`).
pub const SHAPES: &[&str] = &["long", "exit", "output", "trap", "stubborn"];

/// What the trap shape exits with, by signal.
pub const TRAP_TERM_CODE: i32 = 41;
pub const TRAP_INT_CODE: i32 = 42;
pub const TRAP_USR1_CODE: i32 = 43;

/// Values for a shape's placeholders.
#[derive(Clone, Debug, Default)]
pub struct Placeholders {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub file: String,
}

impl Placeholders {
    fn apply(&self, text: &str) -> String {
        text.replace("{code}", &self.code.to_string())
            .replace("{stdout}", &self.stdout)
            .replace("{stderr}", &self.stderr)
            .replace("{file}", &self.file)
    }
}

/// Where the shapes come from.
#[derive(Clone, Debug)]
pub enum Shapes {
    /// `--tasks FILE`, HCL.
    Hcl(String),
    /// `--tasks FILE.toml`.
    Toml(String),
    /// `--task-command TEMPLATE`.
    Command(String),
    /// Neither: every clause that needs a task is skipped.
    None,
}

/// The `/bin/sh -c` snippet of a shape (for `--task-command`).
pub fn snippet(shape: &str) -> Option<&'static str> {
    Some(match shape {
        "long" => "exec sleep 3600",
        "exit" => "sleep 1; exit {code}",
        "output" => {
            "echo {stdout}; echo {stderr} >&2; echo \"marker=$NOMAD_CONFORM_TASK\"; echo \"dirs=$NOMAD_ALLOC_DIR|$NOMAD_TASK_DIR|$NOMAD_SECRETS_DIR\"; for d in \"$NOMAD_ALLOC_DIR\" \"$NOMAD_TASK_DIR\" \"$NOMAD_SECRETS_DIR\"; do echo {file} > \"$d/{file}\"; done; sleep 1"
        }
        "trap" => {
            "trap 'exit 41' TERM; trap 'exit 42' INT; trap 'exit 43' USR1; echo ready; while :; do sleep 0.1; done"
        }
        "stubborn" => {
            "trap '' TERM; (trap '' TERM; while :; do sleep 1; done) & echo ready; while :; do sleep 1; done"
        }
        _ => return None,
    })
}

impl Shapes {
    /// Read `--tasks FILE` (TOML when it ends in `.toml`, HCL otherwise) or take
    /// `--task-command`; checks that the file parses and names only known shapes.
    pub fn load(tasks: Option<&Path>, command: Option<&str>) -> Result<Shapes, String> {
        match (tasks, command) {
            (Some(p), _) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| format!("--tasks {}: {e}", p.display()))?;
                let toml = p.extension().is_some_and(|e| e == "toml");
                Shapes::from_text(text, toml, &p.display().to_string())
            }
            (None, Some(t)) if !t.contains("{command}") && !t.contains("{args}") => Err(format!(
                "--task-command {t:?}: the template needs {{command}} or {{args}} (e.g. 'command = {{command}}\\nargs = {{args}}')"
            )),
            (None, Some(t)) => Ok(Shapes::Command(t.to_string())),
            (None, None) => Ok(Shapes::None),
        }
    }

    /// A `--tasks` file's text (TOML when `toml`, HCL otherwise; `shown` names the file in
    /// messages), checked as [`Shapes::load`] checks it.
    pub fn from_text(text: String, toml: bool, shown: &str) -> Result<Shapes, String> {
        let shapes = if toml {
            Shapes::Toml(text)
        } else {
            Shapes::Hcl(text)
        };
        let names = shapes.names(&Placeholders::default())?;
        if let Some(bad) = names.iter().find(|n| !SHAPES.contains(&n.as_str())) {
            return Err(format!(
                "--tasks {shown}: unknown shape {bad:?} (shapes: {})",
                SHAPES.join(", ")
            ));
        }
        if let Some((shape, missing)) = shapes.missing_placeholders()?.into_iter().next() {
            return Err(format!(
                "--tasks {shown}: shape {shape:?} never uses {}: the harness puts there what it then looks for in the task's exit code, output or files, so without it every clause that reads them would blame the driver (docs/guides/driver.md, `--tasks`, says what each shape does with them)",
                missing.join(", ")
            ));
        }
        Ok(shapes)
    }

    /// The placeholders each shape of a `--tasks` file needs and does not use: `exit` needs
    /// `{code}`, `output` needs `{stdout}`, `{stderr}` and `{file}`. Found by filling them with
    /// values no configuration holds by chance and looking for those in each shape's
    /// configuration.
    fn missing_placeholders(&self) -> Result<Vec<(String, Vec<&'static str>)>, String> {
        let marks = Placeholders {
            code: 197_531,
            stdout: "ncph-stdout-5e1f".into(),
            stderr: "ncph-stderr-5e1f".into(),
            file: "ncph-file-5e1f".into(),
        };
        let code = marks.code.to_string();
        let needs: [(&str, &[(&'static str, &str)]); 2] = [
            ("exit", &[("{code}", code.as_str())]),
            (
                "output",
                &[
                    ("{stdout}", marks.stdout.as_str()),
                    ("{stderr}", marks.stderr.as_str()),
                    ("{file}", marks.file.as_str()),
                ],
            ),
        ];
        let sources = self.sources(&marks)?;
        let mut out = Vec::new();
        for (shape, wanted) in needs {
            let Some(source) = sources.get(shape) else {
                continue;
            };
            let text = match source {
                Source::Hcl(body) => hcl::to_string(body).unwrap_or_default(),
                Source::Json(json) => json.to_string(),
            };
            let missing: Vec<&'static str> = wanted
                .iter()
                .filter(|(_, mark)| !text.contains(mark))
                .map(|(name, _)| *name)
                .collect();
            if !missing.is_empty() {
                out.push((shape.to_string(), missing));
            }
        }
        Ok(out)
    }

    /// The option the shapes came from (`--tasks` or `--task-command`), if any.
    pub fn flag(&self) -> Option<&'static str> {
        match self {
            Shapes::Hcl(_) | Shapes::Toml(_) => Some("--tasks"),
            Shapes::Command(_) => Some("--task-command"),
            Shapes::None => None,
        }
    }

    /// The shapes the run can make.
    pub fn names(&self, p: &Placeholders) -> Result<Vec<String>, String> {
        Ok(match self {
            Shapes::Command(_) => SHAPES.iter().map(|s| s.to_string()).collect(),
            Shapes::None => Vec::new(),
            Shapes::Hcl(_) | Shapes::Toml(_) => self.sources(p)?.into_keys().collect(),
        })
    }

    /// Every shape's configuration source, placeholders filled in.
    fn sources(&self, p: &Placeholders) -> Result<BTreeMap<String, Source>, String> {
        let mut out = BTreeMap::new();
        match self {
            Shapes::Hcl(text) => {
                let body: hcl::Body =
                    hcl::from_str(&p.apply(text)).map_err(|e| format!("--tasks: not HCL: {e}"))?;
                for block in body.blocks() {
                    if block.identifier() != "shape" {
                        return Err(format!(
                            "--tasks: unexpected block {:?}: write `shape \"NAME\" {{ config {{ ... }} }}`",
                            block.identifier()
                        ));
                    }
                    let name = block
                        .labels()
                        .first()
                        .map(|l| l.as_str().to_string())
                        .ok_or("--tasks: a shape block needs its name as a label")?;
                    let config = block
                        .body()
                        .blocks()
                        .find(|b| b.identifier() == "config")
                        .ok_or_else(|| format!("--tasks: shape {name:?} has no config block"))?;
                    out.insert(name, Source::Hcl(config.body().clone()));
                }
            }
            Shapes::Toml(text) => {
                let table: toml::Table = toml::from_str(&p.apply(text))
                    .map_err(|e| format!("--tasks: not TOML: {}", e.message()))?;
                let shapes = table
                    .get("shape")
                    .and_then(|s| s.as_table())
                    .ok_or("--tasks: expected [shape.NAME.config] tables")?;
                for (name, v) in shapes {
                    let config = v
                        .get("config")
                        .ok_or_else(|| format!("--tasks: shape {name:?} has no config table"))?;
                    let json = serde_json::to_value(config).map_err(|e| e.to_string())?;
                    out.insert(name.clone(), Source::Json(json));
                }
            }
            Shapes::Command(template) => {
                for shape in SHAPES {
                    let snippet = p.apply(snippet(shape).unwrap_or_default());
                    let text = template
                        .replace("{command}", &quote("/bin/sh"))
                        .replace("{args}", &format!("[{}, {}]", quote("-c"), quote(&snippet)));
                    let body: hcl::Body = hcl::from_str(&text)
                        .map_err(|e| format!("--task-command: not an HCL body: {e}"))?;
                    out.insert(shape.to_string(), Source::Hcl(body));
                }
            }
            Shapes::None => {}
        }
        Ok(out)
    }

    /// The configuration of `shape` decoded against the driver's task schema, and its HCL for
    /// messages; `Ok(None)` when the run has no such shape.
    pub fn render(
        &self,
        shape: &str,
        p: &Placeholders,
        spec: &SpecTree,
    ) -> Result<Option<(Value, String)>, String> {
        let Some(source) = self.sources(p)?.remove(shape) else {
            return Ok(None);
        };
        let value = match &source {
            Source::Hcl(body) => decode_hcl_body(spec, body),
            Source::Json(json) => decode_json(spec, json),
        }
        .map_err(|e| {
            format!(
                "the {shape} task's configuration does not fit the driver's TaskConfigSchema: {e}"
            )
        })?;
        let hcl = nomad_conform_hclspec::config_to_hcl(spec, &value);
        Ok(Some((value, hcl)))
    }
}

#[derive(Clone, Debug)]
enum Source {
    Hcl(hcl::Body),
    Json(serde_json::Value),
}

#[cfg(test)]
mod tests {
    use super::*;
    use nomad_conform_hclspec::Type;

    fn spec() -> SpecTree {
        SpecTree::Object(BTreeMap::from([
            (
                "command".to_string(),
                SpecTree::Attr {
                    name: "command".into(),
                    ty: Type::String,
                    required: true,
                },
            ),
            (
                "args".to_string(),
                SpecTree::Attr {
                    name: "args".into(),
                    ty: Type::List(Box::new(Type::String)),
                    required: false,
                },
            ),
        ]))
    }

    fn p() -> Placeholders {
        Placeholders {
            code: 3,
            stdout: "OUT".into(),
            stderr: "ERR".into(),
            file: "f.txt".into(),
        }
    }

    #[test]
    fn task_command_makes_every_shape() {
        let s = Shapes::load(None, Some("command = {command}\nargs = {args}")).unwrap();
        assert_eq!(s.names(&p()).unwrap().len(), SHAPES.len());
        let (v, hcl) = s.render("exit", &p(), &spec()).unwrap().unwrap();
        let json = v.to_json();
        assert_eq!(json["command"], "/bin/sh");
        assert_eq!(json["args"][1], "sleep 1; exit 3");
        assert!(hcl.contains("exit 3"), "{hcl}");
        let (v, _) = s.render("output", &p(), &spec()).unwrap().unwrap();
        assert!(
            v.to_json()["args"][1]
                .as_str()
                .unwrap()
                .contains("$NOMAD_CONFORM_TASK")
        );
    }

    #[test]
    fn hcl_and_toml_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tasks.hcl");
        std::fs::write(
            &f,
            "shape \"long\" {\n  config {\n    command = \"/bin/sleep\"\n    args = [\"3600\"]\n  }\n}\nshape \"exit\" {\n  config {\n    command = \"/bin/sh\"\n    args = [\"-c\", \"exit {code}\"]\n  }\n}\n",
        )
        .unwrap();
        let s = Shapes::load(Some(&f), None).unwrap();
        assert_eq!(s.names(&p()).unwrap(), vec!["exit", "long"]);
        let (v, _) = s.render("exit", &p(), &spec()).unwrap().unwrap();
        assert_eq!(v.to_json()["args"][1], "exit 3");
        assert!(s.render("trap", &p(), &spec()).unwrap().is_none());
        let t = dir.path().join("tasks.toml");
        std::fs::write(
            &t,
            "[shape.long.config]\ncommand = \"/bin/sleep\"\nargs = [\"3600\"]\n",
        )
        .unwrap();
        let s = Shapes::load(Some(&t), None).unwrap();
        let (v, _) = s.render("long", &p(), &spec()).unwrap().unwrap();
        assert_eq!(v.to_json()["command"], "/bin/sleep");
    }

    #[test]
    fn bad_inputs_are_explained() {
        assert!(Shapes::load(None, Some("command = \"x\"")).is_err());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.hcl");
        std::fs::write(
            &f,
            "shape \"sideways\" {\n  config {\n    command = \"x\"\n  }\n}\n",
        )
        .unwrap();
        assert!(
            Shapes::load(Some(&f), None)
                .unwrap_err()
                .contains("unknown shape")
        );
        let s = Shapes::load(None, Some("cmd = {command}")).unwrap();
        assert!(
            s.render("long", &p(), &spec())
                .unwrap_err()
                .contains("TaskConfigSchema")
        );
    }

    #[test]
    fn a_tasks_file_whose_shapes_drop_a_placeholder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tasks.hcl");
        let write = |text: &str| std::fs::write(&f, text).unwrap();
        // The exit code written in, not {code}.
        write(
            "shape \"exit\" {\n  config {\n    command = \"/bin/sh\"\n    args = [\"-c\", \"exit 3\"]\n  }\n}\n",
        );
        let e = Shapes::load(Some(&f), None).unwrap_err();
        assert!(e.contains("shape \"exit\" never uses {code}"), "{e}");
        // An output shape without {file} (TOML too).
        let t = dir.path().join("tasks.toml");
        std::fs::write(
            &t,
            "[shape.output.config]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"echo {stdout}; echo {stderr} >&2\"]\n",
        )
        .unwrap();
        let e = Shapes::load(Some(&t), None).unwrap_err();
        assert!(e.contains("shape \"output\" never uses {file}"), "{e}");
        // Every placeholder used: accepted.
        write(
            "shape \"exit\" {\n  config {\n    command = \"/bin/sh\"\n    args = [\"-c\", \"exit {code}\"]\n  }\n}\n",
        );
        assert!(Shapes::load(Some(&f), None).is_ok());
    }
}
