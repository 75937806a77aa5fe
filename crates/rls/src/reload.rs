//! [`Reloader`]: the configuration directory watched, a good change applied to the next
//! request, a bad one refused with its reason while the configuration in force stays.

use crate::config::{read_dir, Config, ConfigStatus, Settings, SourceKind};
use crate::service::Service;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Loads the configuration directory into a [`Service`], now and whenever its files change
/// (polled: a Kubernetes ConfigMap's symbolic-link swap is seen like an edit).
///
/// # Examples
///
/// ```
/// use limitcore_rls::{Memory, Options, Reloader, Service, Settings, UnixClock};
/// use std::sync::Arc;
///
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("a.yaml"), "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")?;
/// let service = Arc::new(Service::new(Memory::new(UnixClock::shared(), 100), Options::default()));
/// let reloader = Reloader::new(dir.path().into(), Settings::default(), Arc::clone(&service));
/// assert_eq!(reloader.reload(), Ok(true));   // loaded
/// assert_eq!(reloader.reload(), Ok(false));  // unchanged
/// std::fs::write(dir.path().join("a.yaml"), "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n")?;
/// assert!(reloader.reload().unwrap_err().contains("invalid rate limit unit"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Reloader {
    dir: PathBuf,
    settings: Settings,
    service: Arc<Service>,
    /// The files last seen (applied, or refused: a refused set is not tried again until it
    /// changes).
    seen: Mutex<Option<Vec<(PathBuf, String)>>>,
    /// Why the last change was refused, while it is.
    error: Mutex<Option<String>>,
    /// The version in force and the refusals, for `/json` and `/metrics`.
    status: Arc<ConfigStatus>,
}

impl Reloader {
    /// A reloader of `dir` into `service`.
    pub fn new(dir: PathBuf, settings: Settings, service: Arc<Service>) -> Self {
        Reloader {
            status: Arc::new(ConfigStatus::new(
                SourceKind::Files,
                dir.display().to_string(),
            )),
            dir,
            settings,
            service,
            seen: Mutex::new(None),
            error: Mutex::new(None),
        }
    }

    /// Load the directory if its files changed since the last look: `Ok(true)` if a new
    /// configuration is in force, `Ok(false)` if nothing changed.
    ///
    /// # Errors
    ///
    /// Why the changed files were refused (file, line and key); the configuration in force
    /// is kept.
    pub fn reload(&self) -> Result<bool, String> {
        let files = read_dir(&self.dir).map_err(|e| e.to_string());
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let files = match files {
            Ok(f) => f,
            Err(e) => return Err(self.refuse(None, e)),
        };
        if seen.as_ref() == Some(&files) {
            return match self.last_error() {
                Some(e) => Err(e),
                None => Ok(false),
            };
        }
        *seen = Some(files.clone());
        let version = version(&files);
        let config = match Config::from_files(&files, &self.settings) {
            Ok(c) => c,
            Err(e) => return Err(self.refuse(Some(&version), e.to_string())),
        };
        if let Err(e) = self.service.apply(config) {
            return Err(self.refuse(Some(&version), e.to_string()));
        }
        *self.error.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.status.accepted(&version);
        Ok(true)
    }

    fn refuse(&self, version: Option<&str>, why: String) -> String {
        *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
        self.status.rejected(version, &why);
        why
    }

    /// The version in force (a digest of the files' names and contents) and the
    /// refusals, as `/json` and `/metrics` report them.
    pub fn status(&self) -> &Arc<ConfigStatus> {
        &self.status
    }

    /// Why the files on disk are refused, if they are (the configuration in force is then
    /// an earlier one).
    pub fn last_error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reload every `every` until `stop` turns true, logging each outcome to stderr.
    pub async fn watch(
        self: Arc<Self>,
        every: Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut reported = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.changed() => return,
            }
            let me = Arc::clone(&self);
            let outcome = tokio::task::spawn_blocking(move || me.reload()).await;
            match outcome {
                Ok(Ok(true)) => {
                    eprintln!(
                        "limitcore-rls: configuration reloaded from {}",
                        self.dir.display()
                    );
                    reported = None;
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    if reported.as_ref() != Some(&e) {
                        eprintln!("limitcore-rls: configuration refused, the previous one stays in force: {e}");
                        reported = Some(e);
                    }
                }
                Err(e) => eprintln!("limitcore-rls: reload task failed: {e}"),
            }
        }
    }
}

/// The version of a set of files: the first 12 hex digits of the SHA-1 of their names and
/// contents, each length-prefixed (so that no two sets read the same), the same for the
/// same files on any node and after a restart.
fn version(files: &[(PathBuf, String)]) -> String {
    let mut digest = sha1_smol::Sha1::new();
    for (path, text) in files {
        let name = path.file_name().map_or(path.as_path(), Path::new);
        let name = name.to_string_lossy();
        for part in [name.as_bytes(), text.as_bytes()] {
            digest.update(&(part.len() as u64).to_le_bytes());
            digest.update(part);
        }
    }
    let mut hex = digest.digest().to_string();
    hex.truncate(12);
    hex
}
