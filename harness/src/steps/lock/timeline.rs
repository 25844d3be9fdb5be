//! A timeline of a lock case as a self-contained SVG (no scripts, no external references) for
//! the HTML report: a legend of swatches, then one lane per client with the server's lock holds
//! (the part after the leader's timer fired drawn paler), the probe's run (hatched where the
//! client killed it, grey where the harness stopped it at the end of the clause), the proxy's
//! faults as red marks, requests that got no answer as grey crosses, and its partitions as
//! shaded spans (refusing and hanging told apart); each violation is outlined on the lanes of
//! the clients it involves; a time axis runs along the bottom. Hovering shows details
//! (`<title>` elements).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Instant;

use super::checker::{Hold, Violation, offset_ms};
use crate::plugins::lock::exchange::Exchange;
use crate::plugins::lock::probe::ProbeInterval;
use crate::plugins::lock::proxy_faults::{PartitionMode, PartitionWindow};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 44.0;
const LANE: f64 = 46.0;
const AXIS: f64 = 34.0;

/// Partitions of one client's proxy.
#[derive(Clone, Debug)]
pub struct ClientPartitions {
    pub client: String,
    pub windows: Vec<PartitionWindow>,
}

/// Everything drawn; times are turned into milliseconds from `t0`, open intervals end at
/// `until`.
#[derive(Clone, Debug)]
pub struct Timeline<'a> {
    pub t0: Instant,
    pub until: Instant,
    /// Lanes in this order; clients found only in the data are added after them.
    pub clients: Vec<String>,
    pub holds: &'a [Hold],
    pub probes: &'a [ProbeInterval],
    pub exchanges: &'a [Exchange],
    pub partitions: &'a [ClientPartitions],
    pub violations: &'a [Violation],
    /// When the harness began stopping every client at the end of the clause: a probe that
    /// ended after it was stopped by the harness, not by its client.
    pub stopped_at: Option<Instant>,
}

/// The legend: (swatch fill, label).
const LEGEND: &[(&str, &str)] = &[
    ("#38a169", "lock held (server)"),
    ("#9ae6b4", "held after expiry (lock delay)"),
    ("#2b6cb0", "protected process"),
    ("url(#killed)", "killed by its client"),
    ("url(#stopped)", "stopped by the harness at the end"),
    ("#f6ad55", "refusing connections"),
    ("#b794f4", "hanging requests"),
    ("#e53e3e", "fault injected"),
    ("#718096", "no answer (dropped)"),
];

/// XML-escapes text for element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 does not allow.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A step of 1, 2 or 5 × 10^k ms giving about 8 ticks over `span_ms`.
fn tick_step(span_ms: f64) -> f64 {
    let raw = (span_ms / 8.0).max(1.0);
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= raw {
            return m * mag;
        }
    }
    10.0 * mag
}

fn tick_label(ms: f64) -> String {
    if ms >= 1000.0 {
        let s = ms / 1000.0;
        if (s - s.round()).abs() < 1e-9 {
            format!("{}s", s.round())
        } else {
            format!("{s:.1}s")
        }
    } else {
        format!("{ms:.0}ms")
    }
}

impl Timeline<'_> {
    fn lanes(&self) -> Vec<String> {
        let mut lanes = self.clients.clone();
        let mut seen: BTreeSet<String> = lanes.iter().cloned().collect();
        let found = self
            .holds
            .iter()
            .filter_map(|h| h.client.clone())
            .chain(self.probes.iter().map(|p| p.label.clone()))
            .chain(self.exchanges.iter().map(|e| e.client.clone()))
            .chain(self.partitions.iter().map(|p| p.client.clone()));
        for c in found {
            if seen.insert(c.clone()) {
                lanes.push(c);
            }
        }
        if self.holds.iter().any(|h| h.client.is_none()) {
            lanes.push("(no client)".to_string());
        }
        lanes
    }

    /// The SVG document: the frame and legend, then each layer over the lanes, the axis last.
    pub fn render(&self) -> String {
        let mut d = Drawing::new(self);
        d.frame();
        d.lanes();
        d.partitions();
        d.holds();
        d.probes();
        d.unanswered();
        d.faults();
        d.violations();
        d.axis()
    }
}

