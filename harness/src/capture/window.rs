//! Where a capture keeps its bytes: in memory while they are few, in an unnamed temporary file
//! past that. What a run's captures cost in memory is then a few hundred KiB per call whatever
//! `--capture-limit` and `--jobs` are, and the bytes kept are the same either way: where they
//! are stored never changes what is judged.
//!
//! The file is made with O_TMPFILE (through the `tempfile` crate): it has no name, nothing else
//! can open it, and it is gone when the harness closes it or dies. A file is made only when its
//! filesystem has room for it to grow to the capture limit and still keep [`DISK_FLOOR`] free;
//! otherwise, and when a write to it fails, the bytes stay in memory as they did before.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;
use std::sync::Arc;

/// Bytes a window keeps in memory before it moves them to a file.
pub const SPILL_AT: usize = 256 * 1024;
/// Free space a spill file always leaves on its filesystem, beyond the most it may grow to.
pub const DISK_FLOOR: u64 = 1 << 30;
/// Pieces in which bytes are copied between files.
const COPY_PIECE: usize = 64 * 1024;

#[derive(Clone, Debug)]
enum Backing {
    Memory(Vec<u8>),
    /// Shared by clones; a clone that appends copies first (see [`Window::own`]).
    File(Arc<File>),
}

/// An append-only run of bytes of which the part `[start, end)` of its backing is kept: the
/// front can be dropped ([`Window::keep_last`]) and the end cut ([`Window::keep_first`]).
#[derive(Clone, Debug)]
pub struct Window {
    backing: Backing,
    start: usize,
    end: usize,
    /// Bytes kept in memory before they move to a file.
    spill_at: usize,
    /// The most this window will hold (the capture limit): what a file must have room for.
    most: usize,
}

impl Window {
    pub fn new(spill_at: usize, most: usize) -> Self {
        Window {
            backing: Backing::Memory(Vec::new()),
            start: 0,
            end: 0,
            spill_at,
            most,
        }
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Bytes kept in memory before they move to a file.
    pub fn spill_at(&self) -> usize {
        self.spill_at
    }

    /// Whether the bytes are in a file (for tests and benches).
    pub fn spilled(&self) -> bool {
        matches!(self.backing, Backing::File(_))
    }

    pub fn append(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.own();
        if let Backing::Memory(v) = &self.backing
            && self.len() + chunk.len() > self.spill_at
        {
            let kept = &v[self.start..self.end];
            match spill_file(self.most) {
                Some(file) if file.write_all_at(kept, 0).is_ok() => {
                    self.end = kept.len();
                    self.start = 0;
                    self.backing = Backing::File(Arc::new(file));
                }
                // No room, or no file: this window stays in memory (and stops asking).
                _ => self.spill_at = usize::MAX,
            }
        }
        match &mut self.backing {
            Backing::Memory(v) => {
                // A vector in memory always ends where the window does.
                v.extend_from_slice(chunk);
                self.end += chunk.len();
            }
            Backing::File(f) => {
                if f.write_all_at(chunk, self.end as u64).is_ok() {
                    self.end += chunk.len();
                } else {
                    // The disk failed us: back to memory, with every byte.
                    let mut v = self.read(0, self.len());
                    v.extend_from_slice(chunk);
                    self.start = 0;
                    self.end = v.len();
                    self.backing = Backing::Memory(v);
                    self.spill_at = usize::MAX;
                }
            }
        }
    }

    /// Keep the last `n` bytes only.
    pub fn keep_last(&mut self, n: usize) {
        if self.len() <= n {
            return;
        }
        self.start = self.end - n;
        // Space dropped at the front is given back once it is more than what is kept (each
        // byte is moved at most once per byte appended).
        if self.start < self.len().max(COPY_PIECE) {
            return;
        }
        let len = self.len();
        match &mut self.backing {
            Backing::Memory(v) => {
                v.drain(..self.start);
                v.shrink_to(2 * len);
                self.start = 0;
                self.end = len;
            }
            Backing::File(_) => self.copy_out(),
        }
    }

    /// Keep the first `n` bytes only.
    pub fn keep_first(&mut self, n: usize) {
        if self.len() <= n {
            return;
        }
        self.end = self.start + n;
        if let Backing::Memory(v) = &mut self.backing {
            v.truncate(self.end);
            if v.capacity() > 2 * v.len() {
                v.shrink_to_fit();
            }
        }
    }

    /// `len` bytes from `from` (counted from the window's start).
    pub fn read(&self, from: usize, len: usize) -> Vec<u8> {
        self.slice(from, len).into_owned()
    }

    /// `len` bytes from `from`: in place when they are in memory.
    pub fn slice(&self, from: usize, len: usize) -> Cow<'_, [u8]> {
        let at = self.start + from;
        debug_assert!(at + len <= self.end);
        match &self.backing {
            Backing::Memory(v) => Cow::Borrowed(&v[at..at + len]),
            Backing::File(f) => {
                let mut buf = vec![0u8; len];
                if f.read_exact_at(&mut buf, at as u64).is_err() {
                    // Written by this process and never shortened: a read that fails is the
                    // disk's failure; the bytes read as zeros rather than panic.
                    buf.fill(0);
                }
                Cow::Owned(buf)
            }
        }
    }

