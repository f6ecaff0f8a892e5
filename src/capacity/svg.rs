//! The timeline as an SVG for a capacity review: a date axis with a tick per day (or per
//! few days), one lane per reservation (its reserved window filled, the idle part hatched,
//! the past greyed), its consumers under the bar, blocks ending within a week flagged in
//! red, gaps between one consumer's reservations outlined, and a "now" line. Plain SVG 1.1
//! (rect, line, text, a pattern): every browser and `resvg` draw it.

use std::fmt::Write;

use jiff::{SignedDuration, Timestamp};

use super::timeline::{Timeline, human_hours, short, usd, window};

pub const WIDTH: u32 = 1200;
/// The label column on the left.
pub const LEFT: f64 = 340.0;
pub const RIGHT: f64 = 30.0;
pub const TOP: f64 = 90.0;
pub const LANE: f64 = 78.0;
/// The bar's offset and height inside a lane.
pub const BAR_Y: f64 = 10.0;
pub const BAR_H: f64 = 26.0;
const FOOTER: f64 = 70.0;

pub const USED: &str = "#2f6fb3";
pub const IDLE: &str = "#e8891c";
/// Expected idle (a block that has not started, more than its consumers want): paler.
pub const EXPECTED_IDLE: &str = "#f3c58f";
pub const PAST: &str = "#9aa7b4";
pub const WARN: &str = "#c62828";

/// The picture's height for a timeline of `lanes` reservations.
pub fn height(lanes: usize) -> u32 {
    (TOP + LANE * lanes.max(1) as f64 + FOOTER) as u32
}

/// At most `n` characters, the rest replaced by "…" (labels must stay in their column).
fn fit(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n - 1).collect::<String>()) }
}

