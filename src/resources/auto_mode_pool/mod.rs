//! `auto_mode_pool`: a pool of EKS Auto Mode, rendered into `auto-mode/<pool>.yaml` as the
//! `NodeClass` (`eks.amazonaws.com/v1`: role, subnets, security groups, capacity reservations,
//! ephemeral storage, network policy) and the `NodePool` (`karpenter.sh/v1`, its
//! `nodeClassRef` in the `eks.amazonaws.com` group) that Auto Mode's managed Karpenter reads,
//! with the ids of this stack's subnets, security groups, ODCRs and Capacity Blocks filled in
//! from state (never applied to AWS; DESIGN.md "The Kubernetes side").
//!
//! It shares with `karpenter_pool` the NodePool half: capacity types and their
//! reserved-first / Spot-before-On-Demand weights, the GPU-sane disruption defaults, limits
//! and their offline checks (`karpenter_pool::{render, validate, checks}`), and its rules
//! (`rules::karpenter`: reservations in the pool's zones, types the pool runs). What differs
//! is Auto Mode's: the NodeClass fields (aws-facts-auto-mode §6; no AMI, user data, kubelet or
//! block devices), the `eks.amazonaws.com/instance-*` labels (§8), Auto Mode's default node
//! lifetime (§5) and the GPU families it launches (§9, `rules::auto_mode`).

mod render;
#[cfg(test)]
mod tests;

use async_trait::async_trait;

use super::karpenter_pool::{CAPACITY_TYPES, DISRUPTION, KarpenterPool};
use super::launch_template::TAINT;
use super::{Create, Kind, Manifest, Observed, Recorded, Result, Schema, rendered};
use crate::aws::Ctx;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct AutoModePool;

/// NodeClass `networkPolicy` (EKS UG `create-node-class`; default `DefaultAllow`).
pub const NETWORK_POLICIES: &[&str] = &["DefaultAllow", "DefaultDeny"];
/// NodeClass `snatPolicy` (same page; default `Random`).
pub const SNAT_POLICIES: &[&str] = &["Random", "Disabled"];

