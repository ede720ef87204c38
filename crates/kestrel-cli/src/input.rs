//! Lines of stdin, read on a plain thread and delivered through a channel.
//!
//! A plain thread rather than `tokio::io::stdin`: tokio reads stdin on its blocking pool, and the
//! runtime waits for that read to end before the process can exit, so Ctrl-C at the prompt would
//! hang until Enter. A blocked plain thread does not keep the process alive.

use tokio::sync::mpsc;

/// The lines of stdin, one at a time, without their line ending.
#[derive(Debug)]
pub struct StdinLines {
    rx: mpsc::Receiver<std::io::Result<String>>,
}

impl StdinLines {
    /// Starts reading stdin. At most one line is read ahead of the consumer.
    pub fn spawn() -> Self {
        let (tx, rx) = mpsc::channel(1);
        let spawned = std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || {
                let mut buf = String::new();
                loop {
                    buf.clear();
                    let line = match std::io::stdin().read_line(&mut buf) {
                        Ok(0) => return,
                        Ok(_) => Ok(buf.trim_end_matches(['\n', '\r']).to_string()),
                        Err(error) => Err(error),
                    };
                    let failed = line.is_err();
                    if tx.blocking_send(line).is_err() || failed {
                        return;
                    }
                }
            });
        if let Err(error) = spawned {
            // The receiver then reports end of input at once; say why.
            tracing::error!(%error, "cannot start the stdin reader");
        }
        Self { rx }
    }

    /// The next line; `None` at end of input.
    pub async fn next_line(&mut self) -> Option<std::io::Result<String>> {
        self.rx.recv().await
    }
}
