//! `launch_template`: the EC2 launch template a GPU node group runs on. Bottlerocket
//! user data is generated as plain TOML (`userdata.rs`); EFA interfaces are laid
//! out from the instance catalog; `/dev/xvdb` is the data volume (optionally from an
//! image-cache snapshot, hydrated at `initialization_rate_mibps`); IMDSv2 is required with
//! hop limit 1 unless `imds_hop_limit = 2` opts pods in (then any pod can take the node
//! role's credentials; EKS best practices, "restrict access to IMDS"). Any change makes a new template version and makes it the
//! default; node groups referring to `version` then move to it.

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    CapacityReservationTarget, InstanceType, LaunchTemplate, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateInstanceMarketOptionsRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest as Nic, LaunchTemplatePlacementRequest,
    LaunchTemplateTagSpecificationRequest, MarketType, RequestLaunchTemplateData, ResourceType, Tag, VolumeType,
};

use super::{Create, Kind, Observed, Recorded, Result, Schema, TAGS, i32_of, str_attr, userdata};
use crate::aws::{AwsError, Ctx, Service, err, gone_is_ok, tags};
use crate::stack::expr::ExprKind;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct LaunchTemplateKind;

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
const GPU_SHARING: &[Attr] = &[
    Attr::req("strategy", Ty::Enum(SHARING_STRATEGIES), OnChange::Update),
    Attr::opt("replicas", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("mig_profile", Ty::Map(&Ty::Any), Default::None, OnChange::Update),
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
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:CreateLaunchTemplate",
            "ec2:CreateLaunchTemplateVersion",
            "ec2:DeleteLaunchTemplate",
            "ec2:DescribeLaunchTemplates",
            "ec2:DescribeLaunchTemplateVersions",
            "ec2:ModifyLaunchTemplate",
            "ec2:DescribeInstanceTypes",
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
            check_sharing(e, diags);
        }
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
        if inputs.contains_key("capacity_reservation") && !inputs.contains_key("market") {
            inputs.insert("market".into(), Value::str("on-demand"));
        }
        // Computed from the other inputs unless refresh observed what AWS holds.
        if !inputs.contains_key("user_data") {
            let known = ["node_labels", "node_taints", "gpu_sharing", "bottlerocket_settings"]
                .iter()
                .all(|k| inputs.get(*k).is_none_or(Value::is_known));
            let ud = if known {
                userdata::render(inputs).ok().flatten().map_or(Value::str(""), Value::str)
            } else {
                Value::Unknown
            };
            inputs.insert("user_data".into(), ud);
        }
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
        let sent = {
            let _p = ctx.permit(Service::Ec2).await;
            call.send().await.map_err(err("CreateLaunchTemplate"))
        };
        match sent {
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
            let version = {
                let _p = ctx.permit(Service::Ec2).await;
                ctx.ec2
                    .describe_launch_template_versions()
                    .launch_template_id(&id)
                    .versions("$Default")
                    .send()
                    .await
                    .map_err(err("DescribeLaunchTemplateVersions"))
            };
            let version = match version {
                Ok(v) => v,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
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
            out.push(Observed {
                address: all.get(tags::ADDRESS).cloned(),
                id,
                attrs,
                outputs: recorded(Some(&t)).outputs,
                retained: false,
            });
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
        let _p = ctx.permit(Service::Ec2).await;
        gone_is_ok(
            ctx.ec2
                .delete_launch_template()
                .launch_template_id(id)
                .send()
                .await
                .map(|_| ())
                .map_err(err("DeleteLaunchTemplate")),
        )
    }
}

/// Offline checks of `gpu_sharing` (the catalog-backed ones are in `gpu::rules`).
fn check_sharing(e: &crate::stack::Expr, diags: &mut Vec<Diagnostic>) {
    let ExprKind::Table(t) = &e.kind else { return };
    let strategy = t.get("strategy").and_then(|x| x.as_literal()).and_then(Value::as_str).unwrap_or("none");
    let replicas = t.get("replicas");
    let n = replicas.and_then(|x| x.as_literal()).and_then(Value::as_int);
    match strategy {
        "time-slicing" | "mps" => {
            let (lo, hi) = if strategy == "mps" { (2, 48) } else { (2, i64::MAX) };
            match n {
                None if replicas.is_none() => diags.push(
                    Diagnostic::error(format!("gpu_sharing strategy \"{strategy}\" needs `replicas`"), e.span.clone())
                        .help("replicas = how many pods share each GPU, at least 2, e.g. replicas = 4"),
                ),
                Some(n) if n < lo || n > hi => diags.push(
                    Diagnostic::error(
                        if strategy == "mps" {
                            format!("MPS replicas must be 2 to 48, found {n}")
                        } else {
                            format!("time-slicing replicas must be at least 2, found {n}")
                        },
                        replicas.and_then(|r| r.span.clone()),
                    )
                    .help("with 1 replica nothing is shared: use strategy = \"none\""),
                ),
                _ => {}
            }
            if let Some(p) = t.get("mig_profile") {
                diags.push(
                    Diagnostic::error(
                        format!(
                            "`mig_profile` does not go with strategy \"{strategy}\": MIG and {strategy} are exclusive"
                        ),
                        p.span.clone(),
                    )
                    .help("pick one: strategy = \"mig\" with mig_profile, or time-slicing/mps with replicas"),
                );
            }
        }
        "mig" => {
            if t.get("mig_profile").is_none() {
                diags.push(
                    Diagnostic::error("gpu_sharing strategy \"mig\" needs `mig_profile`", e.span.clone())
                        .help("e.g. mig_profile = { \"h100.80gb\" = \"1g.10gb\" } (keyed by GPU model and memory)"),
                );
            }
            if let Some(r) = replicas {
                diags.push(
                    Diagnostic::error(
                        "`replicas` does not apply to MIG: MIG with sharing on top is not offered",
                        r.span.clone(),
                    )
                    .help("remove replicas; the MIG profile decides how many slices each GPU has"),
                );
            }
            // Bottlerocket's `mig.profile` values are quoted strings: a partition count ("4") or a
            // profile ("1g.10gb"); an integer is rejected and the node never configures
            // (nvidia-migmanager README; Bottlerocket settings reference, kubelet-device-plugins).
            if let Some(ExprKind::Table(p)) = t.get("mig_profile").map(|p| &p.kind) {
                let models = crate::aws::catalog::MIG_MODELS;
                for (k, v) in p {
                    match v.as_literal() {
                        Some(Value::Str(_)) | None => {}
                        Some(Value::Int(n)) => diags.push(
                            Diagnostic::error(
                                format!(
                                    "mig_profile \"{k}\" = {n} is an integer; Bottlerocket takes only strings here"
                                ),
                                v.span.clone(),
                            )
                            .help(format!(
                                "quote it: \"{k}\" = \"{n}\" (a partition count) or a profile such as \"1g.10gb\""
                            )),
                        ),
                        Some(_) => diags.push(
                            Diagnostic::error(format!("mig_profile \"{k}\" must be a string"), v.span.clone())
                                .help("a partition count such as \"4\" or a profile such as \"1g.10gb\""),
                        ),
                    }
                    match models.iter().find(|m| m.key == k.as_str()) {
                        None => diags.push(
                            Diagnostic::error(
                                format!("mig_profile key \"{k}\" is not a GPU Bottlerocket's MIG manager knows"),
                                v.key_span.clone().or(v.span.clone()),
                            )
                            .help(format!("keys are {}", models.iter().map(|m| m.key).collect::<Vec<_>>().join(", "))),
                        ),
                        Some(m) => {
                            if let Some(Value::Str(s)) = v.as_literal()
                                && !m.accepts(s)
                            {
                                diags.push(
                                    Diagnostic::error(
                                        format!("mig_profile \"{k}\" = \"{s}\" is not a layout of {k}"),
                                        v.span.clone(),
                                    )
                                    .help(format!("the choices are {}", m.choices())),
                                );
                            }
                        }
                    }
                }
            }
        }
        _ => {
            for k in ["replicas", "mig_profile"] {
                if let Some(x) = t.get(k) {
                    diags.push(
                        Diagnostic::error(
                            format!("`{k}` needs a sharing strategy, but strategy is \"none\""),
                            x.span.clone(),
                        )
                        .help("set strategy = \"time-slicing\", \"mps\" or \"mig\", or remove it"),
                    );
                }
            }
        }
    }
}

/// The EFA interface layout (DESIGN.md §2) on the EFA-capable `cards` (from the catalog's
/// `efa_layout`). When card 0 supports EFA: card 0 / device 0 is an `efa` interface that also
/// carries IP traffic, and every further EFA card gets an `efa-only` interface at device
/// index 1. When card 0 is ENA-only (newer types), the primary is a plain `interface` on card
/// 0 and each EFA card gets an `efa-only` at device index 0 — an `efa-only` interface cannot be
/// the primary (EC2 UG `efa-acc-inst-types`). Every interface has the security groups; none
/// has a subnet (EKS picks it).
pub fn efa_interfaces(cards: &[u32], groups: &[String]) -> Vec<Nic> {
    let nic = |card: u32, device: i32, kind: &str| {
        Nic::builder()
            .network_card_index(card as i32)
            .device_index(device)
            .interface_type(kind)
            .set_groups(Some(groups.to_vec()))
            .delete_on_termination(true)
            .build()
    };
    if cards.first() == Some(&0) || cards.is_empty() {
        let mut out = vec![nic(0, 0, "efa")];
        out.extend(cards.iter().skip(1).map(|&c| nic(c, 1, "efa-only")));
        out
    } else {
        let mut out = vec![nic(0, 0, "interface")];
        out.extend(cards.iter().map(|&c| nic(c, 0, "efa-only")));
        out
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_list).unwrap_or_default().iter().filter_map(|x| x.as_str().map(str::to_string)).collect()
}

/// The EFA cards `efa` asks for on `instance_type`, checked against the catalog.
pub async fn efa_cards(ctx: &Ctx, instance_type: &str, efa: &Attrs) -> Result<Vec<u32>> {
    let info = ctx.catalog.get(ctx, instance_type).await?;
    let max = info.as_ref().map_or(0, |i| i.max_efa_interfaces);
    let bad =
        |detail: String| AwsError { operation: "DescribeInstanceTypes", code: Some("EfaUnsupported".into()), detail };
    let Some(info) = info.filter(|_| max > 0) else {
        return Err(bad(format!("{instance_type} does not support EFA")));
    };
    match efa.get("interfaces") {
        Some(Value::Int(n)) => match u32::try_from(*n) {
            Ok(k) if k <= max => Ok(info.efa_layout(Some(k.max(1)))),
            _ => Err(bad(format!("{instance_type} has at most {max} EFA interfaces, {n} were asked for"))),
        },
        _ => Ok(info.efa_layout(None)),
    }
}

async fn template_data(ctx: &Ctx, i: &Attrs) -> Result<RequestLaunchTemplateData> {
    let mut d = RequestLaunchTemplateData::builder().metadata_options(
        LaunchTemplateInstanceMetadataOptionsRequest::builder()
            .http_tokens(LaunchTemplateHttpTokensState::Required)
            .http_put_response_hop_limit(i32_of(i.get("imds_hop_limit").and_then(Value::as_int).unwrap_or(1)))
            .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
            .build(),
    );
    let instance_type = str_attr(i, "instance_type");
    if !instance_type.is_empty() {
        d = d.instance_type(InstanceType::from(instance_type));
    }
    let groups = strings(i.get("security_groups"));
    match i.get("efa") {
        Some(Value::Table(efa)) => {
            let cards = efa_cards(ctx, instance_type, efa).await?;
            let mut all = strings(efa.get("security_groups"));
            all.extend(groups.iter().cloned());
            all.sort();
            all.dedup();
            d = d.set_network_interfaces(Some(efa_interfaces(&cards, &all)));
        }
        _ if !groups.is_empty() => d = d.set_security_group_ids(Some(groups)),
        _ => {}
    }
    if let Some(Value::Table(v)) = i.get("data_volume") {
        let mut ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
            .volume_type(VolumeType::Gp3)
            .encrypted(true)
            .delete_on_termination(true);
        if let Some(n) = v.get("size_gib").and_then(Value::as_int) {
            ebs = ebs.volume_size(i32_of(n));
        }
        if let Some(snap) = v.get("snapshot").and_then(Value::as_str) {
            ebs = ebs.snapshot_id(snap);
            // Only with a snapshot: "supported only for volumes created from snapshots" (EC2 API
            // reference, LaunchTemplateEbsBlockDeviceRequest.VolumeInitializationRate).
            if let Some(rate) = v.get("initialization_rate_mibps").and_then(Value::as_int) {
                ebs = ebs.volume_initialization_rate(i32_of(rate));
            }
        }
        if let Some(n) = v.get("iops").and_then(Value::as_int) {
            ebs = ebs.iops(i32_of(n));
        }
        if let Some(n) = v.get("throughput").and_then(Value::as_int) {
            ebs = ebs.throughput(i32_of(n));
        }
        d = d.block_device_mappings(
            LaunchTemplateBlockDeviceMappingRequest::builder().device_name("/dev/xvdb").ebs(ebs.build()).build(),
        );
    }
    let cr = str_attr(i, "capacity_reservation");
    if !cr.is_empty() {
        d = d.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_target(CapacityReservationTarget::builder().capacity_reservation_id(cr).build())
                .build(),
        );
        if str_attr(i, "market") == "capacity-block" {
            d = d.instance_market_options(
                LaunchTemplateInstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build(),
            );
        }
    }
    let pg = str_attr(i, "placement_group");
    if !pg.is_empty() {
        d = d.placement(LaunchTemplatePlacementRequest::builder().group_name(pg).build());
    }
    if let Some(ud) = i.get("user_data").and_then(Value::as_str).filter(|u| !u.is_empty()) {
        d = d.user_data(aws_smithy_types::base64::encode(ud));
    }
    // Instances and their volumes carry the stack's tags (not the address: they are EKS's).
    let mut t: Vec<Tag> = vec![Tag::builder().key(tags::STACK).value(ctx.stack.clone()).build()];
    t.extend(tags::user_tags(i).into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build()));
    for rt in [ResourceType::Instance, ResourceType::Volume, ResourceType::NetworkInterface] {
        d = d.tag_specifications(
            LaunchTemplateTagSpecificationRequest::builder().resource_type(rt).set_tags(Some(t.clone())).build(),
        );
    }
    Ok(d.build())
}

