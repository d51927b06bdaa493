//! A connection whose writes must make progress: [`WriteBound`] fails a write that the client
//! has not taken a byte of for a while (its receive window stays shut), so a client that stops
//! reading an answer (an event stream, say) is cut off instead of holding its connection, its
//! task and the answer's buffers for ever. A client that reads, however slowly, is not.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, each of whose writes fails ([`io::ErrorKind::TimedOut`]) once it has waited
/// `bound` without a byte written.
pub(crate) struct WriteBound<S> {
    inner: S,
    bound: Duration,
    /// Armed when a write first waits; disarmed by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteBound<S> {
    pub(crate) fn new(inner: S, bound: Duration) -> Self {
        Self {
            inner,
            bound,
            stalled: None,
        }
    }

    /// What a write that `written` says: progress disarms the bound; a wait arms it (its
    /// timer wakes the connection, which then writes again) and fails once it is past.
    fn bounded(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if written.is_ready() {
            self.stalled = None;
            return written;
        }
        let bound = self.bound;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(bound)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client took nothing of the answer for {} seconds",
                    bound.as_secs()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteBound<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteBound<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.bounded(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.bounded(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const BOUND: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn a_write_the_client_takes_slowly_goes_on_and_one_it_never_takes_fails() {
        let (ours, mut theirs) = tokio::io::duplex(8);
        let mut bounded = WriteBound::new(ours, BOUND);
        bounded.write_all(b"12345678").await.expect("room");
        // The buffer is full; the client takes it after 2/3 of the bound, twice: each write
        // waits, and goes on, though the two waits together are longer than the bound.
        let reader = tokio::spawn(async move {
            let mut got = [0u8; 8];
            for _ in 0..2 {
                tokio::time::sleep(BOUND * 2 / 3).await;
                theirs.read_exact(&mut got).await.expect("read");
            }
            theirs
        });
        for _ in 0..2 {
            bounded.write_all(b"abcdefgh").await.expect("taken in time");
        }
        let _theirs = reader.await.expect("the reader");
        // Never taken: the write fails once the bound has passed.
        let start = std::time::Instant::now();
        let stuck = bounded.write_all(b"more").await.expect_err("cut off");
        assert_eq!(stuck.kind(), io::ErrorKind::TimedOut);
        assert!(start.elapsed() >= BOUND, "{:?}", start.elapsed());
    }
}
