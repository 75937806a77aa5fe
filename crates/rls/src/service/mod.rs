//! [`Service`]: a `ShouldRateLimit` request in, its response out. The request is planned
//! ([`plan`]: checked, its descriptors matched to their rules, `replaces` applied), decided
//! on the backend's rule states ([`rules`]), and answered ([`respond`]: statuses, shadow
//! and quota modes, headers, the refusal's body, dynamic metadata), by [`Options`].

mod options;
mod plan;
mod respond;
mod rules;

pub use options::{HeaderNames, Options};
pub use rules::ApplyError;

use crate::backend::memory::Memory;
use crate::backend::Backend;
use crate::config::Config;
use crate::protocol::{Request, RequestError, Response};
use rules::{Decide, Rules};
use std::any::Any;

/// The rate-limit service: a configuration, a backend and the answering options. The
/// crate's docs have an example.
///
/// # Examples
///
/// ```
/// use limitcore_rls::{Config, Memory, Options, Service, Settings, UnixClock};
///
/// let service = Service::new(Memory::new(UnixClock::shared(), 1000), Options::default());
/// service.apply(Config::from_str_named("a.yaml", "domain: a\ndescriptors: []\n", &Settings::default())?)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Service {
    options: Options,
    rules: Decider,
}

/// The rules' states on the service's backend: the in-process backend's by their type, so
/// that its decision, which never waits, is one future with the service's (no future boxed
/// and called through a vtable per request: 315 instructions and one allocation a request
/// fewer, measured on examples/decide.rs); any other backend's behind [`Decide`], whose
/// box is nothing beside a Redis round trip.
#[derive(Debug)]
enum Decider {
    Memory(Box<Rules<Memory>>),
    Any(Box<dyn Decide>),
}

impl Service {
    /// A service on `backend` answering by `options`, with an empty configuration (every
    /// descriptor is answered `OK` until [`Service::apply`]).
    pub fn new<B: Backend>(backend: B, options: Options) -> Self {
        let max = options.max_overrides;
        let rules = match (Box::new(backend) as Box<dyn Any>).downcast::<Memory>() {
            Ok(memory) => Decider::Memory(Box::new(Rules::new(*memory, max))),
            Err(backend) => match backend.downcast::<B>() {
                Ok(backend) => Decider::Any(Box::new(Rules::new(*backend, max))),
                Err(_) => unreachable!("a backend is its own type"),
            },
        };
        Service { options, rules }
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Put `config` in force for the next request. A rule whose domain, path and limit are
    /// unchanged keeps its state; one whose limit changed carries each key's usage over (in
    /// process) or keeps its Redis keys (exact); a new rule starts fresh.
    ///
    /// # Errors
    ///
    /// [`ApplyError`] if the backend cannot run a rule (a window algorithm
    /// leased, a rate Redis cannot represent); the configuration in force
    /// is kept then.
    pub fn apply(&self, config: Config) -> Result<(), ApplyError> {
        match &self.rules {
            Decider::Memory(rules) => rules.apply(config),
            Decider::Any(rules) => rules.apply(config),
        }
    }

    /// Decide `request`.
    ///
    /// # Errors
    ///
    /// [`RequestError::InvalidArgument`] for an empty domain or descriptor list, a
    /// descriptor without entries, or a limit override with an unknown unit;
    /// [`RequestError::Unavailable`] when the backend cannot decide.
    pub async fn should_rate_limit(&self, request: &Request) -> Result<Response, RequestError> {
        match &self.rules {
            Decider::Memory(rules) => rules.decide_request(request, &self.options).await,
            Decider::Any(rules) => rules.decide(request, &self.options).await,
        }
    }
}
