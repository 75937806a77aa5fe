//! A YAML document as a tree of nodes that keep their line numbers, read from yaml-rust2's
//! marked events, so that every configuration error names the line it is about.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// One YAML node and the line (1-based) it starts on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    /// What the node holds.
    pub(crate) kind: Kind,
    /// The line it starts on, 1-based.
    pub(crate) line: usize,
}

/// The three kinds of YAML node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A scalar: its text, and whether it was written plain (unquoted), so that `10`, `true`
    /// and `~` can be told from `"10"`, `"true"` and `"~"`.
    Scalar { text: String, plain: bool },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, its pairs in document order.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The scalar's text if this is a scalar.
    pub(crate) fn scalar(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Whether this is a scalar that YAML 1.1/1.2's core schema reads as a string (quoted,
    /// or plain and not a number, boolean or null): what a mapping key must be.
    pub(crate) fn is_string(&self) -> bool {
        match &self.kind {
            Kind::Scalar { text, plain } => !plain || !is_typed(text),
            _ => false,
        }
    }

    /// Whether this is the null scalar (`~`, `null`, or nothing).
    pub(crate) fn is_null(&self) -> bool {
        matches!(&self.kind, Kind::Scalar { text, plain: true } if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// A short description of the node for error messages.
    pub(crate) fn describe(&self) -> String {
        match &self.kind {
            Kind::Scalar { text, .. } => format!("{text:?}"),
            Kind::Seq(_) => "a sequence".to_owned(),
            Kind::Map(_) => "a mapping".to_owned(),
        }
    }
}

/// Whether a plain scalar is a number, a boolean or null in YAML's core schema (and the
/// YAML 1.1 booleans Go's yaml.v2 reads, such as `yes` and `off`).
fn is_typed(text: &str) -> bool {
    let t = text.trim();
    matches!(
        t,
        "" | "~"
            | "null"
            | "Null"
            | "NULL"
            | "true"
            | "True"
            | "TRUE"
            | "false"
            | "False"
            | "FALSE"
            | "yes"
            | "Yes"
            | "YES"
            | "no"
            | "No"
            | "NO"
            | "on"
            | "On"
            | "ON"
            | "off"
            | "Off"
            | "OFF"
            | ".inf"
            | "-.inf"
            | "+.inf"
            | ".nan"
    ) || t.parse::<i64>().is_ok()
        || t.parse::<f64>().is_ok()
        || (t.starts_with("0x") && u64::from_str_radix(&t[2..], 16).is_ok())
        || (t.starts_with("0o") && u64::from_str_radix(&t[2..], 8).is_ok())
}

/// A YAML syntax error: its line and what the parser said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    /// 1-based line of the error.
    pub(crate) line: usize,
    /// The parser's message.
    pub(crate) message: String,
}

/// Builds nodes from events.
#[derive(Default)]
struct Builder {
    /// Open collections: the node being built and, for a mapping, a key waiting for its value.
    stack: Vec<(Node, Option<Node>)>,
    /// Complete documents.
    docs: Vec<Node>,
    /// Anchored nodes by anchor id.
    anchors: HashMap<usize, Node>,
    /// Anchor ids of the open collections.
    open_anchors: Vec<usize>,
    /// An alias to an anchor never defined.
    error: Option<SyntaxError>,
}

impl Builder {
    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some((parent, pending)) => match &mut parent.kind {
                Kind::Seq(items) => items.push(node),
                Kind::Map(pairs) => match pending.take() {
                    None => *pending = Some(node),
                    Some(key) => pairs.push((key, node)),
                },
                Kind::Scalar { .. } => {}
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(text, style, anchor, _) => {
                let node = Node {
                    kind: Kind::Scalar {
                        text,
                        plain: style == TScalarStyle::Plain,
                    },
                    line,
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push_value(node);
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push((
                    Node {
                        kind: Kind::Seq(Vec::new()),
                        line,
                    },
                    None,
                ));
                self.open_anchors.push(anchor);
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push((
                    Node {
                        kind: Kind::Map(Vec::new()),
                        line,
                    },
                    None,
                ));
                self.open_anchors.push(anchor);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((node, _)) = self.stack.pop() {
                    let anchor = self.open_anchors.pop().unwrap_or(0);
                    if anchor > 0 {
                        self.anchors.insert(anchor, node.clone());
                    }
                    self.push_value(node);
                }
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(node) => self.push_value(node),
                None => {
                    self.error.get_or_insert(SyntaxError {
                        line,
                        message: "alias to an unknown anchor".to_owned(),
                    });
                }
            },
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

/// The documents of `text` (one configuration file may hold several, as `---` separates
/// them; envoyproxy/ratelimit reads the first).
pub(crate) fn parse(text: &str) -> Result<Vec<Node>, SyntaxError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut builder, true).map_err(|e| SyntaxError {
        line: e.marker().line(),
        message: e.info().to_owned(),
    })?;
    if let Some(e) = builder.error {
        return Err(e);
    }
    Ok(builder.docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_kinds() {
        let docs = parse("domain: d\ndescriptors:\n  - key: a\n    value: \"1\"\n").unwrap();
        let Kind::Map(pairs) = &docs[0].kind else {
            panic!("a mapping")
        };
        assert_eq!(pairs[0].0.scalar(), Some("domain"));
        assert_eq!(pairs[1].1.line, 3);
        let Kind::Seq(items) = &pairs[1].1.kind else {
            panic!("a sequence")
        };
        let Kind::Map(entry) = &items[0].kind else {
            panic!("a mapping")
        };
        assert_eq!(entry[1].0.line, 4);
        assert!(entry[1].1.is_string());
    }

    #[test]
    fn typed_plain_scalars_are_not_strings() {
        let docs = parse("1: a\ntrue: b\n\"2\": c\n").unwrap();
        let Kind::Map(pairs) = &docs[0].kind else {
            panic!("a mapping")
        };
        assert!(!pairs[0].0.is_string());
        assert!(!pairs[1].0.is_string());
        assert!(pairs[2].0.is_string());
    }

    #[test]
    fn syntax_errors_have_lines() {
        let e = parse("domain: d\ndescriptors:\n  - key: [a\n").unwrap_err();
        assert!(e.line >= 3, "{e:?}");
    }

    #[test]
    fn anchors_and_aliases() {
        let docs = parse("a: &x {k: v}\nb: *x\n").unwrap();
        let Kind::Map(pairs) = &docs[0].kind else {
            panic!("a mapping")
        };
        assert_eq!(pairs[0].1.kind, pairs[1].1.kind);
    }
}
