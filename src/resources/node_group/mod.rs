//! `node_group`: an EKS managed node group (ON_DEMAND, SPOT or CAPACITY_BLOCK).
//! `ami_type = "auto"` picks the Bottlerocket AMI type for the instance type (NVIDIA
//! for GPU types); `release_version = "latest"` lets EKS pick its newest onboarded release
//! at create, which is then pinned, so a new AMI release is not drift. Scaling, labels, taints,
//! update policy, template version and release update in place (`update`); role, subnets,
//! capacity type, AMI type and instance types replace. What `auto` resolves to is in `auto`.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use aws_sdk_eks::types::{
    AmiTypes, CapacityTypes, LaunchTemplateSpecification, Nodegroup, NodegroupScalingConfig, NodegroupStatus,
    NodegroupUpdateConfig, NodegroupUpdateStrategies, Taint, TaintEffect,
};

mod auto;
mod update;

use self::auto::template_facts;
pub use self::auto::{al2023_ami_type, auto_ami_type, nvidia_ami, plain_ami_type, update_strategy};
use super::launch_template::TAINT;
use super::{
    Create, Imported, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, i32_of, int_attr, str_attr,
};
use crate::aws::eks;
use crate::aws::wait::{Status, until_status};
use crate::aws::{Absent, Ctx, Service, tags};
use crate::stack::expr::{ExprKind, OutputRef, Part};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Expr, Resource};
use crate::value::{Attrs, Value};

pub struct NodeGroup;

pub const AMI_TYPES: &[&str] = &[
    "auto",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA_FIPS",
    "BOTTLEROCKET_ARM_64_NVIDIA_FIPS",
    "BOTTLEROCKET_x86_64",
    "BOTTLEROCKET_ARM_64",
    "BOTTLEROCKET_x86_64_FIPS",
    "BOTTLEROCKET_ARM_64_FIPS",
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    "AL2023_x86_64_STANDARD",
    "AL2023_ARM_64_STANDARD",
    "AL2023_x86_64_NEURON",
    "AL2_x86_64_GPU",
];
pub const CAPACITY_TYPES: &[&str] = &["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"];
pub const UPDATE_STRATEGIES: &[&str] = &["auto", "MINIMAL", "DEFAULT"];

const SCALING: &[Attr] = &[
    Attr::req("min", Ty::Int, OnChange::Update),
    Attr::opt("desired", Ty::Int, Default::None, OnChange::Update),
    Attr::req("max", Ty::Int, OnChange::Update),
];

const ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Replace),
    Attr::req("node_role", Ty::Str, OnChange::Replace),
    Attr::req("subnets", Ty::List(&Ty::Str), OnChange::Replace),
    Attr::opt("launch_template", Ty::Str, Default::None, OnChange::Replace),
    Attr::opt("launch_template_version", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("ami_type", Ty::Enum(AMI_TYPES), Default::Str("auto"), OnChange::Replace),
    Attr::opt("release_version", Ty::Str, Default::Str("latest"), OnChange::Update),
    Attr::opt("capacity_type", Ty::Enum(CAPACITY_TYPES), Default::Str("ON_DEMAND"), OnChange::Replace),
    Attr::opt("instance_types", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Replace),
    // EKS `diskSize` (GiB) for a group without a launch template; with one, the template's
    // `root_volume` sets it (EKS API reference, CreateNodegroup.diskSize).
    Attr::opt("disk_size", Ty::Int, Default::None, OnChange::Replace),
    Attr::opt("scaling", Ty::Object(SCALING), Default::None, OnChange::Update),
    Attr::opt("labels", Ty::Map(&Ty::Str), Default::EmptyMap, OnChange::Update),
    // AL2023 NVIDIA groups only: the NVIDIA device plugin's sharing config, which
    // `gpustack manifests` renders and the group's labels select (Bottlerocket takes
    // gpu_sharing in its launch template's user data instead).
    Attr::opt("gpu_sharing", Ty::Object(super::launch_template::GPU_SHARING), Default::None, OnChange::Update),
    Attr::opt("taints", Ty::List(&Ty::Object(TAINT)), Default::EmptyList, OnChange::Update),
    Attr::opt("max_unavailable", Ty::Int, Default::None, OnChange::Update),
    // EKS `updateConfig.updateStrategy`: "auto" is MINIMAL (old nodes go before new ones start)
    // for GPU types and for groups on a reservation or Capacity Block, where there is no spare
    // capacity to surge into, and DEFAULT (surge first) otherwise.
    Attr::opt("update_strategy", Ty::Enum(UPDATE_STRATEGIES), Default::Str("auto"), OnChange::Update),
    Attr::opt("name", Ty::Str, Default::None, OnChange::Replace),
    TAGS,
];

/// Node groups and add-ons live in a cluster of the same stack: that is where refresh
/// finds them.
pub fn require_stack_cluster(r: &Resource, diags: &mut Vec<Diagnostic>) {
    let Some(e) = r.attrs.get("cluster") else { return };
    let ok = e.as_single_ref().is_some_and(|x| x.address.starts_with("eks_cluster.") && x.output == "name");
    if !ok {
        diags.push(
            Diagnostic::error(format!("`{}`: `cluster` must refer to an eks_cluster of this stack", r.address), e.span.clone())
                .help("write cluster = \"${eks_cluster.NAME.name}\"; gpustack manages node groups and add-ons of clusters it created"),
        );
    }
}

