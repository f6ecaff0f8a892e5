//! `hyperpod_cluster`: a SageMaker HyperPod cluster whose orchestrator is an EKS cluster of
//! the stack (`CreateCluster` with `Orchestrator.Eks.ClusterArn`): its instance groups join
//! that cluster as nodes, with HyperPod's health checks and automatic node recovery. A group
//! may run on a `training_plan` (`TrainingPlanArn`).
//!
//! - Create waits for `InService` (cluster and every group), reporting each group's count.
//! - What `UpdateCluster` can change, changes in place (it takes every group's full
//!   specification): a group's count, lifecycle scripts, training plan, EBS volume size,
//!   deep health checks and labels, the cluster's `node_recovery`, and groups added (a new
//!   name in `InstanceGroups`) or removed (`InstanceGroupsToDelete`, never the last one).
//!   Anything else replaces the cluster: `VpcConfig` and the orchestrator cannot change
//!   after creation, nor can a group's type, execution role or threads per core
//!   (`docs/aws-facts-hyperpod.md` §6). A replacement stops every instance and its jobs, so
//!   the plan refuses it unless the resource spells out `prevent_destroy = false`.
//! - Refresh reads every group back whole (type, role, lifecycle, plan, volume, threads,
//!   checks, labels, count), so a cluster adopted by its tags plans no change.
//! - The cluster name is unique in the account and region, so a create that raced a crash
//!   finds its cluster by name and adopts it when its tags say it is this address's.
//! - The HyperPod dependencies Helm chart must be in the EKS cluster before the cluster is
//!   created (SageMaker DG `sagemaker-hyperpod-eks-install-packages-using-helm-chart`):
//!   `gpustack manifests` writes its values and the plan says so.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sagemaker::operation::describe_cluster::DescribeClusterOutput;
use aws_sdk_sagemaker::types::{
    ClusterEbsVolumeConfig, ClusterInstanceGroupSpecification, ClusterInstanceStorageConfig, ClusterInstanceType,
    ClusterKubernetesConfig, ClusterLifeCycleConfig, ClusterNodeRecovery, ClusterOrchestrator,
    ClusterOrchestratorEksConfig, ClusterStatus, DeepHealthCheckType, VpcConfig,
};

use super::{Create, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, i32_of, str_attr, strings_attr};
use crate::aws::wait::{Status, until_status};
use crate::aws::{Absent, AwsError, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct HyperpodCluster;

/// Deep health checks a group may run when its instances start (`DeepHealthCheckType`;
/// `MultiNodeTrainingValidation` is left out: not in gpustack's stack language yet).
pub const DEEP_HEALTH_CHECKS: &[&str] = &["InstanceStress", "InstanceConnectivity"];
const RECOVERY: &[&str] = &["Automatic", "None"];
/// `ClusterName` and `InstanceGroupName`: `[a-zA-Z0-9](-*[a-zA-Z0-9])*`, 1 to 63 characters.
pub const NAME_MAX: usize = 63;
/// HyperPod clusters take long to create: instances boot, run their lifecycle scripts and,
/// with deep health checks, stress tests that can take hours (SageMaker DG
/// `sagemaker-hyperpod-eks-resiliency-deep-health-checks`).
const CREATE_TIMEOUT: Duration = Duration::from_secs(4 * 3600);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(2 * 3600);
const DELETE_TIMEOUT: Duration = Duration::from_secs(3600);

const LIFECYCLE: &[Attr] =
    &[Attr::req("source_s3_uri", Ty::Str, OnChange::Replace), Attr::req("on_create", Ty::Str, OnChange::Replace)];

/// One instance group. What `UpdateCluster` may change for an existing group changes in
/// place: the count (down to 0), lifecycle scripts (for nodes launched later), the training
/// plan, deep health checks and Kubernetes labels (declarative: the full set is sent). The
/// type, execution role and threads per core must stay as created (SageMaker DG
/// `sagemaker-hyperpod-eks-operate-cli-command-update-cluster`; `docs/aws-facts-hyperpod.md` §6).
pub const GROUP: &[Attr] = &[
    Attr::req("instance_type", Ty::Str, OnChange::Replace),
    Attr::req("instance_count", Ty::Int, OnChange::Update),
    Attr::req("execution_role", Ty::Str, OnChange::Replace),
    Attr::req("lifecycle", Ty::Object(LIFECYCLE), OnChange::Update),
    Attr::opt("training_plan", Ty::Str, Default::None, OnChange::Update),
    // Settable on update: EBS through `InstanceStorageConfigs` is "available when creating or
    // updating instance groups" (SageMaker DG `sagemaker-hyperpod-eks-prerequisites`; the
    // CloudFormation schema of `AWS::SageMaker::Cluster` does not list it create-only). It
    // applies to instances launched afterwards.
    Attr::opt("volume_size_gb", Ty::Int, Default::None, OnChange::Update),
    // 1: one thread per core, HyperThreading off, as the SageMaker DG's examples for GPU
    // training set it; 2 turns it on (`ClusterThreadsPerCore`, 1 or 2).
    Attr::opt("threads_per_core", Ty::Int, Default::Int(1), OnChange::Replace),
    Attr::opt("deep_health_checks", Ty::List(&Ty::Enum(DEEP_HEALTH_CHECKS)), Default::EmptyList, OnChange::Update),
    Attr::opt("labels", Ty::Map(&Ty::Str), Default::EmptyMap, OnChange::Update),
];

/// Label prefixes HyperPod keeps for itself and Kubernetes (`ClusterKubernetesConfig`;
/// SageMaker DG `sagemaker-hyperpod-eks-custom-labels-and-taints`).
pub const RESERVED_LABEL_DOMAINS: &[&str] =
    &["kubernetes.io", "k8s.io", "sagemaker.amazonaws.com", "eks.amazonaws.com", "k8s.aws", "karpenter.sh"];

/// A label key whose prefix is (a subdomain of) a reserved domain.
pub fn reserved_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else { return false };
    RESERVED_LABEL_DOMAINS.iter().any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")))
}