    /// Append `len` bytes of `src` from `from`, in pieces (no copy of all of them at once).
    pub fn append_from(&mut self, src: &Window, from: usize, len: usize) {
        let mut done = 0;
        while done < len {
            let n = COPY_PIECE.min(len - done);
            self.append(&src.slice(from + done, n));
            done += n;
        }
    }

    /// Move the kept bytes to a backing of their own: a fresh file, or memory when they fit.
    fn copy_out(&mut self) {
        let mut fresh = Window::new(self.spill_at, self.most);
        fresh.append_from(self, 0, self.len());
        *self = fresh;
    }

    /// A clone shares its file: before it writes, it takes a copy of its own.
    fn own(&mut self) {
        if let Backing::File(f) = &self.backing
            && Arc::strong_count(f) > 1
        {
            self.copy_out();
        }
    }
}

/// Where spill files go: `$TMPDIR` when it is set, else /var/tmp (kept on disk by convention,
/// where /tmp is often memory), else /tmp.
fn spill_dir() -> PathBuf {
    if std::env::var_os("TMPDIR").is_some() {
        return std::env::temp_dir();
    }
    let var_tmp = PathBuf::from("/var/tmp");
    if var_tmp.is_dir() {
        var_tmp
    } else {
        std::env::temp_dir()
    }
}

/// An unnamed file for up to `most` bytes, if its filesystem has room for them and the floor.
fn spill_file(most: usize) -> Option<File> {
    let dir = spill_dir();
    let s = nix::sys::statvfs::statvfs(dir.as_path()).ok()?;
    let free = s.blocks_available() as u64 * s.fragment_size().max(1) as u64;
    // A window grows to twice what it keeps before its front is given back.
    let need = (most as u64).saturating_mul(2).saturating_add(DISK_FLOOR);
    if free < need {
        return None;
    }
    tempfile::tempfile_in(dir).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(spill_at: usize, bytes: &[u8]) -> Window {
        let mut w = Window::new(spill_at, 1 << 20);
        for piece in bytes.chunks(7) {
            w.append(piece);
        }
        w
    }

    #[test]
    fn past_the_threshold_the_bytes_move_to_a_file_and_read_the_same() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mem = filled(usize::MAX, &bytes);
        let file = filled(100, &bytes);
        assert!(!mem.spilled());
        assert!(
            file.spilled(),
            "5000 bytes past a threshold of 100 stay in memory"
        );
        assert_eq!(mem.read(0, 5000), bytes);
        assert_eq!(file.read(0, 5000), bytes);
        assert_eq!(file.read(4990, 10), &bytes[4990..]);
    }

    #[test]
    fn dropping_the_front_and_cutting_the_end_read_the_same_in_a_file() {
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        for spill_at in [usize::MAX, 1000] {
            let mut w = Window::new(spill_at, 1 << 20);
            for piece in bytes.chunks(4096) {
                w.append(piece);
                w.keep_last(70_000);
            }
            assert_eq!(w.len(), 70_000);
            assert_eq!(w.read(0, 70_000), &bytes[bytes.len() - 70_000..]);
            w.keep_first(10);
            assert_eq!(w.read(0, 10), &bytes[bytes.len() - 70_000..][..10]);
            w.append(b"more");
            assert_eq!(w.read(10, 4), b"more");
        }
    }

    #[test]
    fn without_room_on_the_disk_the_bytes_stay_in_memory() {
        // No filesystem has room for a window that may grow to an exbibyte and keep the floor.
        let mut w = Window::new(10, 1 << 60);
        let bytes: Vec<u8> = (0..100u8).collect();
        for piece in bytes.chunks(7) {
            w.append(piece);
        }
        assert!(!w.spilled());
        assert_eq!(
            w.spill_at(),
            usize::MAX,
            "it stops asking after the first refusal"
        );
        assert_eq!(w.read(0, 100), bytes);
    }

    #[test]
    fn a_clone_that_appends_leaves_the_original_as_it_was() {
        let mut a = filled(10, b"0123456789abcdefghij");
        let b = a.clone();
        a.keep_first(5);
        a.append(b"XYZ");
        assert_eq!(a.read(0, a.len()), b"01234XYZ");
        assert_eq!(b.read(0, b.len()), b"0123456789abcdefghij");
    }
}
