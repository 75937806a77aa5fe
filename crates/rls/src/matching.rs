//! Which rule a request descriptor matches: envoyproxy/ratelimit's rules.
//!
//! For each entry of the descriptor in order, at the current level of the domain's tree:
//! the node of the entry's exact key and value; else the first wildcard node of the key
//! (in load order) whose value pattern matches (`*` anywhere stands for any run of
//! characters); else the key's default node (a node with no value). No node: the
//! descriptor matches no rule. The rule is the `rate_limit` of the node matched by the
//! **last** entry (a node higher up that has one does not apply to a longer descriptor,
//! and a descriptor longer than the tree matches nothing). A node with `unlimited: true`
//! matches and is never limited (a whitelist).
//!
//! The counter a match charges is named by the entries' values as the request gives them,
//! except at a wildcard node with `share_threshold`, where the pattern stands for every
//! value it matches (one shared counter).

use crate::config::{Descriptors, Domain, Node, Rule};
use std::sync::Arc;

/// What a descriptor matched: the rule, the counter's key and the metric label.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// The rule of the last entry's node.
    pub rule: Arc<Rule>,
    /// The counter's key within the rule: `key=value` per entry, `|`-separated, with `%`,
    /// `|` and `=` escaped (two different descriptors never share a key, except through
    /// `share_threshold`).
    pub counter: String,
    /// The metric label when the rule asks for runtime values (`detailed_metric`: the
    /// whole descriptor; `value_to_metric` on a level: that level's value), else `None`:
    /// the rule's own label.
    pub metric: Option<String>,
}

/// Whether `value` matches `pattern`, where each `*` stands for any run of characters
/// (possibly empty).
///
/// # Examples
///
/// ```
/// use limitcore_rls::matching::wildcard;
///
/// assert!(wildcard("foo*", "foobar"));
/// assert!(wildcard("*-api-*", "eu-api-7"));
/// assert!(!wildcard("foo*", "barfoo"));
/// assert!(wildcard("a*b*c", "abc"));
/// ```
pub fn wildcard(pattern: &str, value: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == value;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !value.starts_with(first) || value.len() < first.len() + last.len() || !value.ends_with(last)
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Escape the separators of a counter key.
fn escape(out: &mut String, s: &str) {
    // Most values have no separator: copied whole, not char by char (callgrind: 60
    // instructions a request on load.rs's `user=vN`, more on longer values).
    if !s.bytes().any(|b| matches!(b, b'%' | b'|' | b'=')) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '|' => out.push_str("%7C"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
}

/// The node `key`/`value` matches at `level`, and whether it was a wildcard's.
fn step<'a>(level: &'a Descriptors, key: &str, value: &str) -> Option<(&'a Arc<Node>, bool)> {
    if let Some(node) = level.exact.get(key).and_then(|m| m.get(value)) {
        return Some((node, false));
    }
    if let Some(node) = level
        .wildcards
        .iter()
        .find(|n| n.key == key && n.value.as_deref().is_some_and(|p| wildcard(p, value)))
    {
        return Some((node, true));
    }
    level.defaults.get(key).map(|n| (n, false))
}

/// Walk `entries` down `domain`'s tree, `visit`ing each entry's node (with whether a
/// wildcard matched it): the last entry's node, or `None` where an entry matches nothing.
fn walk<'c, K: AsRef<str>, V: AsRef<str>>(
    domain: &'c Domain,
    entries: &[(K, V)],
    mut visit: impl FnMut(usize, &str, &str, &'c Node, bool),
) -> Option<&'c Node> {
    let mut level = &domain.descriptors;
    let mut last = None;
    for (i, (key, value)) in entries.iter().enumerate() {
        let (key, value) = (key.as_ref(), value.as_ref());
        let (node, by_wildcard) = step(level, key, value)?;
        visit(i, key, value, node, by_wildcard);
        level = &node.children;
        last = Some(&**node);
    }
    last
}

/// What a descriptor matched, borrowed from the configuration: [`Matched`] without the
/// rule's reference count touched (the service's path: every worker's clone and drop of one
/// rule's `Arc` is a write to one shared cache line).
pub(crate) struct Found<'c> {
    pub(crate) rule: &'c Arc<Rule>,
    pub(crate) counter: String,
    pub(crate) metric: Option<String>,
}

