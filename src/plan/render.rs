//! Plan rendering for people: Terraform-familiar symbols, field-level diffs,
//! long text as unified diffs, and a summary line.

use std::fmt::Write as _;

use similar::TextDiff;

use super::{Action, Change, FieldDiff, Offer, Plan};
use crate::value::Value;

pub struct Style {
    pub color: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
    }
}

fn color_of(a: &Action) -> &'static str {
    match a {
        Action::Create | Action::Purchase(_) => "32",
        Action::Update => "33",
        Action::DeleteThenCreate | Action::CreateThenDelete => "35",
        Action::Delete | Action::Retain => "31",
        Action::Adopt | Action::Import | Action::Render(_) | Action::Read | Action::Forget => "36",
    }
}

pub fn render(plan: &Plan, header: &str, style: &Style) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}\n");
    if plan.changes.is_empty() {
        let _ = writeln!(
            out,
            "No changes. {} resource{} in sync.",
            plan.unchanged,
            crate::stack::diag::plural(plan.unchanged)
        );
        if let Some(c) = &plan.cost {
            out.push('\n');
            render_cost(&mut out, c, style);
        }
        return out;
    }
    for c in &plan.changes {
        render_change(&mut out, c, &plan.stack, style);
    }
    out.push('\n');
    if let Some(c) = &plan.cost {
        render_cost(&mut out, c, style);
        out.push('\n');
    }
    let _ = writeln!(out, "{}", summary(plan));
    for w in &plan.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

pub fn summary(plan: &Plan) -> String {
    let mut s = format!(
        "Plan: {} to add, {} to change, {} to replace, {} to delete",
        plan.count(|a| matches!(a, Action::Create | Action::Purchase(_))),
        plan.count(|a| *a == Action::Update),
        plan.count(Action::is_replace),
        plan.count(Action::is_removal)
    );
    let adopt = plan.count(|a| *a == Action::Adopt);
    if adopt > 0 {
        let _ = write!(s, ", {adopt} to adopt");
    }
    let import = plan.count(|a| *a == Action::Import);
    if import > 0 {
        let _ = write!(s, ", {import} to import");
    }
    let read = plan.count(|a| *a == Action::Read);
    if read > 0 {
        let _ = write!(s, ", {read} to read");
    }
    let forget = plan.count(|a| *a == Action::Forget);
    if forget > 0 {
        let _ = write!(s, ", {forget} to forget");
    }
    let render = plan.count(|a| matches!(a, Action::Render(_)));
    if render > 0 {
        let _ = write!(s, ", {render} to render (gpustack manifests)");
    }
    s.push('.');
    let buys: Vec<f64> = plan.changes.iter().filter_map(|c| c.action.purchase().map(|p| p.upfront_usd)).collect();
    if !buys.is_empty() {
        let _ = write!(
            s,
            "\nPurchases: {}, ${:.2} up front in total, non-refundable (apply needs --approve-purchases).",
            purchases(plan, |a| a.purchase().is_some()),
            buys.iter().sum::<f64>()
        );
    }
    let unpriced = |a: &Action| matches!(a, Action::Purchase(Offer::Offline(_) | Offer::NotSearched));
    if plan.count(unpriced) > 0 {
        let _ = write!(
            s,
            "\nPurchases: {}, price not looked up (--refresh=false), non-refundable (apply needs --approve-purchases).",
            purchases(plan, unpriced)
        );
    }
    let kept = plan.count(|a| *a == Action::Retain);
    if kept > 0 {
        let _ = write!(
            s,
            "\nRetained: {} cannot be cancelled; {} until {} end date, unmanaged.",
            purchases(plan, |a| *a == Action::Retain),
            if kept == 1 { "it stays" } else { "they stay" },
            if kept == 1 { "its" } else { "their" }
        );
    }
    s
}

/// "2 Capacity Blocks and 1 training plan": the changes whose action `which` picks, counted
/// by what their kind buys.
pub fn purchases(plan: &Plan, which: impl Fn(&Action) -> bool) -> String {
    let mut counts: Vec<(&str, usize)> = vec![];
    for c in plan.changes.iter().filter(|c| which(&c.action)) {
        let noun = crate::resources::kind(c.kind).map(|k| k.purchase_noun()).unwrap_or("purchase");
        match counts.iter_mut().find(|(n, _)| *n == noun) {
            Some((_, k)) => *k += 1,
            None => counts.push((noun, 1)),
        }
    }
    let parts: Vec<String> =
        counts.iter().map(|(noun, k)| format!("{k} {noun}{}", crate::stack::diag::plural(*k))).collect();
    parts.join(" and ")
}

