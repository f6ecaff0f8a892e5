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

/// The AMI aliases a pool takes: Bottlerocket, latest or a release (`bottlerocket@v1.57.0`).
/// Only Bottlerocket: `gpu_sharing` is Bottlerocket user data, and its NVIDIA variants run the
/// device plugin on the host (aws-facts §4, §14).
pub(super) fn ami_version(ami: &str) -> Option<&str> {
    let version = ami.strip_prefix("bottlerocket@")?;
    let release = version.strip_prefix('v').unwrap_or(version);
    let numeric = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    (version == "latest" || (release.split('.').count() == 3 && release.split('.').all(numeric))).then_some(version)
}

/// Duration patterns of the NodePool CRD (karpenter.sh_nodepools.yaml, v1.14.1): `Never` is
/// allowed for `consolidateAfter` and `expireAfter`, not for `terminationGracePeriod`.
pub(super) fn duration(v: &str, never: bool) -> bool {
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
        (None, None) => d.push(
            Diagnostic::error(format!("`{}` needs instance_types or instance_families", r.address), r.span.clone())
                .help("e.g. instance_types = [\"p5.48xlarge\"], or instance_families = [\"g6\", \"g6e\", \"g5\"]"),
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
    if let (Some(e), Some(_)) = (r.attrs.get("efa"), families) {
        d.push(
            Diagnostic::error(
                format!("`{}`: `efa` needs instance_types, not instance_families", r.address),
                e.span.clone(),
            )
            .help("the EFA interfaces are laid out per instance type: list the exact types (with the same EFA layout)"),
        );
    }
}

fn check_numbers(r: &Resource, d: &mut Vec<Diagnostic>) {
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
        && ami_version(ami).is_none()
    {
        d.push(
            Diagnostic::error(
                format!("`{}`: ami = \"{ami}\" is not a Bottlerocket alias gpustack renders", r.address),
                e.span.clone(),
            )
            .help(
                "use \"bottlerocket@latest\" (resolved once and pinned) or a release such as \"bottlerocket@v1.57.0\"",
            ),
        );
    }
}

fn check_disruption(r: &Resource, d: &mut Vec<Diagnostic>) {
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
        let ok = match e.as_literal() {
            Some(Value::Int(n)) => *n >= 0,
            Some(Value::Str(s)) => budget_ok(s),
            Some(_) => false,
            None => true,
        };
        if !ok {
            d.push(
                Diagnostic::error("`disruption.budget` must be a node count or a percentage", e.span.clone())
                    .help("e.g. budget = 1 (one node at a time) or budget = \"10%\""),
            );
        }
    }
}

fn check_labels(r: &Resource, d: &mut Vec<Diagnostic>) {
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