impl Schema for NodeGroup {
    fn name(&self) -> &'static str {
        "node_group"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("name", Ty::Str), ("arn", Ty::Str), ("release_version", Ty::Str), ("ami_type", Ty::Str)]
    }

    /// `launch_template_version` defaults to the referenced template's `version`, so a new
    /// template version moves the node group to it.
    fn complete(&self, attrs: &mut BTreeMap<String, Expr>) {
        if attrs.contains_key("launch_template_version") {
            return;
        }
        let Some(lt) = attrs.get("launch_template") else { return };
        let Some(r) = lt.as_single_ref().filter(|r| r.address.starts_with("launch_template.") && r.output == "id")
        else {
            return;
        };
        let version = OutputRef { address: r.address.clone(), output: "version".into(), span: r.span.clone() };
        let e = Expr { kind: ExprKind::Template(vec![Part::Ref(version)]), span: lt.span.clone(), key_span: None };
        attrs.insert("launch_template_version".into(), e);
    }
}

#[async_trait]
impl Kind for NodeGroup {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "eks:CreateNodegroup",
            "eks:DeleteNodegroup",
            "eks:DescribeNodegroup",
            "eks:ListNodegroups",
            "eks:UpdateNodegroupConfig",
            "eks:UpdateNodegroupVersion",
            "eks:DescribeUpdate",
            "eks:ListClusters",
            "eks:DescribeCluster",
            "eks:TagResource",
            "eks:UntagResource",
            "ec2:DescribeLaunchTemplateVersions",
            "ec2:DescribeInstanceTypes",
            "ec2:RunInstances",
            "iam:PassRole",
            "iam:CreateServiceLinkedRole",
            "servicequotas:GetServiceQuota",
            "servicequotas:GetAWSDefaultServiceQuota",
        ]
    }
    fn replace_order(&self) -> ReplaceOrder {
        // Node group names are unique per cluster.
        ReplaceOrder::DeleteBeforeCreate
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        require_stack_cluster(r, diags);
        al2023_sharing(r, diags);
        let lit = |k: &str| r.attrs.get(k).map(|e| e.resolve(&|_| Value::Unknown));
        let capacity =
            lit("capacity_type").and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| "ON_DEMAND".into());
        let types = lit("instance_types").and_then(|v| v.as_list().map(<[Value]>::len));
        if capacity == "CAPACITY_BLOCK" {
            if !r.attrs.contains_key("launch_template") {
                diags.push(
                    Diagnostic::error(format!("`{}`: CAPACITY_BLOCK needs `launch_template`", r.address), r.attrs["capacity_type"].span.clone())
                        .help("EKS requires a launch template with market = \"capacity-block\" and the block's capacity_reservation"),
                );
            }
            if let Some(e) = r.attrs.get("instance_types") {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: CAPACITY_BLOCK takes no `instance_types`", r.address),
                        e.span.clone(),
                    )
                    .help("the instance type comes from the launch template (the block's type); remove instance_types"),
                );
            }
        }
        if let Some(e) = r.attrs.get("disk_size") {
            if r.attrs.contains_key("launch_template") {
                diags.push(
                    Diagnostic::error(format!("`{}`: EKS refuses disk_size together with a launch template", r.address), e.span.clone())
                        .help("set root_volume = { size_gib = N } in the launch template instead (CreateNodegroup: \"If you specify launchTemplate, then don't specify diskSize\")"),
                );
            }
            if let Some(n) = e.as_literal().and_then(Value::as_int).filter(|n| !(1..=16384).contains(n)) {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: disk_size = {n} is outside 1 to 16,384 GiB", r.address),
                        e.span.clone(),
                    )
                    .help("a GPU node usually wants 100 to 500 GiB"),
                );
            }
        }
        // CreateNodegroup.instanceTypes: "you can specify 0-20 instance types" (EKS API reference).
        if let Some(n) = types.filter(|n| *n > 20) {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: EKS takes at most 20 instance_types, not {n}", r.address),
                    r.attrs["instance_types"].span.clone(),
                )
                .help("keep the 20 most interchangeable types; Spot draws from them price-capacity-optimized"),
            );
        }
        if capacity == "SPOT" && types == Some(1) {
            diags.push(
                Diagnostic::warning(
                    format!("`{}`: SPOT with a single instance type often finds no capacity", r.address),
                    r.attrs["instance_types"].span.clone(),
                )
                .help("list several interchangeable types, e.g. instance_types = [\"g6.xlarge\", \"g5.xlarge\", \"g6e.xlarge\"]"),
            );
        }
        if !r.attrs.contains_key("launch_template") && !r.attrs.contains_key("instance_types") {
            diags.push(
                Diagnostic::error(
                    format!("`{}` needs `instance_types` or a `launch_template` with instance_type", r.address),
                    r.span.clone(),
                )
                .help("set instance_types = [\"g6.xlarge\"] or launch_template = \"${launch_template.NAME.id}\""),
            );
        }
        if let Some(ExprKind::Table(t)) = r.attrs.get("scaling").map(|e| &e.kind) {
            let n = |k: &str| t.get(k).and_then(|e| e.as_literal()).and_then(Value::as_int);
            if let (Some(min), Some(max)) = (n("min"), n("max")) {
                let desired = n("desired").unwrap_or(min);
                if min < 0 || max < 1 || min > max || desired < min || desired > max {
                    diags.push(
                        Diagnostic::error(
                            format!("`{}`: scaling needs 0 ≤ min ≤ desired ≤ max and max ≥ 1 (min {min}, desired {desired}, max {max})", r.address),
                            r.attrs["scaling"].span.clone(),
                        )
                        .help("for example scaling = { min = 0, desired = 1, max = 4 }"),
                    );
                }
            }
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        // The labels that make the NVIDIA device plugin apply this group's sharing config
        // (`gpu_sharing::nvidia_labels`: the config's name, `nvidia.com/gpu.present`, and
        // `nvidia.com/mps.capable` for MPS).
        if let Some((_, wanted)) = inputs
            .get("gpu_sharing")
            .and_then(Value::as_table)
            .and_then(super::launch_template::gpu_sharing::nvidia_labels)
        {
            let labels = inputs.entry("labels".into()).or_insert_with(|| Value::Table(BTreeMap::new()));
            if let Value::Table(t) = labels {
                t.extend(wanted.into_iter().map(|(k, v)| (k.to_string(), Value::str(v))));
            }
        }
        if let Some(Value::List(l)) = inputs.get_mut("subnets") {
            l.sort_by_key(|v| v.interpolate());
        }
        let scaling = inputs.entry("scaling".into()).or_insert_with(|| Value::Table(BTreeMap::new()));
        if let Value::Table(t) = scaling {
            let min = t.get("min").cloned().unwrap_or(Value::Int(1));
            t.entry("min".into()).or_insert(min.clone());
            t.entry("max".into()).or_insert(min.clone());
            let unset = !t.contains_key("desired");
            t.entry("desired".into()).or_insert(min);
            // An update sends a `desired` the file does not set never: it keeps the running size.
            if unset {
                inputs.insert(DESIRED_UNSET.into(), Value::Bool(true));
            }
        }
        inputs.entry("max_unavailable".into()).or_insert(Value::Int(1));
        if let Some(Value::List(l)) = inputs.get_mut("taints") {
            for t in l.iter_mut() {
                if let Value::Table(t) = t {
                    t.entry("value".into()).or_insert(Value::str(""));
                }
            }
            l.sort_by_key(|v| v.interpolate());
        }
    }

    fn update_note(&self, old: &Attrs, new: &Attrs, changed: &[String]) -> Option<String> {
        let version = changed.iter().any(|c| c == "launch_template_version" || c == "release_version");
        let desired =
            new.get("scaling").and_then(Value::as_table).and_then(|t| t.get("desired")).and_then(Value::as_int);
        let running =
            old.get("scaling").and_then(Value::as_table).and_then(|t| t.get("desired")).and_then(Value::as_int);
        (version && str_attr(new, "capacity_type") == "CAPACITY_BLOCK" && running.or(desired).unwrap_or(0) > 0).then(|| {
            format!(
                "Capacity Block group: scale to 0, update, scale back to {} (drains every node of the pool; a block has no spare instances for a rolling update)",
                desired.or(running).unwrap_or(0)
            )
        })
    }

    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        for (k, v) in observed {
            let keep = match k.as_str() {
                // Resolved once and pinned: a newer AMI or the template's type is not drift.
                "ami_type" | "update_strategy" => str_attr(recorded, k) == "auto",
                "release_version" => str_attr(recorded, k) == "latest",
                "instance_types" => recorded.get(k).and_then(Value::as_list).is_some_and(<[Value]>::is_empty),
                _ => false,
            };
            if !keep {
                cur.insert(k.clone(), v.clone());
            }
        }
        // The cluster autoscaler moves `desired`; only min and max are compared.
        if let (Some(Value::Table(rec)), Some(Value::Table(c))) = (recorded.get("scaling"), cur.get_mut("scaling"))
            && let Some(d) = rec.get("desired")
        {
            c.insert("desired".into(), d.clone());
        }
        self.normalize(&mut cur);
        cur
    }

    /// For an import ([`IMPORTED`] in the current inputs): what gpustack resolves once at
    /// create and then pins (`ami_type`/`update_strategy` "auto", `release_version` "latest",
    /// instance types from the template) is no change for a group that exists; `desired` is
    /// the autoscaler's, as for a group gpustack made; `gpu_sharing` (a device-plugin setting,
    /// not AWS's) and `disk_size` left to EKS are the file's.
    fn settle(&self, current: &mut Attrs, desired: &Attrs) {
        if current.remove(IMPORTED).is_none() {
            return;
        }
        for (k, pinned) in [("ami_type", "auto"), ("update_strategy", "auto"), ("release_version", "latest")] {
            if str_attr(desired, k) == pinned {
                current.insert(k.into(), Value::str(pinned));
            }
        }
        let empty = |a: &Attrs| a.get("instance_types").and_then(Value::as_list).is_none_or(<[Value]>::is_empty);
        if empty(desired) && desired.contains_key("launch_template") {
            current.insert("instance_types".into(), Value::List(vec![]));
        }
        if let (Some(Value::Table(c)), Some(d)) = (
            current.get_mut("scaling"),
            desired.get("scaling").and_then(Value::as_table).and_then(|t| t.get("desired")),
        ) {
            c.insert("desired".into(), d.clone());
        }
        for k in ["gpu_sharing", "disk_size"] {
            match desired.get(k) {
                Some(v) if k == "gpu_sharing" || !current.contains_key(k) => current.insert(k.into(), v.clone()),
                None if k == "disk_size" => current.remove(k),
                _ => None,
            };
        }
        self.normalize(current);
        current.remove(DESIRED_UNSET);
        if desired.contains_key(DESIRED_UNSET) {
            current.insert(DESIRED_UNSET.into(), Value::Bool(true));
        }
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("CLUSTER:NODEGROUP")
    }

    /// DescribeNodegroup. The launch template is its id and version (the imported
    /// `launch_template`'s outputs); what the language lacks (SSH remote access, a percentage
    /// `maxUnavailable`, node auto-repair, a `$Latest`/`$Default` template version, a custom
    /// AMI) is `unexpressed`.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let Some((cluster, name)) = eks::split_import_id(id) else { return Ok(None) };
        let Some(n) = describe(ctx, cluster, name).await? else { return Ok(None) };
        let all: BTreeMap<String, String> = n.tags().cloned().unwrap_or_default().into_iter().collect();
        let mut observed = observe(&n, &all);
        observed.address = None;
        // Refresh leaves `diskSize` alone (the recorded value stands); an import compares it
        // when the file sets one (`settle`).
        if let Some(d) = n.disk_size() {
            observed.attrs.insert("disk_size".into(), Value::Int(d.into()));
        }
        let mut unexpressed = unexpressed_of(&n, &mut observed.attrs);
        // A group whose Kubernetes version lags the cluster's (control plane upgraded, groups
        // not yet): the language has no node-group version; an update keeps the group's
        // (`update::version_and_release`), and the note says it lags.
        let running = super::eks_cluster::describe(ctx, cluster).await?.and_then(|c| c.version);
        if let (Some(v), Some(c)) = (n.version(), running.as_deref())
            && v != c
        {
            unexpressed.push(("version".into(), format!("{v} (the cluster runs {c}; updates keep {v})")));
        }
        observed.attrs.insert(IMPORTED.into(), Value::Bool(true));
        Ok(Some(Imported { observed, unexpressed }))
    }

    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, outputs: &Attrs) -> Result<()> {
        let arn = match outputs.get("arn").and_then(Value::as_str) {
            Some(a) if !a.is_empty() => a.to_string(),
            _ => {
                let (cluster, name) = eks::split_import_id(id).unwrap_or_default();
                describe(ctx, cluster, name).await?.and_then(|n| n.nodegroup_arn).unwrap_or_default()
            }
        };
        eks::tag_owned(ctx, &arn, address).await
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let inp = req.inputs;
        let (cluster, name) = (str_attr(inp, "cluster"), str_attr(inp, "name"));
        let facts = template_facts(ctx, inp).await?;
        let info = match &facts.instance_type {
            Some(t) => ctx.catalog.get(ctx, t).await?,
            None => None,
        };
        let ami = match str_attr(inp, "ami_type") {
            "auto" if facts.al2023 => al2023_ami_type(&auto_ami_type(info.as_ref())),
            "auto" => auto_ami_type(info.as_ref()),
            a => a.to_string(),
        };
        let strategy = update_strategy(inp, info.as_ref(), facts.reserved).0;
        // "latest" is left to EKS, which picks the newest release it has onboarded for the
        // cluster's version; that release is then pinned (outputs, and updates keep it). The
        // SSM parameter can name a release EKS does not accept yet (amazon-eks-ami#559).
        let release = match str_attr(inp, "release_version") {
            "latest" => None,
            v => Some(v.to_string()),
        };
        let sc = scaling(inp);
        let call = ctx
            .eks
            .create_nodegroup()
            .cluster_name(cluster)
            .nodegroup_name(name)
            .node_role(str_attr(inp, "node_role"))
            .set_subnets(Some(strings(inp.get("subnets"))))
            .scaling_config(sc)
            .set_instance_types(Some(strings(inp.get("instance_types"))).filter(|v| !v.is_empty()))
            .set_disk_size(int_attr(inp, "disk_size").map(i32_of))
            .ami_type(AmiTypes::from(ami.as_str()))
            .set_release_version(release)
            .capacity_type(CapacityTypes::from(str_attr(inp, "capacity_type")))
            .set_labels(Some(labels(inp)))
            .set_taints(Some(taints(inp)))
            .update_config(
                NodegroupUpdateConfig::builder()
                    .max_unavailable(i32_of(int_attr(inp, "max_unavailable").unwrap_or(1)))
                    .update_strategy(NodegroupUpdateStrategies::from(strategy))
                    .build(),
            )
            .set_launch_template(template_spec(inp))
            .set_tags(Some(eks::tag_map(ctx, req.address, inp)))
            .client_request_token(req.token);
        match ctx.call(Service::Eks, "CreateNodegroup", call.send()).await {
            Ok(_) => {}
            Err(e) if e.has_code("ResourceInUseException") => match describe(ctx, cluster, name).await? {
                Some(n) if eks::is_ours(ctx, n.tags(), req.address) => {}
                _ => return Err(e.taken_by_other("set `name` to another node group name")),
            },
            Err(e) => return Err(e),
        }
        Ok(recorded(&wait_active(ctx, cluster, name).await?))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let mut out = vec![];
        for c in ctx.stack_clusters().await? {
            let cluster = c.name().unwrap_or_default().to_string();
            let pages = ctx.eks.list_nodegroups().cluster_name(&cluster).into_paginator().send();
            let names = ctx.all_pages(Service::Eks, "ListNodegroups", pages, |p| p.nodegroups.unwrap_or_default());
            let Some(names) = names.await.absent_ok()? else { continue };
            for name in names {
                let Some(n) = describe(ctx, &cluster, &name).await? else { continue };
                let all: BTreeMap<String, String> = n.tags().cloned().unwrap_or_default().into_iter().collect();
                if all.get(tags::STACK) == Some(&ctx.stack) {
                    out.push(observe(&n, &all));
                }
            }
        }
        Ok(out)
    }

    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        _id: &str,
        old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded> {
        update::update(ctx, old, new, changed).await
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, _id: &str, inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let (cluster, name) = (str_attr(inputs, "cluster"), str_attr(inputs, "name"));
        let request = ctx.eks.delete_nodegroup().cluster_name(cluster).nodegroup_name(name);
        if ctx.call(Service::Eks, "DeleteNodegroup", request.send()).await.absent_ok()?.is_none() {
            return Ok(());
        }
        let what = format!("deletion of node group {name}");
        eks::wait_deleted(&what, || describe(ctx, cluster, name), |n| n.status().map(|s| s.as_str())).await
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_list).unwrap_or_default().iter().filter_map(|x| x.as_str().map(str::to_string)).collect()
}

