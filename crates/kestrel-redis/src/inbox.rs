//! Instance inboxes on Redis: [`ControlBus`] for [`RedisPubSub`], one stream per instance,
//! read from its end like a topic's subscription.

use futures::stream::BoxStream;
use kestrel_core::cluster::{ControlBus, ControlMessage};
use kestrel_core::pubsub::PubSubError;

use crate::pubsub::RedisPubSub;

impl RedisPubSub {
    /// The stream of an instance's inbox.
    pub fn inbox_key(&self, instance: &str) -> String {
        format!("{}inbox:{instance}", self.key_prefix())
    }
}

/// The stream field that holds a control message's JSON.
const MESSAGE_FIELD: &str = "message";

/// The entries an inbox keeps (about), and how long it lives after its last message (an
/// instance that went away leaves its inbox behind that long).
const INBOX_MAX_LEN: usize = 1_000;
const INBOX_TTL_MS: u64 = 60 * 60 * 1000;

#[async_trait::async_trait]
impl ControlBus for RedisPubSub {
    async fn send(&self, instance: &str, message: &ControlMessage) -> Result<(), PubSubError> {
        let key = self.inbox_key(instance);
        let json = serde_json::to_string(message).map_err(|e| Self::error(&key, e))?;
        let mut pipe = redis::pipe();
        pipe.cmd("XADD")
            .arg(&key)
            .arg("MAXLEN")
            .arg("~")
            .arg(INBOX_MAX_LEN)
            .arg("*")
            .arg(MESSAGE_FIELD)
            .arg(json)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(INBOX_TTL_MS)
            .ignore();
        self.publisher()
            .run(|mut connection| {
                let pipe = &pipe;
                async move { pipe.query_async::<()>(&mut connection).await }
            })
            .await
            .map_err(|e| Self::error(&key, e))
    }

    async fn inbox(
        &self,
        instance: &str,
    ) -> Result<BoxStream<'static, ControlMessage>, PubSubError> {
        let key = self.inbox_key(instance);
        let queue = self
            .read_from_end::<ControlMessage>(&key, key.clone(), MESSAGE_FIELD)
            .await?;
        Ok(Box::pin(queue))
    }
}
