//! The stack file `gpustack import generate` writes: each imported object as `[kind.name]`
//! with the attributes its kind's `import` returned (defaults left out), ids of other imported
//! objects turned into `${kind.name.output}` references, `[import]` entries for all of them,
//! and what the language cannot say as `# not expressible:` comments. Pure: no AWS.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::resources::{Imported, Kind, rank};
use crate::stack::schema::{Attr, Ty};
use crate::value::Value;

/// One object found and read for the file.
pub struct Found {
    pub kind: &'static dyn Kind,
    /// The id as `[import]` takes it (the kind's `import_id` form).
    pub import_id: String,
    /// What to call it when it has no `Name` tag (a cluster's or node group's name).
    pub hint: String,
    pub imported: Imported,
}

/// How the file is written.
pub struct Options {
    pub stack_name: String,
    pub region: String,
    /// The cluster the file was generated from (the header comment).
    pub cluster: String,
    /// `prevent_destroy = true` on clusters and purchases.
    pub prevent_destroy: bool,
}

/// Kinds whose loss cannot be undone quickly or at all: the file protects them by default
/// (issue 20 item 5).
pub const PROTECTED: &[&str] = &["eks_cluster", "capacity_block", "capacity_reservation", "training_plan"];

/// A value as written: a literal from AWS, or a reference to another imported object.
#[derive(Clone, Debug, PartialEq)]
enum W {
    Lit(Value),
    Ref(String),
    List(Vec<W>),
    Table(BTreeMap<String, W>),
}

/// A resource name from an object's Name tag or name: the language's identifier rules
/// (a letter first, then letters, digits, `_`, `-`), lower case, `_` for anything else.
pub fn identifier(raw: &str) -> String {
    let mut s = String::new();
    for c in raw.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '_' };
        if c == '_' && (s.is_empty() || s.ends_with('_')) {
            continue;
        }
        s.push(c);
    }
    let s = s.trim_end_matches(['_', '-']).to_string();
    match s.chars().next() {
        None => "imported".into(),
        Some(c) if !c.is_ascii_alphabetic() => format!("r_{s}"),
        Some(_) => s,
    }
}

/// A stack name from the cluster's: lower-case letters, digits and `-`, a letter first, at most
/// 31 characters (the language's rule for `[stack].name`).
pub fn stack_name(cluster: &str) -> String {
    let mut s: String = cluster
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    if !s.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
        s = format!("s-{s}");
    }
    s.truncate(31);
    s.trim_end_matches('-').to_string()
}

/// The name the object's table gets, before making it unique: the Name tag, else the hint,
/// without the cluster's name as a prefix (`prod-gpu-nat` → `nat`, `eksctl-prod-gpu-cluster/…`
/// → `cluster_…`): every object of the file belongs to that cluster.
fn base_name(f: &Found, cluster: &str) -> String {
    let tag = f.imported.observed.attrs.get("tags").and_then(|t| t.as_table()).and_then(|t| t.get("Name"));
    let raw = tag.and_then(|v| v.as_str()).filter(|s| !s.trim().is_empty()).unwrap_or(&f.hint);
    let mut short = raw;
    for prefix in [format!("eksctl-{cluster}-"), format!("{cluster}-"), format!("{cluster}_")] {
        if let Some(rest) = short.strip_prefix(prefix.as_str())
            && !rest.is_empty()
        {
            short = rest;
            break;
        }
    }
    identifier(short)
}

/// Names unique per kind, in the file's order; `order[i]` is the index into `found` of the
/// i-th table written, `names[j]` the name of `found[j]`.
fn assign_names(found: &[Found], cluster: &str) -> (Vec<usize>, Vec<String>) {
    let bases: Vec<String> = found.iter().map(|f| base_name(f, cluster)).collect();
    let mut order: Vec<usize> = (0..found.len()).collect();
    order.sort_by(|&a, &b| {
        (rank(found[a].kind.name()), &bases[a], &found[a].import_id).cmp(&(
            rank(found[b].kind.name()),
            &bases[b],
            &found[b].import_id,
        ))
    });
    let mut names = vec![String::new(); found.len()];
    let mut taken: BTreeSet<(String, String)> = BTreeSet::new();
    for &i in &order {
        let kind = found[i].kind.name().to_string();
        let mut name = bases[i].clone();
        let mut n = 2;
        while taken.contains(&(kind.clone(), name.clone())) {
            name = format!("{}_{n}", bases[i]);
            n += 1;
        }
        taken.insert((kind, name.clone()));
        names[i] = name;
    }
    (order, names)
}

