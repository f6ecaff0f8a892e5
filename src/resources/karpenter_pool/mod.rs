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

pub(crate) mod checks;
pub mod drift;
pub mod node_class;
pub(crate) mod render;
pub mod requirements;
#[cfg(test)]
mod tests;
pub(crate) mod validate;

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
pub use render::{
    DEFAULT_DATA_GIB, ROOT_GIB, advertised_per_gpu, efa_layout, gpu_maker, limit_resource, network_interfaces,
    vcpus_per_gpu,
};

pub struct KarpenterPool;

/// `karpenter.sh/capacity-type` values, in the order Karpenter prefers them (aws-facts §10).
pub const CAPACITY_TYPES: &[&str] = &["reserved", "spot", "on-demand"];

/// `spec.disruption.consolidationPolicy` of the NodePool CRD (karpenter.sh_nodepools.yaml,
/// v1.14.1; `Balanced` is new in 1.14.0: kubernetes-sigs/karpenter `pkg/apis/v1/nodepool.go`).
pub const POLICIES: &[&str] = &["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"];

/// The disruption reasons a budget may name (`+kubebuilder:validation:Enum={Underutilized,Empty,Drifted}`,
/// kubernetes-sigs/karpenter v1.14.1 `pkg/apis/v1/nodepool.go`).
pub const BUDGET_REASONS: &[&str] = &["Empty", "Drifted", "Underutilized"];