fn scaling(i: &Attrs) -> NodegroupScalingConfig {
    let t = i.get("scaling").and_then(Value::as_table);
    let n = |k: &str| t.and_then(|t| t.get(k)).and_then(Value::as_int).map_or(1, i32_of);
    NodegroupScalingConfig::builder().min_size(n("min")).desired_size(n("desired")).max_size(n("max")).build()
}

fn labels(i: &Attrs) -> HashMap<String, String> {
    match i.get("labels") {
        Some(Value::Table(t)) => t.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect(),
        _ => HashMap::new(),
    }
}

fn taints(i: &Attrs) -> Vec<Taint> {
    i.get("taints")
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_table)
        .map(|t| {
            let g = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            Taint::builder()
                .key(g("key"))
                .set_value(Some(g("value")).filter(|v| !v.is_empty()))
                .effect(TaintEffect::from(g("effect").as_str()))
                .build()
        })
        .collect()
}

fn template_spec(inp: &Attrs) -> Option<LaunchTemplateSpecification> {
    let id = str_attr(inp, "launch_template");
    (!id.is_empty()).then(|| {
        LaunchTemplateSpecification::builder()
            .id(id)
            .set_version(int_attr(inp, "launch_template_version").map(|v| v.to_string()))
            .build()
    })
}

