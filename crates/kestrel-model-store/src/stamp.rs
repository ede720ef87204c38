//! sha256 helpers and the `<file>.sha256` verification stamp.
//!
//! A stamp is one line in the `sha256sum` format (`<hex>  <file name>`), written right after a
//! file was verified. It vouches for the file only while the file has the catalog size and an
//! mtime no later than the stamp's, so replacing or editing the file invalidates it.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::catalog::CatalogEntry;

/// Read/write buffer size for hashing and copying.
pub(crate) const BUFFER_SIZE: usize = 256 * 1024;

/// The stamp next to `model`: `<model>.sha256`.
pub(crate) fn stamp_path(model: &Path) -> PathBuf {
    let mut name = model.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// Whether `model` is vouched for by its stamp: the file has `entry.size` bytes, the stamp names
/// `entry.sha256`, and the file was not modified after the stamp was written.
pub(crate) fn is_stamped(entry: &CatalogEntry, model: &Path) -> bool {
    let Ok(file_meta) = fs::metadata(model) else {
        return false;
    };
    if !file_meta.is_file() || file_meta.len() != entry.size {
        return false;
    }
    let stamp = stamp_path(model);
    let Ok(stamp_meta) = fs::metadata(&stamp) else {
        return false;
    };
    match (file_meta.modified(), stamp_meta.modified()) {
        (Ok(file_time), Ok(stamp_time)) if file_time <= stamp_time => {}
        _ => return false,
    }
    let Ok(text) = fs::read_to_string(&stamp) else {
        return false;
    };
    text.split_whitespace()
        .next()
        .is_some_and(|hex| hex.eq_ignore_ascii_case(&entry.sha256))
}

/// Records that `model` has been verified against `entry`.
pub(crate) fn write_stamp(entry: &CatalogEntry, model: &Path) -> io::Result<()> {
    fs::write(
        stamp_path(model),
        format!("{}  {}\n", entry.sha256, entry.file_name),
    )
}

/// Removes the stamp of `model`, if any.
pub(crate) fn remove_stamp(model: &Path) {
    // Best effort: a leftover stamp cannot vouch for a file it does not match.
    let _ = fs::remove_file(stamp_path(model));
}

/// The sha256 of the file at `path`, calling `progress(done)` as it goes.
pub(crate) fn hash_file(path: &Path, mut progress: impl FnMut(u64)) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; BUFFER_SIZE];
    let mut done = 0u64;
    loop {
        let n = match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buffer[..n]);
        done += n as u64;
        progress(done);
    }
    Ok(hex(&hasher.finalize()))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// A writer that hashes and counts what goes through it.
pub(crate) struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> HashingWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            written: 0,
        }
    }

    /// Bytes written so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Counts and hashes bytes the inner writer already holds (a download being resumed)
    /// without writing them again.
    pub(crate) fn absorb(&mut self, existing: &[u8]) {
        self.hasher.update(existing);
        self.written += existing.len() as u64;
    }

    /// Forgets everything written: the inner writer is being started over.
    pub(crate) fn reset(&mut self) {
        self.hasher = Sha256::new();
        self.written = 0;
    }

    /// The inner writer.
    pub(crate) fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The inner writer and the lowercase hex sha256 of everything written.
    pub(crate) fn finish(self) -> (W, String) {
        (self.inner, hex(&self.hasher.finalize()))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn hashes_like_sha256sum() {
        let mut writer = HashingWriter::new(Vec::new());
        writer.write_all(b"abc").unwrap();
        assert_eq!(writer.written(), 3);
        let (bytes, sha) = writer.finish();
        assert_eq!(bytes, b"abc");
        assert_eq!(
            sha,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0x00, 0x0f, 0xf0, 0xff]), "000ff0ff");
    }
}
