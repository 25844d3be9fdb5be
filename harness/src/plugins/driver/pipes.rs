//! Reading a launched plugin's stdout and stderr the way go-plugin's host does (A.2, A.3, A.7):
//! the first stdout line is the handshake (a Go host scans it with a 64 KiB token limit), the
//! rest of stdout is drained so the plugin never blocks on a full pipe; stderr is read line by
//! line (64 KiB buffer) and each line parsed with [`HclogParser`]. Everything is bounded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;

use super::hclog::{HclogParser, LINE_BUFFER, LogLine};
use crate::process::Capture;

/// The longest first line a Go host scans (bufio.Scanner's default token limit).
pub const FIRST_LINE_LIMIT: usize = 64 * 1024;

/// The first stdout line, or why there is none.
#[derive(Debug)]
pub enum FirstLine {
    /// A line (without `\n`; a final `\r` removed as Go's scanner does) and when it arrived.
    /// A last line without a newline before EOF counts, as for Go's scanner.
    Line { text: String, at: Instant },
    /// No newline within [`FIRST_LINE_LIMIT`] bytes: the Go scanner gives up.
    TooLong { prefix: String, at: Instant },
    /// stdout closed before any byte of a line.
    Eof { at: Instant },
}

/// Parsed stderr lines, bounded: the first half of `limit` and the most recent half are kept.
#[derive(Clone, Debug)]
pub struct LogBuffer {
    head: Vec<LogLine>,
    tail: VecDeque<LogLine>,
    half: usize,
    dropped: u64,
}

impl LogBuffer {
    pub fn new(limit: usize) -> Self {
        LogBuffer {
            head: Vec::new(),
            tail: VecDeque::new(),
            half: (limit / 2).max(1),
            dropped: 0,
        }
    }

    pub fn push(&mut self, line: LogLine) {
        if self.head.len() < self.half {
            self.head.push(line);
            return;
        }
        if self.tail.len() == self.half {
            self.tail.pop_front();
            self.dropped += 1;
        }
        self.tail.push_back(line);
    }

    /// The kept lines in order (a gap where lines were dropped).
    pub fn lines(&self) -> Vec<LogLine> {
        self.head.iter().chain(self.tail.iter()).cloned().collect()
    }

    /// How many lines were dropped between the head and the tail.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Everything read from the plugin's pipes.
#[derive(Debug)]
pub struct Output {
    /// stdout after the first line.
    pub stdout: Capture,
    /// stderr, raw.
    pub stderr: Capture,
    /// stderr, parsed.
    pub logs: LogBuffer,
    /// Whether each pipe reached EOF.
    pub stdout_closed: bool,
    pub stderr_closed: bool,
}

impl Output {
    pub fn new(stdout_limit: usize, stderr_limit: usize, log_lines: usize) -> Self {
        Output {
            stdout: Capture::new(stdout_limit),
            stderr: Capture::new(stderr_limit),
            logs: LogBuffer::new(log_lines),
            stdout_closed: false,
            stderr_closed: false,
        }
    }
}

pub type SharedOutput = Arc<Mutex<Output>>;

pub(crate) fn lock(o: &SharedOutput) -> std::sync::MutexGuard<'_, Output> {
    o.lock().unwrap_or_else(|p| p.into_inner())
}

/// Read stdout: send the first line on `first`, then drain the rest into `out.stdout`.
pub fn read_stdout<R>(mut pipe: R, out: SharedOutput, first: oneshot::Sender<FirstLine>)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        let mut line: Vec<u8> = Vec::new();
        let mut first = Some(first);
        loop {
            let n = match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => 0,
                Ok(n) => n,
            };
            if n == 0 {
                if let Some(tx) = first.take() {
                    let at = Instant::now();
                    let _ = tx.send(if line.is_empty() {
                        FirstLine::Eof { at }
                    } else {
                        FirstLine::Line {
                            text: text_of(&line),
                            at,
                        }
                    });
                }
                lock(&out).stdout_closed = true;
                return;
            }
            let chunk = &buf[..n];
            let Some(tx) = first.take() else {
                lock(&out).stdout.push(chunk);
                continue;
            };
            match chunk.iter().position(|b| *b == b'\n') {
                Some(pos) if line.len() + pos <= FIRST_LINE_LIMIT => {
                    line.extend_from_slice(&chunk[..pos]);
                    let _ = tx.send(FirstLine::Line {
                        text: text_of(&line),
                        at: Instant::now(),
                    });
                    lock(&out).stdout.push(&chunk[pos + 1..]);
                }
                _ if line.len() + chunk.len() > FIRST_LINE_LIMIT => {
                    line.extend_from_slice(chunk);
                    let _ = tx.send(FirstLine::TooLong {
                        prefix: String::from_utf8_lossy(&line[..256.min(line.len())]).into_owned(),
                        at: Instant::now(),
                    });
                    lock(&out).stdout.push(&line);
                }
                _ => {
                    line.extend_from_slice(chunk);
                    first = Some(tx);
                }
            }
        }
    });
}

fn text_of(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(line).into_owned()
}

/// Cuts stderr into the lines go-plugin's host reads (64 KiB buffer) and parses each with
/// [`HclogParser`]: what [`read_stderr`] does with the bytes, without the pipe.
#[derive(Debug, Default)]
pub struct StderrLines {
    parser: HclogParser,
    pending: Vec<u8>,
    /// The previous piece was cut at the buffer size: what follows belongs to it.
    continuation: bool,
}