const ATTRS: &[Attr] = &[
    Attr::opt("name", Ty::Str, Default::None, OnChange::Replace),
    Attr::req("eks_cluster", Ty::Str, OnChange::Replace),
    Attr::req("subnets", Ty::List(&Ty::Str), OnChange::Replace),
    Attr::req("security_groups", Ty::List(&Ty::Str), OnChange::Replace),
    Attr::opt("node_recovery", Ty::Enum(RECOVERY), Default::Str("Automatic"), OnChange::Update),
    // Groups are added and removed in place: "To add a new instance group, specify a new name
    // not existing in your cluster" (SageMaker DG `…-operate-cli-command-update-cluster`);
    // removal through `InstanceGroupsToDelete` (DG `smcluster-scale-down`). A field of a
    // group keeps its own rule (GROUP).
    Attr::req("instance_groups", Ty::Map(&Ty::Object(GROUP)), OnChange::Update),
    TAGS,
];

impl Schema for HyperpodCluster {
    fn name(&self) -> &'static str {
        "hyperpod_cluster"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("arn", Ty::Str), ("name", Ty::Str)]
    }
}

/// `name` is a HyperPod cluster or instance group name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[async_trait]
impl Kind for HyperpodCluster {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "sagemaker:CreateCluster",
            "sagemaker:DescribeCluster",
            "sagemaker:ListClusters",
            "sagemaker:UpdateCluster",
            "sagemaker:ListClusterNodes",
            "sagemaker:DeleteCluster",
            "sagemaker:ListTags",
            "sagemaker:AddTags",
            "sagemaker:DeleteTags",
            "iam:PassRole",
            "iam:CreateServiceLinkedRole",
            "servicequotas:ListServiceQuotas",
            "servicequotas:ListAWSDefaultServiceQuotas",
        ]
    }

    /// The name is unique and stays the same, and a cluster on a training plan holds its
    /// instances: the old cluster goes before the new one is made (a new one first would
    /// find the name taken, adopt the old cluster, and then delete it as the deposed copy).
    fn replace_order(&self) -> ReplaceOrder {
        ReplaceOrder::DeleteBeforeCreate
    }

    fn replace_needs_consent(&self) -> bool {
        true
    }

    /// A group that leaves its training plan keeps its count On-Demand ("You can add, update,
    /// or remove a training plan by updating the instance group", SageMaker DG
    /// `use-training-plan-for-hyperpod-update-using-api-cli-sdk`): the plan says so, since
    /// the field diff alone reads like a harmless edit.
    fn update_note(&self, old: &Attrs, new: &Attrs, _changed: &[String]) -> Option<String> {
        let plan = |i: &Attrs, name: &str| -> Option<String> {
            let Some(Value::Table(t)) = i.get("instance_groups") else { return None };
            Some(t.get(name)?.as_table()?.get("training_plan")?.as_str()?.to_string())
        };
        let leaving: Vec<String> = group_names(new)
            .intersection(&group_names(old))
            .filter(|g| plan(old, g).is_some() && plan(new, g).is_none() && group_count(new, g).unwrap_or(0) > 0)
            .map(|g| format!("{g} ({} instances)", group_count(new, g).unwrap_or(0)))
            .collect();
        (!leaving.is_empty()).then(|| {
            format!(
                "instance group {} leaves its training plan and runs On-Demand from now on (billed per hour); set instance_count = 0 to stop instead",
                leaving.join(", ")
            )
        })
    }

    /// What `UpdateCluster` would refuse: removing every group ("Your SageMaker HyperPod
    /// cluster must always maintain at least one instance group", DG `smcluster-scale-down`)
    /// and adding one with no instances ("To add a new instance group, specify an integer
    /// greater or equal to 1", DG `…-operate-cli-command-update-cluster`).
    fn check_update(&self, old: &Attrs, new: &Attrs) -> Vec<(&'static str, String, String)> {
        let (was, now) = (group_names(old), group_names(new));
        let mut out = vec![];
        if now.is_empty() && !was.is_empty() {
            out.push((
                "instance_groups",
                "removes every instance group, but a HyperPod cluster keeps at least one".into(),
                "keep one group (at instance_count = 0 if it should run nothing), or remove the cluster".into(),
            ));
        }
        // Neither can be cleared by UpdateCluster: `OnStartDeepHealthChecks` has `min: 1`
        // (botocore `sagemaker/2017-07-24/service-2.json`, `OnStartDeepHealthChecks`), so an
        // empty list is invalid, and what an omitted member (or `InstanceStorageConfigs`) does
        // to a group's current value is not documented (SageMaker DG
        // `sagemaker-hyperpod-eks-operate-cli-command-update-cluster`): sending the update
        // could keep the old value and plan the same change forever.
        for name in now.intersection(&was) {
            let (before, after) = (group_field(old, name), group_field(new, name));
            let checks = |f: &dyn Fn(&str) -> Option<Value>| {
                f("deep_health_checks").is_some_and(|v| !v.is_known() || v.as_list().is_some_and(|l| !l.is_empty()))
            };
            if checks(&before) && !checks(&after) {
                out.push((
                    "instance_groups",
                    format!("clears the deep health checks of instance group {name}, which UpdateCluster cannot do in place"),
                    format!(
                        "keep `instance_groups.{name}.deep_health_checks`, or add a group under a new name without them and remove {name} (InstanceGroupsToDelete)"
                    ),
                ));
            }
            let size = |f: &dyn Fn(&str) -> Option<Value>| f("volume_size_gb").is_some();
            if size(&before) && !size(&after) {
                out.push((
                    "instance_groups",
                    format!("removes volume_size_gb from instance group {name}, which UpdateCluster cannot do in place"),
                    format!(
                        "keep `instance_groups.{name}.volume_size_gb`, or add a group under a new name without it and remove {name} (InstanceGroupsToDelete)"
                    ),
                ));
            }
        }
        for name in now.difference(&was) {
            if group_count(new, name) == Some(0) {
                out.push((
                    "instance_groups",
                    format!(
                        "adds instance group {name} with instance_count = 0; HyperPod adds a group with at least 1"
                    ),
                    format!("give `instance_groups.{name}.instance_count` 1 or more, and scale it to 0 afterwards"),
                ));
            }
        }
        out
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        if let Some(e) = r.attrs.get("name")
            && let Some(n) = e.as_literal().and_then(Value::as_str)
            && !valid_name(n)
        {
            diags.push(
                Diagnostic::error(format!("`name` = \"{n}\" is not a HyperPod cluster name"), e.span.clone())
                    .help("use 1 to 63 letters, digits and hyphens, starting and ending with a letter or digit"),
            );
        }
        let Some(groups) = r.attrs.get("instance_groups") else { return };
        for (name, g) in groups.table_entries() {
            let at = g.key_span.clone().or(g.span.clone());
            if !valid_name(&name) {
                diags.push(
                    Diagnostic::error(
                        format!("instance group \"{name}\" is not a HyperPod instance group name"),
                        at.clone(),
                    )
                    .help("use 1 to 63 letters, digits and hyphens, starting and ending with a letter or digit"),
                );
            }
            let fields = g.table_entries();
            let lit = |k: &str| fields.get(k).and_then(|e| e.as_literal().cloned());
            let span = |k: &str| fields.get(k).and_then(|e| e.span.clone()).or(at.clone());
            if let Some(Value::Str(t)) = lit("instance_type")
                && !t.starts_with("ml.")
            {
                diags.push(
                    Diagnostic::error(
                        format!("`instance_groups.{name}.instance_type` = \"{t}\" is not a SageMaker instance type"),
                        span("instance_type"),
                    )
                    .help(format!("HyperPod names EC2 types with the ml. prefix: instance_type = \"ml.{t}\"")),
                );
            }
            if let Some(Value::Int(n)) = lit("threads_per_core")
                && !(1..=2).contains(&n)
            {
                diags.push(
                    Diagnostic::error(
                        format!("`instance_groups.{name}.threads_per_core` = {n} is not 1 or 2"),
                        span("threads_per_core"),
                    )
                    .help("1 turns HyperThreading off (the usual choice for GPU training), 2 keeps it on"),
                );
            }
            if let Some(Value::Int(n)) = lit("volume_size_gb")
                && !(1..=16384).contains(&n)
            {
                diags.push(
                    Diagnostic::error(
                        format!("`instance_groups.{name}.volume_size_gb` = {n} is outside 1 to 16384"),
                        span("volume_size_gb"),
                    )
                    .help("HyperPod's extra EBS volume is 1 to 16,384 GB (ClusterEbsVolumeConfig.VolumeSizeInGB)"),
                );
            }
            if let Some(Value::Int(n)) = lit("instance_count")
                && n < 0
            {
                diags.push(
                    Diagnostic::error(
                        format!("`instance_groups.{name}.instance_count` = {n} is negative"),
                        span("instance_count"),
                    )
                    .help("a group has 0 or more instances"),
                );
            }
            if let Some(labels) = fields.get("labels") {
                for (key, e) in labels.table_entries() {
                    if reserved_label(&key) {
                        diags.push(
                            Diagnostic::error(
                                format!("`instance_groups.{name}.labels`: \"{key}\" uses a prefix HyperPod reserves"),
                                e.key_span.clone().or(e.span.clone()),
                            )
                            .help(format!(
                                "pick a key outside {}, e.g. \"gpustack.io/capacity\"",
                                RESERVED_LABEL_DOMAINS.join(", ")
                            )),
                        );
                    }
                }
            }
            if let Some(lc) = fields.get("lifecycle") {
                let lc = lc.table_entries();
                if let Some(e) = lc.get("source_s3_uri")
                    && let Some(Value::Str(u)) = e.as_literal()
                    && !u.starts_with("s3://")
                {
                    diags.push(
                        Diagnostic::error(format!("`instance_groups.{name}.lifecycle.source_s3_uri` = \"{u}\" is not an S3 URI"), e.span.clone())
                            .help("write the S3 prefix of the lifecycle scripts, e.g. \"s3://sagemaker-my-bucket/hyperpod/lifecycle/\""),
                    );
                }
            }
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        for k in ["subnets", "security_groups"] {
            if let Some(Value::List(l)) = inputs.get_mut(k) {
                l.sort_by_key(|v| v.interpolate());
                l.dedup();
            }
        }
        if let Some(Value::Table(groups)) = inputs.get_mut("instance_groups") {
            for g in groups.values_mut() {
                if let Value::Table(g) = g {
                    for a in GROUP {
                        if !g.contains_key(a.name)
                            && let Some(v) = a.default.value()
                        {
                            g.insert(a.name.to_string(), v);
                        }
                    }
                    if let Some(Value::List(l)) = g.get_mut("deep_health_checks") {
                        l.sort_by_key(|v| v.interpolate());
                        l.dedup();
                    }
                }
            }
        }
    }

    /// The recorded inputs with what HyperPod reports: the recovery mode, the tags and every
    /// group whole (what `observe` read overrides what was recorded, field by field). A group
    /// HyperPod no longer has is dropped, so the plan adds it back in place; a group HyperPod
    /// has without `TargetCount` keeps its recorded count.
    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        for k in ["node_recovery", "tags"] {
            if let Some(v) = observed.get(k) {
                cur.insert(k.into(), v.clone());
            }
        }
        if let Some(Value::Table(seen)) = observed.get("instance_groups") {
            let was = match cur.get("instance_groups") {
                Some(Value::Table(t)) => t.clone(),
                _ => BTreeMap::new(),
            };
            let groups = seen
                .iter()
                .map(|(name, obs)| {
                    let mut g = obs.as_table().cloned().unwrap_or_default();
                    let recorded = was.get(name).and_then(Value::as_table);
                    for k in KEPT_WHEN_UNREPORTED {
                        if !g.contains_key(*k)
                            && let Some(v) = recorded.and_then(|r| r.get(*k))
                        {
                            g.insert(k.to_string(), v.clone());
                        }
                    }
                    (name.clone(), Value::Table(g))
                })
                .collect();
            cur.insert("instance_groups".into(), Value::Table(groups));
        }
        self.normalize(&mut cur);
        cur
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let i = req.inputs;
        let name = str_attr(i, "name");
        plans_paid(ctx, i).await?;
        let call = ctx
            .sagemaker
            .create_cluster()
            .cluster_name(name)
            .set_instance_groups(Some(groups(i, None)))
            .vpc_config(
                VpcConfig::builder()
                    .set_subnets(Some(strings_attr(i, "subnets")))
                    .set_security_group_ids(Some(strings_attr(i, "security_groups")))
                    .build(),
            )
            .orchestrator(
                ClusterOrchestrator::builder()
                    .eks(ClusterOrchestratorEksConfig::builder().cluster_arn(str_attr(i, "eks_cluster")).build())
                    .build(),
            )
            .node_recovery(ClusterNodeRecovery::from(str_attr(i, "node_recovery")))
            .set_tags(Some(tags::sagemaker(ctx, req.address, i)));
        match ctx.call(Service::SageMaker, "CreateCluster", call.send()).await {
            Ok(_) => {}
            // The name is taken: by this very resource (a create that raced a crash) it is adopted.
            Err(e) if e.has_code("ResourceInUse") => {
                let mine = match describe(ctx, name).await? {
                    Some(c) => {
                        let all = tags::sagemaker_map(ctx, c.cluster_arn().unwrap_or_default()).await?;
                        all.get(tags::STACK) == Some(&ctx.stack)
                            && all.get(tags::ADDRESS).map(String::as_str) == Some(req.address)
                    }
                    None => false,
                };
                if !mine {
                    return Err(e.taken_by_other("set `name` to another HyperPod cluster name"));
                }
            }
            Err(e) => return Err(e),
        }
        let c = wait_in_service(ctx, name, "CreateCluster", CREATE_TIMEOUT, req.report).await?;
        Ok(recorded(&c))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let pages = ctx.sagemaker.list_clusters().into_paginator().send();
        let all = ctx
            .all_pages(Service::SageMaker, "ListClusters", pages, |p| p.cluster_summaries.unwrap_or_default())
            .await?;
        let mut out = vec![];
        for s in all {
            let Some(arn) = s.cluster_arn() else { continue };
            let Some(all) = tags::sagemaker_map(ctx, arn).await.absent_ok()? else { continue };
            if all.get(tags::STACK) != Some(&ctx.stack) {
                continue;
            }
            let Some(c) = describe(ctx, arn).await? else { continue };
            if c.cluster_status() == Some(&ClusterStatus::Deleting) {
                continue;
            }
            out.push(observe(&c, &all));
        }
        Ok(out)
    }

    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded> {
        let name = str_attr(new, "name");
        if changed.iter().any(|c| c == "instance_groups" || c == "node_recovery") {
            // Only an InService cluster takes an update (ConflictException otherwise).
            wait_in_service(ctx, name, "UpdateCluster", UPDATE_TIMEOUT, &|_| {}).await?;
            // Groups the stack no longer has go through InstanceGroupsToDelete, and must not
            // be listed in InstanceGroups (DG `smcluster-scale-down`); new names are added.
            let gone: Vec<String> = group_names(old).difference(&group_names(new)).cloned().collect();
            plans_paid(ctx, new).await?;
            health_checks_done(ctx, id).await?;
            let call = ctx
                .sagemaker
                .update_cluster()
                .cluster_name(id)
                .set_instance_groups(Some(groups(new, Some(old))))
                .set_instance_groups_to_delete((!gone.is_empty()).then_some(gone))
                .node_recovery(ClusterNodeRecovery::from(str_attr(new, "node_recovery")));
            ctx.call(Service::SageMaker, "UpdateCluster", call.send()).await?;
            wait_in_service(ctx, name, "UpdateCluster", UPDATE_TIMEOUT, &|_| {}).await?;
        }
        if changed.iter().any(|c| c == "tags") {
            tags::sync_sagemaker(ctx, id, old, new).await?;
        }
        Ok(describe(ctx, id).await?.as_ref().map(recorded).unwrap_or_else(|| Recorded::id_only(id)))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        // A cluster still creating or updating refuses deletion (ConflictException): let it
        // settle, as long as a create may take.
        let settled = until_status(
            &format!("HyperPod cluster {id}"),
            CREATE_TIMEOUT,
            || describe(ctx, id),
            |c: Option<DescribeClusterOutput>| match c.as_ref().and_then(|c| c.cluster_status()) {
                None => Status::Reached(false),
                Some(ClusterStatus::Deleting) => Status::Reached(true),
                Some(
                    ClusterStatus::Creating
                    | ClusterStatus::Updating
                    | ClusterStatus::Systemupdating
                    | ClusterStatus::Rollingback,
                ) => Status::Pending(
                    c.as_ref().and_then(|c| c.cluster_status()).map(|s| s.as_str().to_string()).unwrap_or_default(),
                ),
                Some(_) => Status::Reached(true),
            },
        )
        .await?;
        if !settled {
            return Ok(());
        }
        let call = ctx.sagemaker.delete_cluster().cluster_name(id);
        if ctx.call(Service::SageMaker, "DeleteCluster", call.send()).await.absent_ok()?.is_none() {
            return Ok(());
        }
        until_status(
            &format!("deletion of HyperPod cluster {id}"),
            DELETE_TIMEOUT,
            || describe(ctx, id),
            |c: Option<DescribeClusterOutput>| match c {
                None => Status::Reached(()),
                Some(c) => match c.cluster_status() {
                    Some(ClusterStatus::Failed) => Status::Failed(AwsError {
                        operation: "DeleteCluster",
                        code: Some("Failed".into()),
                        detail: format!(
                            "HyperPod cluster {id} failed to delete: {}",
                            c.failure_message().unwrap_or("no reason given")
                        ),
                    }),
                    s => Status::Pending(s.map(|s| s.as_str().to_string()).unwrap_or_else(|| "Deleting".into())),
                },
            },
        )
        .await
    }
}