async fn describe(ctx: &Ctx, cluster: &str, name: &str) -> Result<Option<Nodegroup>> {
    let request = ctx.eks.describe_nodegroup().cluster_name(cluster).nodegroup_name(name);
    Ok(ctx.call(Service::Eks, "DescribeNodegroup", request.send()).await.absent_ok()?.and_then(|o| o.nodegroup))
}

async fn wait_active(ctx: &Ctx, cluster: &str, name: &str) -> Result<Nodegroup> {
    until_status(
        &format!("node group {name}"),
        eks::CREATE_TIMEOUT,
        || describe(ctx, cluster, name),
        |n| {
            let Some(n) = n else {
                return Status::Failed(eks::disappeared("DescribeNodegroup", format!("node group {name} disappeared")));
            };
            match n.status() {
                Some(NodegroupStatus::Active) => Status::Reached(n),
                // Before its block starts a CAPACITY_BLOCK group cannot launch ("ASG scaling
                // activities will have launch errors until the Capacity Block becomes active", EKS UG
                // `capacity-blocks-mng`): DEGRADED then is expected, and the nodes come with the block.
                Some(NodegroupStatus::Degraded) if n.capacity_type() == Some(&CapacityTypes::CapacityBlock) => {
                    Status::Reached(n)
                }
                Some(s @ (NodegroupStatus::CreateFailed | NodegroupStatus::Degraded)) => {
                    let issues = n.health().map(|h| h.issues()).unwrap_or_default().iter().map(|i| i.message());
                    let detail = format!("node group {name} is {}", s.as_str());
                    Status::Failed(eks::failed("CreateNodegroup", s.as_str(), detail, issues))
                }
                other => Status::Pending(other.map_or("CREATING", |s| s.as_str()).to_string()),
            }
        },
    )
    .await
}

