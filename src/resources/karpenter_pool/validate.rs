//! The offline checks of a `karpenter_pool` on its own (`Kind::validate`): the patterns
//! Karpenter's CRDs and CEL rules would refuse at `kubectl apply` (aliases, durations,
//! budgets, weights, label keys and values), and the launch template's own checks of the
//! attributes the two share. Checks across resources are the rules' (`rules/karpenter.rs`).

use std::collections::BTreeMap;

use super::SHARED_WITH_LAUNCH_TEMPLATE;
use crate::resources::Kind;
use crate::resources::launch_template::LaunchTemplateKind;
use crate::resources::node_group::require_stack_cluster;
use crate::resources::priority_class::dns_label;
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Expr, Resource};
use crate::value::Value;

/// Every check of one pool.
pub(super) fn check(r: &Resource, diags: &mut Vec<Diagnostic>) {
    require_stack_cluster(r, diags);
    check_types(r, diags);
    check_numbers(r, diags);
    check_disruption(r, diags);
    check_labels(r, diags);
    check_shared(r, diags);
    check_mig_slices(r, diags);
    check_sharing_release(r, diags);
    super::checks::check(r, diags);
    let (name, span) = match r.attrs.get("name") {
        Some(e) => (e.as_literal().and_then(Value::as_str).map(str::to_string), e.span.clone()),
        None => (Some(r.name.clone()), r.span.clone()),
    };
    if let Some(n) = name.filter(|n| !dns_label(n)) {
        diags.push(
            Diagnostic::error(format!("`{}`: \"{n}\" is not a valid Kubernetes object name", r.address), span)
                .help("use lowercase letters, digits and '-' (set name = \"...\" if the resource name has '_')"),
        );
    }
}

/// The Bottlerocket release of an `ami` alias: latest or a release (`bottlerocket@v1.57.0`);
/// None for another family (`node_class::ami_alias` takes AL2023 too). `gpu_sharing` is
/// Bottlerocket user data, and its NVIDIA variants run the device plugin on the host
/// (aws-facts §4, §14).
pub(super) fn ami_version(ami: &str) -> Option<&str> {
    let version = ami.strip_prefix("bottlerocket@")?;
    let release = version.strip_prefix('v').unwrap_or(version);
    let numeric = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    (version == "latest" || (release.split('.').count() == 3 && release.split('.').all(numeric))).then_some(version)
}

/// Duration patterns of the NodePool CRD (karpenter.sh_nodepools.yaml, v1.14.1): `Never` is
/// allowed for `consolidateAfter` and `expireAfter`, not for `terminationGracePeriod`.
pub(crate) fn duration(v: &str, never: bool) -> bool {
    if never && v == "Never" {
        return true;
    }
    let mut digits = 0;
    let mut parts = 0;
    for c in v.chars() {
        match c {
            '0'..='9' => digits += 1,
            's' | 'm' | 'h' if digits > 0 => {
                digits = 0;
                parts += 1;
            }
            _ => return false,
        }
    }
    parts > 0 && digits == 0
}

/// A disruption budget's `nodes`: a count or a percentage up to 100% (CRD pattern
/// `^((100|[0-9]{1,2})%|[0-9]+)$`).
pub(super) fn budget_ok(v: &str) -> bool {
    match v.strip_suffix('%') {
        Some(p) => p == "100" || ((1..=2).contains(&p.len()) && p.chars().all(|c| c.is_ascii_digit())),
        None => !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()),
    }
}

/// Label keys Karpenter's NodePool refuses in `template.metadata.labels` (CEL rules of the
/// CRD): its own domains, and `kubernetes.io/hostname`.
pub(super) fn restricted_label(key: &str) -> bool {
    let domain = key.split_once('/').map_or("", |(d, _)| d);
    key == "kubernetes.io/hostname" || domain.ends_with("karpenter.sh") || domain.ends_with("karpenter.k8s.aws")
}

/// A Kubernetes label value: at most 63 characters, alphanumerics with `-_.` inside.
pub(super) fn label_value(v: &str) -> bool {
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    v.len() <= 63
        && (v.is_empty()
            || (v.chars().all(inner)
                && v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric())))
}

fn literal<'a>(r: &'a Resource, k: &str) -> Option<&'a Value> {
    r.attrs.get(k).and_then(Expr::as_literal)
}

/// A table attribute as written, references unknown (an inline table is no single literal).
fn written_table(r: &Resource, k: &str) -> Option<crate::value::Attrs> {
    r.attrs.get(k)?.resolve(&|_| Value::Unknown).as_table().cloned()
}

