//! `karpenter_pool`: a Karpenter EC2NodeClass (`karpenter.k8s.aws/v1`) and NodePool
//! (`karpenter.sh/v1`), rendered into `karpenter/<pool>.yaml` with the ids of this stack's
//! subnets, security groups, reservations and snapshots filled in (never applied to AWS;
//! DESIGN.md "The Kubernetes side"). The fields and their Karpenter versions are in
//! aws-facts §7 and §10; `render.rs` builds the documents.
//!
//! The AMI alias `bottlerocket@latest` is resolved once, at create, from Bottlerocket's
//! public SSM parameter and pinned (output `ami_alias`), so a new Bottlerocket release is not
//! drift; it is resolved again only when `ami` changes. What this kind does not do: install
//! Karpenter or its IAM (that is `karpenter_controller`), or talk to Kubernetes.

mod render;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use async_trait::async_trait;

use super::launch_template::{LaunchTemplateKind, TAINT};
use super::node_group::require_stack_cluster;
use super::priority_class::dns_label;
use super::{Create, Kind, Manifest, Observed, Recorded, Result, Schema, TAGS, rendered, s};
use crate::aws::{AwsError, Ctx, Service, err};
use crate::stack::expr::ExprKind;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Expr, Resource};
use crate::value::{Attrs, Value};

/// Taint effects as Kubernetes spells them, for the device plugins' tolerations (`manifests`).
pub use super::userdata::k8s_effect;
pub use render::{DEFAULT_DATA_GIB, ROOT_GIB, efa_layout, network_interfaces};

pub struct KarpenterPool;

/// `karpenter.sh/capacity-type` values, in the order Karpenter prefers them (aws-facts §10).
pub const CAPACITY_TYPES: &[&str] = &["reserved", "spot", "on-demand"];

const DISRUPTION: &[Attr] = &[
    Attr::opt("consolidate_after", Ty::Str, Default::None, OnChange::Update),
    // A node count ("1") or a percentage ("10%"): an integer is taken as a count.
    Attr::opt("budget", Ty::Any, Default::None, OnChange::Update),
    Attr::opt("expire_after", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("termination_grace_period", Ty::Str, Default::None, OnChange::Update),
];

/// The attributes a pool shares with `launch_template`, taken from its schema so the two can
/// never disagree ("same fields as the launch template": data_volume, efa, gpu_sharing).
const SHARED_WITH_LAUNCH_TEMPLATE: &[&str] = &["data_volume", "efa", "gpu_sharing"];

const OWN_ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Update),
    Attr::req("node_role", Ty::Str, OnChange::Update),
    Attr::req("subnets", Ty::List(&Ty::Str), OnChange::Update),
    Attr::req("security_groups", Ty::List(&Ty::Str), OnChange::Update),
    Attr::opt("capacity_types", Ty::List(&Ty::Enum(CAPACITY_TYPES)), Default::None, OnChange::Update),
    Attr::opt("capacity_reservations", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    Attr::opt("instance_types", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("instance_families", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::req("gpu_limit", Ty::Int, OnChange::Update),
    Attr::opt("ami", Ty::Str, Default::Str("bottlerocket@latest"), OnChange::Update),
    Attr::opt("placement_group", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("node_labels", Ty::Map(&Ty::Str), Default::EmptyMap, OnChange::Update),
    Attr::opt("node_taints", Ty::List(&Ty::Object(TAINT)), Default::EmptyList, OnChange::Update),
    Attr::opt("weight", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("disruption", Ty::Object(DISRUPTION), Default::None, OnChange::Update),
    Attr::opt("name", Ty::Str, Default::None, OnChange::Update),
    TAGS,
];

/// The pool's attributes: its own plus the launch template's shared ones. `Schema::attrs`
/// hands out a `&'static` slice, and the shared ones live in launch_template's schema, so
/// the list is put together once.
fn attrs() -> &'static [Attr] {
    static ATTRS: OnceLock<Vec<Attr>> = OnceLock::new();
    ATTRS.get_or_init(|| {
        let mut all = OWN_ATTRS.to_vec();
        all.extend(
            LaunchTemplateKind.attrs().iter().filter(|a| SHARED_WITH_LAUNCH_TEMPLATE.contains(&a.name)).copied(),
        );
        all
    })
}

impl Schema for KarpenterPool {
    fn name(&self) -> &'static str {
        "karpenter_pool"
    }
    fn attrs(&self) -> &'static [Attr] {
        attrs()
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("sha256", Ty::Str), ("ami_alias", Ty::Str), ("node_class", Ty::Str), ("node_pool", Ty::Str)]
    }
}

