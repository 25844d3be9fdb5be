//! Shell quoting for the commands the reports print (reproduce lines, rerun lines, curl and
//! grpcurl commands): one word at a time, so that what is pasted into a POSIX shell runs with
//! exactly the arguments the harness used. Every kind quotes through here.

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
}
