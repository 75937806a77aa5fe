//! envoyproxy/ratelimit's xDS resources (`RateLimitConfig` messages) into the
//! configuration. Each message is made into the document a configuration file with the
//! same content would hold, and that document is read by the file reader (`parse`): the
//! same model, the same validation, the same error messages. A proto has no lines, so
//! each node of the document is numbered instead, and an error's number is turned back
//! into the field path it stands for (`descriptors[0].rate_limit.unit`).
//!
//! The mapping is envoyproxy/ratelimit's own (`src/config/config_xds.go`, reading its
//! `ConfigXdsProtoToYaml`): `domain` and `descriptors` at the top; per descriptor `key`,
//! `value` (empty: none), `rate_limit`, the nested `descriptors`, `shadow_mode`,
//! `detailed_metric`, `quota_mode`, `metadata`; per policy `unit` (by name; `UNKNOWN`, the
//! unset value, is no unit), `requests_per_unit`, `unlimited`, `name` (empty: none),
//! `replaces`. A resource has no `algorithm` or `burst`: its rules take the service's
//! (the [`Settings`]).

use super::parse::add_document;
use super::yaml::{Kind, Node as Yaml};
use super::{Config, ConfigError, Settings, Unit};
use crate::pb::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy,
};
use envoy_types::pb::google::protobuf::{value, Struct, Value};
use std::path::{Path, PathBuf};

/// The document being built, and the field path of each node number given so far.
#[derive(Default)]
struct Document {
    /// `paths[n - 1]` is the field path of the nodes numbered `n` (0 is no node).
    paths: Vec<String>,
}

impl Document {
    /// A new node number, standing for `path`.
    fn number(&mut self, path: String) -> usize {
        self.paths.push(path);
        self.paths.len()
    }

    /// A string scalar (quoted: `"true"` and `"10"` stay strings, as in a file).
    fn string(text: &str, line: usize) -> Yaml {
        Yaml {
            kind: Kind::Scalar {
                text: text.to_owned(),
                plain: false,
            },
            line,
        }
    }

    /// A plain scalar: a number, a boolean or null, as written in a file.
    fn plain(text: String, line: usize) -> Yaml {
        Yaml {
            kind: Kind::Scalar { text, plain: true },
            line,
        }
    }

