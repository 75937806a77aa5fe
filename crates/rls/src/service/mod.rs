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

use crate::backend::Backend;
use crate::config::Config;
use crate::protocol::{Request, RequestError, Response};
use rules::{Decide, Rules};

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
    rules: Box<dyn Decide>,
}

impl Service {
    /// A service on `backend` answering by `options`, with an empty configuration (every
    /// descriptor is answered `OK` until [`Service::apply`]).
    pub fn new<B: Backend>(backend: B, options: Options) -> Self {
        let rules = Box::new(Rules::new(backend, options.max_overrides));
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
        self.rules.apply(config)
    }

    /// Decide `request`.
    ///
    /// # Errors
    ///
    /// [`RequestError::InvalidArgument`] for an empty domain or descriptor list, a
    /// descriptor without entries, or a limit override with an unknown unit;
    /// [`RequestError::Unavailable`] when the backend cannot decide.
    pub async fn should_rate_limit(&self, request: &Request) -> Result<Response, RequestError> {
        self.rules.decide(request, &self.options).await
    }
}