/// Group fields `ClusterInstanceGroupDetails` may leave out without meaning "none" (all its
/// members are optional in the botocore model): an unreported one keeps its recorded value.
/// A missing `TrainingPlanArn`, storage config, checks or labels do mean none.
const KEPT_WHEN_UNREPORTED: &[&str] =
    &["instance_type", "instance_count", "execution_role", "threads_per_core", "lifecycle"];

/// Waits until every training plan the groups run on is paid for: a group needs its plan
/// `Scheduled` or `Active` (SageMaker DG `training-plan-utilization-for-hyperpod`), and a plan
/// adopted by name or tag may still be `Pending`. A `Failed` plan is an error.
async fn plans_paid(ctx: &Ctx, i: &Attrs) -> Result<()> {
    let Some(Value::Table(groups)) = i.get("instance_groups") else { return Ok(()) };
    let plans: std::collections::BTreeSet<&str> =
        groups.values().filter_map(|g| g.as_table()?.get("training_plan")?.as_str()).collect();
    for arn in plans {
        super::training_plan::paid(ctx, arn).await?;
    }
    Ok(())
}

/// Waits while any node runs deep health checks: "If deep health checks are running on the
/// cluster, this API will not function as expected … you should wait until the deep health
/// checks finish" (SageMaker DG `sagemaker-hyperpod-eks-operate-cli-command-update-cluster`).
/// Nodes run them after a scale-up or a replacement while the cluster is `InService`.
async fn health_checks_done(ctx: &Ctx, id: &str) -> Result<()> {
    let checking = || async {
        let pages = ctx.sagemaker.list_cluster_nodes().cluster_name(id).into_paginator().send();
        let nodes = ctx
            .all_pages(Service::SageMaker, "ListClusterNodes", pages, |p| p.cluster_node_summaries.unwrap_or_default())
            .await?;
        Ok(Some(
            nodes
                .iter()
                .filter(|n| {
                    n.instance_status().and_then(|s| s.status()).map(|s| s.as_str())
                        == Some("DeepHealthCheckInProgress")
                })
                .count(),
        ))
    };
    until_status(
        &format!("deep health checks of HyperPod cluster {id}"),
        CREATE_TIMEOUT,
        checking,
        |n: Option<usize>| match n.unwrap_or(0) {
            0 => Status::Reached(()),
            n => Status::Pending(format!("{n} node(s) in DeepHealthCheckInProgress")),
        },
    )
    .await
}

