//! A pseudo-terminal for ExecTaskStreaming with `tty = true`.
//!
//! The command gets the pty's terminal side as stdin, stdout and stderr, in a new session with
//! the pty as its controlling terminal (so `stty` works and it gets SIGWINCH on a resize). The
//! plugin keeps the other side, [`PtyMaster`], non-blocking under tokio: what the command writes
//! is read from it, what the user types is written to it, and `tty_size` becomes TIOCSWINSZ.

use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::pty::Winsize;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

nix::ioctl_write_ptr_bad!(set_window_size, nix::libc::TIOCSWINSZ, Winsize);
nix::ioctl_write_int_bad!(set_controlling_terminal, nix::libc::TIOCSCTTY);

/// A freshly opened pty: the plugin's side and the command's side.
pub struct Pty {
    pub master: PtyMaster,
    pub terminal: OwnedFd,
}

/// The plugin's side; clones share it (one reads, one writes).
#[derive(Clone)]
pub struct PtyMaster(Arc<AsyncFd<OwnedFd>>);

pub fn open() -> io::Result<Pty> {
    let pair = nix::pty::openpty(None, None)?;
    let flags = OFlag::from_bits_truncate(fcntl(&pair.master, FcntlArg::F_GETFL)?);
    fcntl(&pair.master, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    // SAFETY: the OwnedFd is a valid descriptor that the AsyncFd owns and nothing else
    // closes or replaces while it is registered.
    let master = unsafe { AsyncFd::register(pair.master) }.map_err(io::Error::from)?;
    Ok(Pty {
        master: PtyMaster(Arc::new(master)),
        terminal: pair.slave,
    })
}

/// Runs in the command's process between fork and exec, with the terminal as fd 0: a new
/// session whose controlling terminal it is.
pub fn become_session_leader_of_terminal() -> io::Result<()> {
    nix::unistd::setsid()?;
    // SAFETY: fd 0 is the pty's terminal side, set up by Command before this runs; TIOCSCTTY
    // takes an int argument (0: do not steal the terminal from another session).
    unsafe { set_controlling_terminal(0, 0) }?;
    Ok(())
}

impl PtyMaster {
    /// Tells the terminal (and so the command, by SIGWINCH) its new size.
    pub fn resize(&self, rows: u16, columns: u16) -> io::Result<()> {
        let size = Winsize {
            ws_row: rows,
            ws_col: columns,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: the descriptor is open while self lives, and `size` outlives the call.
        unsafe { set_window_size(self.0.get_ref().as_raw_fd(), &size) }?;
        Ok(())
    }
}

impl AsyncRead for PtyMaster {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard
                .try_io(|fd| nix::unistd::read(fd.get_ref(), unfilled).map_err(io::Error::from))
            {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // EIO: every process closed the terminal side. That is the end of the output.
                Ok(Err(err)) if err.raw_os_error() == Some(nix::libc::EIO) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(err)) => return Poll::Ready(Err(err)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for PtyMaster {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            match guard.try_io(|fd| nix::unistd::write(fd.get_ref(), data).map_err(io::Error::from))
            {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