/// Where things go: the time scale and the lanes.
struct Scale {
    t0: Instant,
    until: Instant,
    /// The whole time drawn, in ms.
    span: f64,
    lanes: Vec<String>,
}

impl Scale {
    /// The width of the plot area.
    const PLOT: f64 = WIDTH - LEFT - RIGHT;

    fn x(&self, ms: u64) -> f64 {
        LEFT + Self::PLOT * (ms as f64 / self.span).min(1.0)
    }

    fn at(&self, i: Instant) -> f64 {
        self.x(offset_ms(self.t0, i))
    }

    fn ms(&self, i: Instant) -> u64 {
        offset_ms(self.t0, i)
    }

    /// The top of a client's lane (holds without a client have a lane of their own).
    fn lane_y(&self, client: Option<&str>) -> Option<f64> {
        let name = client.unwrap_or("(no client)");
        self.lanes
            .iter()
            .position(|l| l == name)
            .map(|i| TOP + LANE * i as f64)
    }

    fn lanes_height(&self) -> f64 {
        LANE * self.lanes.len().max(1) as f64
    }
}

/// A timeline being drawn, one layer after another.
struct Drawing<'t, 'a> {
    tl: &'t Timeline<'a>,
    scale: Scale,
    s: String,
}

impl<'t, 'a> Drawing<'t, 'a> {
    fn new(tl: &'t Timeline<'a>) -> Self {
        Drawing {
            tl,
            scale: Scale {
                t0: tl.t0,
                until: tl.until,
                span: offset_ms(tl.t0, tl.until).max(1) as f64,
                lanes: tl.lanes(),
            },
            s: String::new(),
        }
    }