/// The entries of a table attribute as written, with their spans.
fn table<'a>(r: &'a Resource, k: &str) -> Option<&'a BTreeMap<String, Expr>> {
    match r.attrs.get(k).map(|e| &e.kind) {
        Some(ExprKind::Table(t)) => Some(t),
        _ => None,
    }
}

fn check_types(r: &Resource, d: &mut Vec<Diagnostic>) {
    let (types, families) = (r.attrs.get("instance_types"), r.attrs.get("instance_families"));
    match (types, families) {
        (Some(_), Some(f)) => d.push(
            Diagnostic::error(
                format!("`{}` sets both instance_types and instance_families", r.address),
                f.span.clone(),
            )
            .help("keep one: instance_types for exact types (needed with efa), instance_families for broad Spot pools"),
        ),
        (None, None) if !super::requirements::narrows_types(&super::checks::written(r)) => d.push(
            Diagnostic::error(
                format!("`{}` needs instance_types, instance_families or requirements on the instance type", r.address),
                r.span.clone(),
            )
            .help("e.g. instance_types = [\"p5.48xlarge\"], instance_families = [\"g6\", \"g6e\", \"g5\"], or requirements = [{ key = \"karpenter.k8s.aws/instance-category\", operator = \"In\", values = [\"c\", \"m\", \"r\"] }]"),
        ),
        _ => {}
    }
    for (k, e) in [("instance_types", types), ("instance_families", families)] {
        if let Some(e) = e
            && literal(r, k).and_then(Value::as_list).is_some_and(<[Value]>::is_empty)
        {
            d.push(
                Diagnostic::error(format!("`{}`: `{k}` is empty", r.address), e.span.clone())
                    .help("list at least one; Karpenter would otherwise pick any type, GPU or not"),
            );
        }
    }
    if let (Some(e), None) = (r.attrs.get("efa"), types) {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: `efa` needs instance_types, not {}",
                    r.address,
                    if families.is_some() { "instance_families" } else { "requirements alone" }
                ),
                e.span.clone(),
            )
            .help("the EFA interfaces are laid out per instance type: list the exact types (with the same EFA layout)"),
        );
    }
}

pub(crate) fn check_numbers(r: &Resource, d: &mut Vec<Diagnostic>) {
    if let Some(n) = literal(r, "gpu_limit").and_then(Value::as_int).filter(|n| *n < 1) {
        d.push(
            Diagnostic::error(
                format!("`{}`: gpu_limit = {n} lets the pool start no GPU node", r.address),
                r.attrs["gpu_limit"].span.clone(),
            )
            .help("set the most GPUs this pool may run at once, e.g. gpu_limit = 16"),
        );
    }
    if let Some(n) = literal(r, "weight").and_then(Value::as_int).filter(|n| !(1..=100).contains(n)) {
        d.push(
                Diagnostic::error(format!("`{}`: weight = {n} is outside Karpenter's 1–100", r.address), r.attrs["weight"].span.clone())
                    .help("pools with a higher weight fill first; leave it out for the default (reserved 50, spot 20, on-demand 10)"),
            );
    }
    if let Some(e) = r.attrs.get("capacity_types")
        && literal(r, "capacity_types").and_then(Value::as_list).is_some_and(<[Value]>::is_empty)
    {
        d.push(
            Diagnostic::error(format!("`{}`: `capacity_types` is empty", r.address), e.span.clone())
                .help("list any of \"reserved\", \"spot\", \"on-demand\""),
        );
    }
    if let Some(e) = r.attrs.get("ami")
        && let Some(ami) = e.as_literal().and_then(Value::as_str)
        && super::node_class::ami_alias(ami).is_none()
    {
        d.push(
            Diagnostic::error(
                format!("`{}`: ami = \"{ami}\" is not an AMI alias gpustack renders", r.address),
                e.span.clone(),
            )
            .help(
                "use \"bottlerocket@latest\" or \"al2023@latest\" (resolved once and pinned), or a release such as \"bottlerocket@v1.57.0\" or \"al2023@v20251029\"",
            ),
        );
    }
}