fn observe(n: &Nodegroup, all: &BTreeMap<String, String>) -> Observed {
    let strs = |v: &[String]| Value::List(v.iter().map(|x| Value::str(x.clone())).collect());
    let sc = n.scaling_config();
    let num = |v: Option<i32>| Value::Int(v.unwrap_or(0).into());
    let mut attrs = Attrs::from([
        ("cluster".into(), Value::str(n.cluster_name().unwrap_or_default())),
        ("node_role".into(), Value::str(n.node_role().unwrap_or_default())),
        ("subnets".into(), strs(n.subnets())),
        ("ami_type".into(), Value::str(n.ami_type().map(|a| a.as_str()).unwrap_or_default())),
        ("release_version".into(), Value::str(n.release_version().unwrap_or_default())),
        ("capacity_type".into(), Value::str(n.capacity_type().map(|c| c.as_str()).unwrap_or("ON_DEMAND"))),
        ("instance_types".into(), strs(n.instance_types())),
        (
            "scaling".into(),
            Value::Table(BTreeMap::from([
                ("min".into(), num(sc.and_then(|s| s.min_size()))),
                ("desired".into(), num(sc.and_then(|s| s.desired_size()))),
                ("max".into(), num(sc.and_then(|s| s.max_size()))),
            ])),
        ),
        (
            "labels".into(),
            Value::Table(
                n.labels().cloned().unwrap_or_default().into_iter().map(|(k, v)| (k, Value::str(v))).collect(),
            ),
        ),
        (
            "taints".into(),
            Value::List(
                n.taints()
                    .iter()
                    .map(|t| {
                        Value::Table(BTreeMap::from([
                            ("key".into(), Value::str(t.key().unwrap_or_default())),
                            ("value".into(), Value::str(t.value().unwrap_or_default())),
                            ("effect".into(), Value::str(t.effect().map(|e| e.as_str()).unwrap_or_default())),
                        ]))
                    })
                    .collect(),
            ),
        ),
        ("name".into(), Value::str(n.nodegroup_name().unwrap_or_default())),
        ("tags".into(), tags::observed(all)),
    ]);
    if let Some(m) = n.update_config().and_then(|u| u.max_unavailable()) {
        attrs.insert("max_unavailable".into(), Value::Int(m.into()));
    }
    if let Some(u) = n.update_config().and_then(|u| u.update_strategy()) {
        attrs.insert("update_strategy".into(), Value::str(u.as_str()));
    }
    if let Some(lt) = n.launch_template() {
        attrs.insert("launch_template".into(), Value::str(lt.id().unwrap_or_default()));
        if let Some(v) = lt.version().and_then(|v| v.parse::<i64>().ok()) {
            attrs.insert("launch_template_version".into(), Value::Int(v));
        }
    }
    NodeGroup.normalize(&mut attrs);
    let rec = recorded(n);
    Observed::tagged(all, rec, attrs)
}