/// [`find`], borrowing the rule: the tree is walked once to the last entry's node, and only
/// a match builds its counter key (one allocation, sized up front) and, when the rule asks
/// for runtime values, its metric label.
pub(crate) fn find_in<'c, K: AsRef<str>, V: AsRef<str>>(
    domain: &'c Domain,
    entries: &[(K, V)],
) -> Option<Found<'c>> {
    let mut runtime_label = false;
    let mut last_by_wildcard = false;
    let node = walk(domain, entries, |_, _, _, node, by_wildcard| {
        runtime_label |= node.value_to_metric;
        last_by_wildcard = by_wildcard;
    })?;
    let rule = node.rule.as_ref()?;
    let size = entries
        .iter()
        .map(|(k, v)| k.as_ref().len() + v.as_ref().len() + 2)
        .sum();
    let mut counter = String::with_capacity(size);
    let mut label = String::new();
    let label_wanted = runtime_label && !rule.detailed_metric;
    let mut add = |i: usize, key: &str, value: &str, node: &Node, by_wildcard: bool| {
        if i > 0 {
            counter.push('|');
        }
        escape(&mut counter, key);
        counter.push('=');
        let shared = by_wildcard && node.share_threshold;
        escape(
            &mut counter,
            if shared {
                node.value.as_deref().unwrap_or(value)
            } else {
                value
            },
        );
        if label_wanted {
            if i > 0 {
                label.push('.');
            }
            label.push_str(key);
            if node.value_to_metric {
                label.push('_');
                label.push_str(value);
            } else if let Some(v) = &node.value {
                label.push('_');
                label.push_str(v);
            }
        }
    };
    match entries {
        // One entry (the common descriptor): its node is the one found.
        [(key, value)] => add(0, key.as_ref(), value.as_ref(), node, last_by_wildcard),
        // The second walk meets the same nodes: the first one matched.
        _ => {
            walk(domain, entries, add);
        }
    }
    let metric = if rule.detailed_metric {
        Some(
            entries
                .iter()
                .map(|(k, v)| format!("{}_{}", k.as_ref(), v.as_ref()))
                .collect::<Vec<_>>()
                .join("."),
        )
    } else if label_wanted {
        Some(label)
    } else {
        None
    };
    Some(Found {
        rule,
        counter,
        metric,
    })
}

/// The rule the descriptor `entries` (`(key, value)` in order) matches in `domain`, if any.
///
/// # Examples
///
/// ```
/// use limitcore_rls::{matching, Config, Settings};
///
/// let config = Config::from_str_named("x.yaml", "
/// domain: d
/// descriptors:
///   - key: user
///     rate_limit: {unit: second, requests_per_unit: 5}
///   - key: user
///     value: admin
///     rate_limit: {unlimited: true}
/// ", &Settings::default())?;
/// let domain = config.domain("d").unwrap();
/// let m = matching::find(domain, &[("user", "alice")]).unwrap();
/// assert_eq!((m.rule.path.as_str(), m.counter.as_str()), ("user", "user=alice"));
/// assert!(matching::find(domain, &[("user", "admin")]).unwrap().rule.limit.is_none());
/// assert!(matching::find(domain, &[("team", "x")]).is_none());
/// # Ok::<(), limitcore_rls::ConfigError>(())
/// ```
pub fn find<K: AsRef<str>, V: AsRef<str>>(domain: &Domain, entries: &[(K, V)]) -> Option<Matched> {
    find_in(domain, entries).map(|f| Matched {
        rule: Arc::clone(f.rule),
        counter: f.counter,
        metric: f.metric,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        for (p, v, m) in [
            ("*", "", true),
            ("*", "x", true),
            ("a*", "a", true),
            ("*a", "ba", true),
            ("*a", "ab", false),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("x*y*z", "xyyz", true),
            ("x*y*z", "xzy", false),
            ("plain", "plain", true),
            ("plain", "plains", false),
        ] {
            assert_eq!(wildcard(p, v), m, "{p} ~ {v}");
        }
    }

    #[test]
    fn escaping_keeps_keys_apart() {
        let mut a = String::new();
        escape(&mut a, "a|b=c%");
        assert_eq!(a, "a%7Cb%3Dc%25");
    }
}