/// One NodePool disruption budget (`spec.disruption.budgets[]`, same source).
const BUDGET: &[Attr] = &[
    // A node count ("1") or a percentage ("10%"): an integer is taken as a count.
    Attr::req("nodes", Ty::Any, OnChange::Update),
    Attr::opt("reasons", Ty::List(&Ty::Enum(BUDGET_REASONS)), Default::None, OnChange::Update),
    Attr::opt("schedule", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("duration", Ty::Str, Default::None, OnChange::Update),
];

pub(crate) const DISRUPTION: &[Attr] = &[
    Attr::opt("policy", Ty::Enum(POLICIES), Default::None, OnChange::Update),
    Attr::opt("consolidate_after", Ty::Str, Default::None, OnChange::Update),
    // The one-budget shorthand: a node count ("1") or a percentage ("10%").
    Attr::opt("budget", Ty::Any, Default::None, OnChange::Update),
    Attr::opt("budgets", Ty::List(&Ty::Object(BUDGET)), Default::None, OnChange::Update),
    Attr::opt("expire_after", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("termination_grace_period", Ty::Str, Default::None, OnChange::Update),
];

/// The attributes a pool shares with `launch_template`, taken from its schema so the two can
/// never disagree ("same fields as the launch template": data_volume, efa, gpu_sharing).
const SHARED_WITH_LAUNCH_TEMPLATE: &[&str] = &["data_volume", "efa", "gpu_sharing"];

const OWN_ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Update),
    Attr::req("node_role", Ty::Str, OnChange::Update),
    // Ids (`subnet-…`, `sg-…`, `cr-…`, literal or `${…id}`) and/or tag selectors: at least
    // one of each pair for subnets and security groups (validate.rs).
    Attr::opt("subnets", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("subnet_tags", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("security_groups", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("security_group_tags", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("capacity_types", Ty::List(&Ty::Enum(CAPACITY_TYPES)), Default::None, OnChange::Update),
    Attr::opt("capacity_reservations", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    Attr::opt("capacity_reservation_tags", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("instance_types", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("instance_families", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    // Karpenter's own requirements, rendered after the ones gpustack derives (requirements.rs).
    Attr::opt("requirements", Ty::List(&Ty::Object(requirements::REQUIREMENT)), Default::None, OnChange::Update),
    // Physical accelerators; required where it binds (NVIDIA and Neuron pools: rules::karpenter).
    Attr::opt("gpu_limit", Ty::Int, Default::None, OnChange::Update),
    // Other `spec.limits` (cpu, memory, nodes…), beside what gpu_limit renders.
    Attr::opt("limits", Ty::Map(&Ty::Any), Default::None, OnChange::Update),
    Attr::opt("ami", Ty::Str, Default::Str("bottlerocket@latest"), OnChange::Update),
    Attr::opt("root_volume", Ty::Object(node_class::ROOT_VOLUME), Default::None, OnChange::Update),
    Attr::opt("instance_store", Ty::Enum(&["raid0"]), Default::None, OnChange::Update),
    Attr::opt("kubelet", Ty::Object(node_class::KUBELET), Default::None, OnChange::Update),
    Attr::opt("metadata_options", Ty::Object(node_class::METADATA_OPTIONS), Default::None, OnChange::Update),
    Attr::opt("associate_public_ip_address", Ty::Bool, Default::None, OnChange::Update),
    Attr::opt("detailed_monitoring", Ty::Bool, Default::None, OnChange::Update),
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

/// The GPU-sane disruption defaults (DESIGN.md "The Kubernetes side", "Round 3 contracts").
/// A pool of reserved capacity only is paid for whether its nodes run or not: it consolidates
/// only empty nodes, after an hour, and never expires them (its AMI is pinned, so expiry would
/// only restart training on the same image). A pool that may also launch Spot or On-Demand
/// consolidates underused nodes after ten minutes, so overflow moves back into the paid
/// reservation ("Since ODCRs are pre-paid, Karpenter will model them as free and consolidate
/// spot / on-demand nodes when possible": Karpenter docs v1.14 `tasks/odcrs.md`), and expires
/// after 30 days (Karpenter's default `expireAfter`) — except that a training pool consolidates
/// only empty nodes and a pool that protects jobs never expires ([`default_disruption`]).
/// Every pool disrupts one GPU node at a time.
///
/// `terminationGracePeriod`: set, it lets Drift disrupt a node "even if there are pods with
/// blocking PDBs or the `karpenter.sh/do-not-disrupt` annotation" (Karpenter docs v1.14
/// `concepts/disruption.md` §terminationGracePeriod). Pools that hold jobs worth protecting
/// (reserved capacity, or multi-node training: see [`protects_jobs`]) get none, Karpenter's
/// default of waiting for the pods; others give a draining node an hour.
pub struct Disruption {
    pub policy: &'static str,
    pub consolidate_after: &'static str,
    pub expire_after: &'static str,
    pub budget: &'static str,
    pub termination_grace_period: Option<&'static str>,
}

/// The defaults for a pool with these capacity types, protecting jobs or not, training or
/// not (see [`training`]).
///
/// Review r18 m4: a pool that protects jobs renders no `terminationGracePeriod`, and "it is
/// not recommended to set `expireAfter` without also setting `terminationGracePeriod` if your
/// cluster has pods with the `karpenter.sh/do-not-disrupt` annotation" (Karpenter docs v1.14
/// `concepts/disruption.md` §Expiration: an expiring node with such a pod drains until the pod
/// ends, holding its reservation slot), so it never expires either.
/// Review r18 m5: a training pool consolidates only empty nodes, whatever its capacity:
/// moving a multi-node training pod off an underused node restarts the job.
pub fn default_disruption(capacity_types: &[&str], protects_jobs: bool, training: bool) -> Disruption {
    let only_reserved = !capacity_types.is_empty() && capacity_types.iter().all(|c| *c == "reserved");
    Disruption {
        policy: if only_reserved || training { "WhenEmpty" } else { "WhenEmptyOrUnderutilized" },
        consolidate_after: if only_reserved { "1h" } else { "10m" },
        expire_after: if only_reserved || protects_jobs { "Never" } else { "720h" },
        budget: "1",
        termination_grace_period: (!protects_jobs).then_some("1h"),
    }
}

/// A pool whose running jobs a drift must not kill: one that may use reserved capacity (paid
/// for, usually booked for a job), or a training pool (EFA or a placement group: the layout
/// of multi-node training, whose jobs run for days).
pub fn protects_jobs(capacity_types: &[&str], inputs: &Attrs) -> bool {
    capacity_types.contains(&"reserved") || training(|k| inputs.contains_key(k))
}

/// Default `weight` (1–100, higher fills first): reserved pools before Spot, Spot before
/// On-Demand, so the capacity already paid for is used first and burst goes to Spot. Of the
/// reserved pools, a training pool (see [`protects_jobs`]) comes after the others: a pod that
/// selects no pool then lands on inference capacity rather than on a training block, as
/// Karpenter tries pools by weight and ties by name (kubernetes-sigs/karpenter v1.14.1
/// `pkg/utils/nodepool/nodepool.go`, `OrderByWeight`).
pub fn default_weight(capacity_types: &[&str], training: bool) -> i64 {
    if capacity_types.contains(&"reserved") {
        if training { 40 } else { 50 }
    } else if capacity_types.contains(&"spot") {
        20
    } else {
        10
    }
}

/// A training pool: one with EFA or a placement group, given which attributes it has.
pub fn training(has: impl Fn(&str) -> bool) -> bool {
    has("efa") || has("placement_group")
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

    fn stack_defaults(&self, stack: &crate::stack::Stack, r: &Resource, inputs: &mut Attrs) {
        if uses_capacity_block(stack, r) {
            capacity_block_defaults(inputs);
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        for k in ["subnets", "security_groups", "capacity_reservations", "instance_types", "instance_families"] {
            if let Some(Value::List(l)) = inputs.get_mut(k) {
                l.sort_by_key(Value::interpolate);
                l.dedup();
            }
        }
        // A `karpenter.sh/capacity-type In [...]` requirement is the pool's capacity types
        // (Karpenter's docs write them so): it fills `capacity_types`, rendered once.
        let reqs = requirements::parse(inputs);
        if let Some(types) = requirements::capacity_types(&reqs)
            && !inputs.contains_key("capacity_types")
        {
            inputs.insert("capacity_types".into(), Value::List(types.iter().map(|t| Value::str(t.as_str())).collect()));
        }
        if let Some(Value::List(l)) = inputs.get_mut("requirements") {
            l.retain(|r| {
                let t = r.as_table();
                let get = |k: &str| t.and_then(|t| t.get(k)).and_then(Value::as_str);
                !(get("key") == Some(requirements::CAPACITY_TYPE) && get("operator") == Some("In"))
            });
        }
        let reserved_given =
            inputs.get("capacity_reservations").and_then(Value::as_list).is_some_and(|l| !l.is_empty())
                || inputs.get("capacity_reservation_tags").and_then(Value::as_table).is_some_and(|t| !t.is_empty());
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
        let weight = default_weight(&capacity, training(|k| inputs.contains_key(k)));
        let defaults =
            default_disruption(&capacity, protects_jobs(&capacity, inputs), training(|k| inputs.contains_key(k)));
        inputs.entry("weight".into()).or_insert(Value::Int(weight));
        let disruption = inputs.entry("disruption".into()).or_insert_with(|| Value::Table(BTreeMap::new()));
        if let Value::Table(t) = disruption {
            normalize_disruption(t, &defaults);
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
                "ami {} → {}: Karpenter replaces every node of the pool (drift), {}",
                str_attr(old, "ami"),
                str_attr(new, "ami"),
                drift::pace(new.get("disruption"))
            ));
            if drift::reserved_only(new) {
                notes.push(drift::RESERVED_ROLL.to_string());
            }
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
        let pinned = node_class::ami_alias(ami).is_some_and(|(_, v)| v != "latest");
        let pin = if changed.iter().any(|c| c == "ami") || pinned { Some(pin_alias(ctx, new).await?) } else { None };
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

/// The disruption defaults of a pool on a Capacity Block, when `termination_grace_period`,
/// `budget` and `budgets` are all unwritten: `terminationGracePeriod: 10m` and budgets
/// `[{ nodes: "1" }, { nodes: "0", reasons: [Drifted] }]`. Karpenter deletes a block's
/// NodeClaims "40 minutes before the capacity-block's end time, 10 minutes before EC2 begins
/// reclaiming the instances" (aws/karpenter-provider-aws v1.14.1
/// `pkg/controllers/capacityreservation/expiration/controller.go` l.46-48); without a grace
/// period that drain never evicts `karpenter.sh/do-not-disrupt` pods (Karpenter docs v1.14
/// `concepts/disruption.md` §TerminationGracePeriod), so they would die at reclaim with no
/// SIGTERM. 10m ends the drain as EC2 begins to reclaim. The grace period would also let
/// drift evict protected pods, so drift gets a budget of 0 (a budget without reasons keeps
/// Empty and Underutilized at one node: kubernetes-sigs/karpenter v1.14.1
/// `pkg/apis/v1/nodepool.go` `GetAllowedDisruptionsByReason`).
pub const CAPACITY_BLOCK_GRACE: &str = "10m";

/// True when the pool names a `capacity_block` of the stack in `capacity_reservations`
/// (`"${capacity_block.NAME.id}"`).
fn uses_capacity_block(stack: &crate::stack::Stack, pool: &Resource) -> bool {
    let Some(crate::stack::expr::ExprKind::List(items)) = pool.attrs.get("capacity_reservations").map(|e| &e.kind)
    else {
        return false;
    };
    items
        .iter()
        .filter_map(|e| e.as_single_ref().filter(|x| x.output == "id"))
        .filter_map(|x| stack.get(&x.address))
        .any(|r| r.kind.name() == "capacity_block")
}

fn capacity_block_defaults(inputs: &mut Attrs) {
    let d = inputs.entry("disruption".into()).or_insert_with(|| Value::Table(BTreeMap::new()));
    let Value::Table(t) = d else { return };
    if ["termination_grace_period", "budget", "budgets"].iter().any(|k| t.contains_key(*k)) {
        return;
    }
    t.insert("termination_grace_period".into(), Value::str(CAPACITY_BLOCK_GRACE));
    let budget = |pairs: Vec<(&str, Value)>| Value::Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
    t.insert(
        "budgets".into(),
        Value::List(vec![
            budget(vec![("nodes", Value::str("1"))]),
            budget(vec![("nodes", Value::str("0")), ("reasons", Value::List(vec![Value::str("Drifted")]))]),
        ]),
    );
}

/// The defaults filled into `disruption`; budgets' node counts as Karpenter's strings. The
/// `budget` shorthand stands for one budget and is kept only when `budgets` is not written.
fn normalize_disruption(t: &mut BTreeMap<String, Value>, defaults: &Disruption) {
    t.entry("policy".into()).or_insert(Value::str(defaults.policy));
    t.entry("consolidate_after".into()).or_insert(Value::str(defaults.consolidate_after));
    t.entry("expire_after".into()).or_insert(Value::str(defaults.expire_after));
    if let Some(tgp) = defaults.termination_grace_period {
        t.entry("termination_grace_period".into()).or_insert(Value::str(tgp));
    }
    let count = |v: Value| match v {
        Value::Int(n) => Value::str(n.to_string()),
        other => other,
    };
    if let Some(Value::List(budgets)) = t.get_mut("budgets") {
        for b in budgets.iter_mut().filter_map(|b| match b {
            Value::Table(b) => Some(b),
            _ => None,
        }) {
            if let Some(n) = b.remove("nodes") {
                b.insert("nodes".into(), count(n));
            }
        }
        return;
    }
    let budget = t.remove("budget").map_or(Value::str(defaults.budget), count);
    t.insert("budget".into(), budget);
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
    let (family, version) = node_class::ami_alias(ami).unwrap_or((node_class::AmiFamily::Bottlerocket, "latest"));
    if version != "latest" {
        return Ok(match family {
            node_class::AmiFamily::Bottlerocket => format!("bottlerocket@v{}", version.trim_start_matches('v')),
            node_class::AmiFamily::Al2023 => format!("al2023@{version}"),
        });
    }
    let cluster = str_attr(inputs, "cluster");
    let described = ctx.call(Service::Eks, "DescribeCluster", ctx.eks.describe_cluster().name(cluster).send()).await?;
    let k8s = described.cluster().and_then(|c| c.version()).unwrap_or_default().to_string();
    let (arch, nvidia) = render::arch_and_gpu(inputs);
    if family == node_class::AmiFamily::Al2023 {
        return pin_al2023(ctx, &k8s, arch).await;
    }
    let variant = format!("aws-k8s-{k8s}{}", if nvidia { "-nvidia" } else { "" });
    let what_to_check = "check the cluster's version, or pin ami = \"bottlerocket@vX.Y.Z\"";
    let release = crate::aws::ami::latest_version(ctx, &variant, arch, what_to_check).await?;
    // "1.57.0-0b6a2b38": the release without its build id, as Karpenter's docs pin it
    // (`bottlerocket@v1.20.4`, aws-facts §10).
    let release = release.split('-').next().unwrap_or_default();
    Ok(format!("bottlerocket@v{release}"))
}

/// `al2023@latest` pinned to the release EKS publishes now for the cluster's version:
/// `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/standard/recommended/release_version`
/// is `1.33.5-20251029` (EKS UG `retrieve-ami-id`; the managed node group release version),
/// and Karpenter pins AL2023 by the date, `al2023@v20251029` (EC2NodeClass CRD `alias`:
/// "ex: \"al2023@v20240625\""; Karpenter resolves it per variant under
/// `.../amazon-linux-2023/<arch>/<standard|nvidia|neuron>/amazon-eks-node-al2023-<arch>-<variant>-<k8s>-v<date>/image_id`,
/// karpenter-provider-aws v1.14.1 `pkg/providers/amifamily/al2023.go`). One NodeClass then
/// serves CPU, NVIDIA and Neuron types alike, each on its variant of the same release.
async fn pin_al2023(ctx: &Ctx, k8s: &str, arch: &str) -> Result<String> {
    let name =
        format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/standard/recommended/release_version");
    let release = crate::aws::ssm::parameter(ctx, &name).await.map_err(|e| {
        if !e.has_code("ParameterNotFound") {
            return e;
        }
        let detail = format!(
            "{}: EKS publishes no {name}; check the cluster's version, or pin ami = \"al2023@vYYYYMMDD\"",
            e.detail
        );
        crate::aws::AwsError { detail, ..e }
    })?;
    let date = release.rsplit('-').next().unwrap_or_default();
    Ok(format!("al2023@v{date}"))
}
