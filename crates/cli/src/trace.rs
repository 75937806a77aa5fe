//! Traces: access logs parsed into (client, time) requests, and the synthetic trace.
//!
//! Three log formats are read, detected from the content (never from the file name):
//!
//! - **NASA-HTTP TSV**: tab-separated `host, logname, time (epoch seconds), method, url,
//!   response, bytes, ...`, with or without its header line.
//! - **SEC EDGAR CSV**: comma-separated `ip, date (YYYY-MM-DD), time (HH:MM:SS), ...` in UTC,
//!   with or without its header line; its fields are never quoted.
//! - **Combined / common log format** (Apache, nginx):
//!   `host ident user [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326 ...`.
//!
//! A line that cannot be read (too few fields, a bad time, invalid UTF-8) is **counted and
//! reported with its line number** ([`Malformed`]); it never panics and it is never dropped
//! silently. Empty lines are skipped.
//!
//! # Time
//!
//! All three formats log whole seconds. The `m` requests logged in one second are spread
//! evenly within it, in file order: the `i`-th (from 0) is placed at `second + i·10^9/m` ns,
//! so that a burst logged as "63 requests at 00:00:01" reaches the limiters as 63 requests
//! 15.9 ms apart, not 63 at the same nanosecond. Lines out of time order are sorted (stably)
//! first. Times are nanoseconds since the Unix epoch.
//!
//! # Examples
//!
//! ```
//! use limitcore_cli::trace::{self, Format};
//!
//! let log = "\
//! host\tlogname\ttime\tmethod\turl\tresponse\tbytes\treferer\tuseragent
//! a.example\t-\t807256800\tGET\t/\t200\t1713\t\t
//! a.example\t-\tsoon\tGET\t/\t200\t1713\t\t
//! b.example\t-\t807256800\tGET\t/x\t200\t10\t\t
//! ";
//! let trace = trace::read(log.as_bytes(), |_bytes| {})?;
//! assert_eq!(trace.format, Format::NasaTsv);
//! assert_eq!(trace.clients, ["a.example", "b.example"]);
//! // Two requests logged in second 807256800, half a second apart.
//! let times: Vec<u64> = trace.requests.iter().map(|r| r.t).collect();
//! assert_eq!(times, [807_256_800_000_000_000, 807_256_800_500_000_000]);
//! // The bad line is counted, with its line number.
//! assert_eq!(trace.malformed.len(), 1);
//! assert_eq!(trace.malformed[0].line, 3);
//! # Ok::<(), limitcore_cli::trace::TraceError>(())
//! ```

use chrono::{DateTime, NaiveDateTime};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::BufRead;

/// One request of a trace: who, and when (ns since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Nanoseconds since the Unix epoch.
    pub t: u64,
    /// Index into [`Trace::clients`].
    pub client: u32,
}

/// A line that could not be read, and why (see [`Trace::malformed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// 1-based line number in the input.
    pub line: usize,
    /// What was wrong with it.
    pub reason: String,
}

/// The formats a log can be in (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// NASA-HTTP tab-separated values.
    NasaTsv,
    /// SEC EDGAR comma-separated values.
    EdgarCsv,
    /// Apache/nginx combined (or common) log format.
    Combined,
    /// Generated in-process ([`synthetic`]).
    Synthetic,
}

impl Format {
    /// A name for reports, e.g. `"NASA-HTTP TSV"`.
    pub fn name(self) -> &'static str {
        match self {
            Format::NasaTsv => "NASA-HTTP TSV",
            Format::EdgarCsv => "EDGAR CSV",
            Format::Combined => "combined log format",
            Format::Synthetic => "synthetic",
        }
    }
}

/// A parsed trace: requests in time order and the client names they index; made by [`read`]
/// or [`synthetic`].
#[derive(Debug, Clone)]
pub struct Trace {
    /// The detected format.
    pub format: Format,
    /// Requests sorted by time (stable: file order within a time).
    pub requests: Vec<Request>,
    /// Client names (host or IP), indexed by [`Request::client`].
    pub clients: Vec<String>,
    /// Lines that could not be read, in line order.
    pub malformed: Vec<Malformed>,
    /// Lines read (including malformed and header lines, excluding empty ones).
    pub lines: usize,
}

impl Trace {
    /// The span from the first to the last request, in ns (0 for fewer than two requests).
    pub fn span_ns(&self) -> u64 {
        match (self.requests.first(), self.requests.last()) {
            (Some(a), Some(b)) => b.t.saturating_sub(a.t),
            _ => 0,
        }
    }
}