/// NodeClass `ephemeralStorage`: the node's one data volume (size 1–59000 GiB, default 80Gi;
/// iops 3000–16000; throughput 125–1000 MiB/s; `kmsKeyID`: EKS UG `create-node-class`).
pub const EPHEMERAL_STORAGE: &[Attr] = &[
    Attr::opt("size_gib", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("iops", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("throughput", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("kms_key", Ty::Str, Default::None, OnChange::Update),
];

/// Auto Mode's own node lifetime default: "Terminates instances after 336 hours" (EKS UG
/// `create-node-pool`, Disruption). Used where a Karpenter pool would default to 720h or
/// Never: Auto Mode replaces its AMI about weekly and caps a node's life at 21 days (EKS best
/// practices guide, Auto Mode), so a longer lifetime is not one it keeps.
pub const DEFAULT_EXPIRE_AFTER: &str = "336h";
/// The longest node lifetime Auto Mode keeps, in hours (21 days; see above).
pub const MAX_EXPIRE_HOURS: i64 = 21 * 24;
/// How long an expiring or drifted Auto Mode node drains before its pods are evicted, unless
/// written (a Capacity Block pool's is its block's 10m: `karpenter_pool`).
pub const DEFAULT_GRACE: &str = "1h";

/// The hours an Auto Mode node of a pool with this written `expire_after` (None: the default
/// of a pool that protects jobs) lives at most: Auto Mode's 21 days caps a longer one or
/// `Never`. None when the text is not a duration.
pub fn lifetime_hours(expire_after: Option<&str>) -> Option<i64> {
    match expire_after {
        None | Some("Never") => Some(MAX_EXPIRE_HOURS),
        Some(v) => render::hours(v).map(|h| h.min(MAX_EXPIRE_HOURS)),
    }
}

/// The default `expire_after`: Auto Mode's own, or its ceiling for a pool that protects jobs
/// (review auto M1).
pub fn default_expire_after(protects_jobs: bool) -> String {
    if protects_jobs { format!("{MAX_EXPIRE_HOURS}h") } else { DEFAULT_EXPIRE_AFTER.to_string() }
}

const ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Update),
    // NodeClass `role`: the nodes' IAM role, by name (an ARN is rendered as its name).
    Attr::req("node_role", Ty::Str, OnChange::Update),
    Attr::opt("subnets", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("subnet_tags", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("security_groups", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("security_group_tags", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("capacity_types", Ty::List(&Ty::Enum(CAPACITY_TYPES)), Default::None, OnChange::Update),
    Attr::opt("capacity_reservations", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    Attr::opt("capacity_reservation_tags", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("instance_types", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("instance_families", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    // `eks.amazonaws.com/instance-gpu-name` values (`l4`, `l40s`, `a100`, `h100`, `h200`…).
    Attr::opt("gpu_names", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("gpu_limit", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("limits", Ty::Map(&Ty::Any), Default::None, OnChange::Update),
    Attr::opt("ephemeral_storage", Ty::Object(EPHEMERAL_STORAGE), Default::None, OnChange::Update),
    Attr::opt("network_policy", Ty::Enum(NETWORK_POLICIES), Default::None, OnChange::Update),
    Attr::opt("snat_policy", Ty::Enum(SNAT_POLICIES), Default::None, OnChange::Update),
    Attr::opt("node_labels", Ty::Map(&Ty::Str), Default::EmptyMap, OnChange::Update),
    Attr::opt("node_taints", Ty::List(&Ty::Object(TAINT)), Default::EmptyList, OnChange::Update),
    Attr::opt("weight", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("disruption", Ty::Object(DISRUPTION), Default::None, OnChange::Update),
    Attr::opt("name", Ty::Str, Default::None, OnChange::Update),
];

/// Names Auto Mode keeps for itself: the built-in NodePools and the NodeClass made with them
/// ("Do not name your custom node class `default`", EKS UG `create-node-class`; "You cannot
/// modify the built-in `system` and `general-purpose` node pools", UG `create-node-pool`).
pub const RESERVED_NAMES: &[&str] = &["default", "system", "general-purpose"];

impl Schema for AutoModePool {
    fn name(&self) -> &'static str {
        "auto_mode_pool"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("sha256", Ty::Str), ("node_class", Ty::Str), ("node_pool", Ty::Str)]
    }
}

#[async_trait]
impl Kind for AutoModePool {
    fn actions(&self) -> &'static [&'static str] {
        &[]
    }
    fn rendered(&self) -> bool {
        true
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        render::validate(r, diags);
    }

    fn stack_defaults(&self, stack: &crate::stack::Stack, r: &Resource, inputs: &mut Attrs) {
        // The Capacity Block drain defaults of a Karpenter pool (a block's nodes go 40 minutes
        // before its end): Auto Mode's NodePool is Karpenter's, with the same fields.
        KarpenterPool.stack_defaults(stack, r, inputs);
    }

    /// Karpenter's pool normalization (capacity types, weights, disruption defaults), with
    /// Auto Mode's node lifetimes: `expire_after` defaults to Auto Mode's 336h, or for a pool
    /// that protects jobs (reserved capacity, training) to the 21-day ceiling, so a long job
    /// is stopped as late as Auto Mode allows; and every pool drains within a
    /// `termination_grace_period` (1h unless written or set by a Capacity Block's defaults).
    ///
    /// Review auto M1: Karpenter's "Never" for such pools cannot hold under Auto Mode, which
    /// replaces a node by 21 days regardless; and "it is not recommended to set `expireAfter`
    /// without also setting `terminationGracePeriod` if your cluster has pods with the
    /// `karpenter.sh/do-not-disrupt` annotation" (Karpenter docs v1.14 `concepts/disruption.md`
    /// §Expiration: the expiring node otherwise drains until the pod ends, holding its
    /// reservation slot).
    fn normalize(&self, inputs: &mut Attrs) {
        let written = |k: &str| inputs.get("disruption").and_then(Value::as_table).is_some_and(|t| t.contains_key(k));
        let (expire_written, grace_written) = (written("expire_after"), written("termination_grace_period"));
        KarpenterPool.normalize(inputs);
        let capacity: Vec<&str> = inputs
            .get("capacity_types")
            .and_then(Value::as_list)
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let expire = default_expire_after(super::karpenter_pool::protects_jobs(&capacity, inputs));
        if let Some(Value::Table(t)) = inputs.get_mut("disruption") {
            if !expire_written {
                t.insert("expire_after".into(), Value::str(expire));
            }
            if !grace_written {
                t.entry("termination_grace_period".into()).or_insert(Value::str(DEFAULT_GRACE));
            }
        }
        if let Some(Value::List(l)) = inputs.get_mut("gpu_names") {
            l.sort_by_key(Value::interpolate);
            l.dedup();
        }
    }

    fn render(&self, address: &str, inputs: &Attrs, _outputs: &Attrs) -> Option<Manifest> {
        Some(render::manifest(address, inputs))
    }

    fn update_note(&self, old: &Attrs, new: &Attrs, changed: &[String]) -> Option<String> {
        let mut notes = vec![];
        if changed.iter().any(|c| c == "name") {
            notes.push(format!(
                "renamed: Auto Mode sees a new NodePool and NodeClass; after applying the YAML, `kubectl delete nodepool,nodeclass {}`",
                super::str_attr(old, "name")
            ));
        }
        if changed.iter().any(|c| c == "capacity_reservations" || c == "capacity_reservation_tags") {
            notes.push(format!(
                "the NodeClass selects other reservations: Auto Mode drifts the pool's nodes onto them, {}",
                super::karpenter_pool::drift::pace(new.get("disruption"))
            ));
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    async fn create(&self, _ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        Ok(rendered::record(self, req.address, req.inputs, outputs(req.inputs)))
    }
    async fn read_all(&self, _ctx: &Ctx) -> Result<Vec<Observed>> {
        Ok(vec![])
    }
    async fn update(
        &self,
        _ctx: &Ctx,
        address: &str,
        _id: &str,
        _old: &Attrs,
        new: &Attrs,
        _changed: &[String],
    ) -> Result<Recorded> {
        Ok(rendered::record(self, address, new, outputs(new)))
    }
    async fn delete(&self, _ctx: &Ctx, _a: &str, _id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        Ok(())
    }
}

fn outputs(inputs: &Attrs) -> Attrs {
    let name = Value::str(super::str_attr(inputs, "name"));
    Attrs::from([("node_class".to_string(), name.clone()), ("node_pool".to_string(), name)])
}
