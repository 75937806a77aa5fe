//! One file's YAML into the configuration tree, with envoyproxy/ratelimit's validation.

use super::yaml::{self, Kind, Node as Yaml};
use super::{Config, ConfigError, Descriptors, Domain, Limit, Node, Rule, Settings, Unit};
use limitcore::Algorithm;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

/// Keys allowed at a file's top level.
const TOP_KEYS: &[&str] = &["domain", "descriptors", "algorithm", "burst"];
/// Keys allowed in a descriptor.
const DESCRIPTOR_KEYS: &[&str] = &[
    "key",
    "value",
    "rate_limit",
    "descriptors",
    "shadow_mode",
    "quota_mode",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];
/// Keys allowed in a `rate_limit`.
const RATE_LIMIT_KEYS: &[&str] = &[
    "unit",
    "requests_per_unit",
    "unlimited",
    "name",
    "replaces",
    "algorithm",
    "burst",
];
/// Keys allowed in a `replaces` entry.
const REPLACES_KEYS: &[&str] = &["name"];

/// What one file is read with: its path, the settings and its own defaults.
struct Ctx<'a> {
    file: &'a Path,
    /// The line a rule records for its `rate_limit` node's line (the same for a file; 0
    /// for a document that has no lines of its own, such as an xDS resource's).
    rule_line: &'a dyn Fn(usize) -> usize,
    domain: String,
    algorithm: Algorithm,
    burst: Option<u32>,
    /// Composite keys seen in this domain (this file and, when merging, earlier ones).
    seen: HashSet<String>,
    rules: Vec<Arc<Rule>>,
}

impl Ctx<'_> {
    fn err(&self, line: usize, key: Option<&str>, message: impl Into<String>) -> ConfigError {
        ConfigError::at(self.file, line, key, message)
    }
}