/// Marks the current inputs of an import (`import` puts it in the observed attributes,
/// `current` carries it, `settle` takes it out): not an attribute, never diffed or stored.
const IMPORTED: &str = "~imported";
/// In the inputs when the file leaves `scaling.desired` out (`normalize` fills in `min`):
/// an update then keeps the running desired size (`update::kept_scaling`). Not an attribute,
/// so never a field diff.
pub(super) const DESIRED_UNSET: &str = "~desired_unset";

/// What DescribeNodegroup shows that the stack language cannot say, as (field, value); takes
/// out of `attrs` what the file cannot write (a CUSTOM AMI type, a symbolic template version).
fn unexpressed_of(n: &Nodegroup, attrs: &mut Attrs) -> Vec<(String, String)> {
    let mut out = vec![];
    if let Some(r) = n.remote_access() {
        out.push((
            "remoteAccess".into(),
            format!(
                "ec2SshKey {}, sourceSecurityGroups {:?}",
                r.ec2_ssh_key().unwrap_or("-"),
                r.source_security_groups()
            ),
        ));
    }
    if let Some(p) = n.update_config().and_then(|u| u.max_unavailable_percentage()) {
        out.push(("updateConfig.maxUnavailablePercentage".into(), p.to_string()));
        attrs.remove("max_unavailable");
    }
    if let Some(r) = n.node_repair_config().filter(|r| r.enabled() == Some(true)) {
        out.push(("nodeRepairConfig.enabled".into(), format!("{:?}", r.enabled())));
    }
    if n.ami_type() == Some(&AmiTypes::Custom) || !n.ami_type().is_some_and(|a| AMI_TYPES.contains(&a.as_str())) {
        let ami = n.ami_type().map_or("-", |a| a.as_str()).to_string();
        out.push(("amiType".into(), format!("{ami} (the launch template names the AMI)")));
        attrs.remove("ami_type");
        attrs.remove("release_version");
    }
    if let Some(lt) = n.launch_template() {
        if let Some(v) = lt.version().filter(|v| v.parse::<i64>().is_err()) {
            out.push(("launchTemplate.version".into(), v.to_string()));
        }
        // A template named by name only: the id is what the language refers to.
        if lt.id().is_none() {
            out.push(("launchTemplate.name".into(), lt.name().unwrap_or_default().to_string()));
        }
    }
    out
}