/// Why a whole input could not be read by [`read`] (a bad line is not an error: see
/// [`Malformed`]).
#[derive(Debug)]
pub enum TraceError {
    /// Reading failed.
    Io(std::io::Error),
    /// No line looked like any known format.
    UnknownFormat {
        /// The first non-empty line, shortened.
        first_line: String,
    },
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceError::Io(e) => write!(f, "cannot read the log: {e}"),
            TraceError::UnknownFormat { first_line } => write!(
                f,
                "cannot tell the log's format (NASA TSV, EDGAR CSV or combined log format \
                 expected) from its first line: {first_line:?}"
            ),
        }
    }
}

impl std::error::Error for TraceError {}

/// Guess the format from the first few non-empty lines.
///
/// A NASA or EDGAR header line as the first non-empty line decides; otherwise the first line
/// that parses in some format ([`parse_line`]) decides, tried in the order NASA TSV, EDGAR
/// CSV, combined. `None` if no line parses. [`Format::Synthetic`] is never detected.
///
/// # Examples
///
/// ```
/// use limitcore_cli::trace::{detect, Format};
///
/// let combined = r#"10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326"#;
/// assert_eq!(detect(&["garbage", combined]), Some(Format::Combined));
/// assert_eq!(detect(&["ip,date,time,zone"]), Some(Format::EdgarCsv));
/// assert_eq!(detect(&["hello", "world"]), None);
/// ```
pub fn detect(lines: &[&str]) -> Option<Format> {
    let first = lines.iter().find(|l| !l.trim().is_empty())?;
    if first.starts_with("host\tlogname\ttime") || first.starts_with("ip,date,time") {
        return Some(if first.starts_with("host") {
            Format::NasaTsv
        } else {
            Format::EdgarCsv
        });
    }
    // Otherwise the first line that parses in some format decides.
    lines.iter().filter(|l| !l.trim().is_empty()).find_map(|l| {
        [Format::NasaTsv, Format::EdgarCsv, Format::Combined]
            .into_iter()
            .find(|&f| parse_line(f, l).is_ok())
    })
}

/// Parse one line in `format` into (client name, whole seconds since the Unix epoch).
///
/// The client is the line's host (NASA TSV, combined) or IP address (EDGAR CSV). Only the
/// fields up to the time are read: the rest of the line may hold anything.
///
/// # Errors
///
/// Why the line cannot be read in `format` (too few fields, an empty client, a time that does
/// not parse or is before 1970), as text for [`Malformed::reason`]. Always an error for
/// [`Format::Synthetic`], which has no lines.
///
/// # Examples
///
/// ```
/// use limitcore_cli::trace::{parse_line, Format};
///
/// let line = "1.2.3.abc,2017-06-30,00:00:01,0.0,1.0,x,-index.htm,200.0";
/// assert_eq!(parse_line(Format::EdgarCsv, line), Ok(("1.2.3.abc", 1_498_780_801)));
/// let line = r#"10.0.0.2 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 512"#;
/// assert_eq!(parse_line(Format::Combined, line), Ok(("10.0.0.2", 971_211_336)));
/// assert!(parse_line(Format::NasaTsv, "host-only").is_err());
/// ```
pub fn parse_line(format: Format, line: &str) -> Result<(&str, u64), String> {
    match format {
        Format::NasaTsv => {
            let mut fields = line.split('\t');
            let host = fields.next().unwrap_or("").trim();
            let time = fields.nth(1).ok_or("fewer than 3 tab-separated fields")?;
            if host.is_empty() {
                return Err("empty host".into());
            }
            let secs = time
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("time {time:?} is not whole epoch seconds"))?;
            Ok((host, secs))
        }
        Format::EdgarCsv => {
            let mut fields = line.split(',');
            let ip = fields.next().unwrap_or("").trim();
            let (Some(date), Some(time)) = (fields.next(), fields.next()) else {
                return Err("fewer than 3 comma-separated fields".into());
            };
            if ip.is_empty() {
                return Err("empty ip".into());
            }
            let at = NaiveDateTime::parse_from_str(
                &format!("{} {}", date.trim(), time.trim()),
                "%Y-%m-%d %H:%M:%S",
            )
            .map_err(|e| format!("date/time {date:?} {time:?}: {e}"))?;
            let secs = at.and_utc().timestamp();
            u64::try_from(secs)
                .map(|s| (ip, s))
                .map_err(|_| "time before 1970".into())
        }
        Format::Combined => {
            let host = line.split_whitespace().next().ok_or("empty line")?;
            let open = line.find('[').ok_or("no [timestamp]")?;
            let close = line[open..].find(']').ok_or("unclosed [timestamp]")? + open;
            let stamp = &line[open + 1..close];
            let at = DateTime::parse_from_str(stamp, "%d/%b/%Y:%H:%M:%S %z")
                .map_err(|e| format!("timestamp [{stamp}]: {e}"))?;
            if host.starts_with('[') {
                return Err("no host before the timestamp".into());
            }
            u64::try_from(at.timestamp())
                .map(|s| (host, s))
                .map_err(|_| "time before 1970".into())
        }
        Format::Synthetic => Err("synthetic traces have no lines".into()),
    }
}

