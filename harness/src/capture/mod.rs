//! Bounded captures of a process's output: the first and last bytes of each stream under one
//! limit for a call's stdout and stderr together, with the total counted. Every kind's calls and
//! tasks capture through this; what is kept is in memory while small and in an unnamed file past
//! that ([`window`]), so that a run's memory does not grow with `--capture-limit` × `--jobs`.

mod window;

use std::borrow::Cow;

use nomad_conform_reports::model::Excerpt;

pub use window::SPILL_AT;
use window::Window;

/// Bounded capture of one output stream: the first and last `limit / 2` bytes are kept, and the
/// total is counted.
///
/// The bytes are stored once. While the stream fits the limit they are one contiguous run, so
/// that the whole of it can be read in place ([`Capture::bytes`]) when it is in memory; once it
/// outgrows the limit the run is cut to the head and the rest goes through a window of the tail.
#[derive(Clone, Debug)]
pub struct Capture {
    /// The whole stream while it fits the limit; once it did not, its first `half` bytes.
    head: Window,
    /// Once the stream outgrew the limit, its last `half` bytes; empty until then.
    tail: Window,
    total: u64,
    half: usize,
}

impl Capture {
    pub fn new(limit: usize) -> Self {
        Self::spilling_at(limit, SPILL_AT)
    }

    /// A capture that keeps `spill_at` bytes per part in memory before it moves them to a file
    /// (tests and benches choose it; [`Capture::new`] keeps [`SPILL_AT`]).
    pub fn spilling_at(limit: usize, spill_at: usize) -> Self {
        let half = (limit / 2).max(1);
        Capture {
            head: Window::new(spill_at, 2 * half),
            tail: Window::new(spill_at, 2 * half),
            total: 0,
            half,
        }
    }

    /// Most bytes kept whole: past this the stream is cut to its head and tail.
    fn whole_limit(&self) -> usize {
        2 * self.half
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let whole = self.tail.is_empty();
        if whole && self.head.len() + chunk.len() <= self.whole_limit() {
            self.head.append(chunk);
        } else if whole {
            self.split(chunk);
        } else if chunk.len() >= self.half {
            self.tail.keep_last(0);
            self.tail.append(&chunk[chunk.len() - self.half..]);
        } else {
            self.tail.append(chunk);
            self.tail.keep_last(self.half);
        }
    }

    /// The stream (all of it in `head`, plus `chunk`) just outgrew the limit: keep its first
    /// and last `half` bytes.
    fn split(&mut self, chunk: &[u8]) {
        let half = self.half;
        let mut tail = Window::new(self.head.spill_at(), self.whole_limit());
        if chunk.len() >= half {
            tail.append(&chunk[chunk.len() - half..]);
        } else {
            // head + chunk > 2 * half, so head holds more than the `half - chunk` bytes needed.
            let from_head = half - chunk.len();
            tail.append_from(&self.head, self.head.len() - from_head, from_head);
            tail.append(chunk);
        }
        if self.head.len() >= half {
            self.head.keep_first(half);
        } else {
            let take = half - self.head.len();
            self.head.append(&chunk[..take]);
        }
        self.tail = tail;
    }

    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Bytes kept (head and tail).
    pub fn kept_bytes(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Whether some of what is kept is in a file rather than in memory.
    pub fn spilled(&self) -> bool {
        self.head.spilled() || self.tail.spilled()
    }

    /// Keep at most `cap` bytes from now on: the stream's first and last `cap / 2` bytes (of
    /// what is kept already, and of what comes). A limit only ever shrinks.
    fn shrink_to(&mut self, cap: usize) {
        let half = (cap / 2).max(1);
        if half >= self.half {
            return;
        }
        if self.tail.is_empty() && self.head.len() > 2 * half {
            // Kept whole so far: cut it to its head and tail.
            let mut tail = Window::new(self.head.spill_at(), self.whole_limit());
            tail.append_from(&self.head, self.head.len() - half, half);
            self.tail = tail;
            self.head.keep_first(half);
        } else if !self.tail.is_empty() {
            self.head.keep_first(half);
            self.tail.keep_last(half);
        }
        self.half = half;
    }

    pub fn is_truncated(&self) -> bool {
        self.total > self.kept_bytes() as u64
    }

    /// The whole stream, if it fitted in the capture limit: in place when it is in memory.
    pub fn bytes(&self) -> Option<Cow<'_, [u8]>> {
        (!self.is_truncated()).then(|| self.head.slice(0, self.head.len()))
    }