/// True when `s` looks like an identifier AWS gives one object only: an ARN, an issuer URL,
/// or a prefixed id (`vpc-…`, `sg-…`, `lt-…`, `cr-…`, `a-…`: a short prefix, then 8 or more
/// lower-case letters and digits, at least one a digit). Zones, CIDRs and free text
/// never do, so they are never turned into references by accident.
fn unique_looking(s: &str) -> bool {
    if s.starts_with("arn:") || s.starts_with("https://") {
        return true;
    }
    match s.split_once('-') {
        Some((p, rest)) => {
            (1..=6).contains(&p.len())
                && p.chars().all(|c| c.is_ascii_lowercase())
                && rest.len() >= 8
                && rest.chars().all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
                && rest.chars().any(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Attributes where a value is the *name* of another object (a cluster, a placement group):
/// names are not unique-looking, so only these attributes take them as references.
const NAME_REFERENCES: &[(&str, &str)] = &[("cluster", "eks_cluster"), ("placement_group", "placement_group")];

/// A reference target: the object (index) and its output.
#[derive(Clone, Debug)]
struct Target {
    object: usize,
    output: String,
    /// Pass 1: the value is the object's id, ARN or name (its identity); pass 2: another output.
    primary: bool,
}

fn targets(found: &[Found]) -> BTreeMap<String, Vec<Target>> {
    let mut t: BTreeMap<String, Vec<Target>> = BTreeMap::new();
    for (i, f) in found.iter().enumerate() {
        let obs = &f.imported.observed;
        // Outputs in the schema's order: `id`/`arn`/`name` come first where a kind has them.
        for (out, _) in f.kind.outputs() {
            let Some(Value::Str(v)) = obs.outputs.get(*out) else { continue };
            if v.is_empty() {
                continue;
            }
            let primary = *v == obs.id || matches!(*out, "id" | "arn" | "name");
            let named = NAME_REFERENCES.iter().any(|(_, k)| *k == f.kind.name()) && *out == "name";
            if unique_looking(v) || named {
                t.entry(v.clone()).or_default().push(Target { object: i, output: out.to_string(), primary });
            }
        }
    }
    t
}

/// Converts a value, turning strings that name another imported object into references.
/// `edges` collects (from, to) object pairs; a reference that would close a cycle stays literal.
#[allow(clippy::too_many_arguments)]
fn convert(
    v: &Value,
    attr: &str,
    me: usize,
    found: &[Found],
    names: &[String],
    targets: &BTreeMap<String, Vec<Target>>,
    pass_primary: bool,
    edges: &mut BTreeSet<(usize, usize)>,
) -> W {
    match v {
        Value::Str(s) => {
            let candidates = targets.get(s).map(Vec::as_slice).unwrap_or_default();
            let name_kind = NAME_REFERENCES.iter().find(|(a, _)| *a == attr).map(|(_, k)| *k);
            let pick = candidates.iter().filter(|t| t.object != me && t.primary == pass_primary).find(|t| {
                let f = &found[t.object];
                if t.output == "name" && !unique_looking(s) { name_kind == Some(f.kind.name()) } else { true }
            });
            match pick {
                Some(t) if !reaches(edges, t.object, me) => {
                    edges.insert((me, t.object));
                    W::Ref(format!("${{{}.{}.{}}}", found[t.object].kind.name(), names[t.object], t.output))
                }
                _ => W::Lit(v.clone()),
            }
        }
        Value::List(items) => {
            W::List(items.iter().map(|x| convert(x, attr, me, found, names, targets, pass_primary, edges)).collect())
        }
        Value::Table(t) => W::Table(
            t.iter()
                .map(|(k, x)| (k.clone(), convert(x, attr, me, found, names, targets, pass_primary, edges)))
                .collect(),
        ),
        other => W::Lit(other.clone()),
    }
}

/// Converts a value already converted once (pass 1) again for pass 2, leaving references.
fn convert_again(
    w: W,
    attr: &str,
    me: usize,
    found: &[Found],
    names: &[String],
    targets: &BTreeMap<String, Vec<Target>>,
    edges: &mut BTreeSet<(usize, usize)>,
) -> W {
    match w {
        W::Lit(v @ Value::Str(_)) => convert(&v, attr, me, found, names, targets, false, edges),
        W::List(items) => {
            W::List(items.into_iter().map(|x| convert_again(x, attr, me, found, names, targets, edges)).collect())
        }
        W::Table(t) => W::Table(
            t.into_iter().map(|(k, x)| (k, convert_again(x, attr, me, found, names, targets, edges))).collect(),
        ),
        other => other,
    }
}

/// True when `from` reaches `to` through `edges` (or is it).
fn reaches(edges: &BTreeSet<(usize, usize)>, from: usize, to: usize) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        if n == to {
            return true;
        }
        if seen.insert(n) {
            stack.extend(edges.iter().filter(|(a, _)| *a == n).map(|(_, b)| *b));
        }
    }
    false
}

/// The attributes written for one object: schema inputs that are not computed, not `existing`,
/// and not equal to their default; `name` and `description` always (their defaults depend on
/// the stack: `<stack>-<name>` and the address).
fn written_attrs(kind: &dyn Kind, attrs: &BTreeMap<String, Value>) -> Vec<(&'static Attr, Value)> {
    let mut out = vec![];
    let attrs = &with_unreadable(kind, attrs);
    for a in kind.attrs() {
        if a.computed || a.name == "existing" {
            continue;
        }
        let Some(v) = attrs.get(a.name) else { continue };
        if matches!(v, Value::Unknown) {
            continue;
        }
        let keep_always = matches!(a.name, "name" | "description");
        if !a.required && !keep_always && a.default.value().as_ref() == Some(v) {
            continue;
        }
        out.push((a, v.clone()));
    }
    out
}

/// (address, import id) of every object, in the order the file writes them.
pub fn addresses(found: &[Found], cluster: &str) -> Vec<(String, String)> {
    let (order, names) = assign_names(found, cluster);
    order.iter().map(|&i| (format!("{}.{}", found[i].kind.name(), names[i]), found[i].import_id.clone())).collect()
}

/// Required attributes AWS cannot show, filled so the file validates and plans no change:
/// a Capacity Block's search window and price guard describe a purchase, and an imported block
/// was bought elsewhere. Its window is written as the hour from its start (what its `import`
/// reads as `imported_start`), which `CapacityBlock::settle` takes as the file agreeing; the
/// guard as $1, which no offering meets, so nothing could ever be bought for this resource
/// (a change to a bought block is refused, never planned).
fn with_unreadable(kind: &dyn Kind, attrs: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    let mut attrs = attrs.clone();
    if kind.name() == "capacity_block" {
        let start = attrs.get("imported_start").and_then(Value::as_str).and_then(|s| s.parse::<jiff::Timestamp>().ok());
        if let Some(start) = start {
            // The language wants start_before later than start_after: the hour after the start.
            let before = start.checked_add(jiff::SignedDuration::from_hours(1)).unwrap_or(start);
            attrs.entry("start_after".into()).or_insert_with(|| Value::str(start.to_string()));
            attrs.entry("start_before".into()).or_insert_with(|| Value::str(before.to_string()));
        }
        attrs.entry("max_upfront_usd".into()).or_insert(Value::Int(1));
    }
    attrs
}

/// Comments the writer adds under a table for what it filled in ([`with_unreadable`]).
fn filled_notes(kind: &dyn Kind) -> &'static [&'static str] {
    match kind.name() {
        "capacity_block" => &[
            "# start_after/start_before: the hour the block starts (an imported block is never searched for);",
            "# max_upfront_usd = 1 refuses any purchase: an imported block is never bought or changed.",
        ],
        _ => &[],
    }
}

/// Writes the stack file.
pub fn render(found: &[Found], opts: &Options) -> String {
    let (order, names) = assign_names(found, &opts.cluster);
    let targets = targets(found);
    let mut edges = BTreeSet::new();
    // Pass 1 over every object, then pass 2: identity references win over other outputs, so
    // a cluster naming its additional security group refers to the group, and the group's
    // rule naming the cluster's own group stays a literal id if both would close a circle.
    let mut tables: Vec<Vec<(&'static Attr, W)>> = found
        .iter()
        .enumerate()
        .map(|(i, f)| {
            written_attrs(f.kind, &f.imported.observed.attrs)
                .into_iter()
                .map(|(a, v)| {
                    let w = if a.name == "tags" {
                        W::Lit(v)
                    } else {
                        convert(&v, a.name, i, found, &names, &targets, true, &mut edges)
                    };
                    (a, w)
                })
                .collect()
        })
        .collect();
    for (i, table) in tables.iter_mut().enumerate() {
        for (a, w) in table.iter_mut() {
            if a.name != "tags" {
                let taken = std::mem::replace(w, W::List(vec![]));
                *w = convert_again(taken, a.name, i, found, &names, &targets, &mut edges);
            }
        }
    }

    follow_template_versions(found, &mut tables);

    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Generated by `gpustack import generate --cluster {}` from what AWS shows now.\n\
         # `gpustack plan` on this file should show imports and no change; review it, then apply\n\
         # (which only tags each object gpustack:stack and gpustack:address).",
        opts.cluster
    );
    if opts.prevent_destroy && found.iter().any(|f| PROTECTED.contains(&f.kind.name())) {
        // Review imp-gen m1: destroy refuses (one error per protected address) until released.
        let _ = writeln!(
            s,
            "# The cluster and any purchases carry prevent_destroy = true: `gpustack destroy` refuses\n# until you delete those lines (or set them to false) and run `gpustack apply` once."
        );
    }
    s.push_str("\n[stack]\n");
    let _ = writeln!(s, "name   = {}", lit_str(&opts.stack_name));
    let _ = writeln!(s, "region = {}", lit_str(&opts.region));

    for &i in &order {
        let f = &found[i];
        let address = format!("{}.{}", f.kind.name(), names[i]);
        let _ = writeln!(s, "\n[{address}]");
        let mut rows: Vec<(String, String)> = tables[i].iter().map(|(a, w)| (key(a.name), emit(w, &a.ty))).collect();
        if opts.prevent_destroy && PROTECTED.contains(&f.kind.name()) {
            rows.push(("prevent_destroy".into(), "true".into()));
        }
        let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
        for (k, v) in &rows {
            let _ = writeln!(s, "{k:<width$} = {v}");
        }
        for note in filled_notes(f.kind) {
            let _ = writeln!(s, "{note}");
        }
        for (field, value) in &f.imported.unexpressed {
            let _ = writeln!(s, "# not expressible: {} = {}", one_line(field), one_line(value));
        }
    }

    if !order.is_empty() {
        s.push_str("\n[import]\n");
        let rows: Vec<(String, String)> = order
            .iter()
            .map(|&i| (lit_str(&format!("{}.{}", found[i].kind.name(), names[i])), lit_str(&found[i].import_id)))
            .collect();
        let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
        for (k, v) in rows {
            let _ = writeln!(s, "{k:<width$} = {v}");
        }
    }
    s
}

/// A node group on a template of the file that runs the template's current version leaves
/// `launch_template_version` out: the node group kind then fills it with
/// `${launch_template.NAME.version}` (`NodeGroup::complete`), so a later change to the template
/// rolls the node group as for one gpustack made, where a literal number would pin it.
fn follow_template_versions(found: &[Found], tables: &mut [Vec<(&'static Attr, W)>]) {
    for (i, table) in tables.iter_mut().enumerate() {
        if found[i].kind.name() != "node_group" {
            continue;
        }
        let referenced = table.iter().any(|(a, w)| a.name == "launch_template" && matches!(w, W::Ref(_)));
        let id = found[i].imported.observed.attrs.get("launch_template").and_then(Value::as_str);
        let target =
            id.and_then(|id| found.iter().find(|f| f.kind.name() == "launch_template" && f.imported.observed.id == id));
        let Some(target) = target.filter(|_| referenced) else { continue };
        let current = target.imported.observed.outputs.get("version").map(scalar_text);
        table.retain(|(a, w)| {
            !(a.name == "launch_template_version" && matches!(w, W::Lit(v) if Some(scalar_text(v)) == current))
        });
    }
}

/// A number or string as text, so a version recorded as 3 and "3" compare equal.
fn scalar_text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        other => other.to_json().to_string(),
    }
}

/// A comment stays one line: newlines and other control characters shown escaped.
fn one_line(s: &str) -> String {
    s.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect()
}

/// A bare key where TOML allows one, else quoted.
fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        lit_str_raw(k)
    }
}