/// The cost block: one line per priced object, then the totals line, and where the prices
/// came from.
fn render_cost(out: &mut String, cost: &super::cost::Cost, style: &Style) {
    let _ = writeln!(out, "Cost (USD; prices: {}):", cost.source);
    for i in &cost.items {
        let _ = writeln!(out, "  {:<36} {}", i.address, i.line());
        if !i.note.is_empty() {
            let _ = writeln!(out, "  {:<36} # {}", "", i.note);
        }
    }
    for p in &cost.problems {
        let _ = writeln!(out, "  {}", style.paint("33", &format!("prices not read: {p}")));
    }
    let _ = writeln!(out, "{}", style.paint("1", &super::cost::summary(cost)));
}

fn render_change(out: &mut String, c: &Change, stack: &str, style: &Style) {
    let sym = c.action.symbol();
    let what = match &c.action {
        Action::Purchase(_) => "purchase (non-refundable)".into(),
        Action::Create => "create".to_string(),
        Action::Update => "update in place".to_string(),
        Action::DeleteThenCreate | Action::CreateThenDelete => {
            let reasons: Vec<String> = c.fields.iter().filter(|f| f.forces_replace).map(short_change).collect();
            let order = match c.action {
                Action::CreateThenDelete => "create before destroy",
                _ => "delete before create",
            };
            format!("replace, {order} ({})", reasons.join("; "))
        }
        Action::Retain => format!(
            "retain {} (cannot be cancelled: runs until {}; gpustack stops managing it)",
            c.id.as_deref().unwrap_or_default(),
            c.old_outputs.get("end_date").and_then(Value::as_str).unwrap_or("its end date")
        ),
        Action::Delete if crate::resources::kind(c.kind).is_some_and(|k| k.rendered()) => {
            "stop rendering (remove it from the cluster yourself; no change to AWS)".into()
        }
        Action::Delete => match &c.id {
            Some(id) => format!("delete {id}"),
            None => "delete".into(),
        },
        Action::Adopt => "record in state (no change to AWS)".into(),
        Action::Import => {
            let id = c.id.as_deref().unwrap_or_default();
            let then = if c.fields.is_empty() { "" } else { "; then update in place" };
            format!("import {id} (record in state, add tags {}{then})", import_tags(stack, &c.address))
        }
        Action::Read => match &c.id {
            Some(id) => format!("read {id} (existing, not managed: no change to AWS)"),
            None => "read (existing, not managed: no change to AWS)".into(),
        },
        Action::Forget if c.stray => format!(
            "forget {} (tagged by an interrupted import, never the stack's: remove its gpustack tags, left in AWS)",
            c.id.as_deref().unwrap_or_default()
        ),
        Action::Forget => {
            format!("forget {} (existing, not managed: left in AWS as it is)", c.id.as_deref().unwrap_or_default())
        }
        Action::Render(r) => format!("render {} (gpustack manifests; no change to AWS)", r.file),
    };
    let line = format!("{sym:>4} {:<34} {what}", c.address);
    let _ = writeln!(out, "{}", style.paint(color_of(&c.action), &line));
    if let Some(n) = &c.note {
        let _ = writeln!(out, "{:9}# {n}", "");
    }
    if let Action::Purchase(Offer::Offline(p)) = &c.action {
        let _ = writeln!(out, "{:9}{}", "", style.paint("1;33", &format!("$ {p}")));
    }
    if let Some(p) = c.action.purchase() {
        let _ = writeln!(
            out,
            "{:9}{}",
            "",
            style.paint(
                "1;33",
                &format!(
                    "$ {}× {} in {}, {} → {} ({} h; asked {} h): {:.2} {} up front (max {}), offering {}",
                    p.instance_count,
                    p.instance_type,
                    p.availability_zone,
                    p.start,
                    p.end,
                    p.duration_hours,
                    p.asked_hours,
                    p.upfront_usd,
                    p.currency,
                    p.max_upfront_usd,
                    p.offering_id
                )
            )
        );
        // A split offering: each block, so the gap between them is plain.
        for (i, b) in p.blocks.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:11}{}",
                "",
                style.paint(
                    "1;33",
                    &format!(
                        "block {} of {}: {} → {} in {}",
                        i + 1,
                        p.blocks.len(),
                        b.start,
                        b.end,
                        b.availability_zone
                    )
                )
            );
        }
    }
    match &c.action {
        Action::Render(r) => {
            let diff = TextDiff::from_lines(r.old.as_deref().unwrap_or_default(), r.new.as_str());
            for line in diff.unified_diff().context_radius(3).to_string().lines() {
                let _ = writeln!(out, "{:9}{line}", "");
            }
        }
        Action::Create | Action::Purchase(_) => {
            for f in &c.fields {
                let empty = matches!(&f.new, Some(Value::Table(t)) if t.is_empty())
                    || matches!(&f.new, Some(Value::List(l)) if l.is_empty());
                match f.new.as_ref().filter(|_| !empty) {
                    Some(Value::Str(text)) if is_long(&f.new) => {
                        let _ = writeln!(out, "{:9}{}:", "", f.path);
                        for line in text.lines() {
                            let _ = writeln!(out, "{:11}{line}", "");
                        }
                    }
                    Some(v) => {
                        let _ = writeln!(out, "{:9}{} = {}", "", f.path, plan_value(v));
                    }
                    None => {}
                }
            }
        }
        Action::Update
        | Action::DeleteThenCreate
        | Action::CreateThenDelete
        | Action::Adopt
        | Action::Import
        | Action::Read => {
            for f in &c.fields {
                render_field(out, f);
            }
        }
        Action::Delete | Action::Retain | Action::Forget => {}
    }
}