fn recorded(n: &Nodegroup) -> Recorded {
    let name = n.nodegroup_name().unwrap_or_default().to_string();
    Recorded {
        id: format!("{}:{name}", n.cluster_name().unwrap_or_default()),
        outputs: Attrs::from([
            ("name".into(), Value::str(name)),
            ("arn".into(), Value::str(n.nodegroup_arn().unwrap_or_default())),
            ("release_version".into(), Value::str(n.release_version().unwrap_or_default())),
            ("ami_type".into(), Value::str(n.ami_type().map(|a| a.as_str()).unwrap_or_default())),
        ]),
    }
}

/// `gpu_sharing` on a node group configures the NVIDIA device plugin of AL2023 NVIDIA nodes:
/// time-slicing or MPS, checked as the launch template checks it. MIG needs NVIDIA's MIG
/// manager, which the EKS AL2023 AMI does not run: the stack rule `rules::gpu_addons`
/// allows it only with a `gpu_operator` that has `mig` (it sees the whole stack; this
/// check sees one resource). Bottlerocket makes them from its launch template's settings.
fn al2023_sharing(r: &Resource, diags: &mut Vec<Diagnostic>) {
    let Some(e) = r.attrs.get("gpu_sharing") else { return };
    super::launch_template::gpu_sharing::check(e, diags);
    let ami = r.attrs.get("ami_type").and_then(|x| x.as_literal()).and_then(Value::as_str).unwrap_or("auto");
    if !(ami.starts_with("AL2023_") && ami.contains("NVIDIA")) {
        diags.push(
            Diagnostic::error(
                format!("`{}`: gpu_sharing on a node group configures AL2023's NVIDIA device plugin, but ami_type is \"{ami}\"", r.address),
                e.span.clone(),
            )
            .help("set ami_type = \"AL2023_x86_64_NVIDIA\" (or ARM_64), or for Bottlerocket put gpu_sharing in the launch template"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_eks::types::{LaunchTemplateSpecification, RemoteAccessConfig};

    fn described() -> Nodegroup {
        Nodegroup::builder()
            .nodegroup_name("gpu")
            .cluster_name("brown")
            .nodegroup_arn("arn:aws:eks:us-west-2:123456789012:nodegroup/brown/gpu/x")
            .node_role("arn:aws:iam::123456789012:role/node")
            .subnets("subnet-b")
            .subnets("subnet-a")
            .ami_type(AmiTypes::Al2023X8664Nvidia)
            .release_version("1.33.0-20250101")
            .capacity_type(CapacityTypes::OnDemand)
            .scaling_config(NodegroupScalingConfig::builder().min_size(0).desired_size(3).max_size(4).build())
            .labels("role", "gpu")
            .taints(Taint::builder().key("nvidia.com/gpu").value("true").effect(TaintEffect::NoSchedule).build())
            .update_config(
                NodegroupUpdateConfig::builder()
                    .max_unavailable(1)
                    .update_strategy(NodegroupUpdateStrategies::Minimal)
                    .build(),
            )
            .launch_template(LaunchTemplateSpecification::builder().id("lt-1").version("3").build())
            .build()
    }

    /// What a file that says the same as the described group resolves to (defaults filled).
    fn file(max: i64) -> Attrs {
        let mut a = Attrs::from([
            ("cluster".into(), Value::str("brown")),
            ("node_role".into(), Value::str("arn:aws:iam::123456789012:role/node")),
            ("subnets".into(), Value::List(vec![Value::str("subnet-a"), Value::str("subnet-b")])),
            ("launch_template".into(), Value::str("lt-1")),
            ("launch_template_version".into(), Value::Int(3)),
            ("ami_type".into(), Value::str("auto")),
            ("release_version".into(), Value::str("latest")),
            ("capacity_type".into(), Value::str("ON_DEMAND")),
            ("instance_types".into(), Value::List(vec![])),
            (
                "scaling".into(),
                Value::Table(BTreeMap::from([("min".into(), Value::Int(0)), ("max".into(), Value::Int(max))])),
            ),
            ("labels".into(), Value::Table(BTreeMap::from([("role".into(), Value::str("gpu"))]))),
            (
                "taints".into(),
                Value::List(vec![Value::Table(BTreeMap::from([
                    ("key".into(), Value::str("nvidia.com/gpu")),
                    ("value".into(), Value::str("true")),
                    ("effect".into(), Value::str("NO_SCHEDULE")),
                ]))]),
            ),
            ("update_strategy".into(), Value::str("auto")),
            ("name".into(), Value::str("gpu")),
            ("tags".into(), Value::Table(BTreeMap::new())),
        ]);
        NodeGroup.normalize(&mut a);
        a
    }

    fn imported(n: &Nodegroup) -> (Attrs, Vec<(String, String)>) {
        let mut o = observe(n, &BTreeMap::new());
        let un = unexpressed_of(n, &mut o.attrs);
        o.attrs.insert(IMPORTED.into(), Value::Bool(true));
        (NodeGroup.current(&Attrs::new(), &o.attrs), un)
    }

    /// An imported group: what gpustack resolves once (auto, latest) and the autoscaler's
    /// desired (3 running, the file's 0) are no change; max is.
    #[test]
    fn an_imported_group_settles_what_gpustack_pins_and_shows_the_rest() {
        let (mut cur, un) = imported(&described());
        assert!(un.is_empty(), "{un:?}");
        NodeGroup.settle(&mut cur, &file(4));
        assert!(!cur.contains_key(IMPORTED));
        assert_eq!(cur, file(4));
        let (mut cur, _) = imported(&described());
        NodeGroup.settle(&mut cur, &file(6));
        let want = file(6);
        let differing: Vec<&String> = want.keys().filter(|k| cur.get(*k) != want.get(*k)).collect();
        assert_eq!(differing, ["scaling"]);
        // A refresh (something recorded) never takes the import's shortcuts.
        let mut recorded = file(4);
        recorded.insert("release_version".into(), Value::str("1.32.0-1"));
        let mut cur = NodeGroup.current(&recorded, &observe(&described(), &BTreeMap::new()).attrs);
        NodeGroup.settle(&mut cur, &recorded);
        assert_eq!(cur["release_version"], Value::str("1.33.0-20250101"), "drift from a recorded release shows");
    }

    /// B1 (review imp-eks): a scaling change keeps the running desired size unless the file
    /// sets `desired` and changed it; the running size moves only into the new [min, max].
    #[test]
    fn an_update_keeps_the_running_desired_size() {
        let with = |min: i64, desired: Option<i64>, max: i64| {
            let mut t = BTreeMap::from([("min".to_string(), Value::Int(min)), ("max".to_string(), Value::Int(max))]);
            if let Some(d) = desired {
                t.insert("desired".into(), Value::Int(d));
            }
            let mut a = Attrs::from([("scaling".to_string(), Value::Table(t))]);
            NodeGroup.normalize(&mut a);
            a
        };
        let sent = |old: &Attrs, new: &Attrs, live| {
            let s = update::kept_scaling(old, new, live);
            (s.min_size().unwrap(), s.desired_size().unwrap(), s.max_size().unwrap())
        };
        // No `desired` in the file: max 4 → 6 with 2 running keeps 2 (was: min, 0).
        assert_eq!(sent(&with(0, None, 4), &with(0, None, 6), Some(2)), (0, 2, 6));
        // A higher min lifts the running size; a lower max caps it.
        assert_eq!(sent(&with(0, None, 4), &with(3, None, 6), Some(2)), (3, 3, 6));
        assert_eq!(sent(&with(0, None, 4), &with(0, None, 1), Some(2)), (0, 1, 1));
        // `desired` set and unchanged: the autoscaler's 5 stays.
        assert_eq!(sent(&with(0, Some(2), 8), &with(0, Some(2), 6), Some(5)), (0, 5, 6));
        // `desired` set and changed: the file's, as written.
        assert_eq!(sent(&with(0, Some(2), 8), &with(0, Some(1), 8), Some(5)), (0, 1, 8));
    }

    /// B2 (review imp-eks): a pinned release goes with the group's own Kubernetes version (a
    /// group lagging the cluster keeps its minor); a custom AMI sends neither.
    #[test]
    fn a_version_update_keeps_the_groups_kubernetes_version() {
        let mut n = described();
        n.version = Some("1.32".into());
        assert_eq!(
            update::version_and_release(Some(&n), "latest"),
            (Some("1.32".into()), Some("1.33.0-20250101".into()))
        );
        assert_eq!(update::version_and_release(Some(&n), "1.33.0-20250202"), (None, Some("1.33.0-20250202".into())));
        n.ami_type = Some(AmiTypes::Custom);
        n.release_version = Some("ami-0123".into());
        assert_eq!(update::version_and_release(Some(&n), "latest"), (None, None));
    }

    /// SSH access, a percentage and a custom AMI are unexpressed, never dropped silently.
    #[test]
    fn what_the_language_lacks_is_unexpressed() {
        let mut n = described();
        n.remote_access = Some(RemoteAccessConfig::builder().ec2_ssh_key("ops").build());
        n.ami_type = Some(AmiTypes::Custom);
        n.update_config = Some(NodegroupUpdateConfig::builder().max_unavailable_percentage(25).build());
        let (cur, un) = imported(&n);
        let fields: Vec<&str> = un.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["remoteAccess", "updateConfig.maxUnavailablePercentage", "amiType"]);
        assert!(!cur.contains_key("release_version") || cur["release_version"] == Value::str(""));
    }
}
