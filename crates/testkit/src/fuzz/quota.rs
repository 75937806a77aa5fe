//! `quota_parse`: `Quota`'s parser, constructors and `Display`.

use super::decode::{biased_u32, biased_u64, UNIT_NS};
use super::ArbResult;
use arbitrary::Unstructured;
use core::fmt::Write as _;
use core::time::Duration;
use limitcore::{Quota, QuotaError};

/// [`Quota`]'s text form and constructors never panic, and every quota they make is
/// valid and round-trips through `Display`; every refusal has a message.
///
/// The first byte selects the mode (so regression inputs can be written by hand):
/// - even: the rest, as (lossy) UTF-8 text, is parsed;
/// - `1 mod 4`: the constructors (`new`, `per_second`, …, `with_burst`) get arbitrary
///   numbers;
/// - `3 mod 4`: text assembled from arbitrary pieces of the grammar (numbers, units,
///   spaces, `burst`/`burst=`), to reach the valid forms more often than raw bytes do, and
///   checked against what the documented text form says it must parse to.
///
/// # Panics
///
/// On any broken promise, with the text or the constructor call in the message.
pub fn quota_parse(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 | 2 => check_text(&String::from_utf8_lossy(rest)),
        1 => {
            let _ = quota_constructors(&mut Unstructured::new(rest));
        }
        _ => {
            if let Ok((text, expect)) = quota_text(&mut Unstructured::new(rest)) {
                check_text(&text);
                check_text_expectation(&text, expect);
            }
        }
    }
}

fn check_text(text: &str) {
    match text.parse::<Quota>() {
        Ok(q) => check_quota(&q, &format!("parsed from {text:?}")),
        Err(e) => check_error(&e, &format!("parsing {text:?}")),
    }
}

fn quota_constructors(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let count = biased_u32(u)?;
    let period = match u.int_in_range(0u8..=2)? {
        0 => Duration::from_nanos(biased_u64(u)?),
        // Periods past u64::MAX ns too.
        1 => Duration::new(biased_u64(u)?, u.int_in_range(0..=999_999_999)?),
        _ => Duration::from_nanos(
            UNIT_NS[u.choose_index(UNIT_NS.len())?] * u.int_in_range(1..=1_000)?,
        ),
    };
    let burst = biased_u32(u)?;
    // 0: `Quota::new(count, period)`; 1..=4: the named constructors, which must be `new`
    // with their fixed period.
    const NAMED: [(&str, u64); 4] = [
        ("per_second", 1),
        ("per_minute", 60),
        ("per_hour", 3_600),
        ("per_day", 86_400),
    ];
    let (what, result) = match u.int_in_range(0usize..=NAMED.len())? {
        0 => (
            format!("Quota::new({count}, {period:?})"),
            Quota::new(count, period),
        ),
        i => {
            let (name, secs) = NAMED[i - 1];
            let result = match i {
                1 => Quota::per_second(count),
                2 => Quota::per_minute(count),
                3 => Quota::per_hour(count),
                _ => Quota::per_day(count),
            };
            let what = format!("Quota::{name}({count})");
            assert_eq!(
                result,
                Quota::new(count, Duration::from_secs(secs)),
                "{what} differs from Quota::new({count}, {secs} s)"
            );
            (what, result)
        }
    };
    match result {
        Ok(q) => {
            check_quota(&q, &what);
            assert_eq!(q.count(), count, "{what}: count");
            assert_eq!(q.burst(), count, "{what}: default burst");
            let with = q.with_burst(burst);
            let what = format!("{what}.with_burst({burst})");
            match with {
                Ok(b) => {
                    check_quota(&b, &what);
                    assert_eq!(
                        (
                            b.count(),
                            b.period_ns(),
                            b.emission_interval_ns(),
                            b.burst()
                        ),
                        (q.count(), q.period_ns(), q.emission_interval_ns(), burst),
                        "{what}: with_burst changed more than the burst"
                    );
                }
                Err(e) => check_error(&e, &what),
            }
        }
        Err(e) => check_error(&e, &what),
    }
    Ok(())
}

