//! `launch_template`: the EC2 launch template a GPU node group runs on. This file is the
//! kind (schema, checks, create, refresh, new versions); what a version holds is in `data`
//! (IMDSv2 required with hop limit 1 unless `imds_hop_limit = 2` opts pods in, then any pod
//! can take the node role's credentials: EKS best practices, "restrict access to IMDS"; the
//! data volume `/dev/xvdb`, optionally from an image-cache snapshot hydrated at
//! `initialization_rate_mibps`), the EFA interfaces in `network` (laid out by the instance
//! catalog), the Bottlerocket user data (plain TOML) in `userdata`, and the offline
//! `gpu_sharing` checks in `gpu_sharing`. Any change makes a new template version and makes
//! it the default; node groups referring to `version` then move to it.

mod data;
mod family;
pub mod gpu_sharing;
mod import;
mod network;
pub mod nodeadm;
pub mod parse;
pub mod userdata;

use async_trait::async_trait;
use aws_sdk_ec2::types::{LaunchTemplate, RequestLaunchTemplateData, ResourceType};

use self::data::template_data;
use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, str_attr};
use crate::aws::{Absent, Ctx, Service, tags};
use crate::stack::expr::ExprKind;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct LaunchTemplateKind;

/// The template is written for AL2023 (nodeadm user data), for the cross-resource rules.
pub fn is_al2023_template(r: &Resource) -> bool {
    family::al2023(r)
}