pub(crate) fn check_disruption(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(t) = table(r, "disruption") else { return };
    for (k, never, example) in [
        ("consolidate_after", true, "\"10m\", \"1h30m\" or \"Never\""),
        ("expire_after", true, "\"720h\" or \"Never\""),
        ("termination_grace_period", false, "\"1h\" or \"48h\""),
    ] {
        if let Some(e) = t.get(k)
            && let Some(v) = e.as_literal().and_then(Value::as_str)
            && !duration(v, never)
        {
            d.push(
                Diagnostic::error(format!("`disruption.{k}` = \"{v}\" is not a Karpenter duration"), e.span.clone())
                    .help(format!("write hours, minutes and seconds like {example}")),
            );
        }
    }
    if let Some(e) = t.get("budget") {
        nodes_ok(e, "disruption.budget", d);
    }
    if let (Some(one), Some(_)) = (t.get("budget"), t.get("budgets")) {
        d.push(
            Diagnostic::error(
                "`disruption` sets both `budget` and `budgets`",
                one.key_span.clone().or(one.span.clone()),
            )
            .help("keep `budgets`, with this count as one of its entries: budgets = [{ nodes = \"1\" }, …]"),
        );
    }
    if let Some(ExprKind::List(budgets)) = t.get("budgets").map(|e| &e.kind) {
        for b in budgets {
            check_budget(b, d);
        }
    }
}

/// A budget's `nodes`: a count or a percentage (CRD pattern, [`budget_ok`]).
fn nodes_ok(e: &Expr, what: &str, d: &mut Vec<Diagnostic>) {
    let ok = match e.as_literal() {
        Some(Value::Int(n)) => *n >= 0,
        Some(Value::Str(s)) => budget_ok(s),
        Some(_) => false,
        None => true,
    };
    if !ok {
        d.push(
            Diagnostic::error(format!("`{what}` must be a node count or a percentage"), e.span.clone())
                .help("e.g. 1 (one node at a time), 0 (none) or \"10%\""),
        );
    }
}

/// One `budgets` entry, as the NodePool CRD (v1.14.1) checks it: `schedule` and `duration`
/// together (CEL "'schedule' must be set with 'duration'"), `duration` hours and minutes
/// (`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`), `schedule` a cron macro or five fields
/// (Karpenter parses it with `cron.ParseStandard`: `pkg/apis/v1/nodepool.go`).
fn check_budget(b: &Expr, d: &mut Vec<Diagnostic>) {
    let ExprKind::Table(t) = &b.kind else { return };
    if let Some(n) = t.get("nodes") {
        nodes_ok(n, "disruption.budgets[].nodes", d);
    }
    if t.contains_key("schedule") != t.contains_key("duration") {
        d.push(
            Diagnostic::error(
                "a disruption budget sets one of `schedule` and `duration` without the other",
                b.span.clone(),
            )
            .help("a scheduled budget needs both: schedule = \"0 9 * * mon-fri\", duration = \"8h\""),
        );
    }
    let text = |k: &str| t.get(k).and_then(|e| Some((e, e.as_literal()?.as_str()?.to_string())));
    if let Some((e, v)) = text("duration")
        && !budget_duration(&v)
    {
        d.push(
            Diagnostic::error(format!("budget duration \"{v}\" is not hours and minutes"), e.span.clone())
                .help("write it like \"8h\", \"30m\" or \"1h30m\""),
        );
    }
    if let Some((e, v)) = text("schedule")
        && !cron_schedule(&v)
    {
        d.push(
            Diagnostic::error(format!("budget schedule \"{v}\" is not a cron schedule"), e.span.clone()).help(
                "five fields (minute hour day month weekday, in UTC) like \"0 9 * * mon-fri\", or @daily, @weekly…",
            ),
        );
    }
}

/// A budget's `duration` (CRD pattern `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`).
pub(super) fn budget_duration(v: &str) -> bool {
    let v = v.strip_suffix("0s").filter(|r| r.ends_with(['h', 'm'])).unwrap_or(v);
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    match v.split_once('h') {
        Some((h, "")) => digits(h),
        Some((h, m)) => digits(h) && m.strip_suffix('m').is_some_and(digits),
        None => v.strip_suffix('m').is_some_and(digits),
    }
}