/// What the documented text form says a [`quota_text`] string must parse to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Outside the documented grammar (a tab, `burst` glued to its neighbours, …): only
    /// the general properties are checked.
    Unspecified,
    /// In the grammar's shape but with an invalid piece (unknown unit, a number too large
    /// for its field, a period past `u64::MAX` ns): must be refused.
    Invalid,
    /// Well formed: must be what the constructors make of these parts.
    Valid {
        count: u64,
        period_ns: u64,
        burst: Option<u32>,
    },
}

/// Text assembled from the grammar `COUNT/[N]UNIT[ burst B]` with arbitrary numbers,
/// spacing and the occasional wrong piece, with what the documentation says it must give.
fn quota_text(u: &mut Unstructured<'_>) -> ArbResult<(String, Expect)> {
    // (text, ns); 0 = not a unit.
    const UNITS: [(&str, u64); 10] = [
        ("ns", 1),
        ("us", 1_000),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("min", 60_000_000_000),
        ("h", 3_600_000_000_000),
        ("d", 86_400_000_000_000),
        ("x", 0),
        ("", 0),
    ];
    // (text, documented: "spaces around the parts are allowed").
    const SPACES: [(&str, bool); 4] = [("", true), (" ", true), ("  ", true), ("\t", false)];
    // The forms after the unit; the first two are documented.
    const BURSTS: [&str; 4] = ["burst ", "burst=", "burst =", "burst"];
    let mut s = String::new();
    let mut documented = true;
    let space = |u: &mut Unstructured<'_>, s: &mut String, documented: &mut bool| {
        let (text, ok) = SPACES[u.choose_index(SPACES.len())?];
        s.push_str(text);
        *documented &= ok;
        ArbResult::Ok(text.len())
    };
    // A whole number as text and its value (which may not fit any field).
    let number = |u: &mut Unstructured<'_>, s: &mut String| -> ArbResult<u128> {
        Ok(match u.int_in_range(0u8..=3)? {
            0 => {
                let v = biased_u32(u)?;
                write!(s, "{v}").unwrap();
                v.into()
            }
            1 => {
                let v = biased_u64(u)?;
                write!(s, "{v}").unwrap();
                v.into()
            }
            2 => {
                let v = u.int_in_range(0u32..=999)?;
                write!(s, "{v:03}").unwrap(); // leading zeros
                v.into()
            }
            _ => {
                let (v, d) = (biased_u64(u)?, u.int_in_range(0u32..=9)?);
                write!(s, "{v}{d}").unwrap(); // may pass u64::MAX
                u128::from(v) * 10 + u128::from(d)
            }
        })
    };
    space(u, &mut s, &mut documented)?;
    let count = number(u, &mut s)?;
    space(u, &mut s, &mut documented)?;
    s.push('/');
    space(u, &mut s, &mut documented)?;
    let multiplier = if u.arbitrary()? {
        let m = number(u, &mut s)?;
        space(u, &mut s, &mut documented)?;
        m
    } else {
        1
    };
    let (unit, unit_ns) = UNITS[u.choose_index(UNITS.len())?];
    s.push_str(unit);
    let gap = space(u, &mut s, &mut documented)?;
    let burst = if u.arbitrary()? {
        let form = u.choose_index(BURSTS.len())?;
        // `UNIT burst B` and `burst=B` are the documented forms; the unit must be
        // separated from `burst`.
        documented &= gap > 0 && form <= 1;
        s.push_str(BURSTS[form]);
        space(u, &mut s, &mut documented)?;
        let b = number(u, &mut s)?;
        space(u, &mut s, &mut documented)?;
        Some(b)
    } else {
        None
    };
    let documented = documented && !unit.is_empty();
    let period = multiplier * u128::from(unit_ns);
    let expect = if !documented {
        Expect::Unspecified
    } else {
        match (
            u64::try_from(count),
            u64::try_from(multiplier),
            u64::try_from(period),
            burst.map(u32::try_from),
        ) {
            (Ok(count), Ok(_), Ok(period_ns), None) if unit_ns != 0 => Expect::Valid {
                count,
                period_ns,
                burst: None,
            },
            (Ok(count), Ok(_), Ok(period_ns), Some(Ok(burst))) if unit_ns != 0 => Expect::Valid {
                count,
                period_ns,
                burst: Some(burst),
            },
            _ => Expect::Invalid,
        }
    };
    Ok((s, expect))
}