/// The tags an import adds, as the plan shows them.
pub fn import_tags(stack: &str, address: &str) -> String {
    format!("{} = \"{stack}\", {} = \"{address}\"", crate::aws::tags::STACK, crate::aws::tags::ADDRESS)
}

fn show(v: &Option<Value>) -> String {
    v.as_ref().map_or("(none)".into(), plan_value)
}

/// A value as plans show it: [`Value`]'s own text, except that a run of elements not known
/// until apply is counted, so a list of three subnets still to be created reads
/// `[(known after apply) ×3]` and a mixed one `["subnet-0a1", (known after apply) ×2]`.
pub fn plan_value(v: &Value) -> String {
    match v {
        Value::List(items) => {
            let mut parts: Vec<String> = vec![];
            let mut i = 0;
            while i < items.len() {
                let run = items[i..].iter().take_while(|x| matches!(x, Value::Unknown)).count();
                match run {
                    0 => {
                        parts.push(plan_value(&items[i]));
                        i += 1;
                    }
                    1 => {
                        parts.push(Value::Unknown.to_string());
                        i += 1;
                    }
                    n => {
                        parts.push(format!("{} ×{n}", Value::Unknown));
                        i += n;
                    }
                }
            }
            format!("[{}]", parts.join(", "))
        }
        Value::Table(t) if !t.is_empty() => {
            let entries: Vec<String> = t.iter().map(|(k, v)| format!("{k} = {}", plan_value(v))).collect();
            format!("{{ {} }}", entries.join(", "))
        }
        other => other.to_string(),
    }
}

fn short_change(f: &FieldDiff) -> String {
    format!("{} {} → {}", f.path, show(&f.old), show(&f.new))
}

fn is_long(v: &Option<Value>) -> bool {
    matches!(v, Some(Value::Str(s)) if s.contains('\n') || s.len() > 100)
}

