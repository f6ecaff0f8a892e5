//! `karpenter_pool`: a Karpenter EC2NodeClass (`karpenter.k8s.aws/v1`) and NodePool
//! (`karpenter.sh/v1`), rendered into `karpenter/<pool>.yaml` with the ids of this stack's
//! subnets, security groups, reservations and snapshots filled in (never applied to AWS;
//! DESIGN.md "The Kubernetes side"). The fields and their Karpenter versions are in
//! aws-facts §7 and §10; `render.rs` builds the documents, `validate.rs` checks one pool.
//!
//! The AMI alias `bottlerocket@latest` is resolved once, at create, from Bottlerocket's
//! public SSM parameter and pinned (output `ami_alias`), so a new Bottlerocket release is not
//! drift; it is resolved again only when `ami` changes. What this kind does not do: install
//! Karpenter or its IAM (that is `karpenter_controller`), or talk to Kubernetes.

mod render;
#[cfg(test)]
mod tests;
mod validate;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use async_trait::async_trait;

use super::launch_template::{LaunchTemplateKind, TAINT};
use super::{Create, Kind, Manifest, Observed, Recorded, Result, Schema, TAGS, rendered, str_attr};
use crate::aws::{Ctx, Service};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

/// Taint effects as Kubernetes spells them, for the device plugins' tolerations (`manifests`).
pub use super::launch_template::userdata::k8s_effect;
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
        validate::check(r, diags);
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
                str_attr(old, "name")
            ));
        }
        if changed.iter().any(|c| c == "ami") {
            notes.push(format!(
                "ami {} → {}: Karpenter replaces every node of the pool (drift), {} at a time",
                str_attr(old, "ami"),
                str_attr(new, "ami"),
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
        let ami = str_attr(new, "ami");
        let pin = if changed.iter().any(|c| c == "ami") || validate::ami_version(ami) != Some("latest") {
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
    let name = Value::str(str_attr(inputs, "name"));
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
    let ami = str_attr(inputs, "ami");
    let version = validate::ami_version(ami).unwrap_or("latest");
    if version != "latest" {
        return Ok(format!("bottlerocket@v{}", version.trim_start_matches('v')));
    }
    let cluster = str_attr(inputs, "cluster");
    let described = ctx.call(Service::Eks, "DescribeCluster", ctx.eks.describe_cluster().name(cluster).send()).await?;
    let k8s = described.cluster().and_then(|c| c.version()).unwrap_or_default().to_string();
    let (arch, nvidia) = render::arch_and_gpu(inputs);
    let variant = format!("aws-k8s-{k8s}{}", if nvidia { "-nvidia" } else { "" });
    let what_to_check = "check the cluster's version, or pin ami = \"bottlerocket@vX.Y.Z\"";
    let release = crate::aws::ami::latest_version(ctx, &variant, arch, what_to_check).await?;
    // "1.57.0-0b6a2b38": the release without its build id, as Karpenter's docs pin it
    // (`bottlerocket@v1.20.4`, aws-facts §10).
    let release = release.split('-').next().unwrap_or_default();
    Ok(format!("bottlerocket@v{release}"))
}
