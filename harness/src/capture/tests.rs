use super::*;

/// Where the captures in these tests keep their bytes: all in memory, in a file from the first
/// byte, and in a file past a few bytes.
const SPILLS: [usize; 3] = [usize::MAX, 0, 5];

#[test]
fn capture_keeps_head_and_tail() {
    let mut c = Capture::new(8);
    c.push(b"abcdefghij");
    c.push(b"klmnop");
    assert_eq!(c.total_bytes(), 16);
    assert!(c.is_truncated());
    assert!(c.complete().is_none());
    let ex = c.excerpt(8);
    assert!(ex.text.starts_with("abcd"), "{}", ex.text);
    assert!(ex.text.ends_with("mnop"), "{}", ex.text);
    assert!(ex.text.contains("8 bytes omitted"), "{}", ex.text);
}

/// What a capture of `limit` keeps of `stream`, as it was defined before the bytes were
/// stored once: the first half of the limit as the head, then the rest (at most the last
/// half) as the tail.
fn reference_excerpt(stream: &[u8], limit: usize, max: usize) -> (Option<Vec<u8>>, Excerpt) {
    let half = (limit / 2).max(1);
    let total = stream.len();
    let head = &stream[..total.min(half)];
    let rest = &stream[head.len()..];
    let tail = &rest[rest.len() - rest.len().min(half)..];
    let complete = (total <= head.len() + tail.len()).then(|| stream.to_vec());
    if complete.is_some() && total <= max {
        let text = String::from_utf8_lossy(stream).into_owned();
        return (
            complete,
            Excerpt {
                text,
                total_bytes: total as u64,
                truncated: false,
            },
        );
    }
    let keep = (max / 2).max(1);
    let h = &head[..keep.min(head.len())];
    let t = &tail[tail.len() - keep.min(tail.len())..];
    let text = format!(
        "{}\n[... {} bytes omitted ...]\n{}",
        String::from_utf8_lossy(h),
        total - h.len() - t.len(),
        String::from_utf8_lossy(t)
    );
    let excerpt = Excerpt {
        text,
        total_bytes: total as u64,
        truncated: true,
    };
    (complete, excerpt)
}

#[test]
fn capture_reads_the_same_whatever_the_chunks() {
    // Streams around the limit, cut into chunks of every size from one byte to more than
    // the limit, read whole and through excerpts smaller and larger than what is kept.
    // Multi-byte characters, so that cuts fall inside them too.
    let pattern = "ab\u{e9}cd\nxyz\u{1f980}".as_bytes();
    let stream: Vec<u8> = (0..200).map(|i| pattern[i % pattern.len()]).collect();
    for limit in [1, 2, 7, 16, 33, 64] {
        for len in [0, 1, 5, 8, 15, 16, 17, 31, 32, 33, 40, 65, 100, 200] {
            for (chunk, spill) in [1, 3, 8, 16, 17, 50, 300]
                .into_iter()
                .flat_map(|c| SPILLS.map(|s| (c, s)))
            {
                let stream = &stream[..len];
                let mut c = Capture::spilling_at(limit, spill);
                for piece in stream.chunks(chunk) {
                    c.push(piece);
                }
                assert_eq!(c.total_bytes(), len as u64);
                for max in [1, 4, 10, 16, 31, 64, 1000] {
                    let (complete, excerpt) = reference_excerpt(stream, limit, max);
                    let at = format!(
                        "limit {limit}, {len} bytes in chunks of {chunk}, max {max}, spilled past {spill}"
                    );
                    assert_eq!(c.complete(), complete, "{at}");
                    assert_eq!(c.bytes().as_deref(), complete.as_deref(), "{at}");
                    assert_eq!(c.is_truncated(), complete.is_none(), "{at}");
                    assert_eq!(c.excerpt(max), excerpt, "{at}");
                }
            }
        }
    }
}

