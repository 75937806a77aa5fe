//! Reading client addresses out of `X-Forwarded-For` and `Forwarded` (RFC 7239) field
//! lines, from the right, without allocating and without trusting the client's entries.
//!
//! Every function here takes hostile bytes: any byte sequence gives an answer (possibly
//! "no address"), never a panic, and the work is linear in the bytes looked at.

use http::HeaderValue;
use http::header::GetAll;
use std::net::{IpAddr, SocketAddr};

/// The entries of a comma-separated list spread over several field lines (RFC 9110 §5.3:
/// several lines are one list, in order), from the rightmost entry to the leftmost, each
/// trimmed of optional whitespace. Commas inside a quoted string (RFC 9110 §5.6.4) do not
/// separate entries; an unterminated quote runs to the start of its line.
pub(crate) fn entries_from_right<'a>(
    lines: GetAll<'a, HeaderValue>,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    lines
        .into_iter()
        .rev()
        .flat_map(|line| SplitFromRight::new(line.as_bytes()))
}

/// Splits one field line at the commas outside quoted strings, from the right.
struct SplitFromRight<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> SplitFromRight<'a> {
    fn new(line: &'a [u8]) -> Self {
        SplitFromRight { rest: Some(line) }
    }
}

impl<'a> Iterator for SplitFromRight<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let line = self.rest?;
        // Walk left from the end; a quote toggles the state unless it is escaped by a
        // backslash (the escape is only known from the left, so count the backslashes).
        let mut quoted = false;
        let mut i = line.len();
        while i > 0 {
            let b = line[i - 1];
            if b == b'"' && !escaped(line, i - 1) {
                quoted = !quoted;
            } else if b == b',' && !quoted {
                self.rest = Some(&line[..i - 1]);
                return Some(trim(&line[i..]));
            }
            i -= 1;
        }
        self.rest = None;
        Some(trim(line))
    }
}

/// Whether the byte at `at` is preceded by an odd number of backslashes.
fn escaped(line: &[u8], at: usize) -> bool {
    line[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
}

/// `s` without leading and trailing spaces and tabs (RFC 9110's OWS).
fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !matches!(b, b' ' | b'\t'));
    match start {
        None => &[],
        Some(start) => {
            let end = s
                .iter()
                .rposition(|b| !matches!(b, b' ' | b'\t'))
                .unwrap_or(start);
            &s[start..=end]
        }
    }
}

/// The `for` parameter of one `Forwarded` element (RFC 7239 §4: `pair *( ";" pair )`, the
/// parameter name case-insensitive), unquoted; `None` if the element has none. An element
/// with two `for` parameters is invalid (§4: "each parameter MUST NOT occur more than once
/// per forwarded-element"), and gives `None` too.
pub(crate) fn forwarded_for(element: &[u8]) -> Option<&[u8]> {
    let mut found = None;
    for pair in SplitPairs::new(element) {
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (name, value) = (trim(&pair[..eq]), trim(&pair[eq + 1..]));
        if name.eq_ignore_ascii_case(b"for") {
            if found.is_some() {
                return None;
            }
            found = Some(unquote(value)?);
        }
    }
    found
}

/// Splits a `Forwarded` element at the semicolons outside quoted strings, from the left.
struct SplitPairs<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> SplitPairs<'a> {
    fn new(element: &'a [u8]) -> Self {
        SplitPairs {
            rest: Some(element),
        }
    }
}

impl<'a> Iterator for SplitPairs<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let s = self.rest?;
        let mut quoted = false;
        let mut escape = false;
        for (i, &b) in s.iter().enumerate() {
            if escape {
                escape = false;
            } else if quoted && b == b'\\' {
                escape = true;
            } else if b == b'"' {
                quoted = !quoted;
            } else if b == b';' && !quoted {
                self.rest = Some(&s[i + 1..]);
                return Some(&s[..i]);
            }
        }
        self.rest = None;
        Some(s)
    }
}

/// A token as it is, or a quoted string without its quotes. Node names never need escapes
/// (RFC 7239 §6), so a quoted string holding a backslash is refused rather than unescaped.
fn unquote(value: &[u8]) -> Option<&[u8]> {
    match value {
        [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') && !inner.contains(&b'"') => {
            Some(inner)
        }
        [b'"', ..] | [.., b'"'] => None,
        _ => Some(value),
    }
}

/// The address of a node: an `X-Forwarded-For` entry, or the unquoted value of a
/// `Forwarded` `for` parameter (RFC 7239 §6: `IPv4address`, `"[" IPv6address "]"`, either
/// with a `:port`, or `unknown` / an obfuscated `_name`, which are no address). Accepted
/// forms: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`, `[2001:db8::1]`,
/// `[2001:db8::1]:80`. Anything else (including an unspecified address, `0.0.0.0` or `::`,
/// which no client can have) is `None`.
pub(crate) fn parse_node(node: &[u8]) -> Option<IpAddr> {
    // The longest valid form, `[` + 45-character IPv6 + `]:65535`, is 53 bytes.
    if node.is_empty() || node.len() > 64 {
        return None;
    }
    let text = std::str::from_utf8(node).ok()?;
    let ip = text
        .parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            text.strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<std::net::Ipv6Addr>().ok())
                .map(IpAddr::V6)
        })?;
    (!ip.to_canonical().is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn right(lines: &[&str]) -> Vec<String> {
        let mut map = HeaderMap::new();
        for l in lines {
            map.append("x", HeaderValue::from_str(l).unwrap());
        }
        entries_from_right(map.get_all("x"))
            .map(|e| String::from_utf8(e.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn splits_lines_and_entries_from_the_right() {
        assert_eq!(right(&["a, b", "c"]), ["c", "b", "a"]);
        assert_eq!(right(&[" a ,,b"]), ["b", "", "a"]);
        assert_eq!(
            right(&["for=\"x,y\";by=z, for=w"]),
            ["for=w", "for=\"x,y\";by=z"]
        );
        assert_eq!(right(&["\"a\\\",b\", c"]), ["c", "\"a\\\",b\""]);
    }

    #[test]
    fn forwarded_for_values() {
        assert_eq!(
            forwarded_for(b"for=192.0.2.60;proto=http"),
            Some(&b"192.0.2.60"[..])
        );
        assert_eq!(
            forwarded_for(b"By=x; For=\"[2001:db8::1]:80\""),
            Some(&b"[2001:db8::1]:80"[..])
        );
        assert_eq!(forwarded_for(b"for=a;for=b"), None);
        assert_eq!(forwarded_for(b"proto=https"), None);
        assert_eq!(forwarded_for(b"for=\"unterminated"), None);
    }

    #[test]
    fn nodes() {
        let ip = |s: &str| parse_node(s.as_bytes());
        assert_eq!(ip("192.0.2.1"), Some("192.0.2.1".parse().unwrap()));
        assert_eq!(ip("192.0.2.1:8080"), Some("192.0.2.1".parse().unwrap()));
        assert_eq!(ip("[2001:db8::1]:80"), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(ip("[2001:db8::1]"), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(ip("2001:db8::1"), Some("2001:db8::1".parse().unwrap()));
        for bad in [
            "unknown",
            "_hidden",
            "",
            "0.0.0.0",
            "::",
            "::ffff:0.0.0.0",
            "1.2.3",
            "999.1.1.1",
        ] {
            assert_eq!(ip(bad), None, "{bad}");
        }
    }
}