    /// A mapping entry `key: value` for the field `key` under `prefix`, both numbered as
    /// the field (an error about either names the field).
    fn field(
        &mut self,
        pairs: &mut Vec<(Yaml, Yaml)>,
        prefix: &str,
        key: &str,
        value: impl FnOnce(&mut Self, &str, usize) -> Yaml,
    ) {
        let path = if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        };
        let line = self.number(path.clone());
        let value = value(self, &path, line);
        pairs.push((Document::string(key, line), value));
    }

    /// The top of a resource: `domain` and `descriptors`.
    fn config(&mut self, config: &RateLimitConfig) -> Yaml {
        let line = self.number(String::new());
        let mut pairs = Vec::new();
        self.field(&mut pairs, "", "domain", |_, _, l| {
            Document::string(&config.domain, l)
        });
        self.field(&mut pairs, "", "descriptors", |d, path, l| {
            d.descriptors(&config.descriptors, path, l)
        });
        Yaml {
            kind: Kind::Map(pairs),
            line,
        }
    }

    /// A `descriptors` list at `path`.
    fn descriptors(&mut self, list: &[RateLimitDescriptor], path: &str, line: usize) -> Yaml {
        let items = list
            .iter()
            .enumerate()
            .map(|(i, d)| self.descriptor(d, &format!("{path}[{i}]")))
            .collect();
        Yaml {
            kind: Kind::Seq(items),
            line,
        }
    }

    /// One descriptor at `path`; fields at their default (empty, false, unset) are left
    /// out, as a file that does not set them.
    fn descriptor(&mut self, d: &RateLimitDescriptor, path: &str) -> Yaml {
        let line = self.number(path.to_owned());
        let mut pairs = Vec::new();
        self.field(&mut pairs, path, "key", |_, _, l| {
            Document::string(&d.key, l)
        });
        if !d.value.is_empty() {
            self.field(&mut pairs, path, "value", |_, _, l| {
                Document::string(&d.value, l)
            });
        }
        if let Some(policy) = &d.rate_limit {
            self.field(&mut pairs, path, "rate_limit", |doc, p, l| {
                doc.policy(policy, p, l)
            });
        }
        if !d.descriptors.is_empty() {
            self.field(&mut pairs, path, "descriptors", |doc, p, l| {
                doc.descriptors(&d.descriptors, p, l)
            });
        }
        for (key, set) in [
            ("shadow_mode", d.shadow_mode),
            ("detailed_metric", d.detailed_metric),
            ("quota_mode", d.quota_mode),
        ] {
            if set {
                self.field(&mut pairs, path, key, |_, _, l| {
                    Document::plain("true".into(), l)
                });
            }
        }
        if let Some(metadata) = &d.metadata {
            self.field(&mut pairs, path, "metadata", |_, _, l| {
                Document::structure(metadata, l)
            });
        }
        Yaml {
            kind: Kind::Map(pairs),
            line,
        }
    }

    /// A `rate_limit` at `path`.
    fn policy(&mut self, p: &RateLimitPolicy, path: &str, line: usize) -> Yaml {
        let mut pairs = Vec::new();
        // UNKNOWN (0) is the unset value: no unit, as a file without one. A number no unit
        // has is written as the number, which the reader refuses naming it.
        if p.unit != 0 {
            let unit = match Unit::from_proto(p.unit) {
                Some(u) => u.name().to_owned(),
                None => p.unit.to_string(),
            };
            self.field(&mut pairs, path, "unit", |_, _, l| {
                Document::string(&unit, l)
            });
        }
        self.field(&mut pairs, path, "requests_per_unit", |_, _, l| {
            Document::plain(p.requests_per_unit.to_string(), l)
        });
        if p.unlimited {
            self.field(&mut pairs, path, "unlimited", |_, _, l| {
                Document::plain("true".into(), l)
            });
        }
        if !p.name.is_empty() {
            self.field(&mut pairs, path, "name", |_, _, l| {
                Document::string(&p.name, l)
            });
        }
        if !p.replaces.is_empty() {
            self.field(&mut pairs, path, "replaces", |doc, list_path, l| {
                let items = p
                    .replaces
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let item_path = format!("{list_path}[{i}]");
                        let item_line = doc.number(item_path.clone());
                        let mut entry = Vec::new();
                        doc.field(&mut entry, &item_path, "name", |_, _, nl| {
                            Document::string(&r.name, nl)
                        });
                        Yaml {
                            kind: Kind::Map(entry),
                            line: item_line,
                        }
                    })
                    .collect();
                Yaml {
                    kind: Kind::Seq(items),
                    line: l,
                }
            });
        }
        Yaml {
            kind: Kind::Map(pairs),
            line,
        }
    }

    /// A `google.protobuf.Struct` (a descriptor's `metadata`) as a mapping, numbered as the
    /// field it is the value of (it is echoed, never validated).
    fn structure(s: &Struct, line: usize) -> Yaml {
        // Keys in order, so that the same resource makes the same document.
        let mut keys: Vec<&String> = s.fields.keys().collect();
        keys.sort();
        let pairs = keys
            .into_iter()
            .map(|k| {
                (
                    Document::string(k, line),
                    Document::value(&s.fields[k], line),
                )
            })
            .collect();
        Yaml {
            kind: Kind::Map(pairs),
            line,
        }
    }

    /// A `google.protobuf.Value`: numbers, booleans and null plain, as JSON has them.
    fn value(v: &Value, line: usize) -> Yaml {
        match &v.kind {
            None | Some(value::Kind::NullValue(_)) => Document::plain("null".into(), line),
            Some(value::Kind::BoolValue(b)) => Document::plain(b.to_string(), line),
            Some(value::Kind::NumberValue(n)) => {
                // An integer (what JSON's numbers mostly are) written as one; any other
                // number as Rust writes it, which the reader reads back unchanged.
                let text = if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    format!("{}", *n as i64)
                } else {
                    n.to_string()
                };
                Document::plain(text, line)
            }
            Some(value::Kind::StringValue(s)) => Document::string(s, line),
            Some(value::Kind::StructValue(s)) => Document::structure(s, line),
            Some(value::Kind::ListValue(l)) => Yaml {
                kind: Kind::Seq(l.values.iter().map(|v| Document::value(v, line)).collect()),
                line,
            },
        }
    }

    /// `e`, which names a node number as its line, named by the field path instead: the
    /// resource as its file, no line, the path (ending with the key) as its key.
    fn locate(&self, e: ConfigError) -> ConfigError {
        let path = e
            .line
            .checked_sub(1)
            .and_then(|i| self.paths.get(i))
            .filter(|p| !p.is_empty());
        // The key is the path's last field, or one the path runs through (an entry of a
        // `replaces` list); otherwise it is a field below the path's end (a missing unit).
        let named = |p: &str, k: &str| {
            p.split('.')
                .any(|segment| segment.split('[').next() == Some(k))
        };
        let key = match (path, e.key) {
            (Some(p), Some(k)) if !named(p, &k) => Some(format!("{p}.{k}")),
            (Some(p), _) => Some(p.clone()),
            (None, k) => k,
        };
        ConfigError {
            file: e.file,
            line: 0,
            key,
            message: e.message,
        }
    }
}