/// A label: a training plan's ARN shortened to its name, then fitted.
fn label(s: &str, n: usize) -> String {
    let s = match s.split_once("arn:aws:sagemaker:") {
        Some((head, arn)) => format!("{head}{}", arn.rsplit('/').next().unwrap_or(arn)),
        None => s.to_string(),
    };
    fit(&s, n)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub fn render(t: &Timeline) -> String {
    let (lo, hi) = window(t);
    let span = hi.duration_since(lo).as_secs_f64();
    let plot = WIDTH as f64 - LEFT - RIGHT;
    let x = |at: Timestamp| LEFT + (at.duration_since(lo).as_secs_f64() / span).clamp(0.0, 1.0) * plot;
    let h = height(t.reservations.len());
    let bottom = TOP + LANE * t.reservations.len().max(1) as f64;
    let now = t.now;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">"#
    );
    let _ = writeln!(
        o,
        r##"<defs><pattern id="idle" patternUnits="userSpaceOnUse" width="8" height="8" patternTransform="rotate(45)"><rect width="8" height="8" fill="#fbe3c4"/><rect width="4" height="8" fill="{IDLE}"/></pattern><pattern id="expected-idle" patternUnits="userSpaceOnUse" width="8" height="8" patternTransform="rotate(45)"><rect width="8" height="8" fill="#fdf3e6"/><rect width="2" height="8" fill="{EXPECTED_IDLE}"/></pattern></defs>"##
    );
    let _ = writeln!(o, r##"<rect width="{WIDTH}" height="{h}" fill="#ffffff"/>"##);
    let _ = writeln!(
        o,
        r#"<text x="20" y="30" font-size="18" font-weight="bold">Capacity timeline: stack {} ({})</text>"#,
        esc(&t.stack),
        esc(&t.region)
    );
    let summary = match t.idle_summary() {
        Some(idle) => format!("now {} UTC · idle now: {idle}", short(now)),
        None => format!("now {} UTC · no idle reserved capacity", short(now)),
    };
    let _ = writeln!(o, r##"<text x="20" y="52" fill="#444">{}</text>"##, esc(&summary));
    // Lane backgrounds first, so the grid and the bars draw over them.
    for i in 0..t.reservations.len() {
        let y = TOP + LANE * i as f64;
        let fill = if i % 2 == 0 { "#f3f5f8" } else { "#ffffff" };
        let _ = writeln!(o, r#"<rect class="lane" x="0" y="{y:.1}" width="{WIDTH}" height="{LANE}" fill="{fill}"/>"#);
    }
    // The axis: day ticks (every few days on long windows) and grid lines.
    let days = (span / 86400.0).round().max(1.0) as i64;
    let step = [1, 2, 3, 7, 14, 28].into_iter().find(|s| days / s <= 14).unwrap_or(56);
    let _ = writeln!(o, r##"<line x1="{LEFT}" y1="{TOP}" x2="{}" y2="{TOP}" stroke="#333"/>"##, WIDTH as f64 - RIGHT);
    let mut d = 0;
    while d <= days {
        let at = lo + SignedDuration::from_hours(24 * d);
        let px = x(at);
        let _ = writeln!(o, r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{bottom:.1}" stroke="#e3e3e3"/>"##);
        let _ = writeln!(
            o,
            r##"<text x="{px:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
            TOP - 10.0,
            at.strftime("%b %d")
        );
        d += step;
    }
    for (i, r) in t.reservations.iter().enumerate() {
        let y = TOP + LANE * i as f64;
        let soon = r.ends_soon(now);
        let _ = writeln!(
            o,
            r#"<text x="20" y="{:.1}" font-weight="bold"{}>{}{}</text>"#,
            y + 24.0,
            if soon { format!(r#" fill="{WARN}""#) } else { String::new() },
            esc(&label(&r.address, 36)),
            if soon { " ⚠" } else { "" }
        );
        let _ = writeln!(
            o,
            r##"<text x="20" y="{:.1}" fill="#444">{} ×{} · {} · {}</text>"##,
            y + 42.0,
            esc(if r.instance_type.is_empty() { "?" } else { &r.instance_type }),
            r.total,
            esc(&r.availability_zone),
            esc(if r.state.is_empty() { "state unknown" } else { &r.state })
        );
        let rate = match &r.rate {
            Some(rt) => format!("{}/h per instance", usd(rt.usd_per_instance_hour)),
            None => "unpriced".into(),
        };
        let _ = writeln!(
            o,
            r##"<text x="20" y="{:.1}" fill="#666" font-size="12">{} · {}</text>"##,
            y + 60.0,
            esc(&label(&r.id, 24)),
            rate
        );
        // The bar: past, then from now on used or idle.
        let (s, e) = (r.start.unwrap_or(lo).max(lo), r.end.unwrap_or(hi).min(hi));
        if e > s {
            let (bx, ex) = (x(s), x(e));
            let nx = x(now.clamp(s, e));
            let by = y + BAR_Y;
            if nx > bx {
                let _ = writeln!(
                    o,
                    r#"<rect class="past" x="{bx:.1}" y="{by:.1}" width="{:.1}" height="{BAR_H}" fill="{PAST}"/>"#,
                    nx - bx
                );
            }
            if ex > nx {
                let idle = r.idle(now).unwrap_or(0);
                let total = r.total.max(1) as f64;
                // The used share on top, the idle share hatched below it.
                let used_h = BAR_H * (1.0 - (idle as f64 / total).min(1.0));
                if used_h > 0.0 {
                    let _ = writeln!(
                        o,
                        r#"<rect class="used" x="{nx:.1}" y="{by:.1}" width="{:.1}" height="{used_h:.1}" fill="{USED}"/>"#,
                        ex - nx
                    );
                }
                if idle > 0 {
                    // Idle now, or expected to sit idle once it starts (a paler hatch).
                    let (class, fill, stroke) = if r.is_active(now) {
                        ("idle", "url(#idle)", IDLE)
                    } else {
                        ("expected-idle", "url(#expected-idle)", EXPECTED_IDLE)
                    };
                    let _ = writeln!(
                        o,
                        r#"<rect class="{class}" x="{nx:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="{stroke}"/>"#,
                        by + used_h,
                        ex - nx,
                        BAR_H - used_h
                    );
                }
            }
            let _ = writeln!(
                o,
                r##"<rect x="{bx:.1}" y="{by:.1}" width="{:.1}" height="{BAR_H}" fill="none" stroke="{}" stroke-width="{}"/>"##,
                ex - bx,
                if soon { WARN } else { "#1d3f66" },
                if soon { 2.5 } else { 1.0 }
            );
            // A split plan: nothing reserved between its blocks.
            for w in r.segments.windows(2) {
                let (gs, ge) = (w[0].1.max(lo).min(hi), w[1].0.max(lo).min(hi));
                if ge > gs {
                    let _ = writeln!(
                        o,
                        r##"<rect class="plan-gap" x="{:.1}" y="{by:.1}" width="{:.1}" height="{BAR_H}" fill="#ffffff" stroke="#1d3f66" stroke-dasharray="2,2"/>"##,
                        x(gs),
                        x(ge) - x(gs)
                    );
                }
            }
            // Cut at an edge of the window.
            if let Some(st) = r.start.filter(|st| *st < lo) {
                let _ = writeln!(
                    o,
                    r##"<text x="{:.1}" y="{:.1}" fill="#1d3f66" stroke="#ffffff" stroke-width="3" paint-order="stroke">← since {}</text>"##,
                    bx + 4.0,
                    by + 18.0,
                    st.strftime("%Y-%m-%d")
                );
            }
            if let Some(en) = r.end.filter(|en| *en > hi) {
                let _ = writeln!(
                    o,
                    r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#1d3f66" stroke="#ffffff" stroke-width="3" paint-order="stroke">until {} →</text>"##,
                    ex - 4.0,
                    by + 18.0,
                    en.strftime("%Y-%m-%d")
                );
            }
            if r.end.is_none() {
                let _ = writeln!(
                    o,
                    r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#1d3f66" stroke="#ffffff" stroke-width="3" paint-order="stroke">no end date →</text>"##,
                    ex - 4.0,
                    by + 18.0
                );
            }
        }
        // Under the bar: consumers, idle cost, time left.
        let mut under = vec![];
        if r.consumers.is_empty() {
            under.push("nothing targets it".to_string());
        }
        for c in &r.consumers {
            under.push(match c.desired {
                Some(d) => format!("{} ×{d}", c.address),
                None => c.address.clone(),
            });
        }
        if let Some(n) = r.idle(now).filter(|n| *n > 0) {
            under.push(match r.idle_usd_per_hour(now) {
                Some(c) => format!("idle {n} ≈ {}/h", usd(c)),
                None if r.is_active(now) => format!("idle {n} (unpriced)"),
                None => format!("{n} will sit idle"),
            });
        }
        if soon && let Some(left) = r.hours_left(now) {
            under.push(format!("ends in {}", human_hours(left)));
        }
        // Left-aligned at the bar's start, or right-aligned at the plot's right edge when it
        // would run past it (about 6.6 px a character at 12 px), so it stays in the picture.
        let under = fit(&under.join(" · "), 120);
        let (tx, anchor) = if x(s) + 2.0 + 6.6 * under.chars().count() as f64 > WIDTH as f64 - RIGHT {
            (WIDTH as f64 - RIGHT, r#" text-anchor="end""#)
        } else {
            (x(s) + 2.0, "")
        };
        let _ = writeln!(
            o,
            r##"<text x="{tx:.1}" y="{:.1}"{anchor} fill="{}" font-size="12">{}</text>"##,
            y + BAR_Y + BAR_H + 16.0,
            if soon { WARN } else { "#222" },
            esc(&under)
        );
    }
    // Gaps: dashed red outlines in the lane of the reservation that follows the gap.
    for g in &t.gaps {
        let Some(i) = t.reservations.iter().position(|r| r.address == g.before) else { continue };
        let y = TOP + LANE * i as f64 + BAR_Y;
        let (gx, ex) = (x(g.start.max(lo)), x(g.end.min(hi)));
        let _ = writeln!(
            o,
            r#"<rect class="gap" x="{gx:.1}" y="{y:.1}" width="{:.1}" height="{BAR_H}" fill="none" stroke="{WARN}" stroke-dasharray="5,3"/>"#,
            (ex - gx).max(1.0)
        );
        let cost = g.on_demand_usd.map(|c| format!(", On-Demand ≈ {}", usd(c))).unwrap_or_default();
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="{WARN}" font-size="11">gap {}{}</text>"#,
            (gx + ex) / 2.0,
            y - 2.0,
            human_hours(g.hours),
            esc(&cost)
        );
    }
    // Now.
    let nx = x(now);
    let _ = writeln!(
        o,
        r#"<line class="now" x1="{nx:.1}" y1="{:.1}" x2="{nx:.1}" y2="{bottom:.1}" stroke="{WARN}" stroke-width="2" stroke-dasharray="6,4"/>"#,
        TOP - 4.0
    );
    let _ = writeln!(
        o,
        r#"<text x="{nx:.1}" y="{:.1}" text-anchor="middle" fill="{WARN}" font-weight="bold">now</text>"#,
        bottom + 16.0
    );
    // Legend.
    let ly = bottom + 46.0;
    let items = [
        (USED.to_string(), "reserved, in use"),
        ("url(#idle)".to_string(), "reserved, idle"),
        ("url(#expected-idle)".to_string(), "will sit idle"),
        (PAST.to_string(), "past"),
        ("none".to_string(), "gap"),
    ];
    for (k, (fill, label)) in items.iter().enumerate() {
        let lx = 20.0 + 190.0 * k as f64;
        let stroke =
            if *fill == "none" { format!(r#" stroke="{WARN}" stroke-dasharray="5,3""#) } else { String::new() };
        let _ = writeln!(o, r#"<rect x="{lx}" y="{:.1}" width="28" height="14" fill="{fill}"{stroke}/>"#, ly - 11.0);
        let _ = writeln!(o, r#"<text x="{}" y="{ly:.1}">{label}</text>"#, lx + 36.0);
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{ly:.1}" fill="{WARN}">⚠ ends within a week</text>"#,
        20.0 + 190.0 * items.len() as f64
    );
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::timeline::tests::sample;

    #[test]
    fn svg_rendering() {
        let svg = render(&sample());
        insta::assert_snapshot!(svg);
    }

    /// Rendered to pixels by resvg: the picture has the size it says, and each lane has
    /// the colours its reservation should have (so a malformed or empty picture fails).
    #[test]
    fn svg_renders_to_the_expected_picture() {
        let tl = sample();
        let png = to_pixels(&render(&tl));
        assert_eq!((png.width(), png.height()), (WIDTH, height(tl.reservations.len())));
        let px = |x: f64, y: f64| {
            let p = png.pixel(x as u32, y as u32).unwrap();
            (p.red(), p.green(), p.blue())
        };
        let (lo, hi) = window(&tl);
        let plot = WIDTH as f64 - LEFT - RIGHT;
        let xat =
            |at: Timestamp| LEFT + at.duration_since(lo).as_secs_f64() / hi.duration_since(lo).as_secs_f64() * plot;
        for (i, r) in tl.reservations.iter().enumerate() {
            let mid_y = TOP + LANE * i as f64 + BAR_Y + BAR_H / 2.0;
            let end = r.end.unwrap_or(hi).min(hi);
            let start = r.start.unwrap_or(lo).max(lo).max(tl.now);
            let x = (xat(start) + xat(end)) / 2.0;
            let (red, green, blue) = px(x, mid_y);
            let lane_bg = px(LEFT - 5.0, mid_y);
            assert_ne!((red, green, blue), lane_bg, "lane {} is drawn at x={x}", r.address);
            // Idle lanes are hatched orange somewhere in the bar's lower half; used ones blue.
            let idle = r.idle(tl.now).unwrap_or(0) > 0;
            let lower = TOP + LANE * i as f64 + BAR_Y + BAR_H - 3.0;
            let orange = (0..16).any(|dx| {
                let (r, g, b) = px(x + dx as f64, lower);
                r > 200 && g > 100 && g < 170 && b < 80
            });
            // Idle now: orange; expected to sit idle (not started): the paler hatch (review
            // timeline minor 9).
            let active_idle = idle && r.is_active(tl.now);
            assert_eq!(orange, active_idle, "lane {}: hatched orange iff idle now", r.address);
            let pale = (0..16).any(|dx| {
                let (r, g, b) = px(x + dx as f64, lower);
                r > 230 && (180..215).contains(&g) && (120..165).contains(&b)
            });
            // (Anti-aliased edges of the orange hatch have pale pixels too: pale and no orange.)
            assert_eq!(pale && !orange, idle && !active_idle, "lane {}: pale hatch iff expected idle", r.address);
            if !idle {
                assert!(blue > red && blue > 150, "lane {}: used is blue, got {:?}", r.address, (red, green, blue));
            }
        }
        // Outside every lane's bar, at the top-left, the white background.
        assert_eq!(px(5.0, 5.0), (255, 255, 255));
    }

    /// Review timeline M1/M3/minor 8: a year-old ODCR does not stretch the axis (it is cut
    /// and marked "← since"), a split plan's gap is drawn, long labels are shortened.
    #[test]
    fn long_lived_odcr_and_split_plan() {
        let tl = crate::capacity::timeline::tests::long_lived();
        let svg = render(&tl);
        assert!(svg.contains("← since 2025-11-20"), "{svg}");
        assert!(svg.contains(r#"class="plan-gap""#));
        assert!(!svg.contains("arn:aws:sagemaker"), "a plan is labelled by its name");
        // The 2-day block next week is wide, not a sliver: more than 40 px.
        let (lo, hi) = window(&tl);
        let plot = WIDTH as f64 - LEFT - RIGHT;
        let px_per_day = plot / (hi.duration_since(lo).as_secs_f64() / 86400.0);
        assert!(px_per_day * 2.0 > 40.0, "{px_per_day} px per day");
        // Under-bar text of a bar in the right half is right-aligned inside the picture.
        assert!(svg.contains(&format!(r#"x="{:.1}" "#, WIDTH as f64 - RIGHT)));
        let _ = to_pixels(&svg);
    }

    pub fn to_pixels(svg: &str) -> resvg::tiny_skia::Pixmap {
        let tree = resvg::usvg::Tree::from_str(svg, &resvg::usvg::Options::default()).expect("a valid SVG");
        let size = tree.size().to_int_size();
        let mut pix = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
        resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pix.as_mut());
        pix
    }
}
