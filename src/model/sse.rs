//! Server-sent events (features `openai`, `anthropic`): the one reader both providers take the
//! events of a streamed reply from.
//!
//! The body is read in one pass: each byte is looked at once when its chunk arrives and copied
//! at most twice (into the line being read, then into the event's data), so a reply costs time
//! in proportion to its size however it is split into chunks. A reader that searched the whole
//! unfinished line again at every chunk took 18 s for a 2 MiB text in one `data:` event, and
//! 76 s for 4 MiB.
//!
//! An event is bounded while it arrives, in the bytes it takes in the body (all its lines,
//! comments and line ends included, up to the blank line that ends it): once the event being
//! read passes the bound, reading stops with [`SseError::TooLarge`], whether or not its line or
//! the event ever ends. So a server that sends one endless `data:` line, or endless lines
//! without the blank line that ends an event, costs at most the bound in memory.
//!
//! What is read follows the HTML standard's event-stream format: lines end in LF, CRLF or CR;
//! a leading byte-order mark is skipped; `data` lines are joined with LF; `event` names the
//! event; a line starting with `:` is a comment; other fields (`id`, `retry`) are not needed
//! and are ignored; a blank line ends the event; an unfinished event at the end of the body
//! is dropped.

use std::collections::VecDeque;

/// One event of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// Its `event` field, or `""` when it had none.
    pub(crate) name: String,
    /// Its `data` lines, joined with `\n`.
    pub(crate) data: String,
}

/// Why an event stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    /// The event being read passed the bound, in bytes.
    #[error("an event of the stream is larger than {0} bytes")]
    TooLarge(usize),
    /// A line is not UTF-8.
    #[error("an event line is not UTF-8: {0}")]
    NotUtf8(std::str::Utf8Error),
}

/// Splits a server-sent-events body, pushed in chunks as it arrives, into [`Event`]s; see the
/// [module docs](self).
#[derive(Debug)]
pub(crate) struct SseReader {
    /// The largest event taken, in bytes of the body.
    max_event: usize,
    /// Bytes of the body the event being read has taken so far.
    event_bytes: usize,
    /// The unfinished line: the bytes after the last line end.
    line: Vec<u8>,
    /// The data lines of the event being read, joined with `\n`.
    data: String,
    /// Whether the event being read has a `data` line (it may be empty).
    has_data: bool,
    /// The `event` field of the event being read.
    name: String,
    /// The last chunk ended in CR: an LF first in the next one belongs to that line end.
    after_cr: bool,
    /// No line has ended yet (the first may start with a byte-order mark).
    first_line: bool,
    /// Events read and not yet taken.
    ready: VecDeque<Event>,
    /// Bytes looked at so far, each chunk's bytes once, for the tests that check linearity.
    #[cfg(test)]
    examined: usize,
}

impl SseReader {
    /// A reader that takes events of at most `max_event` bytes.
    pub(crate) fn new(max_event: usize) -> Self {
        Self {
            max_event,
            event_bytes: 0,
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            name: String::new(),
            after_cr: false,
            first_line: true,
            ready: VecDeque::new(),
            #[cfg(test)]
            examined: 0,
        }
    }

    /// The next event read, if one is complete.
    pub(crate) fn next_event(&mut self) -> Option<Event> {
        self.ready.pop_front()
    }

