//! The command lines the reports print (rerun lines, reproduce commands), built so that no
//! secret is ever written into one: a value holding a registered secret
//! ([`crate::secrets::holds_secret`]) is written as a variable the reader sets first
//! (`--parameters "$NOMAD_CONFORM_PARAMETERS"`, `DHV_PARAMETERS="$DHV_PARAMETERS"`), and the line
//! ends with a comment saying what to set it to. Every other word is shell-quoted
//! ([`crate::shell::quote`]). Redaction still runs over every line, but a secret that is never
//! written needs no escaped form to be found.

use crate::shell::quote;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    words: Vec<String>,
    /// Variables the line reads in place of a secret, each with what to set it to.
    to_set: Vec<(String, String)>,
}

impl CommandLine {
    /// A line starting with these words (shell-quoted).
    pub fn new(words: &[&str]) -> CommandLine {
        let mut line = CommandLine::default();
        for w in words {
            line.word(w);
        }
        line
    }

    /// Words already written for the shell (quoted, or naming a variable on purpose).
    pub fn from_shell_words(words: impl IntoIterator<Item = String>) -> CommandLine {
        CommandLine {
            words: words.into_iter().collect(),
            to_set: Vec::new(),
        }
    }

    /// One word, shell-quoted.
    pub fn word(&mut self, word: &str) -> &mut Self {
        self.words.push(quote(word));
        self
    }

    /// A word already written for the shell.
    pub fn shell_word(&mut self, word: impl Into<String>) -> &mut Self {
        self.words.push(word.into());
        self
    }

    /// `--name VALUE` when `value` is given; a value holding a secret is written as the
    /// variable nomad-conform reads the option from (`--launch` from `NOMAD_CONFORM_LAUNCH`).
    pub fn flag(&mut self, name: &str, value: Option<&str>) -> &mut Self {
        let Some(value) = value else {
            return self;
        };
        self.words.push(name.to_string());
        if crate::secrets::holds_secret(value) {
            let var = format!(
                "NOMAD_CONFORM_{}",
                name.trim_start_matches('-')
                    .replace('-', "_")
                    .to_ascii_uppercase()
            );
            self.words.push(format!("\"${var}\""));
            self.needs(
                &var,
                &format!("this run's {name} (secrets are not printed)"),
            );
        } else {
            self.words.push(quote(value));
        }
        self
    }

    /// `NAME=VALUE` (an environment assignment); a value holding a secret is written as
    /// `NAME="$NAME"`, and the comment shows it redacted.
    pub fn assign(&mut self, name: &str, value: &str) -> &mut Self {
        if crate::secrets::holds_secret(value) {
            self.words.push(format!("{name}=\"${name}\""));
            // On one line: a newline would end the comment, and the rest would run.
            let mut shown = crate::secrets::redact(value);
            if shown.chars().any(char::is_control) {
                shown = nomad_conform_reports::secret_forms::json(&shown);
            }
            self.needs(
                name,
                &format!("this call's value, {shown} with the secrets put back"),
            );
        } else {
            self.words.push(format!("{name}={}", quote(value)));
        }
        self
    }

    fn needs(&mut self, var: &str, what: &str) {
        if !self.to_set.iter().any(|(v, _)| v == var) {
            self.to_set.push((var.to_string(), what.to_string()));
        }
    }

    /// The command alone.
    pub fn command(&self) -> String {
        self.words.join(" ")
    }

    /// What to set before running it, when it reads secrets from variables.
    pub fn note(&self) -> Option<String> {
        if self.to_set.is_empty() {
            return None;
        }
        let each: Vec<String> = self
            .to_set
            .iter()
            .map(|(var, what)| format!("{var} to {what}"))
            .collect();
        Some(format!("first set {}", each.join(", and ")))
    }

    /// The command, with the note as a comment at its end.
    pub fn line(&self) -> String {
        match self.note() {
            Some(note) => format!("{}  # {note}", self.command()),
            None => self.command(),
        }
    }

    /// The line that reruns one clause with the run's seed.
    pub fn rerun(&self, seed: u64, clause: &str) -> String {
        let mut line = self.clone();
        line.shell_word("--seed")
            .shell_word(seed.to_string())
            .shell_word("--tags")
            .word(&format!("@{clause}"));
        line.line()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_holding_a_secret_is_a_variable() {
        let secret = "cmd-line\"S3cret'é\nline-two";
        crate::secrets::register(secret);
        let params = serde_json::json!({ "password": secret, "mode": "fast" }).to_string();
        let mut line = CommandLine::new(&["nomad-conform", "dhv", "/p/my plugin"]);
        line.flag("--parameters", Some(&params))
            .flag("--failing-parameters", None)
            .flag("--capacity-min", Some("1MiB"));
        let rerun = line.rerun(7, "DHV-CREATE-EXIT-ZERO");
        assert_eq!(
            rerun,
            "nomad-conform dhv '/p/my plugin' --parameters \"$NOMAD_CONFORM_PARAMETERS\" \
             --capacity-min 1MiB --seed 7 --tags @DHV-CREATE-EXIT-ZERO  # first set \
             NOMAD_CONFORM_PARAMETERS to this run's --parameters (secrets are not printed)"
        );
        let mut call = CommandLine::new(&["env", "-i"]);
        call.assign("DHV_PARAMETERS", &params)
            .assign("DHV_VOLUME_ID", "vol 1")
            .word("/p/plugin");
        let text = call.line();
        assert!(
            text.starts_with(
                "env -i DHV_PARAMETERS=\"$DHV_PARAMETERS\" DHV_VOLUME_ID='vol 1' /p/plugin  # first set DHV_PARAMETERS to this call's value, "
            ),
            "{text}"
        );
        assert!(text.contains(r#""password":"[redacted]""#), "{text}");
        for part in ["S3cret", "line-two"] {
            assert!(!text.contains(part), "{text}");
            assert!(!rerun.contains(part), "{rerun}");
        }
        // The comment is one line: nothing after it runs when the line is pasted.
        assert_eq!(text.lines().count(), 1, "{text}");
        // Without a secret, nothing to set.
        let plain = CommandLine::new(&["nomad-conform", "lock"]);
        assert_eq!(plain.rerun(1, "X"), "nomad-conform lock --seed 1 --tags @X");
    }
}
