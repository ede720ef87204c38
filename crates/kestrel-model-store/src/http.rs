//! Fetching a model file over HTTP(S) (the hub and plain URL sources), and [`receive`], the
//! copy-hash-verify step shared with the wheel source.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use crate::catalog::CatalogEntry;
use crate::error::FailureReason;
use crate::progress::Phase;
use crate::stamp::{BUFFER_SIZE, HashingWriter};
use crate::temp::TempFile;

/// Bound on the wait for response headers once connected.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// A download that receives nothing for this long has stalled.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Progress is reported at most once per this many bytes (and at the end).
const REPORT_EVERY: u64 = 1024 * 1024;

/// Progress sink of the fetch functions: phase, bytes done, bytes expected.
pub(crate) type Report<'a> = &'a mut dyn FnMut(Phase, u64, Option<u64>);

/// An HTTP agent with the store's timeouts: `connect` bounds name resolution and connecting
/// (TLS included) separately.
pub(crate) fn agent(connect: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_resolve(Some(connect))
        .timeout_connect(Some(connect))
        .timeout_recv_response(Some(RESPONSE_TIMEOUT))
        .timeout_per_read(Some(READ_TIMEOUT))
        .user_agent(concat!("kestrel-model-store/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// Downloads `url` into a verified temporary file in `dir`, resuming what an earlier pull of
/// the same file left when its transfer broke off (an HTTP range request from where it ended;
/// a server that answers with the whole file is read from the start).
pub(crate) fn fetch_url(
    agent: &ureq::Agent,
    connect_timeout: Duration,
    url: &str,
    dir: &Path,
    entry: &CatalogEntry,
    report: Report<'_>,
) -> Result<TempFile, FailureReason> {
    let mut receiver = Receiver::resumable(dir, entry)?;
    let kept = receiver.written();
    report(Phase::Connecting, 0, None);
    let ranged = |from: u64| {
        let request = agent.get(url);
        if from > 0 {
            request.header("range", format!("bytes={from}-")).call()
        } else {
            request.call()
        }
    };
    let response = match ranged(kept) {
        // The kept bytes do not fit what the server has: start over.
        Err(ureq::Error::StatusCode(416)) if kept > 0 => {
            receiver.restart()?;
            ranged(0)
        }
        other => other,
    }
    .map_err(|e| classify(&e, connect_timeout))?;
    let length = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if response.status().as_u16() == 206 && kept > 0 {
        let range = response
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if parse_content_range(range) != Some((kept, entry.size)) {
            // Appending any other range would corrupt the file; the next pull starts over.
            receiver.discard();
            return Err(FailureReason::Network(format!(
                "asked to resume at byte {kept} of {}, the server sent {range:?}",
                entry.size
            )));
        }
        report(Phase::Resuming, kept, Some(entry.size));
    } else {
        if receiver.written() > 0 {
            // The whole file again (the server ignores ranges).
            receiver.restart()?;
        }
        if let Some(length) = length
            && length != entry.size
        {
            return Err(FailureReason::SizeMismatch {
                expected: entry.size,
                actual: length,
            });
        }
    }
    let mut body = response.into_body().into_reader();
    report(Phase::Downloading, receiver.written(), Some(entry.size));
    receiver.copy(&mut body, &Phase::Downloading, report, &|e, done| {
        let cause = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<ureq::Error>())
            .map_or_else(
                || e.to_string(),
                |inner| classify(inner, connect_timeout).to_string(),
            );
        FailureReason::Network(format!(
            "download broke off after {done} bytes (kept: the next pull resumes there): {cause}"
        ))
    })?;
    receiver.finish(report)
}

/// `bytes <first>-<last>/<total>` as (first, total), when last is the final byte.
fn parse_content_range(value: &str) -> Option<(u64, u64)> {
    let range = value.trim().strip_prefix("bytes ")?;
    let (span, total) = range.split_once('/')?;
    let (first, last) = span.split_once('-')?;
    let (first, last, total) = (
        first.trim().parse::<u64>().ok()?,
        last.trim().parse::<u64>().ok()?,
        total.trim().parse::<u64>().ok()?,
    );
    (last + 1 == total && first <= last).then_some((first, total))
}

/// Turns a ureq error into a short, human reason.
fn classify(error: &ureq::Error, connect_timeout: Duration) -> FailureReason {
    use ureq::Timeout;
    match error {
        ureq::Error::Timeout(Timeout::Connect | Timeout::Resolve) => {
            FailureReason::ConnectTimeout(connect_timeout)
        }
        ureq::Error::Timeout(Timeout::PerRead) => FailureReason::Network(format!(
            "stalled: nothing received for {}s",
            READ_TIMEOUT.as_secs()
        )),
        ureq::Error::Timeout(Timeout::RecvResponse) => FailureReason::Network(format!(
            "no response within {}s",
            RESPONSE_TIMEOUT.as_secs()
        )),
        ureq::Error::Timeout(other) => FailureReason::Network(format!("timed out ({other})")),
        ureq::Error::HostNotFound => FailureReason::HostNotFound("no address found".to_owned()),
        ureq::Error::StatusCode(status) => FailureReason::HttpStatus(*status),
        ureq::Error::Io(e) => FailureReason::Network(match e.kind() {
            io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
            io::ErrorKind::ConnectionReset => "connection reset".to_owned(),
            io::ErrorKind::TimedOut => "timed out".to_owned(),
            // std's resolver reports `failed to lookup address information: <gai message>`.
            _ if e.to_string().contains("lookup address") => {
                let message = e.to_string();
                let detail = message.rsplit(": ").next().unwrap_or(&message).to_owned();
                return FailureReason::HostNotFound(detail);
            }
            _ => e.to_string(),
        }),
        other => FailureReason::Network(other.to_string()),
    }
}

/// Copies `reader` into a new temporary file for `entry` in `dir`, reporting `phase`, then checks
/// the size and sha256. The file is deleted unless everything matches.
///
/// `read_error` turns a failed read (after `done` bytes) into the source's failure reason.
pub(crate) fn receive(
    reader: &mut dyn Read,
    dir: &Path,
    entry: &CatalogEntry,
    phase: Phase,
    report: Report<'_>,
    read_error: &dyn Fn(io::Error, u64) -> FailureReason,
) -> Result<TempFile, FailureReason> {
    let mut receiver = Receiver::new(dir, entry)?;
    report(phase.clone(), 0, Some(entry.size));
    receiver.copy(reader, &phase, report, read_error)?;
    receiver.finish(report)
}

/// A temporary file for `entry` filled from one reader or several in turn (a file split in
/// parts), hashed as it is written; [`Receiver::finish`] checks the size and sha256. Dropped
/// before, the file is deleted.
pub(crate) struct Receiver<'e> {
    entry: &'e CatalogEntry,
    temp: TempFile,
    writer: HashingWriter<std::fs::File>,
    buffer: Vec<u8>,
    reported: u64,
}

impl<'e> Receiver<'e> {
    /// An empty temporary file for `entry` in `dir`.
    pub(crate) fn new(dir: &Path, entry: &'e CatalogEntry) -> Result<Self, FailureReason> {
        let (temp, file) = TempFile::create(dir, &entry.file_name)
            .map_err(|e| FailureReason::Io(format!("{}: {e}", dir.display())))?;
        Ok(Self {
            entry,
            temp,
            writer: HashingWriter::new(file),
            buffer: vec![0; BUFFER_SIZE],
            reported: 0,
        })
    }

    /// The resumable download of `entry` in `dir`, holding (and having hashed) what an earlier
    /// pull left in it; an empty temporary file when another process is writing it.
    pub(crate) fn resumable(dir: &Path, entry: &'e CatalogEntry) -> Result<Self, FailureReason> {
        let io_error = |e: io::Error| FailureReason::Io(format!("{}: {e}", dir.display()));
        let Some((temp, file)) = TempFile::resumable(dir, &entry.file_name).map_err(io_error)?
        else {
            return Self::new(dir, entry);
        };
        let mut receiver = Self {
            entry,
            temp,
            writer: HashingWriter::new(file),
            buffer: vec![0; BUFFER_SIZE],
            reported: 0,
        };
        let held = receiver
            .writer
            .get_mut()
            .metadata()
            .map_err(io_error)?
            .len();
        if held == 0 || held > entry.size {
            receiver.restart()?;
            return Ok(receiver);
        }
        let path = receiver.temp.path().to_path_buf();
        let read_error = |e: io::Error| FailureReason::Io(format!("{}: {e}", path.display()));
        receiver
            .writer
            .get_mut()
            .seek(SeekFrom::Start(0))
            .map_err(read_error)?;
        // Read to the end: the file is then positioned where the next bytes go.
        loop {
            let n = match receiver.writer.get_mut().read(&mut receiver.buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e)),
            };
            receiver.writer.absorb(&receiver.buffer[..n]);
        }
        Ok(receiver)
    }

    /// Bytes written so far.
    pub(crate) fn written(&self) -> u64 {
        self.writer.written()
    }

    /// Empties the file, to receive it from its first byte.
    pub(crate) fn restart(&mut self) -> Result<(), FailureReason> {
        let path = self.temp.path();
        let io_error = |e: io::Error| FailureReason::Io(format!("{}: {e}", path.display()));
        let file = self.writer.get_mut();
        file.set_len(0).map_err(io_error)?;
        file.seek(SeekFrom::Start(0)).map_err(io_error)?;
        self.writer.reset();
        self.reported = 0;
        Ok(())
    }

    /// Makes the file go when the receiver does, even a resumable download: its bytes are
    /// wrong.
    pub(crate) fn discard(&mut self) {
        self.temp.discard();
    }

    /// Appends all of `reader`, reporting `phase` (never past the entry's size: more is
    /// [`FailureReason::TooLarge`]).
    pub(crate) fn copy(
        &mut self,
        reader: &mut dyn Read,
        phase: &Phase,
        report: Report<'_>,
        read_error: &dyn Fn(io::Error, u64) -> FailureReason,
    ) -> Result<(), FailureReason> {
        let size = self.entry.size;
        loop {
            let n = match reader.read(&mut self.buffer) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e, self.writer.written())),
            };
            if self.writer.written() + n as u64 > size {
                self.discard();
                return Err(FailureReason::TooLarge { expected: size });
            }
            let path = self.temp.path();
            self.writer
                .write_all(&self.buffer[..n])
                .map_err(|e| FailureReason::Io(format!("writing {}: {e}", path.display())))?;
            let done = self.writer.written();
            if done - self.reported >= REPORT_EVERY || done == size {
                report(phase.clone(), done, Some(size));
                self.reported = done;
            }
        }
    }

    /// The file, once its size and sha256 are the entry's.
    pub(crate) fn finish(mut self, report: Report<'_>) -> Result<TempFile, FailureReason> {
        let entry = self.entry;
        let received = self.writer.written();
        if received != entry.size {
            return Err(FailureReason::SizeMismatch {
                expected: entry.size,
                actual: received,
            });
        }
        report(Phase::Verifying, received, Some(entry.size));
        // A wrong file must not be resumed: dropped from here on, it goes.
        self.temp.discard();
        let (file, sha) = self.writer.finish();
        file.sync_all().map_err(|e| {
            FailureReason::Io(format!("writing {}: {e}", self.temp.path().display()))
        })?;
        drop(file);
        if sha != entry.sha256 {
            return Err(FailureReason::ShaMismatch {
                expected: entry.sha256.clone(),
                actual: sha,
            });
        }
        Ok(self.temp)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn content_ranges_must_run_to_the_end() {
        assert_eq!(parse_content_range("bytes 100-999/1000"), Some((100, 1000)));
        assert_eq!(parse_content_range(" bytes 0-0/1 "), Some((0, 1)));
        // Not to the last byte, unknown total, another unit, nonsense.
        assert_eq!(parse_content_range("bytes 100-500/1000"), None);
        assert_eq!(parse_content_range("bytes 100-999/*"), None);
        assert_eq!(parse_content_range("items 100-999/1000"), None);
        assert_eq!(parse_content_range("bytes 9-3/10"), None);
        assert_eq!(parse_content_range(""), None);
    }

    #[test]
    fn network_errors_read_well() {
        let five = Duration::from_secs(5);
        let reason = |e: ureq::Error| classify(&e, five).to_string();
        assert_eq!(
            reason(ureq::Error::Timeout(ureq::Timeout::Connect)),
            "connection timed out after 5s"
        );
        assert_eq!(
            classify(
                &ureq::Error::Timeout(ureq::Timeout::Resolve),
                Duration::from_millis(250)
            )
            .to_string(),
            "connection timed out after 250ms"
        );
        assert_eq!(
            reason(ureq::Error::Io(io::Error::other(
                "failed to lookup address information: Name or service not known"
            ))),
            "could not resolve host (Name or service not known)"
        );
        assert_eq!(
            reason(ureq::Error::Io(io::ErrorKind::ConnectionRefused.into())),
            "connection refused"
        );
        assert_eq!(reason(ureq::Error::StatusCode(403)), "HTTP 403");
    }
}
