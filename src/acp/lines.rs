//! Newline-delimited JSON-RPC over a byte stream, with a bound on the size of one message: a
//! line longer than the bound is read to its end and dropped, and the peer gets a parse error
//! (`-32700`) for it instead of the agent holding it in memory.

use futures_util::Stream;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What stands in for a line that was too long: not JSON, so the peer gets a parse error
/// naming the bound.
fn too_long(max: usize) -> String {
    format!("(a message longer than {max} bytes was dropped)")
}

/// The lines of `input` (without their line feed, a carriage return before it kept as JSON
/// whitespace), each at most `max` bytes; a longer one is read to its end and replaced by a
/// short text that is not JSON. Bytes that are not UTF-8 are replaced (the line is then
/// refused as the JSON it is not).
pub(crate) fn bounded_lines<R>(input: R, max: usize) -> impl Stream<Item = std::io::Result<String>>
where
    R: AsyncBufRead + Unpin + Send + 'static,
{
    futures_util::stream::unfold(input, move |mut input| async move {
        let mut line = Vec::new();
        let mut dropped = false;
        loop {
            let buffer = match input.fill_buf().await {
                Ok(buffer) => buffer,
                Err(error) => return Some((Err(error), input)),
            };
            if buffer.is_empty() {
                // End of input: a last line without a line feed still counts.
                if line.is_empty() && !dropped {
                    return None;
                }
                break;
            }
            let (taken, done) = match buffer.iter().position(|&b| b == b'\n') {
                Some(at) => (at + 1, true),
                None => (buffer.len(), false),
            };
            let content = &buffer[..if done { taken - 1 } else { taken }];
            if !dropped && line.len() + content.len() <= max {
                line.extend_from_slice(content);
            } else {
                dropped = true;
                line = Vec::new();
            }
            input.consume(taken);
            if done {
                break;
            }
        }
        let text = if dropped {
            too_long(max)
        } else {
            String::from_utf8_lossy(&line).into_owned()
        };
        Some((Ok(text), input))
    })
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    async fn lines(input: &'static [u8], max: usize) -> Vec<String> {
        let reader = tokio::io::BufReader::with_capacity(4, input);
        super::bounded_lines(reader, max)
            .map(|l| l.expect("a line"))
            .collect()
            .await
    }

    #[tokio::test]
    async fn lines_split_at_line_feeds_and_a_long_one_is_dropped() {
        assert_eq!(lines(b"ab\ncdef\n", 10).await, ["ab", "cdef"]);
        assert_eq!(lines(b"ab\ncdef", 10).await, ["ab", "cdef"]);
        let got = lines(b"ab\n0123456789abc\nxy\n", 10).await;
        assert_eq!(got[0], "ab");
        assert!(got[1].contains("longer than 10 bytes"), "{got:?}");
        assert_eq!(got[2], "xy");
        assert_eq!(lines(b"", 10).await, Vec::<String>::new());
    }
}