    /// Reads `bytes`, the next part of the body; the events it completes are taken with
    /// [`SseReader::next_event`].
    ///
    /// # Errors
    /// [`SseError::TooLarge`] once the event being read passes the bound (the bytes after it
    /// are not read), [`SseError::NotUtf8`] for a line that is not UTF-8.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) -> Result<(), SseError> {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while !bytes.is_empty() {
            let Some(end) = bytes.iter().position(|b| matches!(b, b'\n' | b'\r')) else {
                #[cfg(test)]
                {
                    self.examined += bytes.len();
                }
                return self.extend_line(bytes);
            };
            #[cfg(test)]
            {
                self.examined += end + 1;
            }
            self.extend_line(&bytes[..end])?;
            let crlf = bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n');
            self.after_cr = bytes[end] == b'\r' && end + 1 == bytes.len();
            let line_end = if crlf { 2 } else { 1 };
            self.event_bytes += line_end;
            bytes = &bytes[end + line_end..];
            let line = std::mem::take(&mut self.line);
            let ended = self.end_line(&line);
            // The buffer is kept for the next line.
            self.line = line;
            self.line.clear();
            ended?;
        }
        Ok(())
    }

    /// Adds `part` to the unfinished line, unless the event would pass the bound.
    fn extend_line(&mut self, part: &[u8]) -> Result<(), SseError> {
        self.event_bytes += part.len();
        if self.event_bytes > self.max_event {
            return Err(SseError::TooLarge(self.max_event));
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    /// Takes in one whole line (without its line end).
    fn end_line(&mut self, line: &[u8]) -> Result<(), SseError> {
        let mut line = std::str::from_utf8(line).map_err(SseError::NotUtf8)?;
        if std::mem::take(&mut self.first_line) {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            self.event_bytes = 0;
            if std::mem::take(&mut self.has_data) {
                self.ready.push_back(Event {
                    name: std::mem::take(&mut self.name),
                    data: std::mem::take(&mut self.data),
                });
            } else {
                self.name.clear();
            }
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => {
                if std::mem::replace(&mut self.has_data, true) {
                    self.data.push('\n');
                }
                self.data.push_str(value);
            }
            "event" => value.clone_into(&mut self.name),
            _ => {}
        }
        Ok(())
    }
}

/// Why the events of a response cannot be read on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamError {
    /// Reading the body failed (the connection broke, a read timed out).
    #[error(transparent)]
    Transport(reqwest::Error),
    /// The body is not a readable event stream.
    #[error(transparent)]
    Sse(SseError),
}

/// The events of a response body, read as its chunks arrive.
#[derive(Debug)]
pub(crate) struct EventStream {
    response: reqwest::Response,
    reader: SseReader,
    ended: bool,
}

impl EventStream {
    /// The events of `response`'s body, each of at most `max_event` bytes.
    pub(crate) fn new(response: reqwest::Response, max_event: usize) -> Self {
        Self {
            response,
            reader: SseReader::new(max_event),
            ended: false,
        }
    }

