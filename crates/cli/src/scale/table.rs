//! The text of a `limitcore bench` report: tables with a column per thread count.

use super::{Contender, QuotaKind, Report, Role};
use std::fmt::Write as _;

/// The width of a table's first column: the longest label (the ratio row
/// "keyed-spread-papaya ÷ governor-keyed-spread", 43 characters) and two blanks.
const LABEL: usize = 45;

/// A cell's width.
const CELL: usize = 10;

/// The share of refusals under an admitting quota above which a point is named in the notes
/// as saturated: 0.1 %.
const SATURATED: f64 = 1e-3;

/// The report as text ([`Report::text`]).
pub(super) fn text(report: &Report) -> String {
    let mut s = String::new();
    let m = &report.machine;
    let ids: Vec<String> = m.core_ids.iter().map(usize::to_string).collect();
    let _ = writeln!(
        s,
        "machine: {} cores{}, {}, {} {}; limitcore's clock: {}",
        m.cores,
        if ids.is_empty() {
            String::new()
        } else {
            format!(" (CPUs {})", ids.join(", "))
        },
        m.cpu_model,
        m.os,
        m.arch,
        m.clock_source
    );
    let all_pinned = report.points.iter().all(|p| p.pinned);
    let _ = writeln!(
        s,
        "run: {} s a point after {} s of warm-up; threads {}; {}",
        report.seconds,
        report.warmup_seconds,
        join(report.threads.iter().map(usize::to_string)),
        match (report.pin, all_pinned) {
            (false, _) => "not pinned (--no-pin)",
            (true, true) => "each thread pinned to a core (thread i to CPU i mod cores)",
            (true, false) => "pinning asked for, not done for every point (see the notes)",
        }
    );
    let pairs = pair_text(report);
    if !pairs.is_empty() {
        let _ = writeln!(s, "ratios (same run, same threads, same quota): {pairs}");
    }
    if !report.added_peers.is_empty() {
        let _ = writeln!(
            s,
            "added for the ratios: {}",
            join(report.added_peers.iter().map(|c| c.name().to_owned()))
        );
    }
    for note in &report.quotas {
        let _ = match note.kind {
            QuotaKind::None => writeln!(s, "\nthe floor: {}", note.description),
            kind => writeln!(s, "\n{kind} quota: {}", note.description),
        };
        let series: Vec<Contender> = report
            .series()
            .into_iter()
            .filter(|&(_, q)| q == note.kind)
            .map(|(c, _)| c)
            .collect();
        header(&mut s, report, "M decisions/s, all threads");
        for &c in &series {
            row(&mut s, report, c.name(), |t| {
                report
                    .point(c, note.kind, t)
                    .map(|p| format!("{:.2}", p.decisions_per_second / 1e6))
            });
        }
        header(&mut s, report, "M decisions/s per thread");
        for &c in &series {
            row(&mut s, report, c.name(), |t| {
                report
                    .point(c, note.kind, t)
                    .map(|p| format!("{:.2}", p.per_thread_per_second / 1e6))
            });
        }
        if series.iter().any(|c| c.peer().is_some()) {
            header(&mut s, report, "÷ peer (decisions/s)");
            for &c in &series {
                let Some(peer) = c.peer() else { continue };
                row(&mut s, report, &format!("{c} ÷ {peer}"), |t| {
                    report
                        .point(c, note.kind, t)
                        .and_then(|p| p.ratio_to_peer)
                        .map(|r| format!("{r:.2}"))
                });
            }
        }
        header(&mut s, report, "efficiency (per thread ÷ 1 thread)");
        for &c in &series {
            row(&mut s, report, c.name(), |t| {
                report
                    .point(c, note.kind, t)
                    .and_then(|p| p.efficiency)
                    .map(|e| format!("{e:.2}"))
            });
        }
    }
    let mut notes = Vec::new();
    // Under an admitting quota a handful of refusals are expected on a busy machine: a thread
    // preempted between its clock reading and its decision decides on a stale reading, which
    // the contract makes stricter (a refusal), never looser. Points above this share of
    // refusals are named one by one: the machine asked more than the quota allows.
    let mut stale = (0u64, 0usize, 0.0f64);
    for p in &report.points {
        let refused = p.decisions - p.admitted;
        let share = refused as f64 / p.decisions.max(1) as f64;
        match p.quota {
            QuotaKind::Refusing if p.admitted > 0 => notes.push(format!(
                "{} refusing, {} threads: {} of {} calls admitted: the refusing quota did not hold",
                p.contender, p.threads, p.admitted, p.decisions
            )),
            QuotaKind::Admitting if share >= SATURATED => notes.push(format!(
                "{} admitting, {} threads: {refused} of {} calls refused ({:.2} %): the machine \
                 asked more of it than its admitting quota allows; the figure is partly refusals",
                p.contender,
                p.threads,
                p.decisions,
                100.0 * share
            )),
            QuotaKind::Admitting if refused > 0 => {
                stale = (stale.0 + refused, stale.1 + 1, stale.2.max(share));
            }
            _ => {}
        }
        if report.pin && !p.pinned {
            notes.push(format!(
                "{} {}, {} threads: not every thread could be pinned",
                p.contender, p.quota, p.threads
            ));
        }
    }
    let cores = report.machine.cores;
    let crowded: Vec<&super::Point> = report.points.iter().filter(|p| p.crowded(cores)).collect();
    if let Some(worst) = crowded.iter().min_by(|a, b| {
        a.on_cpu
            .partial_cmp(&b.on_cpu)
            .unwrap_or(std::cmp::Ordering::Equal)
    }) {
        notes.push(format!(
            "{} of {} points ran their threads less than 90 % of the time they could have \
             (other work on the machine took their cores); the least: {} {}, {} threads, on a \
             CPU {:.0} % of the time. Their figures are partly the other work's",
            crowded.len(),
            report.points.len(),
            worst.contender,
            worst.quota,
            worst.threads,
            100.0 * worst.on_cpu.unwrap_or(0.0)
        ));
    }
    if stale.0 > 0 {
        notes.push(format!(
            "{} calls refused under the admitting quota, in {} point{} (at most {:.4} % of a \
             point's calls): decisions on the stale clock reading of a thread preempted between \
             its reading and its decision, which the contract makes stricter",
            stale.0,
            stale.1,
            if stale.1 == 1 { "" } else { "s" },
            100.0 * stale.2
        ));
    }
    if !notes.is_empty() {
        let _ = writeln!(s, "\nnotes:");
        for n in notes {
            let _ = writeln!(s, "  {n}");
        }
    }
    let _ = writeln!(s, "\ncalls:");
    for op in &report.contenders {
        let role = match op.role {
            Role::Limitcore => "",
            Role::Peer => " (peer)",
            Role::Floor => " (floor)",
        };
        let _ = writeln!(
            s,
            "  {:<30}{}",
            format!("{}{role}", op.contender),
            op.operation
        );
    }
    s
}