fn render_field(out: &mut String, f: &FieldDiff) {
    let mark = if f.forces_replace { "  # forces replacement" } else { "" };
    if is_long(&f.old) || is_long(&f.new) {
        let o = f.old.as_ref().and_then(Value::as_str).unwrap_or_default();
        let n = f.new.as_ref().and_then(Value::as_str).unwrap_or_default();
        let _ = writeln!(out, "{:9}{}:{mark}", "", f.path);
        let diff = TextDiff::from_lines(o, n);
        for line in diff.unified_diff().context_radius(3).to_string().lines() {
            let _ = writeln!(out, "{:11}{line}", "");
        }
    } else {
        let _ = writeln!(out, "{:9}{}: {} → {}{mark}", "", f.path, show(&f.old), show(&f.new));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Attrs;

    fn change(action: Action, fields: Vec<FieldDiff>) -> Change {
        Change {
            address: "security_group.efa".into(),
            kind: "security_group",
            action,
            fields,
            id: Some("sg-1".into()),
            old_inputs: Attrs::new(),
            old_outputs: Attrs::new(),
            old_deps: vec![],
            adopt: None,
            stray: false,
            note: None,
        }
    }

    fn plan(changes: Vec<Change>) -> Plan {
        Plan {
            stack: "s".into(),
            region: "r".into(),
            lineage: None,
            serial: 1,
            changes,
            unchanged: 2,
            destroy: false,
            warnings: vec![],
            cost: None,
        }
    }

    #[test]
    fn update_shows_field_diff_and_summary() {
        let f = FieldDiff {
            path: "tags.team".into(),
            old: Some(Value::str("a")),
            new: Some(Value::str("b")),
            forces_replace: false,
        };
        let out = render(&plan(vec![change(Action::Update, vec![f])]), "h", &Style { color: false });
        assert_eq!(
            out,
            "h\n\n   ~ security_group.efa                 update in place\n         tags.team: \"a\" → \"b\"\n\nPlan: 0 to add, 1 to change, 0 to replace, 0 to delete.\n"
        );
    }

    #[test]
    fn long_text_renders_as_unified_diff() {
        let f = FieldDiff {
            path: "user_data".into(),
            old: Some(Value::str("[a]\nreplicas = 4\nx = 1\n")),
            new: Some(Value::str("[a]\nreplicas = 8\nx = 1\n")),
            forces_replace: false,
        };
        let out = render(&plan(vec![change(Action::Update, vec![f])]), "h", &Style { color: false });
        assert!(out.contains("-replicas = 4"), "{out}");
        assert!(out.contains("+replicas = 8"), "{out}");
        assert!(out.contains("@@"), "{out}");
    }

    #[test]
    fn replace_names_the_reason_and_order() {
        let f = FieldDiff {
            path: "cidr_block".into(),
            old: Some(Value::str("10.0.2.0/24")),
            new: Some(Value::str("10.0.3.0/24")),
            forces_replace: true,
        };
        let c = change(Action::DeleteThenCreate, vec![f]);
        let out = render(&plan(vec![c]), "h", &Style { color: false });
        assert!(out.contains(" -/+ security_group.efa"), "{out}");
        assert!(out.contains("replace, delete before create (cidr_block \"10.0.2.0/24\" → \"10.0.3.0/24\")"), "{out}");
    }

    #[test]
    fn unknown_list_elements_are_counted_as_a_list() {
        let u = || Value::Unknown;
        assert_eq!(plan_value(&Value::List(vec![u(), u(), u()])), "[(known after apply) ×3]");
        assert_eq!(plan_value(&Value::List(vec![u()])), "[(known after apply)]");
        assert_eq!(
            plan_value(&Value::List(vec![Value::str("subnet-0a1"), u(), u()])),
            "[\"subnet-0a1\", (known after apply) ×2]"
        );
        let t = Value::Table([("subnets".to_string(), Value::List(vec![u(), u()]))].into());
        assert_eq!(plan_value(&t), "{ subnets = [(known after apply) ×2] }");
        assert_eq!(plan_value(&u()), "(known after apply)");
        // Known values read as before.
        let known = Value::Table([("a".to_string(), Value::List(vec![Value::Int(1)]))].into());
        assert_eq!(plan_value(&known), known.to_string());
        let f = FieldDiff {
            path: "subnets".into(),
            old: None,
            new: Some(Value::List(vec![u(), u()])),
            forces_replace: false,
        };
        let out = render(&plan(vec![change(Action::Create, vec![f])]), "h", &Style { color: false });
        assert!(out.contains("         subnets = [(known after apply) ×2]\n"), "{out}");
    }

    #[test]
    fn no_changes_says_so() {
        let out = render(&plan(vec![]), "h", &Style { color: false });
        assert!(out.contains("No changes. 2 resources in sync."), "{out}");
    }
}