/// A budget's `schedule`: a cron macro, or the five fields of a standard cron line.
pub(super) fn cron_schedule(v: &str) -> bool {
    const MACROS: &[&str] = &["@annually", "@yearly", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"];
    MACROS.contains(&v) || v.split_whitespace().count() == 5
}

pub(crate) fn check_labels(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(t) = table(r, "node_labels") else { return };
    for (k, e) in t {
        let at = e.key_span.clone().or(e.span.clone());
        if restricted_label(k) {
            d.push(
                    Diagnostic::error(format!("`{}`: Karpenter refuses the node label \"{k}\"", r.address), at)
                        .help("karpenter.sh, karpenter.k8s.aws and kubernetes.io/hostname labels are set by Karpenter; pick another key"),
                );
        } else if let Some(v) = e.as_literal().and_then(Value::as_str).filter(|v| !label_value(v)) {
            d.push(
                    Diagnostic::error(format!("`{}`: \"{v}\" is not a Kubernetes label value", r.address), e.span.clone())
                        .help("at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit"),
                );
        }
    }
}

/// The first Bottlerocket release whose settings model has each sharing strategy's settings:
/// time-slicing 1.25 (the migration `migrate_v1.25.0_kubelet-device-plugins-time-slicing-settings`
/// in bottlerocket `Release.toml`; bottlerocket.dev's 1.23.x settings page has no time-slicing,
/// the 1.29.x page has it), MIG's `device-partitioning-strategy` 1.34 (bottlerocket.dev 1.34.x
/// "NVIDIA Multi-Instance GPU (MIG)"), MPS 1.54 (bottlerocket.dev 1.54.x lists `mps.*`;
/// bottlerocket-settings-models 0.20.0 "Added MPS GPU sharing settings model"). An older
/// release refuses user data with settings it does not know, and the node never joins.
const SHARING_FLOORS: &[(&str, (u32, u32))] = &[("time-slicing", (1, 25)), ("mig", (1, 34)), ("mps", (1, 54))];

/// A pinned `ami` release older than its `gpu_sharing` strategy (see [`SHARING_FLOORS`]).
fn check_sharing_release(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(ami) = literal(r, "ami").and_then(Value::as_str) else { return };
    let Some(release) = ami_version(ami).filter(|v| *v != "latest") else { return };
    let mut parts = release.trim_start_matches('v').split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let pinned = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let sharing = written_table(r, "gpu_sharing");
    let strategy = sharing.as_ref().and_then(|t| t.get("strategy")?.as_str());
    let Some((strategy, floor)) = SHARING_FLOORS.iter().find(|(s, _)| Some(*s) == strategy) else { return };
    if pinned < *floor {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: Bottlerocket {release} has no {strategy} settings (they came in {}.{}): its nodes would refuse the user data and never join",
                    r.address, floor.0, floor.1
                ),
                r.attrs["ami"].span.clone(),
            )
            .help(format!("pin ami = \"bottlerocket@v{}.{}.0\" or later, or \"bottlerocket@latest\"", floor.0, floor.1)),
        );
    }
}

/// One MIG layout per pool: its limit is rendered in slices ([`super::advertised_per_gpu`]),
/// which must be the same number for every GPU model the pool may launch, or `gpu_limit`
/// could not stand for physical GPUs.
fn check_mig_slices(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(sharing) = written_table(r, "gpu_sharing") else { return };
    let Some(profile) = sharing.get("mig_profile").and_then(Value::as_table) else { return };
    let slices: BTreeMap<i64, Vec<&str>> = profile.keys().fold(BTreeMap::new(), |mut m, k| {
        m.entry(super::advertised_per_gpu(Some(&sharing), Some(k))).or_default().push(k.as_str());
        m
    });
    if slices.len() > 1 {
        let shown: Vec<String> = slices.iter().map(|(n, ks)| format!("{} → {n}", ks.join(", "))).collect();
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: mig_profile slices GPUs differently by model ({}), so one gpu_limit cannot count its GPUs",
                    r.address,
                    shown.join("; ")
                ),
                r.attrs["gpu_sharing"].span.clone(),
            )
            .help("give every model the same number of slices, or split the pool by GPU model"),
        );
    }
}

/// `gpu_sharing`, `data_volume` and `efa` are checked exactly as a launch template's are:
/// the launch template's own checks run on a template holding just those. Its `efa` wants
/// the template's `instance_type`; a pool's types are checked by the rules, so a stand-in
/// keeps that one check quiet.
fn check_shared(r: &Resource, d: &mut Vec<Diagnostic>) {
    let mut attrs: BTreeMap<String, Expr> =
        SHARED_WITH_LAUNCH_TEMPLATE.iter().filter_map(|k| Some((k.to_string(), r.attrs.get(*k)?.clone()))).collect();
    if attrs.is_empty() {
        return;
    }
    if attrs.contains_key("efa") {
        attrs.insert("instance_type".into(), Expr::value(Value::str("(the pool's types)"), r.span.clone()));
    }
    let as_template = Resource {
        address: r.address.clone(),
        kind: &LaunchTemplateKind,
        name: r.name.clone(),
        attrs,
        prevent_destroy: false,
        prevent_destroy_written: false,
        depends_on: vec![],
        span: r.span.clone(),
        deps: vec![],
        values_ok: r.values_ok,
        schema_ok: r.schema_ok,
    };
    LaunchTemplateKind.validate(&as_template, d);
}
