//! Connecting to Redis: the client, a shared connection that reconnects by itself, and the
//! errors of connecting.

use std::time::Duration;

use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// Why connecting to Redis failed.
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    /// The URL is not a Redis URL.
    #[error("{url:?} is not a Redis URL: {source}")]
    Url {
        /// The URL as given.
        url: String,
        /// What the client said.
        #[source]
        source: redis::RedisError,
    },
    /// Redis could not be reached.
    #[error("could not connect to Redis at {url:?}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// What the client said.
        #[source]
        source: redis::RedisError,
    },
    /// An option is out of its range.
    #[error("invalid Redis pub/sub option {option}: {reason}")]
    Option {
        /// The option's name.
        option: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The URL without its password, for logs and errors.
pub(crate) fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// A client for `url` and a shared connection to it, or why Redis cannot be reached now.
pub(crate) async fn connect(url: &str) -> Result<(Client, ConnectionManager), RedisError> {
    let shown = redacted(url);
    let client = Client::open(url).map_err(|source| RedisError::Url {
        url: shown.clone(),
        source,
    })?;
    // Few, short retries: while Redis is away a command fails soon, with the error, instead
    // of holding up the run that sent it; the next one reconnects.
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500));
    let manager = ConnectionManager::new_with_config(client.clone(), config)
        .await
        .map_err(|source| RedisError::Connect { url: shown, source })?;
    Ok((client, manager))
}

/// Runs `op` (a command on a shared connection) again, up to twice, when the connection
/// broke under it: the first command after Redis restarted finds the old socket dead, and the
/// connection manager only reconnects once that command failed. A command that Redis ran
/// but whose answer was lost may so run twice; the commands retried here are idempotent or
/// tolerate it (lease scripts, an event appended twice in that rare case).
pub(crate) async fn retrying<T, F, Fut>(mut op: F) -> redis::RedisResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<T>>,
{
    let mut delay = Duration::from_millis(50);
    let mut attempt = 1;
    loop {
        match op().await {
            Err(e)
                if attempt < 3
                    && (e.is_io_error()
                        || e.is_connection_dropped()
                        || e.is_connection_refusal()) =>
            {
                tracing::debug!(error = %e, attempt, "a Redis command failed on a broken connection; retrying");
                tokio::time::sleep(delay).await;
                delay *= 5;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redacted("redis://user:secret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redacted("redis://host:6379"), "redis://host:6379");
    }
}
