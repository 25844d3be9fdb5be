//! Shell quoting for the commands the reports print (reproduce lines, rerun lines, curl and
//! grpcurl commands): one word at a time, so that what is pasted into a POSIX shell runs with
//! exactly the arguments the harness used. Every kind quotes through here, and splits the
//! command lines it is given (`--launch`, `--plugin-args`, a lock client's) with
//! [`split_words`].

/// The words of a command line given in a flag, split as a POSIX shell splits them, or the
/// one-line refusal when no shell could: an unbalanced quote, or a backslash at the end.
pub fn split_words(flag: &str, line: &str) -> Result<Vec<String>, String> {
    shlex::split(line).ok_or_else(|| {
        format!(
            "{flag} {line:?}: not a shell-quoted command line (an unbalanced quote or a trailing backslash)"
        )
    })
}

/// Shell-quote one word (a NUL, which no argument can hold, is dropped).
pub fn quote(s: &str) -> String {
    shlex::try_quote(s)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| format!("'{}'", s.replace('\0', "").replace('\'', r"'\''")))
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn words_come_back_whole() {
        for word in ["plain", "two words", "it's", "$(id)", "a\nb", "", "-x", "é"] {
            let quoted = quote(word);
            assert_eq!(
                shlex::split(&quoted).unwrap(),
                vec![word.to_string()],
                "{quoted}"
            );
        }
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a\0b"), "'ab'");
    }

    #[test]
    fn command_lines_that_no_shell_could_split_are_refused() {
        assert_eq!(
            super::split_words("--f", "a 'b c' \"d\"").unwrap(),
            ["a", "b c", "d"]
        );
        assert_eq!(super::split_words("--f", "").unwrap(), Vec::<String>::new());
        for bad in ["a 'b", "a \"b", "a b\\"] {
            let e = super::split_words("--f", bad).unwrap_err();
            assert!(
                e.starts_with("--f ") && e.contains("unbalanced quote"),
                "{e}"
            );
        }
    }
}
