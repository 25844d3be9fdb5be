//! A connection the harness can close whatever holds a clone of its gRPC channel: closing
//! makes every socket of the channel read EOF and fail writes, and refuses new dials. This is
//! how [`super::Client::close`] closes the connection as go-plugin's `Close` does (and as an
//! agent that dies does), even while steps still hold stubs.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Shared by a channel's connector and every socket it made.
#[derive(Debug, Default)]
pub struct Closer {
    closed: AtomicBool,
    wakers: Mutex<Vec<Arc<Mutex<Option<Waker>>>>>,
}

impl Closer {
    pub fn new() -> Arc<Closer> {
        Arc::new(Closer::default())
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Close every socket (pending reads wake up to EOF) and refuse new ones.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        for slot in wakers.iter() {
            if let Some(w) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                w.wake();
            }
        }
    }

    /// Wrap a freshly dialled socket.
    pub fn wrap<T>(self: &Arc<Self>, inner: T) -> ClosableIo<T> {
        let slot = Arc::new(Mutex::new(None));
        let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        wakers.retain(|s| Arc::strong_count(s) > 1);
        wakers.push(slot.clone());
        ClosableIo {
            inner,
            closer: self.clone(),
            slot,
        }
    }
}

/// A socket that reads EOF once its [`Closer`] is closed.
#[derive(Debug)]
pub struct ClosableIo<T> {
    inner: T,
    closer: Arc<Closer>,
    slot: Arc<Mutex<Option<Waker>>>,
}

fn closed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the harness closed the connection",
    )
}

impl<T: AsyncRead + Unpin> AsyncRead for ClosableIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.closer.is_closed() {
            return Poll::Ready(Ok(()));
        }
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
        // Closed between the check and the registration: the waker may have been missed.
        if self.closer.is_closed() {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ClosableIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.closer.is_closed() {
            return Poll::Ready(Err(closed_error()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.closer.is_closed() {
            return Poll::Ready(Err(closed_error()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn closing_wakes_a_pending_read_with_eof() {
        let (a, mut b) = tokio::io::duplex(64);
        let closer = Closer::new();
        let mut io = closer.wrap(a);
        b.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(io.read(&mut buf).await.unwrap(), 1);
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 8];
            let n = io.read(&mut buf).await.unwrap();
            (n, io.write_all(b"y").await.is_err())
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!reader.is_finished());
        closer.close();
        assert_eq!(reader.await.unwrap(), (0, true));
    }
}