    /// The document's head, the hatch patterns, the background and the legend.
    fn frame(&mut self) {
        let height = TOP + self.scale.lanes_height() + AXIS;
        let s = &mut self.s;
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="lock-timeline" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
        );
        s.push_str(
            r##"<defs><pattern id="killed" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#2b6cb0"/></pattern><pattern id="stopped" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#a0aec0"/></pattern></defs>"##,
        );
        s.push_str(r##"<rect x="0" y="0" width="100%" height="100%" fill="#ffffff"/>"##);
        // The legend: a swatch and a label each, in two rows.
        s.push_str(r#"<g class="legend">"#);
        for (i, (fill, text)) in LEGEND.iter().enumerate() {
            let (col, row) = (i % 5, i / 5);
            let lx = 8.0 + col as f64 * 190.0;
            let ly = 6.0 + row as f64 * 16.0;
            let _ = write!(
                s,
                r##"<rect x="{lx}" y="{ly}" width="14" height="10" fill="{fill}" stroke="#999" stroke-width="0.5"/><text x="{}" y="{}" fill="#333">{}</text>"##,
                lx + 18.0,
                ly + 9.0,
                escape(text)
            );
        }
        s.push_str("</g>");
    }

    /// One band per client, named on the left.
    fn lanes(&mut self) {
        for (i, name) in self.scale.lanes.iter().enumerate() {
            let y = TOP + LANE * i as f64;
            let fill = if i % 2 == 0 { "#f7f7f7" } else { "#efefef" };
            let _ = write!(
                self.s,
                r##"<g class="lane" data-client="{c}"><rect x="0" y="{y}" width="{WIDTH}" height="{LANE}" fill="{fill}"/><text x="8" y="{}" fill="#222">{c}</text></g>"##,
                y + LANE / 2.0 + 4.0,
                c = escape(name)
            );
        }
    }

    /// Partitions: shaded behind the lane.
    fn partitions(&mut self) {
        let sc = &self.scale;
        for p in self.tl.partitions {
            let Some(y) = sc.lane_y(Some(&p.client)) else {
                continue;
            };
            for w in &p.windows {
                let end = w.end.unwrap_or(sc.until);
                let (x1, x2) = (sc.at(w.start), sc.at(end));
                let (mode, fill) = match w.mode {
                    PartitionMode::Refuse => ("refusing", "#f6ad55"),
                    PartitionMode::Hang => ("hanging", "#b794f4"),
                };
                let _ = write!(
                    self.s,
                    r##"<rect class="partition" data-mode="{mode}" x="{x1:.1}" y="{y}" width="{:.1}" height="{LANE}" fill="{fill}" fill-opacity="0.35"><title>partition ({mode}) {}–{} ms</title></rect>"##,
                    (x2 - x1).max(1.0),
                    sc.ms(w.start),
                    sc.ms(end),
                );
            }
        }
    }

    /// The server's holds, paler after the leader's timer fired.
    fn holds(&mut self) {
        let sc = &self.scale;
        for h in self.tl.holds {
            let Some(y) = sc.lane_y(h.client.as_deref()) else {
                continue;
            };
            // Solid until the leader's timer fired (or the hold ended), pale through the delay.
            let valid_end = match (h.expired, h.end) {
                (Some(x), Some(e)) => x.min(e),
                (x, e) => x.or(e).unwrap_or(sc.until),
            };
            let (x1, x2) = (sc.at(h.start), sc.at(valid_end));
            let _ = write!(
                self.s,
                r##"<rect class="hold" x="{x1:.1}" y="{:.1}" width="{:.1}" height="12" fill="#38a169"><title>lock {} held {}–{} ms{}</title></rect>"##,
                y + 8.0,
                (x2 - x1).max(1.0),
                escape(&h.lock_id),
                sc.ms(h.start),
                sc.ms(valid_end),
                match h.end_reason {
                    Some(r) => format!(" ({r:?})").to_lowercase(),
                    None => String::new(),
                }
            );
            if let (Some(exp), end) = (h.expired, h.end) {
                let x3 = sc.at(end.unwrap_or(sc.until));
                let x2 = sc.at(exp);
                let _ = write!(
                    self.s,
                    r##"<rect class="hold-expired" x="{x2:.1}" y="{:.1}" width="{:.1}" height="12" fill="#9ae6b4"><title>lock {} expired at {} ms, kept through the lock delay</title></rect>"##,
                    y + 8.0,
                    (x3 - x2).max(1.0),
                    escape(&h.lock_id),
                    sc.ms(exp)
                );
            }
        }
    }

    /// Each run of the protected process: hatched where its client killed it, grey where the
    /// harness stopped it at the end of the clause.
    fn probes(&mut self) {
        let sc = &self.scale;
        for p in self.tl.probes {
            let Some(y) = sc.lane_y(Some(&p.label)) else {
                continue;
            };
            let end = p.end.unwrap_or(sc.until);
            let (x1, x2) = (sc.at(p.start), sc.at(end));
            let stopped_by_harness = self
                .tl
                .stopped_at
                .is_some_and(|s| p.end.is_none_or(|e| e >= s));
            let fill = if stopped_by_harness {
                "url(#stopped)"
            } else if p.killed {
                "url(#killed)"
            } else {
                "#2b6cb0"
            };
            let how = match (stopped_by_harness, p.exit, p.killed, p.end) {
                (true, _, _, _) => {
                    "still running when the harness stopped the clients at the end of the clause"
                        .to_string()
                }
                (_, Some(c), _, _) => format!("exited {c}"),
                (_, None, true, _) => "killed by its client".to_string(),
                (_, None, _, None) => "still running".to_string(),
                _ => "ended".to_string(),
            };
            let _ = write!(
                self.s,
                r##"<rect class="probe" x="{x1:.1}" y="{:.1}" width="{:.1}" height="12" fill="{fill}"><title>probe pid {} ran {}–{} ms, {how}</title></rect>"##,
                y + 24.0,
                (x2 - x1).max(1.0),
                p.pid,
                sc.ms(p.start),
                sc.ms(end),
            );
        }
    }

    /// Requests that got no answer (a dropped or refused connection, a client that gave up):
    /// a grey cross on the hold bar's row.
    fn unanswered(&mut self) {
        let sc = &self.scale;
        for e in self.tl.exchanges.iter().filter(|e| e.status.is_none()) {
            let Some(y) = sc.lane_y(Some(&e.client)) else {
                continue;
            };
            let cx = sc.at(e.at);
            let cy = y + 14.0;
            let _ = write!(
                self.s,
                r##"<path class="dropped" d="M{:.1} {:.1} L{:.1} {:.1} M{:.1} {:.1} L{:.1} {:.1}" stroke="#718096" stroke-width="1.5"><title>{} at {} ms: no answer ({:?})</title></path>"##,
                cx - 3.0,
                cy - 3.0,
                cx + 3.0,
                cy + 3.0,
                cx - 3.0,
                cy + 3.0,
                cx + 3.0,
                cy - 3.0,
                escape(e.operation.as_str()),
                sc.ms(e.at),
                e.outcome
            );
        }
    }

    /// The proxy's faults: a small red mark above the hold bar.
    fn faults(&mut self) {
        let sc = &self.scale;
        for e in self.tl.exchanges {
            let Some(f) = &e.fault else { continue };
            let Some(y) = sc.lane_y(Some(&e.client)) else {
                continue;
            };
            let cx = sc.at(e.at);
            let _ = write!(
                self.s,
                r##"<path class="fault" d="M{:.1} {:.1} L{:.1} {:.1} L{:.1} {:.1} Z" fill="#e53e3e"><title>{} {} at {} ms: {}</title></path>"##,
                cx - 3.0,
                y + 1.0,
                cx + 3.0,
                y + 1.0,
                cx,
                y + 7.0,
                escape(e.operation.as_str()),
                escape(&e.method),
                sc.ms(e.at),
                escape(&f.description)
            );
        }
    }

    /// Violations, outlined on the lanes of the clients they involve.
    fn violations(&mut self) {
        let sc = &self.scale;
        for v in self.tl.violations {
            let (x1, x2) = (sc.x(v.window.start_ms), sc.x(v.window.end_ms));
            for c in &v.clients {
                let Some(y) = sc.lane_y(Some(c)) else {
                    continue;
                };
                let _ = write!(
                    self.s,
                    r##"<rect class="violation" data-client="{}" x="{x1:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#e53e3e" fill-opacity="0.15" stroke="#c53030" stroke-width="2"><title>{}</title></rect>"##,
                    escape(c),
                    y + 2.0,
                    (x2 - x1).max(3.0),
                    LANE - 4.0,
                    escape(&v.detail)
                );
            }
        }
    }

    /// The time axis along the bottom, and the end of the document.
    fn axis(mut self) -> String {
        let sc = &self.scale;
        let axis_y = TOP + sc.lanes_height();
        let s = &mut self.s;
        let _ = write!(
            s,
            r##"<g class="axis"><line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#444"/>"##,
            WIDTH - RIGHT
        );
        let step = tick_step(sc.span);
        let mut t = 0.0;
        let mut ticks = 0;
        while t <= sc.span + 0.5 && ticks < 100 {
            let tx = LEFT + Scale::PLOT * (t / sc.span);
            let _ = write!(
                s,
                r##"<line x1="{tx:.1}" y1="{axis_y}" x2="{tx:.1}" y2="{:.1}" stroke="#444"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
                axis_y + 5.0,
                axis_y + 18.0,
                tick_label(t)
            );
            t += step;
            ticks += 1;
        }
        s.push_str("</g></svg>");
        self.s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::lock::exchange::AppliedFault;
    use crate::plugins::lock::exchange::tests::exchange;
    use crate::plugins::lock::proxy_faults::{FaultSource, Operation};
    use crate::steps::lock::checker::{HoldEnd, ViolationKind, Window};
    use std::time::Duration;

    /// Tags open and close in order: a tiny well-formedness check (no DTD, no CDATA here).
    fn balanced(xml: &str) -> Result<usize, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = xml;
        let mut elements = 0;
        while let Some(i) = rest.find('<') {
            let text = &rest[..i];
            if text.contains('>') {
                return Err(format!("stray '>' in text {text:?}"));
            }
            let Some(j) = rest[i..].find('>') else {
                return Err("unterminated tag".into());
            };
            let tag = &rest[i + 1..i + j];
            rest = &rest[i + j + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else {
                let name: String = tag
                    .chars()
                    .take_while(|c| !c.is_whitespace() && *c != '/')
                    .collect();
                if name.is_empty() || !tag.matches('"').count().is_multiple_of(2) {
                    return Err(format!("bad tag <{tag}>"));
                }
                elements += 1;
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
        }
        if !stack.is_empty() {
            return Err(format!("unclosed {stack:?}"));
        }
        Ok(elements)
    }

    #[test]
    fn the_checker_itself_catches_bad_xml() {
        assert!(balanced("<a><b/></a>").is_ok());
        assert!(balanced("<a><b></a>").is_err());
        assert!(balanced("<a>x > y</a>").is_err());
        assert!(balanced("<a x=\"1></a>").is_err());
    }

    #[test]
    fn svg_is_well_formed_with_lanes_and_violations() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let holds = vec![
            Hold {
                client: Some("a<1>".into()),
                lock_id: "L1".into(),
                namespace: "default".into(),
                path: "p".into(),
                start: t0 + ms(100),
                expired: Some(t0 + ms(1500)),
                end: Some(t0 + ms(2000)),
                end_reason: Some(HoldEnd::Invalidated),
                conflicted: None,
            },
            Hold {
                client: None,
                lock_id: "H".into(),
                namespace: "default".into(),
                path: "p".into(),
                start: t0 + ms(2100),
                expired: None,
                end: None,
                end_reason: None,
                conflicted: None,
            },
        ];
        let probes = vec![
            ProbeInterval {
                label: "a<1>".into(),
                pid: 1,
                start: t0 + ms(120),
                end: Some(t0 + ms(2500)),
                exit: None,
                killed: true,
                beats: 3,
                max_gap: None,
            },
            ProbeInterval {
                label: "b".into(),
                pid: 2,
                start: t0 + ms(2200),
                end: None,
                exit: None,
                killed: false,
                beats: 1,
                max_gap: None,
            },
        ];
        let mut dropped = exchange("b", Operation::Renew, t0 + ms(1100), 503);
        dropped.status = None;
        let mut e = exchange("b", Operation::Renew, t0 + ms(900), 503);
        e.fault = Some(AppliedFault {
            source: FaultSource::Campaign,
            rule: None,
            description: "status 503 & more".into(),
            fault: None,
        });
        let parts = vec![ClientPartitions {
            client: "b".into(),
            windows: vec![PartitionWindow {
                start: t0 + ms(1000),
                end: Some(t0 + ms(1400)),
                mode: PartitionMode::Refuse,
                source: FaultSource::Step,
            }],
        }];
        let violations = vec![Violation {
            kind: ViolationKind::Overlap,
            clients: vec!["a<1>".into(), "b".into()],
            window: Window {
                start_ms: 2200,
                end_ms: 2500,
            },
            detail: "a & b overlapped".into(),
        }];
        let tl = Timeline {
            t0,
            until: t0 + ms(3000),
            clients: vec!["a<1>".into()],
            holds: &holds,
            probes: &probes,
            exchanges: &[e.clone(), dropped],
            partitions: &parts,
            violations: &violations,
            stopped_at: Some(t0 + ms(2800)),
        };
        let svg = tl.render();
        let elements = balanced(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert!(elements > 20, "{elements}");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(!svg.contains("<script"));
        assert!(svg.contains(r#"data-client="a&lt;1&gt;""#), "{svg}");
        assert!(svg.contains(r#"data-client="b""#));
        assert!(svg.contains(r#"data-client="(no client)""#));
        assert!(svg.contains(r#"class="violation""#));
        assert!(svg.contains("a &amp; b overlapped"));
        assert!(svg.contains(r#"class="partition""#));
        assert!(svg.contains(r#"class="fault""#));
        assert!(svg.contains("status 503 &amp; more"));
        assert!(svg.contains(r#"class="hold-expired""#));
        assert!(svg.contains("url(#killed)"));
        // The violation starts at 2200 of 3000 ms: x = 130 + 810 × 2200/3000 = 724, outlined on
        // the two lanes involved, not the third.
        assert_eq!(svg.matches(r#"class="violation""#).count(), 2, "{svg}");
        assert!(svg.contains(r#"data-client="b" x="724.0""#), "{svg}");
        // The legend, a request without an answer, a probe the harness stopped at the end.
        assert!(svg.contains(r#"<g class="legend">"#));
        assert!(svg.contains("hanging requests"));
        assert!(svg.contains(r#"class="dropped""#), "{svg}");
        assert!(svg.contains("url(#stopped)"), "{svg}");
        // Axis ticks every 500 ms up to 3 s.
        assert!(svg.contains(">3s</text>"));
        assert!(svg.contains(">500ms</text>"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(3000.0), 500.0);
        assert_eq!(tick_step(10.0), 2.0);
        assert_eq!(tick_step(60_000.0), 10_000.0);
        assert_eq!(tick_label(1500.0), "1.5s");
        assert_eq!(tick_label(2000.0), "2s");
    }
}