/// The name a resource is known by in errors and rules: its `name`, else its position.
fn resource_name(config: &RateLimitConfig, index: usize) -> PathBuf {
    if config.name.is_empty() {
        PathBuf::from(format!("resource {index}"))
    } else {
        PathBuf::from(&config.name)
    }
}

impl Config {
    /// The configuration of a set of xDS `RateLimitConfig` resources, in order: each read
    /// as a configuration file with its content would be, its name standing for the file
    /// (its position, `resource 0`, when it has none), under `settings` (a domain in two
    /// resources is refused unless [`Settings::merge_domains`]). A rule's `line` is 0.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for the first problem found, with the file's message; its `file`
    /// is the resource's name, its `line` 0 and its `key` the field path
    /// (`descriptors[0].rate_limit.unit`).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_rls::pb::ratelimit::config::ratelimit::v3::{
    ///     RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
    /// };
    /// use limitcore_rls::{Config, Settings};
    ///
    /// let mut resource = RateLimitConfig {
    ///     name: "edge-rules".into(),
    ///     domain: "edge".into(),
    ///     descriptors: vec![RateLimitDescriptor {
    ///         key: "user".into(),
    ///         rate_limit: Some(RateLimitPolicy {
    ///             unit: RateLimitUnit::Minute as i32,
    ///             requests_per_unit: 5,
    ///             ..Default::default()
    ///         }),
    ///         ..Default::default()
    ///     }],
    /// };
    /// let config = Config::from_resources(&[resource.clone()], &Settings::default())?;
    /// assert_eq!(config.rules()[0].path, "user");
    ///
    /// resource.descriptors[0].rate_limit.as_mut().unwrap().unit = RateLimitUnit::Unknown as i32;
    /// let err = Config::from_resources(&[resource], &Settings::default()).unwrap_err();
    /// assert_eq!(err.key.as_deref(), Some("descriptors[0].rate_limit.unit"));
    /// assert!(err.to_string().starts_with("edge-rules: descriptors[0].rate_limit.unit: invalid rate limit unit"));
    /// # Ok::<(), limitcore_rls::ConfigError>(())
    /// ```
    pub fn from_resources(
        resources: &[RateLimitConfig],
        settings: &Settings,
    ) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for (index, resource) in resources.iter().enumerate() {
            let mut document = Document::default();
            let doc = document.config(resource);
            let name = resource_name(resource, index);
            add_document(&mut config, Path::new(&name), &doc, settings, &|_| 0)
                .map_err(|e| document.locate(e))?;
        }
        Ok(config)
    }
}