#[test]
fn a_calls_two_streams_share_the_limit() {
    let out: Vec<u8> = (0..800u32).map(|i| b'a' + (i % 26) as u8).collect();
    let err: Vec<u8> = (0..800u32).map(|i| b'A' + (i % 26) as u8).collect();
    for (chunk, spill) in [1, 7, 64, 800]
        .into_iter()
        .flat_map(|c| SPILLS.map(|s| (c, s)))
    {
        let mut c = Captures::spilling_at(1024, spill);
        for (o, e) in out.chunks(chunk).zip(err.chunks(chunk)) {
            c.push(Stream::Stdout, o);
            c.push(Stream::Stderr, e);
            assert!(c.stdout.kept_bytes() + c.stderr.kept_bytes() <= 1024);
        }
        let (o, e) = c.take();
        assert!(
            o.kept_bytes() + e.kept_bytes() <= 1024,
            "chunks of {chunk}, spilled past {spill}"
        );
        for (capture, stream) in [(&o, &out), (&e, &err)] {
            // Noted as one stream's truncation is: its total, and what was left out.
            assert_eq!(capture.total_bytes(), 800);
            assert!(capture.is_truncated() && capture.complete().is_none());
            let ex = capture.excerpt(10_000);
            assert!(ex.truncated, "{}", ex.text);
            let kept = capture.kept_bytes();
            assert!(
                ex.text
                    .contains(&format!("[... {} bytes omitted ...]", 800 - kept)),
                "{}",
                ex.text
            );
            assert!(
                ex.text
                    .starts_with(std::str::from_utf8(&stream[..kept / 2]).unwrap())
            );
            assert!(
                ex.text
                    .ends_with(std::str::from_utf8(&stream[800 - kept / 2..]).unwrap())
            );
        }
    }
}

#[test]
fn a_stream_alone_keeps_the_whole_limit() {
    let mut c = Captures::new(1024);
    c.push(Stream::Stderr, &[b'e'; 24]);
    c.push(Stream::Stdout, &[b'o'; 1000]);
    assert_eq!(c.stdout.complete().unwrap().len(), 1000);
    assert_eq!(c.stderr.complete().unwrap().len(), 24);
    // One more byte of stderr: stdout gives up what stderr needs, keeping its ends.
    c.push(Stream::Stderr, b"!");
    assert_eq!(c.stderr.complete().unwrap().len(), 25);
    assert!(c.stdout.is_truncated());
    assert!(c.stdout.kept_bytes() + 25 <= 1024);
}

#[test]
fn capture_small_is_complete() {
    let mut c = Capture::new(100);
    c.push(b"hello ");
    c.push(b"world");
    assert_eq!(c.complete().unwrap(), b"hello world");
    assert!(!c.excerpt(100).truncated);
}

#[test]
fn big_captures_keep_little_memory_and_read_the_same() {
    // What a flooding call keeps goes to a file past SPILL_AT; what is read of it is the same.
    let limit = 4 * SPILL_AT;
    let out: Vec<u8> = (0..3 * SPILL_AT as u32).map(|i| (i % 241) as u8).collect();
    let err: Vec<u8> = (0..3 * SPILL_AT as u32).map(|i| (i % 239) as u8).collect();
    let mut kept = Captures::new(limit);
    let mut mem = Captures::spilling_at(limit, usize::MAX);
    for (o, e) in out.chunks(64 * 1024).zip(err.chunks(64 * 1024)) {
        for c in [&mut kept, &mut mem] {
            c.push(Stream::Stdout, o);
            c.push(Stream::Stderr, e);
        }
    }
    assert!(kept.stdout.spilled() && kept.stderr.spilled());
    assert!(!mem.stdout.spilled() && !mem.stderr.spilled());
    for (a, b) in [(&kept.stdout, &mem.stdout), (&kept.stderr, &mem.stderr)] {
        assert_eq!(a.kept_bytes(), b.kept_bytes());
        assert_eq!(a.excerpt(usize::MAX / 4), b.excerpt(usize::MAX / 4));
        assert_eq!(a.excerpt(1000), b.excerpt(1000));
    }
}

proptest::proptest! {
    /// Any interleaving of the two streams in any chunks keeps the same bytes whether they are
    /// in memory or in files.
    #[test]
    fn where_the_bytes_are_kept_never_changes_what_is_read(
        limit in 1usize..300,
        pushes in proptest::collection::vec((proptest::bool::ANY, 0usize..120), 0..40),
        spill in 0usize..40,
    ) {
        let mut files = Captures::spilling_at(limit, spill);
        let mut mem = Captures::spilling_at(limit, usize::MAX);
        for (i, (to_err, n)) in pushes.iter().enumerate() {
            let chunk: Vec<u8> = (0..*n).map(|j| b'a' + ((i * 7 + j) % 26) as u8).collect();
            let stream = if *to_err { Stream::Stderr } else { Stream::Stdout };
            files.push(stream, &chunk);
            mem.push(stream, &chunk);
        }
        for (a, b) in [(&files.stdout, &mem.stdout), (&files.stderr, &mem.stderr)] {
            proptest::prop_assert_eq!(a.total_bytes(), b.total_bytes());
            proptest::prop_assert_eq!(a.complete(), b.complete());
            for max in [2, 17, 1000] {
                proptest::prop_assert_eq!(a.excerpt(max), b.excerpt(max));
            }
        }
    }
}