/// The pairs of a mapping node, each key checked to be a string among `allowed`.
fn pairs<'a>(
    file: &Path,
    node: &'a Yaml,
    allowed: &[&str],
    what: &str,
) -> Result<Vec<(&'a str, &'a Yaml, usize)>, ConfigError> {
    let Kind::Map(items) = &node.kind else {
        return Err(ConfigError::at(
            file,
            node.line,
            None,
            format!(
                "config error, {what} must be a mapping, found {}",
                node.describe()
            ),
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    let mut keys = HashSet::new();
    for (k, v) in items {
        if !k.is_string() {
            return Err(ConfigError::at(
                file,
                k.line,
                None,
                format!("config error, key is not of type string: {}", k.describe()),
            ));
        }
        let name = k.scalar().unwrap_or_default();
        if !allowed.contains(&name) {
            return Err(ConfigError::at(
                file,
                k.line,
                Some(name),
                format!("config error, unknown key '{name}'"),
            ));
        }
        if !keys.insert(name) {
            return Err(ConfigError::at(
                file,
                k.line,
                Some(name),
                format!("config error, key '{name}' given twice"),
            ));
        }
        out.push((name, v, k.line));
    }
    Ok(out)
}

/// A scalar value as text (numbers and booleans as written).
fn text(file: &Path, key: &str, node: &Yaml) -> Result<String, ConfigError> {
    match &node.kind {
        Kind::Scalar { .. } if node.is_null() => Ok(String::new()),
        Kind::Scalar { text, .. } => Ok(text.clone()),
        _ => Err(ConfigError::at(
            file,
            node.line,
            Some(key),
            format!(
                "config error, '{key}' must be a string, found {}",
                node.describe()
            ),
        )),
    }
}

/// A boolean value (YAML's `true`/`false`, and yaml.v2's `yes`/`no`/`on`/`off`).
fn boolean(file: &Path, key: &str, node: &Yaml) -> Result<bool, ConfigError> {
    match node.scalar().map(str::to_ascii_lowercase).as_deref() {
        Some("true" | "yes" | "on") => Ok(true),
        Some("false" | "no" | "off") => Ok(false),
        _ if node.is_null() => Ok(false),
        _ => Err(ConfigError::at(
            file,
            node.line,
            Some(key),
            format!(
                "config error, '{key}' must be true or false, found {}",
                node.describe()
            ),
        )),
    }
}

/// An unsigned 32-bit integer value at least `min`.
fn uint(file: &Path, key: &str, node: &Yaml, min: u32) -> Result<u32, ConfigError> {
    node.scalar()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|&n| n >= min)
        .ok_or_else(|| {
            ConfigError::at(
                file,
                node.line,
                Some(key),
                format!(
                    "config error, '{key}' must be an integer in {min}..={}, found {}",
                    u32::MAX,
                    node.describe()
                ),
            )
        })
}

/// An algorithm name (`leaky-bucket` refused: it admits only what can start at once, which
/// is not a rate-limit service's question).
fn algorithm(file: &Path, node: &Yaml) -> Result<Algorithm, ConfigError> {
    let name = text(file, "algorithm", node)?;
    match name.parse::<Algorithm>() {
        Ok(Algorithm::LeakyBucket) | Err(_) => Err(ConfigError::at(
            file,
            node.line,
            Some("algorithm"),
            format!(
                "config error, unknown algorithm {name:?}; expected one of fixed-window, gcra, token-bucket, sliding-window, sliding-log"
            ),
        )),
        Ok(a) => Ok(a),
    }
}

/// A YAML node as JSON (for `metadata`): scalars as strings, or numbers and booleans when
/// written plain.
fn json(node: &Yaml) -> serde_json::Value {
    use serde_json::Value;
    match &node.kind {
        Kind::Scalar { .. } if node.is_null() => Value::Null,
        Kind::Scalar { text, plain } => {
            if *plain {
                if let Ok(b) = boolean(Path::new(""), "", node) {
                    if matches!(text.as_str(), "true" | "false") {
                        return Value::Bool(b);
                    }
                }
                if let Ok(i) = text.parse::<i64>() {
                    return Value::from(i);
                }
                if let Ok(f) = text.parse::<f64>() {
                    if let Some(n) = serde_json::Number::from_f64(f) {
                        return Value::Number(n);
                    }
                }
            }
            Value::String(text.clone())
        }
        Kind::Seq(items) => Value::Array(items.iter().map(json).collect()),
        Kind::Map(items) => Value::Object(
            items
                .iter()
                .map(|(k, v)| (k.scalar().unwrap_or_default().to_owned(), json(v)))
                .collect(),
        ),
    }
}

/// Add one file to `config`.
pub(super) fn add_file(
    config: &mut Config,
    file: &Path,
    text_in: &str,
    settings: &Settings,
) -> Result<(), ConfigError> {
    let docs = yaml::parse(text_in).map_err(|e| {
        ConfigError::at(
            file,
            e.line,
            None,
            format!("error loading config file: {}", e.message),
        )
    })?;
    let Some(doc) = docs.first().filter(|d| !d.is_null()) else {
        return Err(ConfigError::at(
            file,
            0,
            Some("domain"),
            "config error, domain must not be empty",
        ));
    };
    add_document(config, file, doc, settings, &|line| line)
}

/// Add one document to `config`, `file` standing for where it came from in errors and
/// rules, `rule_line` giving the line a rule records for its node's. A file's first
/// document comes here, and so does an xDS resource made into the document a file with
/// its content would hold (`super::resource`): both are read and validated by the same
/// code.
pub(super) fn add_document(
    config: &mut Config,
    file: &Path,
    doc: &Yaml,
    settings: &Settings,
    rule_line: &dyn Fn(usize) -> usize,
) -> Result<(), ConfigError> {
    let top = pairs(file, doc, TOP_KEYS, "a configuration file")?;
    let mut domain = None;
    let mut descriptors = None;
    let mut file_algorithm = settings.algorithm;
    let mut file_burst = settings.burst;
    for (key, value, line) in &top {
        match *key {
            "domain" => domain = Some((text(file, key, value)?, *line)),
            "descriptors" => descriptors = Some(*value),
            "algorithm" => file_algorithm = algorithm(file, value)?,
            "burst" => file_burst = Some(uint(file, key, value, 1)?),
            _ => {}
        }
    }
    let (name, domain_line) = domain.unwrap_or_default();
    if name.is_empty() {
        return Err(ConfigError::at(
            file,
            domain_line.max(doc.line),
            Some("domain"),
            "config error, domain must not be empty",
        ));
    }
    if config.domains.contains_key(&name) && !settings.merge_domains {
        return Err(ConfigError::at(
            file,
            domain_line,
            Some("domain"),
            format!("duplicate domain '{name}' in config file (set merge_domains to merge it)"),
        ));
    }
    let seen = config
        .domains
        .get(&name)
        .map(|d| composite_keys(&d.descriptors, ""))
        .unwrap_or_default();
    let mut ctx = Ctx {
        file,
        rule_line,
        domain: name.clone(),
        algorithm: file_algorithm,
        burst: file_burst,
        seen,
        rules: Vec::new(),
    };
    let mut level = config
        .domains
        .get(&name)
        .map(|d| d.descriptors.clone())
        .unwrap_or_default();
    if let Some(list) = descriptors {
        read_level(&mut ctx, list, "", &mut level)?;
    }
    config.rules.append(&mut ctx.rules);
    config.domains.insert(
        name.clone(),
        Domain {
            name,
            descriptors: level,
        },
    );
    Ok(())
}

/// Every composite key (path) of a tree already loaded.
fn composite_keys(level: &Descriptors, prefix: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let nodes = level
        .exact
        .values()
        .flat_map(|m| m.values())
        .chain(level.wildcards.iter())
        .chain(level.defaults.values());
    for node in nodes {
        let path = join(prefix, &node.key, node.value.as_deref());
        out.extend(composite_keys(&node.children, &path));
        out.insert(path);
    }
    out
}

/// `prefix.key_value` (or `prefix.key`).
fn join(prefix: &str, key: &str, value: Option<&str>) -> String {
    let own = match value {
        Some(v) => format!("{key}_{v}"),
        None => key.to_owned(),
    };
    if prefix.is_empty() {
        own
    } else {
        format!("{prefix}.{own}")
    }
}

/// Read a `descriptors` list into `level`.
fn read_level(
    ctx: &mut Ctx<'_>,
    list: &Yaml,
    prefix: &str,
    level: &mut Descriptors,
) -> Result<(), ConfigError> {
    if list.is_null() {
        return Ok(());
    }
    let Kind::Seq(items) = &list.kind else {
        return Err(ctx.err(
            list.line,
            Some("descriptors"),
            format!(
                "config error, 'descriptors' must be a list, found {}",
                list.describe()
            ),
        ));
    };
    for item in items {
        let node = read_descriptor(ctx, item, prefix)?;
        let node = Arc::new(node);
        match &node.value {
            None => {
                level.defaults.insert(node.key.clone(), node);
            }
            Some(v) if v.contains('*') => level.wildcards.push(node),
            Some(v) => {
                level
                    .exact
                    .entry(node.key.clone())
                    .or_default()
                    .insert(v.clone(), node);
            }
        }
    }
    Ok(())
}

/// Read one descriptor (and its subtree).
fn read_descriptor(ctx: &mut Ctx<'_>, item: &Yaml, prefix: &str) -> Result<Node, ConfigError> {
    let fields = pairs(ctx.file, item, DESCRIPTOR_KEYS, "a descriptor")?;
    let mut key = None;
    let mut value = None;
    let mut rate_limit = None;
    let mut children = None;
    let (mut shadow, mut quota, mut detailed, mut to_metric, mut share) =
        (false, false, false, false, false);
    let mut metadata = None;
    for (name, node, line) in &fields {
        match *name {
            "key" => key = Some((text(ctx.file, name, node)?, *line)),
            "value" => value = Some(text(ctx.file, name, node)?).filter(|v| !v.is_empty()),
            "rate_limit" => rate_limit = Some((*node, *line)),
            "descriptors" => children = Some(*node),
            "shadow_mode" => shadow = boolean(ctx.file, name, node)?,
            "quota_mode" => quota = boolean(ctx.file, name, node)?,
            "detailed_metric" => detailed = boolean(ctx.file, name, node)?,
            "value_to_metric" => to_metric = boolean(ctx.file, name, node)?,
            "share_threshold" => share = boolean(ctx.file, name, node)?,
            "metadata" => metadata = Some(json(node)),
            _ => {}
        }
    }
    let (key, key_line) = key.unwrap_or((String::new(), item.line));
    if key.is_empty() {
        return Err(ctx.err(key_line, Some("key"), "descriptor has empty key"));
    }
    let path = join(prefix, &key, value.as_deref());
    if !ctx.seen.insert(path.clone()) {
        return Err(ctx.err(
            key_line,
            Some("key"),
            format!("duplicate descriptor composite key '{}.{path}'", ctx.domain),
        ));
    }
    let rule = match rate_limit {
        Some((node, line)) => {
            let rule = read_rule(ctx, node, line, &path, shadow, quota, detailed, metadata)?;
            let rule = Arc::new(rule);
            ctx.rules.push(Arc::clone(&rule));
            Some(rule)
        }
        None => None,
    };
    let mut level = Descriptors::default();
    if let Some(list) = children {
        read_level(ctx, list, &path, &mut level)?;
    }
    Ok(Node {
        key,
        value,
        rule,
        value_to_metric: to_metric,
        share_threshold: share,
        children: level,
    })
}

/// Read a `rate_limit` block.
#[allow(clippy::too_many_arguments)]
fn read_rule(
    ctx: &Ctx<'_>,
    node: &Yaml,
    line: usize,
    path: &str,
    shadow_mode: bool,
    quota_mode: bool,
    detailed_metric: bool,
    metadata: Option<serde_json::Value>,
) -> Result<Rule, ConfigError> {
    let fields = pairs(ctx.file, node, RATE_LIMIT_KEYS, "a rate_limit")?;
    let file = ctx.file;
    let mut unit = None;
    let mut rpu = 0;
    let mut unlimited = false;
    let mut name = None;
    let mut replaces = Vec::new();
    let mut algo = ctx.algorithm;
    let mut burst = None;
    for (key, value, key_line) in &fields {
        match *key {
            "unit" => {
                let text = text(file, key, value)?;
                let parsed = text
                    .parse::<Unit>()
                    .map_err(|e| ctx.err(value.line, Some("unit"), e))?;
                unit = Some((parsed, *key_line));
            }
            "requests_per_unit" => rpu = uint(file, key, value, 0)?,
            "unlimited" => unlimited = boolean(file, key, value)?,
            "name" => name = Some(text(file, key, value)?).filter(|n| !n.is_empty()),
            "replaces" => replaces = read_replaces(ctx, value)?,
            "algorithm" => algo = algorithm(file, value)?,
            "burst" => burst = Some(uint(file, key, value, 1)?),
            _ => {}
        }
    }
    if let Some(own) = &name {
        if let Some(line) = replaces.iter().find(|(r, _)| r == own).map(|(_, l)| *l) {
            return Err(ctx.err(
                line,
                Some("replaces"),
                "replaces should not contain name of same descriptor",
            ));
        }
    }
    let limit = if unlimited {
        if let Some((_, unit_line)) = unit {
            return Err(ctx.err(
                unit_line,
                Some("unit"),
                "should not specify rate limit unit when unlimited",
            ));
        }
        None
    } else {
        let Some((unit, _)) = unit else {
            return Err(ctx.err(
                line,
                Some("unit"),
                "invalid rate limit unit \"\": a rate_limit needs a unit (or unlimited: true)",
            ));
        };
        // A default burst (the file's, the service's) is for the algorithms that have one.
        let burst = burst.or(match algo {
            Algorithm::Gcra | Algorithm::TokenBucket => ctx.burst,
            _ => None,
        });
        let limit = Limit::new(rpu, unit, algo, burst);
        if rpu > 0 {
            limit.quota().map_err(|e| {
                ctx.err(
                    line,
                    Some("rate_limit"),
                    format!("invalid limit for {algo}: {e}"),
                )
            })?;
        }
        Some(limit)
    };
    Ok(Rule {
        domain: ctx.domain.clone(),
        path: path.to_owned(),
        name,
        limit,
        replaces: replaces.into_iter().map(|(r, _)| r).collect(),
        shadow_mode,
        quota_mode,
        detailed_metric,
        metadata,
        file: file.to_owned(),
        line: (ctx.rule_line)(line),
    })
}

/// Read a `replaces` list: names with their lines.
fn read_replaces(ctx: &Ctx<'_>, list: &Yaml) -> Result<Vec<(String, usize)>, ConfigError> {
    let Kind::Seq(items) = &list.kind else {
        if list.is_null() {
            return Ok(Vec::new());
        }
        return Err(ctx.err(
            list.line,
            Some("replaces"),
            "config error, 'replaces' must be a list",
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let fields = pairs(ctx.file, item, REPLACES_KEYS, "a replaces entry")?;
        let name = match fields.first() {
            Some((_, v, _)) => text(ctx.file, "name", v)?,
            None => String::new(),
        };
        if name.is_empty() {
            return Err(ctx.err(
                item.line,
                Some("replaces"),
                "should not have an empty replaces entry",
            ));
        }
        out.push((name, item.line));
    }
    Ok(out)
}
