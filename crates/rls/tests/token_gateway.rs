//! The token gateway demo's scenario (issue 37) with the issue's numbers: 1,000 concurrent
//! requests, an estimate of 100 tokens, actual tokens uniform in 0..=100, a limit of
//! 10,000 tokens a minute, through the tower layer and through the service, each with
//! reserve-then-settle and with check-then-report (the example's own code, included from
//! `examples/token_gateway/scenario.rs`).
//!
//! Every limiter reads a frozen clock, so that every request of a run falls in one window
//! however slow the machine: the verdicts do not depend on its speed.
//!
//! - Reserve-then-settle admits at most 10,000 tokens. A request is admitted only while
//!   its estimate fits, and settled to an actual cost no larger than it, so the tokens
//!   admitted never pass what was reserved.
//! - Check-then-report overshoots. A check is refused only once the tenant is in debt,
//!   past 10,000; so either a check was refused (and the tokens reported by then were
//!   already above the limit), or every request was admitted (and together they used
//!   more than the limit: the premise is asserted).
//!
//! With the upstream holding its answers until every request is decided (all in flight
//! at once), the counts are exact: reserve-then-settle admits 10,000 / 100 = 100
//! requests, check-then-report all 1,000.

// The example uses items this test does not (and the other way round).
#[allow(dead_code)]
#[path = "../examples/token_gateway/scenario.rs"]
mod scenario;

use limitcore_rls::RefusedHits;
use scenario::{Accounting, Answer, Outcome, Scenario, Time};
use std::time::Duration;

const REQUESTS: usize = 1000;
const LIMIT: u32 = 10_000;
const ESTIMATE: u32 = 100;

fn issue(answer: Answer, refused_hits: RefusedHits) -> Scenario {
    Scenario {
        requests: REQUESTS,
        limit: LIMIT,
        estimate: ESTIMATE,
        max_tokens: 100,
        seed: 37,
        answer,
        refused_hits,
    }
}

/// The tokens the upstream's answers add up to, over every request of a run.
fn all_tokens(s: &Scenario) -> u64 {
    scenario::usages(s.seed, s.requests, s.max_tokens)
        .iter()
        .map(|u| u64::from(u.total()))
        .sum()
}

async fn run(s: &Scenario) -> Vec<Outcome> {
    let outcomes = scenario::run(s, Time::Frozen).await.expect("the runs");
    println!("{}", scenario::report(s, Time::Frozen, &outcomes));
    assert_eq!(outcomes.len(), 4);
    for o in &outcomes {
        let name = format!("{:?} {:?}", o.path, o.accounting);
        assert_eq!(o.failed, 0, "{name}: {:?}", o.first_failure);
        assert_eq!(o.lost_reports, 0, "{name}");
        assert!(!o.gate_timed_out, "{name}");
        assert_eq!(o.admitted + o.refused, REQUESTS, "{name}");
    }
    outcomes
}

/// The issue's verdicts, which hold in any order of decisions and charges.
fn verdicts(s: &Scenario, outcomes: &[Outcome]) {
    // The premise of check-then-report's overshoot: the answers of all the requests
    // together use more than the limit.
    assert!(all_tokens(s) > u64::from(LIMIT));
    for o in outcomes {
        let name = format!("{:?} {:?}", o.path, o.accounting);
        match o.accounting {
            Accounting::ReserveThenSettle => {
                assert!(o.tokens <= u64::from(LIMIT), "{name}: {} tokens", o.tokens);
                assert_eq!(o.overshoot(), 0, "{name}");
                // No check is refused before 100 estimates have been admitted.
                assert!(o.admitted >= (LIMIT / ESTIMATE) as usize, "{name}");
            }
            Accounting::CheckThenReport => {
                assert!(o.tokens > u64::from(LIMIT), "{name}: {} tokens", o.tokens);
                assert!(o.overshoot() > 0, "{name}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_in_flight_at_once_reserve_holds_the_limit_and_check_overshoots() {
    for refused_hits in [RefusedHits::Record, RefusedHits::Drop] {
        let s = issue(Answer::WhenAllDecided, refused_hits);
        let outcomes = run(&s).await;
        verdicts(&s, &outcomes);
        for o in &outcomes {
            let name = format!("{:?} {:?} {refused_hits:?}", o.path, o.accounting);
            match o.accounting {
                // Every decision before any settle: exactly the limit's worth of estimates.
                Accounting::ReserveThenSettle => {
                    assert_eq!(o.admitted, (LIMIT / ESTIMATE) as usize, "{name}");
                }
                // Every check before any report: none in debt, all admitted, every
                // answer's tokens used.
                Accounting::CheckThenReport => {
                    assert_eq!(o.admitted, REQUESTS, "{name}");
                    assert_eq!(o.tokens, all_tokens(&s), "{name}");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_as_they_come_reserve_holds_the_limit_and_check_overshoots() {
    let s = issue(Answer::After(Duration::from_millis(5)), RefusedHits::Record);
    let outcomes = run(&s).await;
    verdicts(&s, &outcomes);
}

#[test]
fn settings_the_runs_cannot_mean_are_refused_with_the_reason() {
    let good = issue(Answer::WhenAllDecided, RefusedHits::Record);
    assert_eq!(good.validate(), Ok(()));
    for (bad, flag) in [
        (
            Scenario {
                requests: 0,
                ..good.clone()
            },
            "--requests",
        ),
        (
            Scenario {
                requests: scenario::MAX_REQUESTS + 1,
                ..good.clone()
            },
            "--requests",
        ),
        (
            Scenario {
                limit: 0,
                ..good.clone()
            },
            "--limit",
        ),
        (
            Scenario {
                estimate: 0,
                ..good.clone()
            },
            "--estimate",
        ),
        (
            Scenario {
                estimate: LIMIT + 1,
                ..good.clone()
            },
            "--estimate",
        ),
    ] {
        let why = bad.validate().expect_err(flag);
        assert!(why.starts_with(flag), "{why}");
    }
}

#[test]
fn the_upstream_answers_are_the_seeds() {
    let a = scenario::usages(37, REQUESTS, 100);
    assert_eq!(a, scenario::usages(37, REQUESTS, 100));
    assert_ne!(a, scenario::usages(38, REQUESTS, 100));
    assert!(a.iter().all(|u| u.total() <= 100));
    // Uniform in 0..=100: both ends drawn, a mean near 50.
    assert!(a.iter().any(|u| u.total() == 0) && a.iter().any(|u| u.total() == 100));
    let mean = all_tokens(&issue(Answer::WhenAllDecided, RefusedHits::Record)) as f64 / 1000.0;
    assert!((45.0..55.0).contains(&mean), "{mean}");
}