impl StderrLines {
    pub fn new() -> Self {
        Self::default()
    }

    /// Take in `chunk`; every line it completes (and every full buffer without a newline),
    /// parsed, each timed by `at` when it is cut.
    pub fn feed(&mut self, chunk: &[u8], mut at: impl FnMut() -> Duration) -> Vec<LogLine> {
        self.pending.extend_from_slice(chunk);
        let mut parsed = Vec::new();
        loop {
            let at = at();
            if let Some(pos) = self.pending.iter().position(|b| *b == b'\n')
                && pos <= LINE_BUFFER
            {
                let text = text_of(&self.pending[..pos]);
                parsed.push(if self.continuation {
                    self.parser.partial(&text, at)
                } else {
                    self.parser.parse(&text, at)
                });
                self.continuation = false;
                self.pending.drain(..=pos);
            } else if self.pending.len() >= LINE_BUFFER {
                let text = String::from_utf8_lossy(&self.pending[..LINE_BUFFER]).into_owned();
                parsed.push(self.parser.partial(&text, at));
                self.continuation = true;
                self.pending.drain(..LINE_BUFFER);
            } else {
                break;
            }
        }
        parsed
    }

    /// At EOF: the last line, when it had no newline.
    pub fn finish(&mut self, at: Duration) -> Option<LogLine> {
        if self.pending.is_empty() {
            return None;
        }
        let text = text_of(&std::mem::take(&mut self.pending));
        Some(if self.continuation {
            self.parser.partial(&text, at)
        } else {
            self.parser.parse(&text, at)
        })
    }
}

/// Read stderr line by line into `out.stderr` (raw) and `out.logs` (parsed), offsets from
/// `started`.
pub fn read_stderr<R>(mut pipe: R, out: SharedOutput, started: Instant)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut lines = StderrLines::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => 0,
                Ok(n) => n,
            };
            if n == 0 {
                if let Some(line) = lines.finish(started.elapsed()) {
                    lock(&out).logs.push(line);
                }
                lock(&out).stderr_closed = true;
                return;
            }
            lock(&out).stderr.push(&buf[..n]);
            let parsed = lines.feed(&buf[..n], || started.elapsed());
            if !parsed.is_empty() {
                let mut o = lock(&out);
                for l in parsed {
                    o.logs.push(l);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::driver::hclog::Level;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    fn shared() -> SharedOutput {
        Arc::new(Mutex::new(Output::new(1024, 1024 * 1024, 100)))
    }

    async fn first_of(input: &[u8]) -> (FirstLine, SharedOutput) {
        let (mut w, r) = tokio::io::duplex(1 << 20);
        let out = shared();
        let (tx, rx) = oneshot::channel();
        read_stdout(r, out.clone(), tx);
        w.write_all(input).await.unwrap();
        drop(w);
        let first = rx.await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        (first, out)
    }

    #[tokio::test]
    async fn first_line_then_the_rest_is_captured() {
        let (first, out) = first_of(b"1|2|unix|/p|grpc|\r\nmore\nlines").await;
        assert!(matches!(first, FirstLine::Line { ref text, .. } if text == "1|2|unix|/p|grpc|"));
        assert_eq!(lock(&out).stdout.complete().unwrap(), b"more\nlines");
        assert!(lock(&out).stdout_closed);
        let (first, _) = first_of(b"no newline").await;
        assert!(matches!(first, FirstLine::Line { ref text, .. } if text == "no newline"));
        let (first, _) = first_of(b"").await;
        assert!(matches!(first, FirstLine::Eof { .. }));
        let (first, _) = first_of(&vec![b'x'; FIRST_LINE_LIMIT + 10]).await;
        assert!(matches!(first, FirstLine::TooLong { .. }));
    }

    #[tokio::test]
    async fn stderr_lines_are_parsed_in_order() {
        let (mut w, r) = tokio::io::duplex(1 << 20);
        let out = shared();
        read_stderr(r, out.clone(), Instant::now());
        w.write_all(b"[INFO] a\r\npanic: b\n").await.unwrap();
        w.write_all(&vec![b'y'; LINE_BUFFER + 5]).await.unwrap();
        w.write_all(b"\nlast").await.unwrap();
        drop(w);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let o = lock(&out);
        let lines = o.logs.lines();
        let got: Vec<(Level, bool, usize)> = lines
            .iter()
            .map(|l| (l.level, l.partial, l.raw.len()))
            .collect();
        assert_eq!(
            got,
            [
                (Level::Info, false, 8),
                (Level::Error, false, 8),
                (Level::Debug, true, LINE_BUFFER),
                (Level::Debug, true, 5),
                (Level::Error, false, 4),
            ]
        );
        assert!(o.stderr_closed);
    }

    #[test]
    fn log_buffer_keeps_head_and_tail() {
        let mut b = LogBuffer::new(4);
        let mut p = HclogParser::new();
        for i in 0..10 {
            b.push(p.parse(&i.to_string(), Duration::ZERO));
        }
        let kept: Vec<String> = b.lines().into_iter().map(|l| l.raw).collect();
        assert_eq!(kept, ["0", "1", "8", "9"]);
        assert_eq!(b.dropped(), 6);
    }
}