/// The GPU-sane disruption defaults (DESIGN.md "The Kubernetes side"). A reserved pool is
/// paid for whether its nodes run or not: it consolidates only empty nodes, after an hour,
/// and never expires them (its AMI is pinned, so expiry would only restart training on the
/// same image). Others consolidate underused nodes after ten minutes and expire after 30 days
/// (Karpenter's default `expireAfter`). Every pool disrupts one GPU node at a time, and gives
/// a draining node an hour before it is terminated (Karpenter's default is to wait forever).
pub struct Disruption {
    pub policy: &'static str,
    pub consolidate_after: &'static str,
    pub expire_after: &'static str,
    pub budget: &'static str,
    pub termination_grace_period: &'static str,
}

pub fn default_disruption(reserved: bool) -> Disruption {
    Disruption {
        policy: if reserved { "WhenEmpty" } else { "WhenEmptyOrUnderutilized" },
        consolidate_after: if reserved { "1h" } else { "10m" },
        expire_after: if reserved { "Never" } else { "720h" },
        budget: "1",
        termination_grace_period: "1h",
    }
}

/// Default `weight` (1–100, higher fills first): reserved pools before Spot, Spot before
/// On-Demand, so the capacity already paid for is used first and burst goes to Spot.
pub fn default_weight(capacity_types: &[&str]) -> i64 {
    if capacity_types.contains(&"reserved") {
        50
    } else if capacity_types.contains(&"spot") {
        20
    } else {
        10
    }
}

/// The AMI aliases a pool takes: Bottlerocket, latest or a release (`bottlerocket@v1.57.0`).
/// Only Bottlerocket: `gpu_sharing` is Bottlerocket user data, and its NVIDIA variants run the
/// device plugin on the host (aws-facts §4, §14).
fn ami_version(ami: &str) -> Option<&str> {
    let version = ami.strip_prefix("bottlerocket@")?;
    let release = version.strip_prefix('v').unwrap_or(version);
    let numeric = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    (version == "latest" || (release.split('.').count() == 3 && release.split('.').all(numeric))).then_some(version)
}

/// Duration patterns of the NodePool CRD (karpenter.sh_nodepools.yaml, v1.14.1): `Never` is
/// allowed for `consolidateAfter` and `expireAfter`, not for `terminationGracePeriod`.
fn duration(v: &str, never: bool) -> bool {
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
fn budget_ok(v: &str) -> bool {
    match v.strip_suffix('%') {
        Some(p) => p == "100" || ((1..=2).contains(&p.len()) && p.chars().all(|c| c.is_ascii_digit())),
        None => !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()),
    }
}

/// Label keys Karpenter's NodePool refuses in `template.metadata.labels` (CEL rules of the
/// CRD): its own domains, and `kubernetes.io/hostname`.
fn restricted_label(key: &str) -> bool {
    let domain = key.split_once('/').map_or("", |(d, _)| d);
    key == "kubernetes.io/hostname" || domain.ends_with("karpenter.sh") || domain.ends_with("karpenter.k8s.aws")
}