/// "gcra, token-bucket ÷ governor; budget ÷ leaky-bucket; …": the pairs, grouped by peer.
pub(super) fn pair_text(report: &Report) -> String {
    let mut peers: Vec<Contender> = report.pairs.iter().map(|p| p.peer).collect();
    peers.sort_unstable();
    peers.dedup();
    join_with(
        peers.iter().map(|&peer| {
            let ours = report
                .pairs
                .iter()
                .filter(|p| p.peer == peer)
                .map(|p| p.contender.name().to_owned());
            format!("{} ÷ {peer}", join(ours))
        }),
        "; ",
    )
}

fn header(s: &mut String, report: &Report, what: &str) {
    let _ = write!(s, "\n{what:<LABEL$}");
    for t in &report.threads {
        let label = if *t == 1 {
            "1 thread".to_owned()
        } else {
            format!("{t} threads")
        };
        let _ = write!(s, "{label:>CELL$}");
    }
    s.push('\n');
}

fn row(s: &mut String, report: &Report, label: &str, cell: impl Fn(usize) -> Option<String>) {
    let _ = write!(s, "{label:<LABEL$}");
    for &t in &report.threads {
        let _ = write!(s, "{:>CELL$}", cell(t).unwrap_or_else(|| "-".to_owned()));
    }
    s.push('\n');
}

fn join(items: impl Iterator<Item = String>) -> String {
    join_with(items, ", ")
}

fn join_with(items: impl Iterator<Item = String>, separator: &str) -> String {
    items.collect::<Vec<_>>().join(separator)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_fits_the_first_column_with_a_blank_to_spare() {
        for c in Contender::ALL {
            let mut labels = vec![c.name().to_owned()];
            labels.extend(c.peer().map(|peer| format!("{c} ÷ {peer}")));
            for label in labels {
                assert!(label.chars().count() < LABEL, "{label}");
            }
        }
    }
}
