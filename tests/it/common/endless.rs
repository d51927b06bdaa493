//! A server that never finishes its reply: every request gets `200 text/event-stream`, then
//! `start`, then `piece` again and again until the client hangs up. For the tests that an
//! event stream is refused at its bound while it still arrives, not after it ends.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use tokio::sync::mpsc;

/// The running server; it stops with the test process.
pub struct EndlessServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    hung_up: mpsc::UnboundedReceiver<usize>,
}

impl EndlessServer {
    /// Starts the server on a loopback port, on a thread of its own.
    pub fn start(start: &str, piece: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, hung_up) = mpsc::unbounded_channel();
        let (start, piece) = (
            start.to_owned(),
            piece.repeat(64 * 1024 / piece.len().max(1) + 1),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (tx, start, piece) = (tx.clone(), start.clone(), piece.clone());
                std::thread::spawn(move || {
                    let sent = serve(stream, &start, &piece);
                    let _ = tx.send(sent);
                });
            }
        });
        Self { base, hung_up }
    }

    /// How many body bytes the server had sent when the client hung up; `None` when the client
    /// was still reading after 60 s (a guard against a hang, not a measure of speed). Async, so
    /// the client's connection task can close the connection meanwhile.
    pub async fn hung_up(&mut self) -> Option<usize> {
        tokio::time::timeout(Duration::from_secs(60), self.hung_up.recv())
            .await
            .ok()
            .flatten()
    }
}

/// Reads the request, then writes the endless reply until writing fails; returns the body
/// bytes written.
fn serve(stream: TcpStream, start: &str, piece: &str) -> usize {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return 0;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let mut stream = stream;
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() || stream.write_all(start.as_bytes()).is_err() {
        return 0;
    }
    let mut sent = start.len();
    while stream.write_all(piece.as_bytes()).is_ok() {
        sent += piece.len();
    }
    sent
}
