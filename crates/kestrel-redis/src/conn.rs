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
