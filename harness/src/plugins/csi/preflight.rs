//! Before a run: is there a gRPC server on the socket at all? A missing path, a file that is not
//! a socket, a refused connection and a listener that does not speak HTTP/2 (plain HTTP,
//! anything else, or nothing) each get one line before any clause, instead of a run of
//! failures that all say the same thing.
//!
//! The check speaks HTTP/2 just far enough: it sends the client connection preface and an
//! empty SETTINGS frame; a gRPC server (HTTP/2, RFC 9113 section 3.4) answers with a SETTINGS
//! frame of its own before anything else.

use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How long a listener may take to answer the HTTP/2 preface.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Why the harness cannot talk gRPC to a socket.
#[derive(Debug, PartialEq, Eq)]
pub enum NotGrpc {
    /// The path is wrong: nothing there, or not a socket (the user's input).
    Path(String),
    /// Something is wrong with what listens there (nothing could be tested).
    Listener(String),
}

/// The HTTP/2 client connection preface, then an empty SETTINGS frame (length 0, type 4,
/// flags 0, stream 0).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

pub async fn check(socket: &Path, within: Duration) -> Result<(), NotGrpc> {
    let shown = socket.display();
    match std::fs::metadata(socket) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(NotGrpc::Path(format!(
                "unix://{shown}: no such socket (is the plugin running, and is this its --endpoint?)"
            )));
        }
        Err(e) => return Err(NotGrpc::Path(format!("unix://{shown}: {e}"))),
        Ok(m) if !m.file_type().is_socket() => {
            return Err(NotGrpc::Path(format!(
                "unix://{shown} is not a socket but a {}",
                if m.is_dir() { "directory" } else { "file" }
            )));
        }
        Ok(_) => {}
    }
    let mut stream = match tokio::time::timeout(within, tokio::net::UnixStream::connect(socket))
        .await
    {
        Err(_) => {
            return Err(NotGrpc::Listener(format!(
                "unix://{shown}: the connection was not accepted within {}",
                crate::fmt_duration(within)
            )));
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(NotGrpc::Listener(format!(
                "unix://{shown}: connection refused (the socket exists but nothing listens on it: a plugin that exited left it behind?)"
            )));
        }
        Ok(Err(e)) => return Err(NotGrpc::Listener(format!("unix://{shown}: {e}"))),
        Ok(Ok(s)) => s,
    };
    let exchange = async {
        stream.write_all(PREFACE).await?;
        let mut head = [0u8; 9];
        let mut got = 0;
        while got < head.len() {
            let n = stream.read(&mut head[got..]).await?;
            if n == 0 {
                break;
            }
            got += n;
        }
        Ok::<_, std::io::Error>(head[..got].to_vec())
    };
    let head = match tokio::time::timeout(within, exchange).await {
        Err(_) => {
            return Err(NotGrpc::Listener(format!(
                "unix://{shown} does not speak gRPC: it accepted the connection but answered nothing to HTTP/2 within {}",
                crate::fmt_duration(within)
            )));
        }
        Ok(Err(e)) => {
            return Err(NotGrpc::Listener(format!(
                "unix://{shown} does not speak gRPC: {e}"
            )));
        }
        Ok(Ok(head)) => head,
    };
    judge(&shown.to_string(), &head)
}

/// What the first bytes of the answer say.
fn judge(shown: &str, head: &[u8]) -> Result<(), NotGrpc> {
    if head.len() == 9 && head[3] == 0x4 && head[4] & 0x1 == 0 {
        return Ok(());
    }
    let what = if head.is_empty() {
        "it closed the connection without answering".to_string()
    } else if head.starts_with(b"HTTP/") {
        "it answers HTTP/1, not HTTP/2".to_string()
    } else {
        format!(
            "its answer does not start with an HTTP/2 SETTINGS frame ({})",
            head.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    Err(NotGrpc::Listener(format!(
        "unix://{shown} does not speak gRPC: {what}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settings_frame_is_http2_anything_else_is_not() {
        assert_eq!(judge("s", &[0, 0, 6, 4, 0, 0, 0, 0, 0]), Ok(()));
        let http1 = judge("s", b"HTTP/1.1 400").unwrap_err();
        assert!(matches!(http1, NotGrpc::Listener(m) if m.contains("HTTP/1")));
        let closed = judge("s", b"").unwrap_err();
        assert!(matches!(closed, NotGrpc::Listener(m) if m.contains("closed")));
        // A SETTINGS acknowledgement first is not how a server opens.
        assert!(judge("s", &[0, 0, 0, 4, 1, 0, 0, 0, 0]).is_err());
    }

    #[tokio::test]
    async fn paths_and_listeners_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_millis(300);
        let missing = check(&dir.path().join("none.sock"), t).await.unwrap_err();
        assert!(matches!(missing, NotGrpc::Path(m) if m.contains("no such socket")));
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let not_socket = check(&file, t).await.unwrap_err();
        assert!(matches!(not_socket, NotGrpc::Path(m) if m.contains("not a socket")));
        // A socket left behind by a process that is gone.
        let stale = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let refused = check(&stale, t).await.unwrap_err();
        assert!(matches!(refused, NotGrpc::Listener(m) if m.contains("refused")));
        // A listener that says nothing.
        let silent = dir.path().join("silent.sock");
        let _l = tokio::net::UnixListener::bind(&silent).unwrap();
        let quiet = check(&silent, t).await.unwrap_err();
        assert!(matches!(quiet, NotGrpc::Listener(m) if m.contains("answered nothing")));
    }
}