    /// The next event; `None` at the end of the body (an unfinished last event is dropped).
    ///
    /// # Errors
    /// [`StreamError::Transport`] when reading fails, [`StreamError::Sse`] when the body is
    /// not a readable event stream or an event passes the bound (as it arrives: the rest of
    /// the body is not read).
    pub(crate) async fn next(&mut self) -> Result<Option<Event>, StreamError> {
        loop {
            if let Some(event) = self.reader.next_event() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            match self
                .response
                .chunk()
                .await
                .map_err(StreamError::Transport)?
            {
                Some(bytes) => self.reader.push(&bytes).map_err(StreamError::Sse)?,
                None => self.ended = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event `body` holds when it arrives in chunks of `size` bytes.
    fn read_in_chunks(body: &[u8], size: usize, max: usize) -> Result<Vec<Event>, SseError> {
        let mut reader = SseReader::new(max);
        let mut events = Vec::new();
        for chunk in body.chunks(size) {
            reader.push(chunk)?;
            events.extend(std::iter::from_fn(|| reader.next_event()));
        }
        Ok(events)
    }

    fn event(name: &str, data: &str) -> Event {
        Event {
            name: name.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_read_the_same_however_the_body_is_split() {
        let body = "\u{feff}: a comment\nevent: delta\ndata: {\"a\":\ndata:  1}\r\n\r\n\
                    id: 7\rretry: 10\rdata:x\r\rdata\n\ndata: [DONE]\n\n"
            .as_bytes();
        let expected = [
            event("delta", "{\"a\":\n 1}"),
            event("", "x"),
            event("", ""),
            event("", "[DONE]"),
        ];
        for size in 1..=body.len() {
            assert_eq!(
                read_in_chunks(body, size, 1024).expect("read"),
                expected,
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn an_event_without_data_is_not_an_event_and_the_last_unfinished_one_is_dropped() {
        let body = b"event: ping\n\n: keep-alive\n\ndata: cut off";
        assert_eq!(read_in_chunks(body, 4, 1024).expect("read"), []);
        let body = b"event: ping\n\ndata: after\n\n";
        assert_eq!(
            read_in_chunks(body, 4, 1024).expect("read"),
            [event("", "after")],
            "the name of an event without data does not carry over"
        );
    }

    #[test]
    fn a_line_that_is_not_utf8_is_an_error_even_split_inside_a_character() {
        let body = "data: é\n\n".as_bytes();
        assert_eq!(
            read_in_chunks(body, 1, 1024).expect("split é"),
            [event("", "é")]
        );
        let err = read_in_chunks(b"data: \xff\n\n", 3, 1024).expect_err("not UTF-8");
        assert!(matches!(err, SseError::NotUtf8(_)), "{err:?}");
    }

    /// Issue 19, item 7: one large `data:` event took time with the square of its size, since
    /// every chunk searched the whole unfinished line again. Now each byte is looked at once,
    /// whatever the chunks: a 4 MiB event in 1,024-byte chunks is 4 MiB examined.
    #[test]
    fn every_byte_is_examined_once_however_small_the_chunks() {
        let text = "x".repeat(4 << 20);
        let body = format!("data: {text}\n\ndata: [DONE]\n\n");
        for size in [1024, 16 * 1024, body.len()] {
            let mut reader = SseReader::new(8 << 20);
            let mut events = Vec::new();
            for chunk in body.as_bytes().chunks(size) {
                reader.push(chunk).expect("within the bound");
                events.extend(std::iter::from_fn(|| reader.next_event()));
            }
            assert_eq!(reader.examined, body.len(), "chunks of {size}");
            assert_eq!(events.len(), 2);
            assert_eq!(events[0].data, text);
        }
    }

    /// The bound holds while an event arrives: an endless line, and endless data lines without
    /// the blank line that ends an event, stop at the bound, with nothing kept past it.
    #[test]
    fn an_event_past_the_bound_stops_the_reader_as_it_arrives() {
        let max = 64 * 1024;
        for (start, repeated) in [
            ("data: ", "x".repeat(1000)),
            ("", "data: xxxxxxxxx\n".to_owned()),
            ("", "data: xxxxxxxxx\r\n".to_owned()),
            (": ", "a comment that never ends ".to_owned()),
        ] {
            let mut reader = SseReader::new(max);
            reader.push(start.as_bytes()).expect("start");
            let mut pushed = start.len();
            let err = loop {
                match reader.push(repeated.as_bytes()) {
                    Ok(()) => pushed += repeated.len(),
                    Err(err) => break err,
                }
                assert!(pushed <= max + repeated.len(), "{start:?}: not stopped");
            };
            assert_eq!(err, SseError::TooLarge(max));
            assert!(reader.line.len() + reader.data.len() <= max, "{start:?}");
            assert!(reader.next_event().is_none());
        }
        // Events that each stay within the bound are all taken, however many; so are
        // keep-alive comments between them.
        let body = "data: yyyyyyyy\n\n: keep-alive\n\n".repeat(10_000);
        assert_eq!(
            read_in_chunks(body.as_bytes(), 4096, 16)
                .expect("read")
                .len(),
            10_000
        );
        // The bound counts the event's bytes in the body: 16 bytes, line end included.
        assert!(read_in_chunks(b"data: yyyyyyyyy\n\n", 4, 16).is_ok());
        assert_eq!(
            read_in_chunks(b"data: yyyyyyyyyy\n\n", 4, 16),
            Err(SseError::TooLarge(16))
        );
    }
}
