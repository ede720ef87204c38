//! A record of the demo's effects, for tests that count them: each time `get_weather` or
//! `send_email` does its work, or a plain step of a demo workflow does, one line is appended
//! to a file ([`super::DemoOptions::ledger`]; `KESTREL_DEV_LEDGER=<file>` for `kestrel dev`):
//!
//! ```text
//! <kind> <run id> <tool call id or step id> <instance> <started ms> <ended ms>
//! ```
//!
//! `kind` is `tool` or `step`; the times are milliseconds since the Unix epoch, when the work
//! began (before the demo's delay) and when it was done. The line is written when the work is
//! done, as a real API call's effect happens at its end: work cut short (its process killed)
//! leaves none. Each line is one `write` on a file opened to append. The cluster chaos test
//! (`tests/it/chaos_faults.rs`) gives each process a file and counts how often each effect
//! happened while instances are killed, paused and cut off from their services.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The variable naming the file `kestrel dev` records the demo's effects in (unset: none).
pub const LEDGER_ENV: &str = "KESTREL_DEV_LEDGER";

/// The file the demo's effects are recorded in, and this process's name in it.
#[derive(Clone, Debug)]
pub struct Ledger {
    file: Arc<Mutex<std::fs::File>>,
    instance: Arc<str>,
}

impl Ledger {
    /// Opens `path` to append (creating it), recording as `instance` (no spaces).
    pub fn open(path: &Path, instance: &str) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            file: Arc::new(Mutex::new(file)),
            instance: instance.into(),
        })
    }

    fn record(&self, kind: &str, run_id: &str, id: &str, started: u64) {
        let line = format!(
            "{kind} {run_id} {id} {} {started} {}\n",
            self.instance,
            now_ms()
        );
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(error) = file.write_all(line.as_bytes()) {
            tracing::warn!(%error, "the demo's ledger could not be written");
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What a demo tool or step does before it answers: waits its delay, then records the effect
/// in the ledger, if there is one.
#[derive(Clone, Debug, Default)]
pub(crate) struct Work {
    pub(crate) delay: Duration,
    pub(crate) ledger: Option<Ledger>,
}

impl Work {
    /// Does the work of `id` (a tool call's or a step's id) in run `run_id`.
    pub(crate) async fn done(&self, kind: &str, run_id: &str, id: &str) {
        let started = now_ms();
        tokio::time::sleep(self.delay).await;
        if let Some(ledger) = &self.ledger {
            ledger.record(kind, run_id, id, started);
        }
    }
}
