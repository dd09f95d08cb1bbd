//! The results as an SVG chart a person can open: one group of horizontal
//! bars per operation, one bar per system, ns per operation on a log scale.

use super::report::{fmt_ratio, Report};
use std::fmt::Write;

const WIDTH: f64 = 1120.0;
const LABEL_RIGHT: f64 = 250.0; // operation labels end here
const PLOT_LEFT: f64 = 260.0;
const PLOT_RIGHT: f64 = 930.0; // room to the right for the value labels
const BAR_H: f64 = 11.0;
const BAR_GAP: f64 = 2.0;
const GROUP_GAP: f64 = 14.0;

/// A log10 scale from whole decades `lo` to `hi` (10^lo .. 10^hi ns) onto
/// pixels `x0..x1`.
#[derive(Debug, PartialEq)]
pub struct LogScale {
    pub lo: i32,
    pub hi: i32,
    pub x0: f64,
    pub x1: f64,
}

impl LogScale {
    /// The smallest whole-decade range holding every value (at least one
    /// decade wide).
    pub fn fit(values: impl IntoIterator<Item = f64>, x0: f64, x1: f64) -> LogScale {
        let (mut lo, mut hi) = (i32::MAX, i32::MIN);
        for v in values.into_iter().filter(|v| *v > 0.0 && v.is_finite()) {
            lo = lo.min(v.log10().floor() as i32);
            hi = hi.max(v.log10().ceil() as i32);
        }
        if lo > hi {
            (lo, hi) = (1, 6);
        }
        if hi <= lo {
            hi = lo + 1;
        }
        LogScale { lo, hi, x0, x1 }
    }

    pub fn x(&self, v: f64) -> f64 {
        let t = (v.max(1e-9).log10() - f64::from(self.lo)) / f64::from(self.hi - self.lo);
        self.x0 + t.clamp(0.0, 1.0) * (self.x1 - self.x0)
    }
}