/// Whether `line` is the header line of `format`.
fn is_header(format: Format, line: &str) -> bool {
    match format {
        Format::NasaTsv => line.starts_with("host\t"),
        Format::EdgarCsv => line.starts_with("ip,"),
        _ => false,
    }
}

/// Read a whole log, detecting its format from its first 20 non-empty lines ([`detect`]).
///
/// Lines are split at `\n` (a trailing `\r` is dropped); empty lines are skipped; the format's
/// header line, if it is the first non-empty line, is skipped too. Every other line is either
/// a request or a [`Malformed`] entry with its 1-based line number: invalid UTF-8, a line that
/// [`parse_line`] rejects, or a time whose second does not fit in `u64` nanoseconds. The
/// requests are then sorted and spread within their seconds ([`spread_within_seconds`]).
///
/// `progress` is called once per line read with its length in bytes plus one for its newline
/// (so the calls add up to the input's size when it ends with one), e.g. to advance a
/// progress bar.
///
/// # Errors
///
/// [`TraceError::Io`] if reading fails, [`TraceError::UnknownFormat`] if none of those lines
/// parses in any format (an empty input included). Bad lines are not errors: they are in
/// [`Trace::malformed`].
///
/// # Examples
///
/// ```
/// use limitcore_cli::trace;
///
/// let log: &[u8] = b"10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET / HTTP/1.0\" 200 1\n\xff\n";
/// let mut bytes = 0;
/// let trace = trace::read(log, |n| bytes += n)?;
/// assert_eq!(bytes, log.len() as u64);
/// assert_eq!(trace.requests.len(), 1);
/// assert_eq!(trace.malformed[0].line, 2);
/// assert_eq!(trace.malformed[0].reason, "not valid UTF-8");
/// # Ok::<(), limitcore_cli::trace::TraceError>(())
/// ```
pub fn read(input: impl BufRead, mut progress: impl FnMut(u64)) -> Result<Trace, TraceError> {
    // Raw lines as bytes: invalid UTF-8 is a malformed line, not a failed read.
    let mut raw: Vec<(usize, Result<String, ()>)> = Vec::new();
    for (i, line) in input.split(b'\n').enumerate() {
        let bytes = line.map_err(TraceError::Io)?;
        progress(bytes.len() as u64 + 1);
        let text = String::from_utf8(bytes).map_err(|_| ());
        if text.as_deref().is_ok_and(|t| t.trim().is_empty()) {
            continue;
        }
        let text = text.map(|mut t| {
            t.truncate(t.trim_end_matches('\r').len());
            t
        });
        raw.push((i + 1, text));
    }
    let sample: Vec<&str> = raw
        .iter()
        .filter_map(|(_, l)| l.as_deref().ok())
        .take(20)
        .collect();
    let format = detect(&sample).ok_or_else(|| TraceError::UnknownFormat {
        first_line: sample
            .first()
            .map_or(String::new(), |l| l.chars().take(120).collect()),
    })?;

    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut stamped: Vec<(u64, u32)> = Vec::with_capacity(raw.len());
    let mut malformed = Vec::new();
    let lines = raw.len();
    for (n, (line_no, text)) in raw.into_iter().enumerate() {
        let Ok(text) = text else {
            malformed.push(Malformed {
                line: line_no,
                reason: "not valid UTF-8".into(),
            });
            continue;
        };
        if n == 0 && is_header(format, &text) {
            continue;
        }
        match parse_line(format, &text) {
            Ok((name, secs)) => {
                // The whole second must fit: its requests are spread within it.
                let Some(ns) = secs
                    .checked_mul(1_000_000_000)
                    .filter(|ns| ns.checked_add(999_999_999).is_some())
                else {
                    malformed.push(Malformed {
                        line: line_no,
                        reason: format!("time {secs} s is past the u64 nanosecond range"),
                    });
                    continue;
                };
                // A client seen before costs no allocation; a new one, its name once (the
                // list of names is the table inverted, after the loop).
                let id = match ids.get(name) {
                    Some(&id) => id,
                    None => {
                        let id = ids.len() as u32;
                        ids.insert(name.to_owned(), id);
                        id
                    }
                };
                stamped.push((ns, id));
            }
            Err(reason) => malformed.push(Malformed {
                line: line_no,
                reason,
            }),
        }
    }
    let mut clients = vec![String::new(); ids.len()];
    for (name, id) in ids {
        clients[id as usize] = name;
    }
    Ok(Trace {
        format,
        requests: spread_within_seconds(stamped),
        clients,
        malformed,
        lines,
    })
}

