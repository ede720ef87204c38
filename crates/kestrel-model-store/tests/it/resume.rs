//! A download that breaks off is resumed by the next pull: an HTTP range request from the
//! bytes kept, every byte still verified; a server that ignores ranges, and kept bytes that
//! turn out wrong, start over.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use kestrel_model_store::{Error, FailureReason, Phase};

use crate::store::{FakeWheel, files_in, model_bytes, recorder, store};

/// How the fake hub answers one request.
#[derive(Debug, Clone, Copy)]
enum Reply {
    /// `200` announcing the whole file, then only its first `n` bytes and a closed connection.
    BreakOffAfter(usize),
    /// Ranges honoured: `206` from the asked byte (`200` without a range).
    Ranges,
    /// Ranges ignored: always `200` with the whole file.
    Whole,
}

/// A fake hub answering the n-th request with `replies[n]` (the last one after that); it
/// records each request's `range` header.
struct Hub {
    base_url: String,
    ranges: Arc<Mutex<Vec<Option<String>>>>,
}

impl Hub {
    fn start(bytes: Vec<u8>, replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let ranges = Arc::new(Mutex::new(Vec::new()));
        let seen = ranges.clone();
        std::thread::spawn(move || {
            for (i, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { continue };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => break,
                    }
                }
                let head = String::from_utf8_lossy(&head).to_lowercase();
                let range = head
                    .lines()
                    .find_map(|l| l.strip_prefix("range:"))
                    .map(|v| v.trim().to_owned());
                seen.lock().unwrap().push(range.clone());
                let reply = replies[i.min(replies.len() - 1)];
                let from = range
                    .as_deref()
                    .and_then(|r| r.strip_prefix("bytes="))
                    .and_then(|r| r.strip_suffix('-'))
                    .and_then(|r| r.parse::<usize>().ok());
                let (status, extra, body): (&str, String, &[u8]) = match (reply, from) {
                    (Reply::Ranges, Some(from)) => (
                        "206 Partial Content",
                        format!(
                            "content-range: bytes {from}-{}/{}\r\n",
                            bytes.len() - 1,
                            bytes.len()
                        ),
                        &bytes[from..],
                    ),
                    _ => ("200 OK", String::new(), &bytes[..]),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let sent = match reply {
                    Reply::BreakOffAfter(n) => &body[..n],
                    _ => body,
                };
                let _ = stream.write_all(sent);
            }
        });
        Self { base_url, ranges }
    }

    fn ranges(&self) -> Vec<Option<String>> {
        self.ranges.lock().unwrap().clone()
    }
}

const KEPT: &str = ".tiny.gguf.download";

#[test]
fn a_broken_off_download_is_resumed_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let half = bytes.len() / 2;
    let hub = Hub::start(
        bytes.clone(),
        vec![Reply::BreakOffAfter(half), Reply::Ranges],
    );
    let store = store(tmp.path(), &bytes, &hub.base_url, &FakeWheel::failing());
    let dir = tmp.path().join("models");

    let error = store.pull("tiny", |_| {}).unwrap_err();
    let Error::AllSourcesFailed { failures, .. } = &error else {
        panic!("{error:?}");
    };
    let FailureReason::Network(message) = &failures[0].reason else {
        panic!("{failures:?}");
    };
    assert!(message.contains("the next pull resumes there"), "{message}");
    // What arrived is kept, under one name per file.
    assert_eq!(files_in(&dir), [KEPT]);
    assert_eq!(fs::read(dir.join(KEPT)).unwrap(), &bytes[..half]);

    let (seen, sink) = recorder();
    let pulled = store.pull("tiny", sink).unwrap();
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    assert_eq!(
        hub.ranges(),
        [None, Some(format!("bytes={half}-"))],
        "the second request asks for the rest"
    );
    let seen = seen.lock().unwrap();
    let resumed = seen
        .iter()
        .find(|p| p.phase == Phase::Resuming)
        .expect("a Resuming report");
    assert_eq!(resumed.done, half as u64);
    assert!(seen.iter().any(|p| p.phase == Phase::Verifying));
    // The kept file became the model; nothing else is left.
    assert_eq!(files_in(&dir), ["tiny.gguf", "tiny.gguf.sha256"]);
}

#[test]
fn a_server_that_ignores_ranges_sends_the_whole_file_again() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = Hub::start(
        bytes.clone(),
        vec![Reply::BreakOffAfter(1000), Reply::Whole],
    );
    let store = store(tmp.path(), &bytes, &hub.base_url, &FakeWheel::failing());
    store.pull("tiny", |_| {}).unwrap_err();
    let pulled = store.pull("tiny", |_| {}).unwrap();
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    assert_eq!(hub.ranges()[1].as_deref(), Some("bytes=1000-"));
}

#[test]
fn kept_bytes_that_are_wrong_are_thrown_away() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let half = bytes.len() / 2;
    let dir = tmp.path().join("models");
    fs::create_dir_all(&dir).unwrap();
    // A broken-off download whose bytes are not the model's.
    let mut wrong = bytes[..half].to_vec();
    wrong[10] ^= 0xff;
    fs::write(dir.join(KEPT), &wrong).unwrap();
    let hub = Hub::start(bytes.clone(), vec![Reply::Ranges]);
    let store = store(tmp.path(), &bytes, &hub.base_url, &FakeWheel::failing());

    // Resumed, the whole fails its sha256 check, and the kept bytes go with it ...
    let error = store.pull("tiny", |_| {}).unwrap_err();
    let Error::AllSourcesFailed { failures, .. } = &error else {
        panic!("{error:?}");
    };
    assert!(
        matches!(failures[0].reason, FailureReason::ShaMismatch { .. }),
        "{failures:?}"
    );
    assert!(files_in(&dir).is_empty(), "{:?}", files_in(&dir));
    // ... so the next pull starts from the first byte and succeeds.
    let pulled = store.pull("tiny", |_| {}).unwrap();
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    assert_eq!(
        hub.ranges(),
        [Some(format!("bytes={half}-")), None],
        "{:?}",
        hub.ranges()
    );
}

#[test]
fn kept_bytes_longer_than_the_model_are_not_resumed() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let dir = tmp.path().join("models");
    fs::create_dir_all(&dir).unwrap();
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"extra");
    fs::write(dir.join(KEPT), &longer).unwrap();
    let hub = Hub::start(bytes.clone(), vec![Reply::Ranges]);
    let store = store(tmp.path(), &bytes, &hub.base_url, &FakeWheel::failing());
    let pulled = store.pull("tiny", |_| {}).unwrap();
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    assert_eq!(hub.ranges(), [None]);
}