/// A time for people: three significant digits and a unit.
pub fn fmt_time(ns: f64) -> String {
    let (v, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

/// A decade's axis label: 10 ns, 1 µs, 100 ms...
fn decade_label(d: i32) -> String {
    let units = ["ns", "µs", "ms", "s"];
    let i = (d.max(0) / 3).min(3);
    format!("{} {}", 10i64.pow((d - 3 * i).max(0) as u32), units[i as usize])
}

/// Fill colours by system: native grey, nomu's paths blues and greens, UML
/// orange, gVisor reds.
fn color(id: &str, nth_other: usize) -> &'static str {
    match id {
        "native" => "#6b6b6b",
        "nomu-zpoline" => "#1a9850",
        "nomu-seccomp" => "#2166ac",
        "nomu-split" => "#67a9cf",
        "nomu-sysemu" => "#8e6fc1",
        "uml" => "#e08214",
        _ => ["#d73027", "#a50026", "#f46d43", "#b2182b"][nth_other % 4],
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub fn render(report: &Report) -> String {
    let systems: Vec<&str> = report.ran().map(|s| s.id.as_str()).collect();
    let values = systems.iter().flat_map(|s| report.ops.iter().filter_map(move |o| report.ns(s, o.name)));
    let scale = LogScale::fit(values, PLOT_LEFT, PLOT_RIGHT);

    let title_h = 58.0;
    let legend_h = 22.0 * (systems.len() as f64 / 5.0).ceil().max(1.0);
    let axis_h = 22.0;
    let top = title_h + legend_h + axis_h;
    let group_h = systems.len() as f64 * (BAR_H + BAR_GAP) - BAR_GAP + GROUP_GAP;
    let plot_h = report.ops.len() as f64 * group_h;
    let skipped: Vec<String> = report
        .systems
        .iter()
        .filter(|s| !s.ran())
        .map(|s| shorten(&format!("{}: {}", s.id, not_run_reason(s)), 170))
        .collect();
    let height = top + plot_h + axis_h + 30.0 + 16.0 * skipped.len() as f64;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let m = &report.machine;
    let pin = report.cpu.map_or("not pinned".into(), |c| format!("pinned to CPU {c}"));
    let _ = writeln!(
        o,
        r#"<text x="20" y="26" font-size="18" font-weight="bold">nomu bench: time per operation (log scale, shorter is faster)</text>"#
    );
    let _ = writeln!(
        o,
        r##"<text x="20" y="46" font-size="12" fill="#444">{} · {} cores · Linux {} · {} · {pin} · best of {} round(s) · labels: time (ratio to native)</text>"##,
        esc(&m.cpu_model),
        m.cores,
        esc(&m.kernel),
        esc(&m.date),
        report.rounds
    );

    // Legend.
    let mut nth_other = 0;
    let colors: Vec<&str> = systems
        .iter()
        .map(|s| {
            let c = color(s, nth_other);
            if s.starts_with("gvisor") {
                nth_other += 1;
            }
            c
        })
        .collect();
    for (i, (s, c)) in systems.iter().zip(&colors).enumerate() {
        let x = 20.0 + (i % 5) as f64 * 200.0;
        let y = title_h + 4.0 + (i / 5) as f64 * 22.0;
        let _ = writeln!(o, r#"<rect x="{x}" y="{y}" width="14" height="14" fill="{c}"/>"#);
        let _ = writeln!(o, r#"<text x="{}" y="{}" font-size="13">{}</text>"#, x + 20.0, y + 12.0, esc(s));
    }

    // Decade grid lines and labels, top and bottom; light lines at 2x, 5x.
    let bottom = top + plot_h;
    for d in scale.lo..=scale.hi {
        let x = scale.x(10f64.powi(d));
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#bbb" stroke-width="1"/>"##,
            top - 4.0
        );
        for y in [top - 8.0, bottom + 16.0] {
            let _ = writeln!(
                o,
                r##"<text x="{x:.1}" y="{y:.1}" font-size="11" text-anchor="middle" fill="#333">{}</text>"##,
                decade_label(d)
            );
        }
        if d < scale.hi {
            for k in [2.0, 5.0] {
                let x = scale.x(k * 10f64.powi(d));
                let _ = writeln!(
                    o,
                    r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#e6e6e6" stroke-width="1"/>"##
                );
            }
        }
    }

    // Bars.
    for (g, op) in report.ops.iter().enumerate() {
        let y0 = top + g as f64 * group_h;
        if g % 2 == 1 {
            let _ = writeln!(
                o,
                r##"<rect x="10" y="{:.1}" width="{:.0}" height="{group_h:.1}" fill="#f4f4f4" fill-opacity="0.6"/>"##,
                y0 - GROUP_GAP / 2.0,
                WIDTH - 20.0
            );
        }
        let mid = y0 + (group_h - GROUP_GAP) / 2.0;
        let _ = writeln!(
            o,
            r#"<text x="{LABEL_RIGHT}" y="{:.1}" font-size="13" text-anchor="end">{}</text>"#,
            mid + 4.5,
            esc(op.label)
        );
        for (i, (s, c)) in systems.iter().zip(&colors).enumerate() {
            let y = y0 + i as f64 * (BAR_H + BAR_GAP);
            match report.outcome(s, op.name) {
                Some(Ok(ns)) => {
                    let w = (scale.x(*ns) - PLOT_LEFT).max(1.0);
                    let ratio = if *s == "native" {
                        String::new()
                    } else {
                        report.ratio(s, op.name).map_or(String::new(), |r| format!(" ({})", fmt_ratio(r)))
                    };
                    let _ = writeln!(
                        o,
                        r#"<rect x="{PLOT_LEFT}" y="{y:.1}" width="{w:.1}" height="{BAR_H}" fill="{c}"><title>{} {}: {:.1} ns</title></rect>"#,
                        esc(s),
                        op.name,
                        ns
                    );
                    let _ = writeln!(
                        o,
                        r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#222">{}{ratio}</text>"##,
                        PLOT_LEFT + w + 4.0,
                        y + BAR_H - 2.0,
                        fmt_time(*ns)
                    );
                }
                other => {
                    let what = if other.is_some() { "error" } else { "not measured" };
                    let _ = writeln!(
                        o,
                        r##"<text x="{:.1}" y="{:.1}" font-size="10" font-style="italic" fill="#999">{} {what}</text>"##,
                        PLOT_LEFT + 4.0,
                        y + BAR_H - 2.0,
                        esc(s)
                    );
                }
            }
        }
    }
    let _ = writeln!(
        o,
        r##"<line x1="{PLOT_LEFT}" y1="{:.1}" x2="{PLOT_LEFT}" y2="{bottom:.1}" stroke="#333" stroke-width="1"/>"##,
        top - 4.0
    );

    // Systems that did not run, and why.
    let mut y = bottom + axis_h + 20.0;
    for s in &skipped {
        let _ = writeln!(o, r##"<text x="20" y="{y:.1}" font-size="11" fill="#666">not run: {}</text>"##, esc(s));
        y += 16.0;
    }
    o.push_str("</svg>\n");
    o
}

/// At most `max` characters, an ellipsis marking the cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

fn not_run_reason(s: &super::report::SystemReport) -> String {
    match &s.state {
        super::report::State::Skipped(why) => why.clone(),
        super::report::State::Ran { .. } => "every run failed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_scale_fits_whole_decades() {
        let s = LogScale::fit([150.0, 2500.0, 6.1e6], 0.0, 500.0);
        assert_eq!((s.lo, s.hi), (2, 7));
        assert_eq!(s.x(100.0), 0.0);
        assert_eq!(s.x(1e7), 500.0);
        assert!((s.x(1e3) - 100.0).abs() < 1e-9);
        assert!((s.x(1e5) - 300.0).abs() < 1e-9);
        // Out of range values are clamped, not drawn outside the plot.
        assert_eq!(s.x(1.0), 0.0);
        // Nothing measured, or one value on a decade: still a usable scale.
        let e = LogScale::fit([], 0.0, 1.0);
        assert!(e.hi > e.lo);
        let one = LogScale::fit([1000.0], 0.0, 1.0);
        assert_eq!((one.lo, one.hi), (3, 4));
    }

    #[test]
    fn labels() {
        assert_eq!(decade_label(1), "10 ns");
        assert_eq!(decade_label(3), "1 µs");
        assert_eq!(decade_label(5), "100 µs");
        assert_eq!(decade_label(7), "10 ms");
        assert_eq!(decade_label(9), "1 s");
        assert_eq!(fmt_time(206.6), "207 ns");
        assert_eq!(fmt_time(2838.8), "2.84 µs");
        assert_eq!(fmt_time(6_112_240.6), "6.11 ms");
        assert_eq!(fmt_time(45.0), "45.0 ns");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
    }
}
