//! `Far`: an `AsyncKeyedRateLimiter` that really awaits. Each decision sleeps `latency` on
//! tokio's timer (the round trip), then goes over a channel to a task that holds a `Keyed`
//! limiter and answers on a oneshot; while `down`, that task answers an error instead (a
//! server that is up but failing), and once the task is gone (`Far::stop`) the channel
//! fails (a server that is gone).

use http::HeaderValue;
use limitcore::clock::ManualClock;
use limitcore::rules::GcraRule;
use limitcore::{AsyncKeyedRateLimiter, Decision, Keyed, KeyedRateLimiter, Quota};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The limit the task holds, keyed by a header's value (`HeaderKey`'s key type).
pub type Held = Keyed<HeaderValue, GcraRule, ManualClock>;

type Ask = (
    HeaderValue,
    u32,
    oneshot::Sender<Result<Decision, FarError>>,
);

/// Why `Far` could not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FarError {
    /// The task answered that it is failing.
    Down,
    /// The task is gone.
    Gone,
}

impl fmt::Display for FarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FarError::Down => "the limiter's server is failing",
            FarError::Gone => "the limiter's server is gone",
        })
    }
}

impl std::error::Error for FarError {}

/// A remote limiter: see the module's docs.
pub struct Far {
    asks: std::sync::Mutex<Option<mpsc::UnboundedSender<Ask>>>,
    quota: Quota,
    latency: Duration,
    down: Arc<AtomicBool>,
    /// Decisions the task made (errors included).
    pub answered: Arc<AtomicU64>,
}

impl Far {
    /// A task holding `limit` (spawned on the current runtime), each decision `latency` away.
    pub fn spawn(limit: Held, latency: Duration) -> Far {
        let (tx, mut rx) = mpsc::unbounded_channel::<Ask>();
        let down = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let quota = limit.quota_for(&HeaderValue::from_static(""));
        let (task_down, task_answered) = (Arc::clone(&down), Arc::clone(&answered));
        tokio::spawn(async move {
            while let Some((key, n, reply)) = rx.recv().await {
                let answer = if task_down.load(Ordering::SeqCst) {
                    Err(FarError::Down)
                } else {
                    Ok(limit.decide_n(&key, n))
                };
                task_answered.fetch_add(1, Ordering::SeqCst);
                let _ = reply.send(answer);
            }
        });
        Far {
            asks: std::sync::Mutex::new(Some(tx)),
            quota,
            latency,
            down,
            answered,
        }
    }

    /// Makes the task answer errors (`true`) or decide again (`false`).
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Ends the task: every later decision fails with [`FarError::Gone`].
    pub fn stop(&self) {
        self.asks.lock().unwrap().take();
    }
}

impl AsyncKeyedRateLimiter<HeaderValue> for Far {
    type Error = FarError;

    async fn decide_async<'a>(
        &'a self,
        key: &'a HeaderValue,
        n: u32,
    ) -> Result<Decision, FarError> {
        tokio::time::sleep(self.latency).await;
        let (reply, answer) = oneshot::channel();
        let sent = match self.asks.lock().unwrap().as_ref() {
            Some(asks) => asks.send((key.clone(), n, reply)).is_ok(),
            None => false,
        };
        if !sent {
            return Err(FarError::Gone);
        }
        answer.await.unwrap_or(Err(FarError::Gone))
    }

    fn quota_for_key(&self, _key: &HeaderValue) -> Quota {
        self.quota
    }
}