/// A TOML basic string of `s` exactly (keys and ids: no interpolation to escape).
fn lit_str_raw(s: &str) -> String {
    toml_edit::Value::from(s).to_string().trim().to_string()
}

/// A string from AWS as the language reads it back: `${` escaped as `$${` so it stays text.
fn lit_str(s: &str) -> String {
    lit_str_raw(&s.replace("${", "$${"))
}

fn emit(w: &W, ty: &Ty) -> String {
    match w {
        W::Ref(r) => lit_str_raw(r),
        W::Lit(v) => emit_value(v),
        W::List(items) => {
            let inner = match ty {
                Ty::List(t) => *t,
                _ => &Ty::Any,
            };
            let parts: Vec<String> = items.iter().map(|x| emit(x, inner)).collect();
            format!("[{}]", parts.join(", "))
        }
        W::Table(t) => {
            let parts: Vec<String> = t
                .iter()
                .map(|(k, x)| {
                    let inner = match ty {
                        Ty::Map(t) => *t,
                        Ty::Object(attrs) => attrs.iter().find(|a| a.name == k).map(|a| &a.ty).unwrap_or(&Ty::Any),
                        _ => &Ty::Any,
                    };
                    format!("{} = {}", key(k), emit(x, inner))
                })
                .collect();
            if parts.is_empty() { "{}".into() } else { format!("{{ {} }}", parts.join(", ")) }
        }
    }
}