    /// A copy of the whole stream, if it fitted in the capture limit ([`Capture::bytes`]
    /// reads it without copying when it can).
    pub fn complete(&self) -> Option<Vec<u8>> {
        self.bytes().map(Cow::into_owned)
    }

    /// Lossy text of the stream, cut to `max` bytes (head and tail) with a marker in between.
    pub fn excerpt(&self, max: usize) -> Excerpt {
        let keep = (max / 2).max(1);
        if !self.is_truncated() {
            let len = self.head.len();
            if len <= max {
                return Excerpt {
                    text: String::from_utf8_lossy(&self.head.slice(0, len)).into_owned(),
                    total_bytes: self.total,
                    truncated: false,
                };
            }
            // Cut as if the stream were kept as a head of `half` bytes and a tail of the rest,
            // so that an excerpt reads the same whichever way the bytes are stored.
            let head_len = len.min(self.half);
            let tail_len = keep.min(len - head_len);
            return self.cut(
                &self.head.slice(0, keep.min(head_len)),
                &self.head.slice(len - tail_len, tail_len),
            );
        }
        let n = keep.min(self.tail.len());
        self.cut(
            &self.head.slice(0, keep.min(self.head.len())),
            &self.tail.slice(self.tail.len() - n, n),
        )
    }

    /// The excerpt of `head`, a marker saying how much was left out, and `tail`.
    fn cut(&self, head: &[u8], tail: &[u8]) -> Excerpt {
        let omitted = self.total - head.len() as u64 - tail.len() as u64;
        Excerpt {
            text: format!(
                "{}\n[... {omitted} bytes omitted ...]\n{}",
                String::from_utf8_lossy(head),
                String::from_utf8_lossy(tail)
            ),
            total_bytes: self.total,
            truncated: true,
        }
    }
}

/// One of a process's two output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// The stdout and stderr of one call under one limit: together they keep at most `limit`
/// bytes. Each stream is kept whole while both fit; past that the larger is cut to its head and
/// tail in what the other leaves it, and when both are large each keeps half. A stream alone
/// (the other empty) is kept as a [`Capture`] of the whole limit is.
#[derive(Clone, Debug)]
pub struct Captures {
    pub stdout: Capture,
    pub stderr: Capture,
    limit: usize,
}

impl Captures {
    pub fn new(limit: usize) -> Self {
        Self::spilling_at(limit, SPILL_AT)
    }

    /// Captures whose parts keep `spill_at` bytes in memory (see [`Capture::spilling_at`]).
    pub fn spilling_at(limit: usize, spill_at: usize) -> Self {
        Captures {
            stdout: Capture::spilling_at(limit, spill_at),
            stderr: Capture::spilling_at(limit, spill_at),
            limit,
        }
    }

    pub fn push(&mut self, stream: Stream, chunk: &[u8]) {
        match stream {
            Stream::Stdout => self.stdout.push(chunk),
            Stream::Stderr => self.stderr.push(chunk),
        }
        let (out, err) = (self.stdout.kept_bytes(), self.stderr.kept_bytes());
        if out + err <= self.limit {
            return;
        }
        let half = self.limit / 2;
        if err <= half {
            self.stdout.shrink_to(self.limit - err);
        } else if out <= half {
            self.stderr.shrink_to(self.limit - out);
        } else {
            self.stdout.shrink_to(half);
            self.stderr.shrink_to(self.limit - half);
        }
    }

    /// Both streams, moved out (the captures left behind are empty).
    pub fn take(&mut self) -> (Capture, Capture) {
        (
            std::mem::replace(&mut self.stdout, Capture::new(0)),
            std::mem::replace(&mut self.stderr, Capture::new(0)),
        )
    }
}

#[cfg(test)]
mod tests;