async fn describe_by_name(ctx: &Ctx, name: &str) -> Result<Option<LaunchTemplate>> {
    let _p = ctx.permit(Service::Ec2).await;
    match ctx
        .ec2
        .describe_launch_templates()
        .launch_template_names(name)
        .send()
        .await
        .map_err(err("DescribeLaunchTemplates"))
    {
        Ok(o) => Ok(o.launch_templates().first().cloned()),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// A new version holding `data`, made the default.
async fn new_version(ctx: &Ctx, id: &str, data: RequestLaunchTemplateData, name: &str) -> Result<Recorded> {
    let version = {
        let _p = ctx.permit(Service::Ec2).await;
        ctx.ec2
            .create_launch_template_version()
            .launch_template_id(id)
            .launch_template_data(data)
            .send()
            .await
            .map_err(err("CreateLaunchTemplateVersion"))?
            .launch_template_version()
            .and_then(|v| v.version_number())
            .unwrap_or_default()
    };
    {
        let _p = ctx.permit(Service::Ec2).await;
        ctx.ec2
            .modify_launch_template()
            .launch_template_id(id)
            .default_version(version.to_string())
            .send()
            .await
            .map_err(err("ModifyLaunchTemplate"))?;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efa_layout_puts_efa_on_card_zero_and_efa_only_on_the_rest() {
        let cards: Vec<u32> = (0..32).collect();
        let nics = efa_interfaces(&cards, &["sg-efa".into(), "sg-node".into()]);
        assert_eq!(nics.len(), 32);
        assert_eq!(
            (nics[0].network_card_index, nics[0].device_index, nics[0].interface_type.as_deref()),
            (Some(0), Some(0), Some("efa"))
        );
        for (k, n) in nics.iter().enumerate().skip(1) {
            assert_eq!(
                (n.network_card_index, n.device_index, n.interface_type.as_deref()),
                (Some(k as i32), Some(1), Some("efa-only"))
            );
        }
        assert!(nics.iter().all(|n| n.subnet_id.is_none()
            && n.groups.as_deref() == Some(&["sg-efa".to_string(), "sg-node".to_string()][..])));
    }

    #[test]
    fn an_ena_only_card_zero_keeps_an_ena_primary_and_puts_efa_only_on_the_efa_cards() {
        // A type whose card 0 is ENA-only and cards 1..=16 support EFA.
        let cards: Vec<u32> = (1..=16).collect();
        let nics = efa_interfaces(&cards, &["sg-efa".into()]);
        assert_eq!(nics.len(), 17);
        assert_eq!(
            (nics[0].network_card_index, nics[0].device_index, nics[0].interface_type.as_deref()),
            (Some(0), Some(0), Some("interface"))
        );
        for (k, n) in nics.iter().enumerate().skip(1) {
            assert_eq!(
                (n.network_card_index, n.device_index, n.interface_type.as_deref()),
                (Some(k as i32), Some(0), Some("efa-only"))
            );
        }
    }
}