const EFA: &[Attr] = &[
    Attr::opt("security_groups", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    // "max" or a number.
    Attr::opt("interfaces", Ty::Any, Default::Str("max"), OnChange::Update),
];
const DATA_VOLUME: &[Attr] = &[
    Attr::req("size_gib", Ty::Int, OnChange::Update),
    Attr::opt("snapshot", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("iops", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("throughput", Ty::Int, Default::None, OnChange::Update),
    // MiB/s at which a volume made from `snapshot` is hydrated (EC2 `VolumeInitializationRate`,
    // 100–300, only for volumes from snapshots); 200 when a snapshot is set. Without it the
    // volume lazy-loads from S3 on first read, which undoes most of what an image cache saves.
    Attr::opt("initialization_rate_mibps", Ty::Int, Default::None, OnChange::Update),
];
/// The default hydration rate for a data volume made from a snapshot.
pub const DEFAULT_INIT_RATE: i64 = 200;
pub const SHARING_STRATEGIES: &[&str] = &["none", "time-slicing", "mps", "mig"];
pub(crate) const GPU_SHARING: &[Attr] = &[
    Attr::req("strategy", Ty::Enum(SHARING_STRATEGIES), OnChange::Update),
    Attr::opt("replicas", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("mig_profile", Ty::Map(&Ty::Any), Default::None, OnChange::Update),
];
pub const VOLUME_TYPES: &[&str] = &["gp3", "gp2", "io1", "io2"];
/// The root device (`/dev/xvda` on the EKS AL2023 and Bottlerocket AMIs: their
/// `RootDeviceName`; Bottlerocket's data volume is `/dev/xvdb`). Same shape as
/// `karpenter_pool.root_volume`.
pub const ROOT_VOLUME: &[Attr] = &[
    Attr::req("size_gib", Ty::Int, OnChange::Update),
    Attr::opt("type", Ty::Enum(VOLUME_TYPES), Default::Str("gp3"), OnChange::Update),
    Attr::opt("iops", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("throughput", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("encrypted", Ty::Bool, Default::Bool(true), OnChange::Update),
    Attr::opt("kms_key", Ty::Str, Default::None, OnChange::Update),
];
/// The EKS AMI types a template can name: what user data it gets (AL2023 → nodeadm MIME,
/// Bottlerocket → TOML) and, for a self-managed group's template (`cluster` set), which
/// AMI its instances boot (from the public SSM parameters).
pub const AMI_TYPES: &[&str] = &[
    "AL2023_x86_64_STANDARD",
    "AL2023_ARM_64_STANDARD",
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    "AL2023_x86_64_NEURON",
    "BOTTLEROCKET_x86_64",
    "BOTTLEROCKET_ARM_64",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_FIPS",
    "BOTTLEROCKET_ARM_64_FIPS",
    "BOTTLEROCKET_x86_64_NVIDIA_FIPS",
    "BOTTLEROCKET_ARM_64_NVIDIA_FIPS",
];
pub const TAINT_EFFECTS: &[&str] = &["NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE"];
pub const TAINT: &[Attr] = &[
    Attr::req("key", Ty::Str, OnChange::Update),
    Attr::opt("value", Ty::Str, Default::None, OnChange::Update),
    Attr::req("effect", Ty::Enum(TAINT_EFFECTS), OnChange::Update),
];

const ATTRS: &[Attr] = &[
    Attr::opt("instance_type", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("efa", Ty::Object(EFA), Default::None, OnChange::Update),
    Attr::opt("security_groups", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    Attr::opt("placement_group", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("capacity_reservation", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("market", Ty::Enum(&["capacity-block", "on-demand"]), Default::None, OnChange::Update),
    Attr::opt("data_volume", Ty::Object(DATA_VOLUME), Default::None, OnChange::Update),
    Attr::opt("gpu_sharing", Ty::Object(GPU_SHARING), Default::None, OnChange::Update),
    Attr::opt("node_labels", Ty::Map(&Ty::Str), Default::EmptyMap, OnChange::Update),
    Attr::opt("node_taints", Ty::List(&Ty::Object(TAINT)), Default::EmptyList, OnChange::Update),
    Attr::opt("bottlerocket_settings", Ty::Any, Default::EmptyMap, OnChange::Update),
    // AL2023: nodeadm's NodeConfig (kubelet, containerd, instance store, feature gates).
    Attr::opt("nodeadm", Ty::Object(nodeadm::NODEADM), Default::None, OnChange::Update),
    // AL2023: the instance-store strategy, short for nodeadm.instance.local_storage.strategy.
    Attr::opt("local_storage", Ty::Enum(nodeadm::SHORTHAND), Default::None, OnChange::Update),
    Attr::opt("root_volume", Ty::Object(ROOT_VOLUME), Default::None, OnChange::Update),
    Attr::opt("ami_type", Ty::Enum(AMI_TYPES), Default::None, OnChange::Update),
    // Self-managed node groups only: an AMI id instead of the one `ami_type` resolves, the
    // cluster the nodes join (user data with its endpoint, CA and service CIDR) and the
    // instance profile they run as. EKS refuses all three in a managed group's template.
    Attr::opt("ami_id", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("cluster", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("instance_profile", Ty::Str, Default::None, OnChange::Update),
    // IMDSv2 hop limit. 1 (the default, as Karpenter's) keeps pods from reaching IMDS and with it
    // the node role's credentials; 2 lets pods without host networking reach it (opt-in).
    Attr::opt("imds_hop_limit", Ty::Int, Default::Int(1), OnChange::Update),
    Attr::computed("user_data", Ty::Str, OnChange::Update),
    Attr::opt("name", Ty::Str, Default::None, OnChange::Replace),
    TAGS,
];

impl Schema for LaunchTemplateKind {
    fn name(&self) -> &'static str {
        "launch_template"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("id", Ty::Str), ("name", Ty::Str), ("version", Ty::Int)]
    }
}

#[async_trait]
impl Kind for LaunchTemplateKind {
    /// A self-managed template (`cluster`, `ami_type` and no `ami_id`) takes EKS's recommended
    /// AMI for the cluster's version when each version is written (`data::self_managed`), so
    /// the new version may boot a newer AMI than the running one; the plan says so.
    fn update_note(&self, _old: &Attrs, new: &Attrs, _changed: &[String]) -> Option<String> {
        let resolves = new.get("cluster").and_then(Value::as_str).is_some_and(|c| !c.is_empty())
            && new.get("ami_id").and_then(Value::as_str).is_none_or(str::is_empty);
        resolves.then(|| {
            "the new version re-reads EKS's recommended AMI for the cluster's version from SSM at apply: it may boot a newer AMI than running nodes (set ami_id to pin it)".to_string()
        })
    }
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:CreateLaunchTemplate",
            "ec2:CreateLaunchTemplateVersion",
            "ec2:DeleteLaunchTemplate",
            "ec2:DescribeLaunchTemplates",
            "ec2:DescribeLaunchTemplateVersions",
            "ec2:ModifyLaunchTemplate",
            "ec2:DescribeInstanceTypes",
            // A self-managed group's template: its cluster's join settings and version, and
            // the AMI `ami_type` names (public SSM parameters).
            "eks:DescribeCluster",
            "ssm:GetParameter",
        ]
    }
    fn outputs_changed_by_update(&self) -> &'static [&'static str] {
        &["version"]
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        let lit = |k: &str| r.attrs.get(k).and_then(|e| e.as_literal());
        if let Some(e) = r.attrs.get("bottlerocket_settings")
            && !matches!(e.kind, ExprKind::Table(_) | ExprKind::Value(Value::Table(_)))
        {
            diags.push(
                Diagnostic::error(
                    "`bottlerocket_settings` must be a table (the contents of Bottlerocket's [settings])",
                    e.span.clone(),
                )
                .help("for example bottlerocket_settings = { kernel = { lockdown = \"integrity\" } }"),
            );
        }
        if let Some(e) = r.attrs.get("bottlerocket_settings") {
            nested_settings(e, diags);
        }
        if let Some(e) = r.attrs.get("efa") {
            if !r.attrs.contains_key("instance_type") {
                diags.push(
                    Diagnostic::error(
                        "`efa` needs `instance_type`: the interface layout depends on the type",
                        e.span.clone(),
                    )
                    .help("set instance_type = \"p5.48xlarge\" (or the type you run)"),
                );
            }
            if let ExprKind::Table(t) = &e.kind
                && let Some(n) = t.get("interfaces")
            {
                let ok = match n.as_literal() {
                    Some(Value::Str(s)) => s == "max",
                    Some(Value::Int(k)) => (1..=i64::from(i32::MAX)).contains(k),
                    _ => n.as_literal().is_none(),
                };
                if !ok {
                    diags.push(
                        Diagnostic::error(
                            "`efa.interfaces` must be \"max\" or a number from 1 to 2147483647",
                            n.span.clone(),
                        )
                        .help("\"max\" uses every EFA interface the instance type has"),
                    );
                }
            }
        }
        if lit("market").and_then(Value::as_str) == Some("capacity-block")
            && !r.attrs.contains_key("capacity_reservation")
        {
            diags.push(
                Diagnostic::error(
                    "market = \"capacity-block\" needs `capacity_reservation`, the block's cr- id",
                    r.attrs["market"].span.clone(),
                )
                .help("set capacity_reservation = \"${capacity_block.NAME.id}\""),
            );
        }
        if let Some(e) = r.attrs.get("market")
            && !r.attrs.contains_key("capacity_reservation")
            && lit("market").and_then(Value::as_str) == Some("on-demand")
        {
            diags.push(
                Diagnostic::error("`market` only applies together with `capacity_reservation`", e.span.clone())
                    .help("remove market, or set capacity_reservation"),
            );
        }
        if let Some(e) = r.attrs.get("gpu_sharing") {
            gpu_sharing::check(e, diags);
        }
        nodeadm::check(r.attrs.get("nodeadm"), r.attrs.get("local_storage"), diags);
        family::check(r, diags);
        if let Some(e) = r.attrs.get("imds_hop_limit")
            && let Some(n) = e.as_literal().and_then(Value::as_int)
            && !(1..=64).contains(&n)
        {
            diags.push(
                Diagnostic::error(format!("`imds_hop_limit` = {n} is outside 1–64"), e.span.clone())
                    .help("1 (the default) keeps pods away from the node role; 2 lets pods reach IMDS"),
            );
        }
        if let Some(ExprKind::Table(dv)) = r.attrs.get("data_volume").map(|e| &e.kind)
            && let Some(rate) = dv.get("initialization_rate_mibps")
        {
            if let Some(n) = rate.as_literal().and_then(Value::as_int)
                && !(100..=300).contains(&n)
            {
                diags.push(
                    Diagnostic::error(
                        format!("`initialization_rate_mibps` = {n} is outside 100–300 MiB/s"),
                        rate.span.clone(),
                    )
                    .help("EBS hydrates a volume from its snapshot at 100 to 300 MiB/s (VolumeInitializationRate)"),
                );
            }
            if !dv.contains_key("snapshot") {
                diags.push(
                    Diagnostic::error(
                        "`initialization_rate_mibps` needs `snapshot`: only a volume made from a snapshot is hydrated",
                        rate.span.clone(),
                    )
                    .help("set data_volume.snapshot, or remove initialization_rate_mibps"),
                );
            }
        }
        // Collisions between bottlerocket_settings and the generated keys.
        if family::al2023(r) {
            return;
        }
        let literal: Attrs = ["node_labels", "node_taints", "gpu_sharing", "bottlerocket_settings"]
            .iter()
            .filter_map(|k| r.attrs.get(*k).map(|e| (k.to_string(), e.resolve(&|_| Value::Unknown))))
            .collect();
        if let Err(key) = userdata::render(&literal) {
            diags.push(
                Diagnostic::error(
                    format!("`bottlerocket_settings` sets `{key}`, which gpustack generates from node_labels, node_taints or gpu_sharing"),
                    r.attrs.get("bottlerocket_settings").and_then(|e| e.span.clone()),
                )
                .help("set it through the dedicated attribute instead, or remove it from bottlerocket_settings"),
            );
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        if let Some(Value::Table(efa)) = inputs.get_mut("efa") {
            efa.entry("interfaces".into()).or_insert(Value::str("max"));
            efa.entry("security_groups".into()).or_insert(Value::List(vec![]));
            if let Some(Value::List(l)) = efa.get_mut("security_groups") {
                l.sort_by_key(|v| v.interpolate());
            }
        }
        if let Some(Value::List(l)) = inputs.get_mut("security_groups") {
            l.sort_by_key(|v| v.interpolate());
        }
        if let Some(Value::Table(dv)) = inputs.get_mut("data_volume")
            && dv.contains_key("snapshot")
        {
            dv.entry("initialization_rate_mibps".into()).or_insert(Value::Int(DEFAULT_INIT_RATE));
        }
        if let Some(Value::Table(rv)) = inputs.get_mut("root_volume") {
            rv.entry("type".into()).or_insert(Value::str("gp3"));
            rv.entry("encrypted".into()).or_insert(Value::Bool(true));
        }
        if inputs.contains_key("capacity_reservation") && !inputs.contains_key("market") {
            inputs.insert("market".into(), Value::str("on-demand"));
        }
        // Computed from the other inputs unless refresh observed what AWS holds.
        if !inputs.contains_key("user_data") {
            let known = ["node_labels", "node_taints", "gpu_sharing", "bottlerocket_settings", "nodeadm"]
                .iter()
                .all(|k| inputs.get(*k).is_none_or(Value::is_known));
            let ud = if known && nodeadm::is_al2023(inputs) {
                nodeadm::render(inputs, None).map_or(Value::str(""), Value::str)
            } else if known {
                userdata::render(inputs).ok().flatten().map_or(Value::str(""), Value::str)
            } else {
                Value::Unknown
            };
            inputs.insert("user_data".into(), ud);
        }
    }

    /// A self-managed group's template (`cluster` set) holds its cluster's join settings in
    /// the user data it sends, read at apply: the plan compares only what the stack writes.
    /// A user data that reads back to the recorded one's inputs (an imported template, whose
    /// text another tool spelled) is no drift (`parse`).
    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        let joins = recorded.get("cluster").and_then(Value::as_str).is_some_and(|c| !c.is_empty());
        cur.extend(
            observed.iter().filter(|(k, _)| !(joins && k.as_str() == "user_data")).map(|(k, v)| (k.clone(), v.clone())),
        );
        if !joins && recorded.contains_key("user_data") {
            import::settle(&mut cur, recorded);
        }
        self.normalize(&mut cur);
        cur
    }

    /// For an import: the user data another tool spelled is no change when it reads back to
    /// the file's inputs; the AMI type (the node group's, not readable from the template) is
    /// the file's.
    fn settle(&self, current: &mut Attrs, desired: &Attrs) {
        import::settle(current, desired);
        super::eks_cluster::settle_unreadable(current, desired);
    }

    fn check_update(&self, old: &Attrs, new: &Attrs) -> Vec<(&'static str, String, String)> {
        import::refusals(old, new)
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("lt-…")
    }

    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        import::import(ctx, id).await
    }

    /// ec2:CreateTags with the stack's two tags, nothing else.
    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, _outputs: &Attrs) -> Result<()> {
        let set = [(tags::STACK, ctx.stack.as_str()), (tags::ADDRESS, address)]
            .map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build());
        let request = ctx.ec2.create_tags().resources(id).set_tags(Some(set.to_vec()));
        ctx.call(Service::Ec2, "CreateTags", request.send()).await?;
        Ok(())
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let name = str_attr(req.inputs, "name");
        let data = template_data(ctx, req.inputs).await?;
        let call = ctx
            .ec2
            .create_launch_template()
            .launch_template_name(name)
            .launch_template_data(data.clone())
            .client_token(req.token)
            .tag_specifications(tags::ec2_spec(ctx, ResourceType::LaunchTemplate, req.address, req.inputs));
        match ctx.call(Service::Ec2, "CreateLaunchTemplate", call.send()).await {
            Ok(out) => Ok(recorded(out.launch_template())),
            // The name is taken: by this very resource (a create that raced a crash) it is adopted,
            // with a new version holding what this run wants.
            Err(e) if e.code.as_deref().is_some_and(|c| c.contains("AlreadyExists")) => {
                let found = describe_by_name(ctx, name).await?;
                match found.filter(|t| tags::is_ours(ctx, t.tags(), req.address)) {
                    Some(t) => new_version(ctx, t.launch_template_id().unwrap_or_default(), data, name).await,
                    None => Err(e.taken_by_other("set `name` to another template name")),
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let pages = ctx.ec2.describe_launch_templates().filters(tags::stack_filter(ctx)).into_paginator().send();
        let templates = ctx
            .all_pages(Service::Ec2, "DescribeLaunchTemplates", pages, |p| p.launch_templates.unwrap_or_default())
            .await?;
        let mut out = vec![];
        for t in templates {
            let id = t.launch_template_id().unwrap_or_default().to_string();
            let request = ctx.ec2.describe_launch_template_versions().launch_template_id(&id).versions("$Default");
            let version = ctx.call(Service::Ec2, "DescribeLaunchTemplateVersions", request.send()).await;
            let Some(version) = version.absent_ok()? else { continue };
            let data = version.launch_template_versions().first().and_then(|v| v.launch_template_data());
            let all = tags::ec2_map(t.tags());
            let mut attrs = Attrs::from([
                ("name".into(), Value::str(t.launch_template_name().unwrap_or_default())),
                ("tags".into(), tags::observed(&all)),
            ]);
            if let Some(d) = data {
                let text = d
                    .user_data()
                    .and_then(|u| aws_smithy_types::base64::decode(u).ok())
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                attrs.insert("user_data".into(), Value::str(text));
            }
            out.push(Observed::tagged(&all, recorded(Some(&t)), attrs));
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
        _changed: &[String],
    ) -> Result<Recorded> {
        let data = template_data(ctx, new).await?;
        let rec = new_version(ctx, id, data, str_attr(new, "name")).await?;
        tags::sync_ec2(ctx, id, old, new).await?;
        Ok(rec)
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let request = ctx.ec2.delete_launch_template().launch_template_id(id);
        ctx.call(Service::Ec2, "DeleteLaunchTemplate", request.send()).await.absent_ok()?;
        Ok(())
    }
}

/// `bottlerocket_settings` is already the contents of `[settings]`: a `settings` key inside
/// it would render `[settings.settings…]`, which Bottlerocket does not know.
fn nested_settings(e: &crate::stack::Expr, diags: &mut Vec<Diagnostic>) {
    let at = match &e.kind {
        ExprKind::Table(t) => t.get("settings").map(|s| s.key_span.clone().or(s.span.clone())),
        ExprKind::Value(Value::Table(t)) if t.contains_key("settings") => Some(e.span.clone()),
        _ => None,
    };
    if let Some(at) = at {
        diags.push(
            Diagnostic::error(
                "`bottlerocket_settings` holds the contents of Bottlerocket's [settings]: a `settings` key inside it would render [settings.settings…]",
                at,
            )
            .help("drop the outer `settings`: write bottlerocket_settings = { kernel = { … } } for [settings.kernel]"),
        );
    }
}

async fn describe_by_name(ctx: &Ctx, name: &str) -> Result<Option<LaunchTemplate>> {
    let request = ctx.ec2.describe_launch_templates().launch_template_names(name);
    let out = ctx.call(Service::Ec2, "DescribeLaunchTemplates", request.send()).await.absent_ok()?;
    Ok(out.and_then(|o| o.launch_templates().first().cloned()))
}

/// A new version holding `data`, made the default.
async fn new_version(ctx: &Ctx, id: &str, data: RequestLaunchTemplateData, name: &str) -> Result<Recorded> {
    let request = ctx.ec2.create_launch_template_version().launch_template_id(id).launch_template_data(data);
    let created = ctx.call(Service::Ec2, "CreateLaunchTemplateVersion", request.send()).await?;
    let version = created.launch_template_version().and_then(|v| v.version_number()).unwrap_or_default();
    let request = ctx.ec2.modify_launch_template().launch_template_id(id).default_version(version.to_string());
    ctx.call(Service::Ec2, "ModifyLaunchTemplate", request.send()).await?;
    Ok(Recorded {
        id: id.to_string(),
        outputs: Attrs::from([
            ("id".into(), Value::str(id)),
            ("name".into(), Value::str(name)),
            ("version".into(), Value::Int(version)),
        ]),
    })
}

fn recorded(t: Option<&LaunchTemplate>) -> Recorded {
    let id = t.and_then(|t| t.launch_template_id()).unwrap_or_default().to_string();
    Recorded {
        outputs: Attrs::from([
            ("id".into(), Value::str(id.clone())),
            ("name".into(), Value::str(t.and_then(|t| t.launch_template_name()).unwrap_or_default())),
            ("version".into(), Value::Int(t.and_then(|t| t.default_version_number()).unwrap_or(1))),
        ]),
        id,
    }
}