/// A [`quota_text`] string against what the documentation says it must give.
fn check_text_expectation(text: &str, expect: Expect) {
    let got = text.parse::<Quota>();
    match expect {
        Expect::Unspecified => {}
        Expect::Invalid => assert!(
            got.is_err(),
            "{text:?} has an invalid piece but parses as {got:?}"
        ),
        Expect::Valid {
            count,
            period_ns,
            burst,
        } => {
            let period = Duration::from_nanos(period_ns);
            let built = match burst {
                Some(burst) => Quota::new_u64(count, period, burst),
                None => match u32::try_from(count) {
                    Ok(count) => Quota::new(count, period),
                    // A rate with no exact form is that error first; else the burst is missing.
                    Err(_) => Quota::new_u64(count, period, 1)
                        .and(Err(QuotaError::DefaultBurstTooLarge { count })),
                },
            };
            match (&got, &built) {
                (Ok(g), Ok(b)) => assert_eq!(g, b, "{text:?}: parsed differs from built"),
                (Err(g), Err(b)) => {
                    assert_eq!(g, b, "{text:?}: parse and constructors refuse differently")
                }
                _ => panic!(
                    "{text:?} (count {count}, period {period_ns} ns, burst {burst:?}) parses as \
                     {got:?} but the constructors give {built:?}"
                ),
            }
        }
    }
}

/// Everything a valid quota promises.
fn check_quota(q: &Quota, what: &str) {
    let (count, burst, period, interval) = (
        q.count(),
        q.burst(),
        q.period_ns(),
        q.emission_interval_ns(),
    );
    assert!(
        count >= 1 && burst >= 1 && period >= 1,
        "{what}: {q:?} has a zero part"
    );
    assert!(interval >= 1, "{what}: {q:?}: emission interval < 1 ns");
    let (i, c, p) = (u128::from(interval), u128::from(count), u128::from(period));
    assert!(
        i * c >= p,
        "{what}: {q:?}: interval × count < period (admits too much)"
    );
    assert!(
        (i - 1) * c < p,
        "{what}: {q:?}: interval is not period / count rounded up"
    );
    let span = q.burst_span_ns();
    assert!(
        span <= Quota::MAX_BURST_SPAN_NS,
        "{what}: {q:?}: burst span {span} > Quota::MAX_BURST_SPAN_NS"
    );
    assert_eq!(
        u128::from(span),
        i * u128::from(burst),
        "{what}: {q:?}: burst span"
    );
    assert_eq!(
        q.period(),
        Duration::from_nanos(period),
        "{what}: {q:?}: period()"
    );
    assert_eq!(
        q.emission_interval(),
        Duration::from_nanos(interval),
        "{what}: {q:?}: emission_interval()"
    );
    assert_eq!(
        q.tolerance(),
        Duration::from_nanos(span - interval),
        "{what}: {q:?}: tolerance()"
    );
    let text = q.to_string();
    assert_eq!(
        text.parse::<Quota>().as_ref(),
        Ok(q),
        "{what}: {q:?} displays as {text:?}, which does not parse back"
    );
    // The constructor with all three parts as written makes the same quota.
    let written = Duration::from_nanos(q.period_as_written_ns());
    assert_eq!(
        Quota::new_u64(q.count_as_written(), written, burst).as_ref(),
        Ok(q),
        "{what}: {q:?} is not what the constructors make of its parts"
    );
    // The documented limit `burst × interval ≤ Quota::MAX_BURST_SPAN_NS`, exactly at its edge.
    let most = (Quota::MAX_BURST_SPAN_NS / interval).min(u64::from(u32::MAX)) as u32;
    assert!(
        q.with_burst(most).is_ok(),
        "{what}: {q:?}.with_burst({most}) refused, but {most} × {interval} ns fits"
    );
    if let Some(over) = most.checked_add(1) {
        assert!(
            matches!(q.with_burst(over), Err(QuotaError::BurstTooLarge { .. })),
            "{what}: {q:?}.with_burst({over}) accepted, but {over} × {interval} ns is too long"
        );
    }
    assert_eq!(
        q.with_burst(burst).as_ref(),
        Ok(q),
        "{what}: {q:?}.with_burst(its own burst)"
    );
    let _ = format!("{q:?}");
}

fn check_error(e: &QuotaError, what: &str) {
    assert!(
        !e.to_string().is_empty(),
        "{what}: {e:?} has an empty message"
    );
    let _ = format!("{e:?}");
}