fn emit_value(v: &Value) -> String {
    match v {
        Value::Str(s) => lit_str(s),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Float(f) => toml_edit::Value::from(*f).to_string().trim().to_string(),
        Value::List(items) => format!("[{}]", items.iter().map(emit_value).collect::<Vec<_>>().join(", ")),
        Value::Table(t) => {
            if t.is_empty() {
                "{}".into()
            } else {
                let parts: Vec<String> = t.iter().map(|(k, x)| format!("{} = {}", key(k), emit_value(x))).collect();
                format!("{{ {} }}", parts.join(", "))
            }
        }
        // Never reaches the file (written_attrs leaves unknowns out).
        Value::Unknown => "\"\"".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{Observed, kind};

    fn obj(k: &str, id: &str, hint: &str, attrs: &[(&str, Value)], outputs: &[(&str, &str)]) -> Found {
        Found {
            kind: kind(k).unwrap(),
            import_id: id.to_string(),
            hint: hint.to_string(),
            imported: Imported {
                observed: Observed {
                    address: None,
                    id: id.to_string(),
                    attrs: attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
                    outputs: outputs.iter().map(|(k, v)| (k.to_string(), Value::str(*v))).collect(),
                    retained: false,
                },
                unexpressed: vec![],
            },
        }
    }

    fn s(v: &str) -> Value {
        Value::str(v)
    }
    fn list(v: &[&str]) -> Value {
        Value::List(v.iter().map(|x| Value::str(*x)).collect())
    }

    fn opts() -> Options {
        Options { stack_name: "prod".into(), region: "us-west-2".into(), cluster: "prod".into(), prevent_destroy: true }
    }

    fn sample() -> Vec<Found> {
        let mut sg_rules = BTreeMap::new();
        sg_rules.insert("protocol".to_string(), s("tcp"));
        sg_rules.insert("from_port".to_string(), Value::Int(443));
        sg_rules.insert("security_group".to_string(), s("sg-0000000000000eks0"));
        vec![
            obj(
                "subnet",
                "subnet-00000000000000a01",
                "subnet-00000000000000a01",
                &[
                    ("vpc", s("vpc-0000000000000000a")),
                    ("cidr_block", s("10.0.0.0/20")),
                    ("availability_zone", s("us-west-2a")),
                    ("public", Value::Bool(false)),
                    ("tags", Value::Table([("Name".to_string(), s("Private A"))].into())),
                ],
                &[
                    ("id", "subnet-00000000000000a01"),
                    ("vpc_id", "vpc-0000000000000000a"),
                    ("availability_zone", "us-west-2a"),
                ],
            ),
            obj(
                "vpc",
                "vpc-0000000000000000a",
                "vpc-0000000000000000a",
                &[
                    ("cidr_block", s("10.0.0.0/16")),
                    ("internet_gateway", Value::Bool(true)),
                    ("tags", Value::Table(BTreeMap::new())),
                ],
                &[("id", "vpc-0000000000000000a"), ("cidr_block", "10.0.0.0/16")],
            ),
            obj(
                "security_group",
                "sg-000000000000000a1",
                "extra",
                &[
                    ("vpc", s("vpc-0000000000000000a")),
                    ("name", s("extra")),
                    ("description", s("made by ${team}")),
                    ("ingress", Value::List(vec![Value::Table(sg_rules)])),
                ],
                &[("id", "sg-000000000000000a1"), ("name", "extra")],
            ),
            obj(
                "iam_role",
                "prod-cluster-role",
                "prod-cluster-role",
                &[("service", s("eks.amazonaws.com")), ("name", s("prod-cluster-role"))],
                &[("arn", "arn:aws:iam::123456789012:role/prod-cluster-role"), ("name", "prod-cluster-role")],
            ),
            obj(
                "eks_cluster",
                "prod",
                "prod",
                &[
                    ("version", s("1.33")),
                    ("role", s("arn:aws:iam::123456789012:role/prod-cluster-role")),
                    ("subnets", list(&["subnet-00000000000000a01"])),
                    ("security_groups", list(&["sg-000000000000000a1"])),
                    ("name", s("prod")),
                ],
                &[("name", "prod"), ("security_group_id", "sg-0000000000000eks0")],
            ),
            obj(
                "eks_addon",
                "prod:vpc-cni",
                "vpc-cni",
                &[("cluster", s("prod")), ("addon", s("vpc-cni"))],
                &[("arn", "arn:aws:eks:us-west-2:123456789012:addon/prod/vpc-cni/x")],
            ),
        ]
    }

    /// The writer's shape: dependency order, names from Name tags or hints, references for
    /// ids of other imported objects, defaults left out, `[import]` for all, protection.
    #[test]
    fn writes_references_imports_and_protection() {
        let mut found = sample();
        found[4].imported.unexpressed.push(("encryption_config".into(), "kms key\nx".into()));
        let text = render(&found, &opts());
        insta::assert_snapshot!(text);
        assert!(text.contains("vpc               = \"${vpc.vpc-0000000000000000a.id}\""), "{text}");
        assert!(!text.contains("public "), "a default is left out: {text}");
        assert!(text.contains("role            = \"${iam_role.cluster-role.arn}\""), "{text}");
        assert!(text.contains("cluster = \"${eks_cluster.prod.name}\""), "{text}");
        assert!(text.contains("prevent_destroy = true"), "{text}");
        assert!(text.contains("`gpustack destroy` refuses\n# until you delete those lines"), "{text}");
        assert!(text.contains("# not expressible: encryption_config = kms key\\nx"), "{text}");
        // The cluster refers to its additional group; the group's rule naming the cluster's own
        // group would close a circle and stays literal.
        assert!(text.contains("security_groups = [\"${security_group.extra.id}\"]"), "{text}");
        assert!(text.contains("security_group = \"sg-0000000000000eks0\""), "{text}");
        // Text from AWS that looks like interpolation stays text.
        assert!(text.contains("\"made by $${team}\""), "{text}");
        assert!(text.contains("\"subnet.private_a\"") && text.contains("= \"subnet-00000000000000a01\""), "{text}");
    }

    /// Review imp-net M5: a VPC made by plain CreateVpc has DNS hostnames off; the file says
    /// `dns = false` so its plan is clean, and leaves `dns` out when it is on (the default).
    #[test]
    fn a_vpc_with_dns_off_is_written_with_dns_false() {
        let vpc = |dns: bool| {
            let attrs = [("cidr_block", s("10.0.0.0/16")), ("dns", Value::Bool(dns))];
            obj("vpc", "vpc-0000000000000000a", "vpc-0000000000000000a", &attrs, &[("id", "vpc-0000000000000000a")])
        };
        let off = render(&[vpc(false)], &opts());
        assert!(off.lines().any(|l| l.replace(' ', "") == "dns=false"), "{off}");
        let on = render(&[vpc(true)], &opts());
        assert!(!on.contains("dns"), "{on}");
    }

    #[test]
    fn without_protection_and_names_are_unique() {
        let mut found = sample();
        let mut twin =
            obj("eks_addon", "prod:coredns", "vpc-cni", &[("cluster", s("prod")), ("addon", s("coredns"))], &[]);
        twin.imported.observed.outputs.clear();
        found.push(twin);
        let text = render(&found, &Options { prevent_destroy: false, ..opts() });
        assert!(!text.contains("prevent_destroy") && !text.contains("destroy` refuses"), "{text}");
        assert!(text.contains("[eks_addon.vpc-cni]") && text.contains("[eks_addon.vpc-cni_2]"), "{text}");
    }

    /// The file reads back through the load step (language, [import] checks, rules) with
    /// every reference resolved to the right kind and every import entry accepted.
    #[test]
    fn the_written_file_parses() {
        let text = render(&sample(), &opts());
        let sources = crate::stack::VarSources { env: &|_| None, cli: &[] };
        match crate::load::from_bytes(std::path::Path::new("gen.toml"), text.clone().into_bytes(), &sources) {
            Ok(stack) => assert_eq!(stack.resources.len(), 6),
            Err(d) => panic!("{}\n{text}", d.render(false)),
        }
    }

    #[test]
    fn identifiers_and_stack_names() {
        assert_eq!(identifier("Private A (us-west-2a)"), "private_a_us-west-2a");
        assert_eq!(identifier("10.0.0.0/20"), "r_10_0_0_0_20");
        assert_eq!(identifier("***"), "imported");
        assert_eq!(stack_name("My_Cluster.prod"), "my-cluster-prod");
        assert_eq!(stack_name("9lives"), "s-9lives");
        assert!(stack_name(&"x".repeat(40)).len() <= 31);
        assert!(unique_looking("vpc-0123456789abcdef0") && unique_looking("a-0123456789abcdefg".trim_end_matches('g')));
        assert!(!unique_looking("us-west-2a") && !unique_looking("10.0.0.0/16") && !unique_looking("vpc-cni"));
    }

    #[test]
    fn node_groups_follow_their_template_and_names_drop_the_cluster_prefix() {
        let lt = obj(
            "launch_template",
            "lt-0123456789abcdef0",
            "prod-gpu",
            &[("instance_type", s("g6e.2xlarge"))],
            &[("id", "lt-0123456789abcdef0"), ("name", "prod-gpu"), ("version", "3")],
        );
        let ng = |v: i64| {
            obj(
                "node_group",
                "prod:gpu",
                "gpu",
                &[
                    ("cluster", s("prod")),
                    ("launch_template", s("lt-0123456789abcdef0")),
                    ("launch_template_version", Value::Int(v)),
                ],
                &[("name", "gpu")],
            )
        };
        let text = render(&[lt, ng(3)], &opts());
        assert!(text.contains("[launch_template.gpu]"), "{text}");
        assert!(text.contains("launch_template = \"${launch_template.gpu.id}\""), "{text}");
        assert!(!text.contains("launch_template_version"), "the current version is followed: {text}");
        let lt2 = obj(
            "launch_template",
            "lt-0123456789abcdef0",
            "x",
            &[],
            &[("id", "lt-0123456789abcdef0"), ("version", "3")],
        );
        let text = render(&[lt2, ng(2)], &opts());
        assert!(text.contains("launch_template_version = 2"), "an older version stays pinned: {text}");
    }

    /// A Capacity Block's window and price guard cannot be read back: the file gets the hour
    /// the block starts and a guard no offering meets, and still validates.
    #[test]
    fn an_imported_capacity_block_gets_a_window_and_a_guard_that_buys_nothing() {
        let mut cb = obj(
            "capacity_block",
            "cr-0123456789abcdef0",
            "p5",
            &[
                ("instance_type", s("p5.48xlarge")),
                ("instance_count", Value::Int(1)),
                ("duration_hours", Value::Int(24)),
                ("availability_zone", s("us-west-2a")),
            ],
            &[("id", "cr-0123456789abcdef0")],
        );
        cb.imported.observed.attrs.insert("imported_start".into(), s("2026-12-01T11:30:00Z"));
        let text = render(&[cb], &opts());
        assert!(text.contains("start_after       = \"2026-12-01T11:30:00Z\""), "{text}");
        assert!(text.contains("start_before      = \"2026-12-01T12:30:00Z\""), "{text}");
        assert!(text.contains("max_upfront_usd   = 1\n"), "{text}");
        assert!(!text.contains("imported_start"), "{text}");
        let sources = crate::stack::VarSources { env: &|_| None, cli: &[] };
        if let Err(d) = crate::load::from_bytes(std::path::Path::new("cb.toml"), text.clone().into_bytes(), &sources) {
            panic!("{}\n{text}", d.render(false));
        }
    }
}