/// Sort whole-second stamps (stably) and spread each second's requests evenly within it.
///
/// `stamped` holds (time, client) pairs, times in ns since the Unix epoch, each a whole
/// second (a multiple of 10⁹, at most `u64::MAX - 999_999_999`). The `m` requests of one
/// second are placed `10⁹ / m` ns apart from the second's start, in input order.
///
/// # Panics
///
/// In debug builds, on a time past `u64::MAX - 999_999_999` ([`read`] never gives one).
///
/// # Examples
///
/// ```
/// use limitcore_cli::trace::{spread_within_seconds, Request};
///
/// let s = 1_000_000_000;
/// let requests = spread_within_seconds(vec![(2 * s, 0), (s, 1), (s, 2), (s, 0)]);
/// let at = |t, client| Request { t, client };
/// assert_eq!(
///     requests,
///     [at(s, 1), at(s + 333_333_333, 2), at(s + 666_666_666, 0), at(2 * s, 0)]
/// );
/// ```
pub fn spread_within_seconds(mut stamped: Vec<(u64, u32)>) -> Vec<Request> {
    stamped.sort_by_key(|&(t, _)| t);
    let mut out = Vec::with_capacity(stamped.len());
    let mut rest = &stamped[..];
    while let Some(&(second, _)) = rest.first() {
        let m = rest.iter().take_while(|&&(t, _)| t == second).count();
        for (i, &(t, client)) in rest[..m].iter().enumerate() {
            out.push(Request {
                t: t + i as u64 * 1_000_000_000 / m as u64,
                client,
            });
        }
        rest = &rest[m..];
    }
    out
}

/// A deterministic synthetic trace: `clients` clients over `seconds` seconds.
///
/// Client rates are heavy-tailed (Pareto, shape 1.1, from 0.02 requests/s up to 200/s), and
/// every client also fires bursts (10 % of its requests come as back-to-back groups of 5 to
/// 60 requests 1 ms apart), so every limiter has something to refuse. Same `seed`, same trace.
/// The trace starts at 1,700,000,000 s since the Unix epoch; its clients are named
/// `client-0`, `client-1`, ...; its format is [`Format::Synthetic`].
///
/// # Examples
///
/// ```
/// use limitcore_cli::trace::synthetic;
///
/// let trace = synthetic(100, 60, 42);
/// assert_eq!(trace.clients.len(), 100);
/// assert!(trace.span_ns() < 60_000_000_000);
/// assert_eq!(trace.requests, synthetic(100, 60, 42).requests);
/// ```
pub fn synthetic(clients: u32, seconds: u32, seed: u64) -> Trace {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let start: u64 = 1_700_000_000 * 1_000_000_000;
    let end = start + u64::from(seconds) * 1_000_000_000;
    let mut requests = Vec::new();
    for client in 0..clients {
        let u: f64 = rng.gen_range(f64::EPSILON..1.0);
        let rate = (0.02 / u.powf(1.0 / 1.1)).min(200.0);
        let mut t = start as f64;
        loop {
            // Exponential gaps: a Poisson process at `rate`.
            let gap: f64 = -rng.gen_range(f64::EPSILON..1.0f64).ln() / rate;
            t += gap * 1e9;
            if t >= end as f64 {
                break;
            }
            if rng.gen_bool(0.1 / 5.0) {
                for k in 0..rng.gen_range(5u64..=60) {
                    let at = t as u64 + k * 1_000_000;
                    if at < end {
                        requests.push(Request { t: at, client });
                    }
                }
            } else {
                requests.push(Request {
                    t: t as u64,
                    client,
                });
            }
        }
    }
    requests.sort_by_key(|r| (r.t, r.client));
    Trace {
        format: Format::Synthetic,
        clients: (0..clients).map(|c| format!("client-{c}")).collect(),
        lines: requests.len(),
        requests,
        malformed: Vec::new(),
    }
}