/// The names of the instance groups in `i`.
fn group_names(i: &Attrs) -> std::collections::BTreeSet<String> {
    match i.get("instance_groups") {
        Some(Value::Table(t)) => t.keys().cloned().collect(),
        _ => std::collections::BTreeSet::new(),
    }
}

/// A group's field reader: `f(key)` is that field of group `name` in `i`, if set.
fn group_field<'a>(i: &'a Attrs, name: &'a str) -> impl Fn(&str) -> Option<Value> + 'a {
    move |k: &str| {
        let Some(Value::Table(t)) = i.get("instance_groups") else { return None };
        t.get(name)?.as_table()?.get(k).cloned()
    }
}

fn group_count(i: &Attrs, name: &str) -> Option<i64> {
    let Some(Value::Table(t)) = i.get("instance_groups") else { return None };
    t.get(name)?.as_table()?.get("instance_count")?.as_int()
}

/// The instance groups as `CreateCluster` and `UpdateCluster` take them, in name order. An
/// update (`old`: the groups as they are) sends an empty label set for a group whose labels
/// were all removed: labels are declarative ("you specify the complete desired state … Omit
/// the labels or taints you want to remove", SageMaker DG
/// `sagemaker-hyperpod-eks-custom-labels-and-taints`), and an omitted `KubernetesConfig` is
/// not documented to clear them.
fn groups(i: &Attrs, old: Option<&Attrs>) -> Vec<ClusterInstanceGroupSpecification> {
    let had_labels = |name: &str| {
        let Some(Value::Table(t)) = old.and_then(|o| o.get("instance_groups")) else { return false };
        t.get(name)
            .and_then(Value::as_table)
            .and_then(|g| g.get("labels"))
            .is_some_and(|l| matches!(l, Value::Table(l) if !l.is_empty()))
    };
    let Some(Value::Table(groups)) = i.get("instance_groups") else { return vec![] };
    groups
        .iter()
        .filter_map(|(name, g)| Some((name, g.as_table()?)))
        .map(|(name, g)| {
            let s = |k: &str| g.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let n = |k: &str| g.get(k).and_then(Value::as_int);
            let lifecycle = g.get("lifecycle").and_then(Value::as_table);
            let lc = |k: &str| lifecycle.and_then(|t| t.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
            let mut spec = ClusterInstanceGroupSpecification::builder()
                .instance_group_name(name)
                .instance_type(ClusterInstanceType::from(s("instance_type").as_str()))
                .instance_count(i32_of(n("instance_count").unwrap_or(0)))
                .execution_role(s("execution_role"))
                .life_cycle_config(
                    ClusterLifeCycleConfig::builder()
                        .source_s3_uri(lc("source_s3_uri"))
                        .on_create(lc("on_create"))
                        .build(),
                )
                .set_threads_per_core(n("threads_per_core").map(i32_of));
            if let Some(plan) = g.get("training_plan").and_then(Value::as_str) {
                spec = spec.training_plan_arn(plan);
            }
            if let Some(gb) = n("volume_size_gb") {
                let ebs = ClusterEbsVolumeConfig::builder().volume_size_in_gb(i32_of(gb)).build();
                spec = spec.instance_storage_configs(ClusterInstanceStorageConfig::EbsVolumeConfig(ebs));
            }
            let checks: Vec<DeepHealthCheckType> = g
                .get("deep_health_checks")
                .and_then(Value::as_list)
                .unwrap_or_default()
                .iter()
                .filter_map(|v| v.as_str().map(DeepHealthCheckType::from))
                .collect();
            if !checks.is_empty() {
                spec = spec.set_on_start_deep_health_checks(Some(checks));
            }
            if let Some(Value::Table(labels)) = g.get("labels")
                && (!labels.is_empty() || had_labels(name))
            {
                let labels: std::collections::HashMap<String, String> =
                    labels.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect();
                spec = spec.kubernetes_config(ClusterKubernetesConfig::builder().set_labels(Some(labels)).build());
            }
            spec.build()
        })
        .collect()
}

async fn describe(ctx: &Ctx, name_or_arn: &str) -> Result<Option<DescribeClusterOutput>> {
    let call = ctx.sagemaker.describe_cluster().cluster_name(name_or_arn);
    ctx.call(Service::SageMaker, "DescribeCluster", call.send()).await.absent_ok()
}

/// "train 2/4, infer 1/1": each group's current and target counts.
fn counts(c: &DescribeClusterOutput) -> String {
    c.instance_groups()
        .iter()
        .map(|g| {
            format!(
                "{} {}/{}",
                g.instance_group_name().unwrap_or_default(),
                g.current_count().unwrap_or(0),
                g.target_count().unwrap_or(0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Waits until the cluster is `InService`; `Failed` or `RollingBack` ends the wait with
/// HyperPod's failure message. Each look reports the groups' counts.
async fn wait_in_service(
    ctx: &Ctx,
    name: &str,
    operation: &'static str,
    timeout: Duration,
    report: &(dyn Fn(&str) + Send + Sync),
) -> Result<DescribeClusterOutput> {
    let last = std::sync::Mutex::new(String::new());
    until_status(
        &format!("HyperPod cluster {name}"),
        timeout,
        || describe(ctx, name),
        |c: Option<DescribeClusterOutput>| {
            let Some(c) = c else {
                return Status::Failed(AwsError {
                    operation,
                    code: Some("ResourceNotFound".into()),
                    detail: format!("HyperPod cluster {name} disappeared"),
                });
            };
            let status = c.cluster_status().map(|s| s.as_str().to_string()).unwrap_or_default();
            // Each change once: a look that sees what the last one saw says nothing new.
            let seen = format!("{status}: {}", counts(&c));
            if let Ok(mut last) = last.lock()
                && *last != seen
            {
                report(&seen);
                *last = seen;
            }
            match c.cluster_status() {
                Some(ClusterStatus::Inservice) => Status::Reached(c),
                Some(ClusterStatus::Failed | ClusterStatus::Rollingback) => Status::Failed(AwsError {
                    operation,
                    code: Some(status.clone()),
                    detail: format!(
                        "HyperPod cluster {name} is {status}: {}",
                        c.failure_message().unwrap_or("no reason given (see the SageMaker console's cluster events)")
                    ),
                }),
                _ => Status::Pending(format!("{status} ({})", counts(&c))),
            }
        },
    )
    .await
}

fn observe(c: &DescribeClusterOutput, all: &BTreeMap<String, String>) -> Observed {
    let groups: BTreeMap<String, Value> = c
        .instance_groups()
        .iter()
        .filter_map(|g| Some((g.instance_group_name()?.to_string(), Value::Table(observe_group(g)))))
        .collect();
    let mut attrs =
        Attrs::from([("instance_groups".into(), Value::Table(groups)), ("tags".into(), tags::observed(all))]);
    if let Some(r) = c.node_recovery() {
        attrs.insert("node_recovery".into(), Value::str(r.as_str()));
    }
    Observed::tagged(all, recorded(c), attrs)
}

/// One group as `DescribeCluster` reports it (`ClusterInstanceGroupDetails`), in the stack's
/// terms. Only `InstanceGroupName` identifies a group: `TargetCount` and the rest are
/// optional members of the shape, and what is absent is left to the record. Labels are
/// `CurrentLabels`, what the nodes carry (SageMaker DG
/// `sagemaker-hyperpod-eks-custom-labels-and-taints`), else the desired ones.
fn observe_group(g: &aws_sdk_sagemaker::types::ClusterInstanceGroupDetails) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            out.insert(k.to_string(), v);
        }
    };
    put("instance_type", g.instance_type().map(|t| Value::str(t.as_str())));
    put("instance_count", g.target_count().map(|n| Value::Int(n.into())));
    put("execution_role", g.execution_role().map(Value::str));
    put("threads_per_core", g.threads_per_core().map(|n| Value::Int(n.into())));
    put(
        "lifecycle",
        g.life_cycle_config().map(|lc| {
            Value::Table(BTreeMap::from([
                ("source_s3_uri".to_string(), Value::str(lc.source_s3_uri().unwrap_or_default())),
                ("on_create".to_string(), Value::str(lc.on_create().unwrap_or_default())),
            ]))
        }),
    );
    // A group without a plan or an extra volume says so by leaving the member out.
    let plan = g.training_plan_arn().map(Value::str);
    let volume = g.instance_storage_configs().iter().find_map(|s| match s {
        ClusterInstanceStorageConfig::EbsVolumeConfig(e) if e.root_volume() != Some(true) => {
            e.volume_size_in_gb().map(|n| Value::Int(n.into()))
        }
        _ => None,
    });
    let checks = g.on_start_deep_health_checks().iter().map(|c| Value::str(c.as_str())).collect();
    let labels = g.kubernetes_config().and_then(|k| k.current_labels().or(k.desired_labels()));
    let labels = labels.map(|l| l.iter().map(|(k, v)| (k.clone(), Value::str(v))).collect()).unwrap_or_default();
    put("training_plan", plan);
    put("volume_size_gb", volume);
    out.insert("deep_health_checks".into(), Value::List(checks));
    out.insert("labels".into(), Value::Table(labels));
    out
}

fn recorded(c: &DescribeClusterOutput) -> Recorded {
    let arn = c.cluster_arn().unwrap_or_default().to_string();
    Recorded {
        id: arn.clone(),
        outputs: Attrs::from([
            ("arn".into(), Value::str(arn)),
            ("name".into(), Value::str(c.cluster_name().unwrap_or_default())),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_sagemakers_pattern() {
        assert!(valid_name("hybrid-base"));
        assert!(valid_name(&"a".repeat(63)));
        for bad in ["", "-a", "a-", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn reserved_label_prefixes_are_refused() {
        for key in ["kubernetes.io/role", "node.kubernetes.io/x", "sagemaker.amazonaws.com/a", "karpenter.sh/nodepool"]
        {
            assert!(reserved_label(key), "{key}");
        }
        for key in ["gpustack.io/capacity", "team", "example.com/kubernetes.io"] {
            assert!(!reserved_label(key), "{key}");
        }
    }

    fn table(pairs: &[(&str, Value)]) -> Value {
        Value::Table(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    #[test]
    fn refresh_reads_groups_whole_and_keeps_a_count_hyperpod_does_not_report() {
        let group = |count: i64, plan: Option<&str>| {
            let mut g = vec![
                ("instance_type", Value::str("ml.p5.48xlarge")),
                ("instance_count", Value::Int(count)),
                ("execution_role", Value::str("arn:aws:iam::1:role/hp")),
            ];
            if let Some(p) = plan {
                g.push(("training_plan", Value::str(p)));
            }
            table(&g)
        };
        let recorded = Attrs::from([(
            "instance_groups".to_string(),
            table(&[("train", group(2, Some("arn:plan"))), ("gone", group(1, None))]),
        )]);
        // HyperPod reports `train` without TargetCount and without its plan, and a group
        // the record lacks (adopted, or added outside gpustack).
        let observed = Attrs::from([(
            "instance_groups".to_string(),
            table(&[
                (
                    "train",
                    table(&[("instance_type", Value::str("ml.p5.48xlarge")), ("volume_size_gb", Value::Int(500))]),
                ),
                ("extra", table(&[("instance_type", Value::str("ml.m5.xlarge")), ("instance_count", Value::Int(1))])),
            ]),
        )]);
        let cur = HyperpodCluster.current(&recorded, &observed);
        let Some(Value::Table(groups)) = cur.get("instance_groups") else { panic!("{cur:?}") };
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["extra", "train"], "a group HyperPod lacks is dropped");
        let train = groups["train"].as_table().expect("a table");
        assert_eq!(train.get("instance_count"), Some(&Value::Int(2)), "no TargetCount: the recorded count");
        assert_eq!(train.get("execution_role"), Some(&Value::str("arn:aws:iam::1:role/hp")));
        assert_eq!(train.get("training_plan"), None, "no TrainingPlanArn: no plan");
        assert_eq!(train.get("volume_size_gb"), Some(&Value::Int(500)));
        assert_eq!(train.get("threads_per_core"), Some(&Value::Int(1)), "defaults filled");
        assert_eq!(groups["extra"].as_table().and_then(|g| g.get("instance_count")), Some(&Value::Int(1)));
    }

    #[test]
    fn removing_every_label_sends_an_empty_set() {
        let with = |labels: &[(&str, Value)]| {
            Attrs::from([("instance_groups".to_string(), table(&[("train", table(&[("labels", table(labels))]))]))])
        };
        let (old, new) = (with(&[("team", Value::str("ml"))]), with(&[]));
        let sent = groups(&new, Some(&old));
        let labels = sent[0].kubernetes_config().and_then(|k| k.labels());
        assert_eq!(labels.map(|l| l.len()), Some(0), "labels cleared explicitly");
        assert!(groups(&new, None)[0].kubernetes_config().is_none(), "a create without labels sends none");
    }

    #[test]
    fn leaving_a_training_plan_with_instances_is_said_plainly() {
        let with = |plan: Option<&str>, count: i64| {
            let mut g = vec![("instance_count", Value::Int(count))];
            if let Some(p) = plan {
                g.push(("training_plan", Value::str(p)));
            }
            Attrs::from([("instance_groups".to_string(), table(&[("train", table(&g))]))])
        };
        let note = HyperpodCluster.update_note(&with(Some("arn:plan"), 2), &with(None, 2), &[]);
        assert!(note.is_some_and(|n| n.contains("train (2 instances) leaves its training plan and runs On-Demand")));
        assert_eq!(HyperpodCluster.update_note(&with(Some("arn:plan"), 2), &with(None, 0), &[]), None);
    }

    #[test]
    fn an_update_never_removes_the_last_group_nor_adds_an_empty_one() {
        let with = |groups: &[(&str, i64)]| {
            let t = groups.iter().map(|(n, c)| (*n, table(&[("instance_count", Value::Int(*c))]))).collect::<Vec<_>>();
            Attrs::from([("instance_groups".to_string(), table(&t))])
        };
        assert!(HyperpodCluster.check_update(&with(&[("a", 1)]), &with(&[("a", 1), ("b", 1)])).is_empty());
        let last = HyperpodCluster.check_update(&with(&[("a", 1)]), &with(&[]));
        assert!(last[0].1.contains("keeps at least one"), "{last:?}");
        let empty = HyperpodCluster.check_update(&with(&[("a", 1)]), &with(&[("a", 1), ("b", 0)]));
        assert!(empty[0].1.contains("adds instance group b with instance_count = 0"), "{empty:?}");
    }

    /// Review r18 minor-4: UpdateCluster cannot clear deep health checks (`min: 1`) nor a
    /// volume (an omitted member's effect is undocumented), so the plan refuses it.
    #[test]
    fn an_update_never_clears_deep_health_checks_nor_the_volume() {
        let with = |fields: &[(&str, Value)]| {
            let mut g = vec![("instance_count", Value::Int(1))];
            g.extend(fields.iter().cloned());
            Attrs::from([("instance_groups".to_string(), table(&[("a", table(&g))]))])
        };
        let checks = Value::List(vec![Value::str("InstanceStress")]);
        let full = with(&[("deep_health_checks", checks.clone()), ("volume_size_gb", Value::Int(500))]);
        assert!(HyperpodCluster.check_update(&full, &full).is_empty());
        assert!(HyperpodCluster.check_update(&with(&[]), &full).is_empty(), "adding both is fine");
        let cleared = HyperpodCluster.check_update(
            &full,
            &with(&[("deep_health_checks", Value::List(vec![])), ("volume_size_gb", Value::Int(500))]),
        );
        assert_eq!(cleared.len(), 1, "{cleared:?}");
        assert!(cleared[0].1.contains("clears the deep health checks of instance group a"), "{cleared:?}");
        let dropped = HyperpodCluster.check_update(&full, &with(&[("deep_health_checks", checks)]));
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert!(dropped[0].1.contains("removes volume_size_gb from instance group a"), "{dropped:?}");
        assert!(dropped[0].2.contains("InstanceGroupsToDelete"), "{dropped:?}");
    }
}