/// A Kubernetes label value: at most 63 characters, alphanumerics with `-_.` inside.
fn label_value(v: &str) -> bool {
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

impl KarpenterPool {
    fn check_types(&self, r: &Resource, d: &mut Vec<Diagnostic>) {
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

    fn check_numbers(&self, r: &Resource, d: &mut Vec<Diagnostic>) {
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
                Diagnostic::error(format!("`{}`: ami = \"{ami}\" is not a Bottlerocket alias gpustack renders", r.address), e.span.clone())
                    .help("use \"bottlerocket@latest\" (resolved once and pinned) or a release such as \"bottlerocket@v1.57.0\""),
            );
        }
    }

    fn check_disruption(&self, r: &Resource, d: &mut Vec<Diagnostic>) {
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
                    Diagnostic::error(
                        format!("`disruption.{k}` = \"{v}\" is not a Karpenter duration"),
                        e.span.clone(),
                    )
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

    fn check_labels(&self, r: &Resource, d: &mut Vec<Diagnostic>) {
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
    fn check_shared(&self, r: &Resource, d: &mut Vec<Diagnostic>) {
        let mut attrs: BTreeMap<String, Expr> = SHARED_WITH_LAUNCH_TEMPLATE
            .iter()
            .filter_map(|k| Some((k.to_string(), r.attrs.get(*k)?.clone())))
            .collect();
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
            depends_on: vec![],
            span: r.span.clone(),
            deps: vec![],
            values_ok: r.values_ok,
            schema_ok: r.schema_ok,
        };
        LaunchTemplateKind.validate(&as_template, d);
    }
}

#[async_trait]
impl Kind for KarpenterPool {
    fn actions(&self) -> &'static [&'static str] {
        // The AMI alias is pinned at create: the cluster's Kubernetes version, then
        // Bottlerocket's public SSM parameter for the latest release.
        &["eks:DescribeCluster", "ssm:GetParameter"]
    }
    fn rendered(&self) -> bool {
        true
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        require_stack_cluster(r, diags);
        self.check_types(r, diags);
        self.check_numbers(r, diags);
        self.check_disruption(r, diags);
        self.check_labels(r, diags);
        self.check_shared(r, diags);
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

    fn normalize(&self, inputs: &mut Attrs) {
        for k in ["subnets", "security_groups", "capacity_reservations", "instance_types", "instance_families"] {
            if let Some(Value::List(l)) = inputs.get_mut(k) {
                l.sort_by_key(Value::interpolate);
                l.dedup();
            }
        }
        let reserved_given =
            inputs.get("capacity_reservations").and_then(Value::as_list).is_some_and(|l| !l.is_empty());
        let types = inputs
            .entry("capacity_types".into())
            .or_insert_with(|| Value::List(vec![Value::str(if reserved_given { "reserved" } else { "on-demand" })]));
        if let Value::List(l) = types {
            l.sort_by_key(|v| CAPACITY_TYPES.iter().position(|c| Some(*c) == v.as_str()));
            l.dedup();
        }
        let capacity: Vec<&str> = inputs
            .get("capacity_types")
            .and_then(Value::as_list)
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let (weight, defaults) = (default_weight(&capacity), default_disruption(capacity.contains(&"reserved")));
        inputs.entry("weight".into()).or_insert(Value::Int(weight));
        let disruption = inputs.entry("disruption".into()).or_insert_with(|| Value::Table(BTreeMap::new()));
        if let Value::Table(t) = disruption {
            t.entry("consolidate_after".into()).or_insert(Value::str(defaults.consolidate_after));
            t.entry("expire_after".into()).or_insert(Value::str(defaults.expire_after));
            t.entry("termination_grace_period".into()).or_insert(Value::str(defaults.termination_grace_period));
            let budget = match t.remove("budget") {
                Some(Value::Int(n)) => Value::str(n.to_string()),
                Some(v) => v,
                None => Value::str(defaults.budget),
            };
            t.insert("budget".into(), budget);
        }
        if let Some(Value::Table(efa)) = inputs.get_mut("efa") {
            efa.entry("interfaces".into()).or_insert(Value::str("max"));
            efa.entry("security_groups".into()).or_insert(Value::List(vec![]));
            if let Some(Value::List(l)) = efa.get_mut("security_groups") {
                l.sort_by_key(Value::interpolate);
            }
        }
        if let Some(Value::Table(dv)) = inputs.get_mut("data_volume")
            && dv.contains_key("snapshot")
        {
            dv.entry("initialization_rate_mibps".into())
                .or_insert(Value::Int(super::launch_template::DEFAULT_INIT_RATE));
        }
        if let Some(Value::List(l)) = inputs.get_mut("node_taints") {
            l.sort_by_key(Value::interpolate);
        }
    }

    fn render(&self, address: &str, inputs: &Attrs, outputs: &Attrs) -> Option<Manifest> {
        Some(render::manifest(address, inputs, outputs))
    }

    fn update_note(&self, old: &Attrs, new: &Attrs, changed: &[String]) -> Option<String> {
        let mut notes = vec![];
        if changed.iter().any(|c| c == "name") {
            notes.push(format!(
                "renamed: Karpenter sees a new NodePool and EC2NodeClass; after applying the YAML, `kubectl delete nodepool,ec2nodeclass {}`",
                s(old, "name")
            ));
        }
        if changed.iter().any(|c| c == "ami") {
            notes.push(format!(
                "ami {} → {}: Karpenter replaces every node of the pool (drift), {} at a time",
                s(old, "ami"),
                s(new, "ami"),
                new.get("disruption")
                    .and_then(Value::as_table)
                    .and_then(|t| t.get("budget"))
                    .map_or("1".into(), Value::interpolate)
            ));
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let alias = pin_alias(ctx, req.inputs).await?;
        Ok(rendered::record(self, req.address, req.inputs, outputs(req.inputs, alias)))
    }
    async fn read_all(&self, _ctx: &Ctx) -> Result<Vec<Observed>> {
        Ok(vec![])
    }
    /// The pinned alias stays unless `ami` changed. The engine keeps the outputs an update does
    /// not return, but does not pass them in: with `ami = "bottlerocket@latest"` unchanged the
    /// pin is not known here, so neither it nor the hash is returned, and state keeps the hash
    /// of the YAML last written with a known pin (reported: `Kind::update` has no old outputs).
    async fn update(
        &self,
        ctx: &Ctx,
        address: &str,
        _id: &str,
        _old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded> {
        let ami = s(new, "ami");
        let pin = if changed.iter().any(|c| c == "ami") || ami_version(ami) != Some("latest") {
            Some(pin_alias(ctx, new).await?)
        } else {
            None
        };
        match pin {
            Some(alias) => Ok(rendered::record(self, address, new, outputs(new, alias))),
            None => {
                let mut o = outputs(new, String::new());
                o.remove("ami_alias");
                Ok(Recorded { id: address.to_string(), outputs: o })
            }
        }
    }
    async fn delete(&self, _ctx: &Ctx, _a: &str, _id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        Ok(())
    }
}

fn outputs(inputs: &Attrs, alias: String) -> Attrs {
    let name = Value::str(s(inputs, "name"));
    Attrs::from([
        ("ami_alias".to_string(), Value::str(alias)),
        ("node_class".to_string(), name.clone()),
        ("node_pool".to_string(), name),
    ])
}

/// The concrete alias for `ami`: a release as written (`bottlerocket@v1.57.0`), or for
/// `latest` the release Bottlerocket publishes now for the cluster's Kubernetes version, read
/// from `/aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<arch>/latest/image_version`
/// (aws-facts §4; Karpenter reads the same tree for the alias, trimming the `v`: §10).
async fn pin_alias(ctx: &Ctx, inputs: &Attrs) -> Result<String> {
    let ami = s(inputs, "ami");
    let version = ami_version(ami).unwrap_or("latest");
    if version != "latest" {
        return Ok(format!("bottlerocket@v{}", version.trim_start_matches('v')));
    }
    let cluster = s(inputs, "cluster");
    let described = {
        let _p = ctx.permit(Service::Eks).await;
        ctx.eks.describe_cluster().name(cluster).send().await.map_err(err("DescribeCluster"))?
    };
    let k8s = described.cluster().and_then(|c| c.version()).unwrap_or_default().to_string();
    let (arch, nvidia) = render::arch_and_gpu(inputs);
    let name = format!(
        "/aws/service/bottlerocket/aws-k8s-{k8s}{}/{arch}/latest/image_version",
        if nvidia { "-nvidia" } else { "" }
    );
    let release = {
        let _p = ctx.permit(Service::Ssm).await;
        match ctx.ssm.get_parameter().name(&name).send().await.map_err(err("GetParameter")) {
            Ok(o) => o.parameter().and_then(|p| p.value()).unwrap_or_default().to_string(),
            Err(e) if e.code.as_deref() == Some("ParameterNotFound") => {
                return Err(AwsError {
                    detail: format!(
                        "{}: Bottlerocket publishes no {name}; check the cluster's version, or pin ami = \"bottlerocket@vX.Y.Z\"",
                        e.detail
                    ),
                    ..e
                });
            }
            Err(e) => return Err(e),
        }
    };
    // "1.57.0-0b6a2b38": the release without its build id, as Karpenter's docs pin it
    // (`bottlerocket@v1.20.4`, aws-facts §10).
    let release = release.split('-').next().unwrap_or_default();
    Ok(format!("bottlerocket@v{release}"))
}
