//! The SVG plot of a `limitcore bench` report: decisions per second against threads, both on
//! log scales, one line per contender.

use super::{Contender, QuotaKind, Report, Role};
use plotters::prelude::*;
use std::path::Path;

/// The width of a panel's chart, in pixels (its legend is beside it).
const CHART_WIDTH: u32 = 820;
/// The width of a panel's legend.
const LEGEND_WIDTH: u32 = 300;
/// The height of a panel.
const PANEL_HEIGHT: u32 = 560;

/// Draw `report` into the SVG file `path`: a panel per quota kind measured (admitting,
/// refusing; the floor's alone when nothing else ran), each with decisions per second in
/// total (log scale) against threads (log scale, base 2), one line per contender with a
/// dot at each point, and a legend beside it naming each contender (peers and the floor
/// marked); the floor's lines appear in every panel. Each line is one SVG `polyline` in the
/// contender's colour, the colour of its legend's box (the axes and ticks are black
/// polylines).
///
/// # Errors
///
/// A report without points; drawing or writing the file failed.
///
/// # Examples
///
/// ```
/// use limitcore_cli::scale::{self, Config, Contender};
///
/// let config = Config {
///     contenders: vec![Contender::FetchAddShared, Contender::FetchAddPerThread],
///     threads: vec![1, 2],
///     seconds: 0.01,
///     ..Config::new(2)
/// };
/// let report = scale::run(&config, &mut |_| {})?;
/// let path = std::env::temp_dir().join(format!("scale-doc-{}.svg", std::process::id()));
/// scale::plot(&path, &report)?;
/// let svg = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
/// assert!(svg.contains("fetch-add-per-thread (floor)"));
/// assert_eq!(svg.matches("stroke=\"#AAAAAA\"").count(), 1); // its line
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), String>(())
/// ```
pub fn plot(path: &Path, report: &Report) -> Result<(), String> {
    let series = report.series();
    if series.is_empty() {
        return Err("a report without points has nothing to plot".into());
    }
    let floors: Vec<Contender> = series
        .iter()
        .filter(|(_, q)| *q == QuotaKind::None)
        .map(|&(c, _)| c)
        .collect();
    let mut panels: Vec<QuotaKind> = [QuotaKind::Admitting, QuotaKind::Refusing]
        .into_iter()
        .filter(|k| series.iter().any(|(_, q)| q == k))
        .collect();
    if panels.is_empty() {
        panels.push(QuotaKind::None);
    }
    let err = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    let root = SVGBackend::new(
        path,
        (
            CHART_WIDTH + LEGEND_WIDTH,
            PANEL_HEIGHT * panels.len() as u32,
        ),
    )
    .into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let max_threads = report.threads.iter().copied().max().unwrap_or(1).max(2) as f64;
    for (kind, area) in panels.iter().zip(root.split_evenly((panels.len(), 1))) {
        let lines: Vec<Contender> = series
            .iter()
            .filter(|(_, q)| q == kind && *kind != QuotaKind::None)
            .map(|&(c, _)| c)
            .chain(floors.iter().copied())
            .collect();
        let values = || {
            report
                .points
                .iter()
                .filter(|p| {
                    lines.contains(&p.contender) && (p.quota == *kind || p.role == Role::Floor)
                })
                .map(|p| p.decisions_per_second)
                .filter(|&v| v > 0.0)
        };
        let low = values().fold(f64::INFINITY, f64::min);
        let high = values().fold(0.0, f64::max);
        let (low, high) = if low.is_finite() && high > 0.0 {
            (low / 1.5, high * 1.5)
        } else {
            (1.0, 10.0)
        };
        let (chart_area, legend_area) = area.split_horizontally(CHART_WIDTH);
        let title = match kind {
            QuotaKind::Admitting => "admitting quota: every decision admitted",
            QuotaKind::Refusing => "refusing quota: every decision refused",
            QuotaKind::None => "the floor: bare atomic adds",
        };
        let mut chart = ChartBuilder::on(&chart_area)
            .caption(
                format!(
                    "{title} — {} cores, {}",
                    report.machine.cores, report.machine.cpu_model
                ),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.25..max_threads.log2() + 0.25, (low..high).log_scale())
            .map_err(|e| err(&e))?;
        let threads_label = |x: &f64| {
            let rounded = x.round();
            if (x - rounded).abs() < 1e-6 && rounded >= 0.0 {
                format!("{}", 2f64.powf(rounded))
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_desc("threads (log scale)")
            .y_desc("decisions/s, all threads (log scale)")
            .x_labels(max_threads.log2().ceil() as usize + 1)
            .x_label_formatter(&threads_label)
            .y_labels(12)
            .light_line_style(WHITE)
            .y_label_formatter(&|v| format_rate(*v))
            .draw()
            .map_err(|e| err(&e))?;
        for (i, &c) in lines.iter().enumerate() {
            let quota = if c.role() == Role::Floor {
                QuotaKind::None
            } else {
                *kind
            };
            let points: Vec<(f64, f64)> = report
                .threads
                .iter()
                .filter_map(|&t| report.point(c, quota, t))
                .filter(|p| p.decisions_per_second > 0.0)
                .map(|p| ((p.threads as f64).log2(), p.decisions_per_second))
                .collect();
            let color = colour(c);
            let width = if c.role() == Role::Limitcore { 2 } else { 1 };
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(width),
                ))
                .map_err(|e| err(&e))?;
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| err(&e))?;
            let y = 40 + 22 * i as i32;
            legend_area
                .draw(&Rectangle::new([(8, y - 5), (30, y + 5)], color.filled()))
                .map_err(|e| err(&e))?;
            legend_area
                .draw(&Text::new(
                    legend_name(c),
                    (38, y - 7),
                    ("sans-serif", 14).into_font(),
                ))
                .map_err(|e| err(&e))?;
        }
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// The legend's name: the contender's, with " (peer)" or " (floor)".
fn legend_name(c: Contender) -> String {
    match c.role() {
        Role::Limitcore => c.name().to_owned(),
        Role::Peer => format!("{c} (peer)"),
        Role::Floor => format!("{c} (floor)"),
    }
}

/// A contender's colour, the same in every panel; the floor in greys.
fn colour(c: Contender) -> RGBColor {
    const COLOURS: [RGBColor; 16] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(0, 0, 128),
        RGBColor(128, 0, 0),
        RGBColor(0, 100, 0),
        RGBColor(255, 0, 255),
        RGBColor(112, 128, 0),
        RGBColor(0, 128, 128),
        RGBColor(75, 0, 130),
    ];
    match c {
        Contender::FetchAddShared => RGBColor(90, 90, 90),
        Contender::FetchAddPerThread => RGBColor(170, 170, 170),
        _ => {
            let i = Contender::ALL.iter().position(|&x| x == c).unwrap_or(0);
            COLOURS[i % COLOURS.len()]
        }
    }
}

/// Decisions per second on an axis: "20M", "1.5G", "800k".
fn format_rate(v: f64) -> String {
    let (scaled, unit) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if scaled >= 10.0 || (scaled - scaled.round()).abs() < 0.05 {
        format!("{scaled:.0}{unit}")
    } else {
        format!("{scaled:.1}{unit}")
    }
}
