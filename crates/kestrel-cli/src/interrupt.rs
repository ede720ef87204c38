//! Ctrl-C as a stream of notifications instead of process termination.
//!
//! [`Interrupts::install`] replaces the default SIGINT behaviour (exit) for the rest of the
//! process: each Ctrl-C becomes one item of [`Interrupts::recv`], and the chat decides whether it
//! stops a generation or quits.
//!
//! The platform listeners behind `tokio::signal::ctrl_c` are used directly so that the handler
//! is in place when `install` returns (`ctrl_c()` installs it only when first polled) and one
//! listener sees every press (a `ctrl_c()` per press could miss one between two calls).

use tokio::sync::mpsc;

/// The Ctrl-C presses not yet handled.
#[derive(Debug)]
pub struct Interrupts {
    rx: mpsc::UnboundedReceiver<()>,
}

impl Interrupts {
    /// Starts listening for Ctrl-C. Must be called inside a tokio runtime.
    ///
    /// If the handler cannot be installed, a warning is logged and Ctrl-C keeps its default
    /// behaviour (the process ends).
    pub fn install() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        match CtrlC::new() {
            Ok(mut ctrl_c) => {
                tokio::spawn(async move {
                    while ctrl_c.recv().await.is_some() {
                        if tx.send(()).is_err() {
                            return;
                        }
                    }
                });
            }
            Err(error) => tracing::warn!(%error, "cannot listen for Ctrl-C"),
        }
        Self { rx }
    }

    /// Waits for the next Ctrl-C; `None` if interrupts can no longer be observed.
    pub async fn recv(&mut self) -> Option<()> {
        self.rx.recv().await
    }

    /// Forgets presses already received (e.g. extra ones during a generation that was stopped).
    pub fn clear(&mut self) {
        while self.rx.try_recv().is_ok() {}
    }
}

/// The platform's Ctrl-C listener.
#[cfg(unix)]
struct CtrlC(tokio::signal::unix::Signal);

#[cfg(unix)]
impl CtrlC {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        signal(SignalKind::interrupt()).map(Self)
    }

    async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

/// The platform's Ctrl-C listener.
#[cfg(windows)]
struct CtrlC(tokio::signal::windows::CtrlC);

#[cfg(windows)]
impl CtrlC {
    fn new() -> std::io::Result<Self> {
        tokio::signal::windows::ctrl_c().map(Self)
    }

    async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}
