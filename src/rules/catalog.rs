//! The rules that need the instance catalog: EFA on a type without it, MIG on a GPU that
//! has none, GPU counts, sharing layouts, update strategy. From EC2's `DescribeInstanceTypes`
//! at plan and apply time, or from the embedded catalog offline.

use std::collections::{BTreeMap, BTreeSet};

use super::{efa_table, lit, lit_str, node_groups, referenced, span, strings};
use crate::aws::catalog::InstanceInfo;
use crate::aws::{AwsError, Ctx};
use crate::resources::node_group::{auto_ami_type, nvidia_ami, plain_ami_type};
use crate::stack::{Diagnostic, Resource, Stack};
use crate::value::Value;

/// The instance types each launch template and node group will run, as far as the
/// stack says: a template's own type, else the types of the node groups using it.
fn planned_types(stack: &Stack) -> (BTreeMap<String, Vec<String>>, BTreeMap<String, Vec<String>>) {
    let mut by_lt: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut by_ng: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for ng in node_groups(stack) {
        let lt = referenced(stack, ng, "launch_template", "launch_template");
        let mut types = strings(lit(ng, "instance_types"));
        if types.is_empty()
            && let Some(t) = lt.and_then(|lt| lit_str(lt, "instance_type"))
        {
            types.push(t);
        }
        if let Some(lt) = lt {
            by_lt.entry(lt.address.clone()).or_default().extend(types.iter().cloned());
        }
        by_ng.insert(ng.address.clone(), types);
    }
    for lt in stack.resources.iter().filter(|r| r.kind.name() == "launch_template") {
        let e = by_lt.entry(lt.address.clone()).or_default();
        if let Some(t) = lit_str(lt, "instance_type") {
            e.clear();
            e.push(t);
        }
        e.sort();
        e.dedup();
    }
    (by_lt, by_ng)
}

/// What preflight found: diagnostics, and a line per resource saying what the catalog
/// made of it (for the plan).
pub struct Preflight {
    pub diags: Vec<Diagnostic>,
    pub notes: BTreeMap<String, String>,
}

/// Every instance type the rules and the quota check ask the catalog about: what the
/// launch templates and node groups run, and what reservations and blocks hold. Read in
/// one `DescribeInstanceTypes`, together with the refresh.
pub fn catalog_types(stack: &Stack) -> BTreeSet<String> {
    let (by_lt, by_ng) = planned_types(stack);
    let mut wanted: BTreeSet<String> = by_lt.values().chain(by_ng.values()).flatten().cloned().collect();
    for r in stack.resources.iter().filter(|r| matches!(r.kind.name(), "capacity_reservation" | "capacity_block")) {
        wanted.extend(lit_str(r, "instance_type"));
    }
    wanted.extend(super::karpenter::catalog_types(stack));
    for g in super::self_managed::groups(stack) {
        wanted.extend(strings(lit(g, "instance_types")));
    }
    wanted
}

/// Several instance types in one group (Spot diversification) should have one GPU count: the
/// Cluster Autoscaler sizes a group from one of its types ("each node group should be
/// composed of instances with the same amount of CPU and memory", its AWS README, "Using
/// Mixed Instances Policies and Spot Instances"), so a pod asking for 4 GPUs can make it add a
/// 1-GPU node that never fits it, and a sharing layout made for one count is wrong on another.
/// A warning naming the shapes; differing vCPUs alone are common and left alone.
fn mixed_shapes(r: &Resource, types: &[String], info: &dyn Fn(&str) -> Option<InstanceInfo>) -> Option<Diagnostic> {
    let shapes: BTreeSet<u32> = types.iter().filter_map(|t| info(t)).map(|i| i.gpus).collect();
    if shapes.len() < 2 {
        return None;
    }
    let listed = types
        .iter()
        .filter_map(|t| info(t).map(|i| format!("{t} ({} vCPU, {} GPU)", i.vcpus, i.gpus)))
        .collect::<Vec<_>>()
        .join(", ");
    Some(
        Diagnostic::warning(
            format!("`{}` mixes GPU counts: {listed}", r.address),
            span(r, "instance_types"),
        )
        .help("diversify across types with the same GPU count (e.g. g6e.2xlarge, g6.2xlarge, g5.2xlarge), or put each count in a group of its own"),
    )
}

/// Rules that need the instance catalog, from EC2 (one DescribeInstanceTypes per 100 types,
/// cached for the run). A type whose EC2 facts differ from the embedded catalog's is a
/// warning, so a stale embedded catalog (what `validate` and `plan --refresh=false` use)
/// shows up.
pub async fn preflight(ctx: &Ctx, stack: &Stack) -> Result<Preflight, AwsError> {
    let catalog = ctx.catalog.lookup(ctx, catalog_types(stack)).await?;
    let info = |t: &str| catalog.get(t).cloned().flatten();
    let mut pf = check_catalog(stack, &info, true);
    let embedded = crate::aws::catalog::embedded();
    for (t, live) in catalog.iter().filter_map(|(t, i)| Some((t, i.as_ref()?))) {
        let Some(old) = embedded.get(t) else { continue };
        let diff = crate::aws::catalog::differences(old, live);
        if diff.is_empty() {
            continue;
        }
        let user = stack.resources.iter().find(|r| {
            ["instance_type", "instance_types"]
                .iter()
                .any(|k| lit(r, k).is_some_and(|v| v.as_str() == Some(t) || strings(Some(v)).iter().any(|x| x == t)))
        });
        pf.diags.push(Diagnostic::warning(
            format!(
                "{t}: EC2 in {} differs from {} ({}); this plan uses EC2's values",
                stack.region,
                embedded.label(),
                diff.join(", ")
            ),
            user.and_then(|r| r.span.clone()),
        ));
    }
    Ok(pf)
}

/// The same rules from the embedded catalog, with no AWS call (`validate`,
/// `plan --refresh=false`). A type the embedded catalog lacks is not checked here.
pub fn preflight_offline(stack: &Stack) -> Preflight {
    let embedded = crate::aws::catalog::embedded();
    check_catalog(stack, &|t| embedded.get(t).cloned(), false)
}

/// The catalog rules over `info`; `live` says whether a type `info` lacks is one EC2 does
/// not know (an error) or one the embedded catalog does not carry (not checked).
fn check_catalog(stack: &Stack, info: &dyn Fn(&str) -> Option<InstanceInfo>, live: bool) -> Preflight {
    let (by_lt, by_ng) = planned_types(stack);
    let mut d = vec![];
    let mut notes = BTreeMap::new();
    let mut unknown_reported = BTreeSet::new();
    let mut unknown = |r: &Resource, attr: &str, t: &str, d: &mut Vec<Diagnostic>| {
        if live && unknown_reported.insert(t.to_string()) {
            d.push(
                Diagnostic::error(
                    format!("`{}`: EC2 does not know instance type \"{t}\" in {}", r.address, stack.region),
                    span(r, attr),
                )
                .help("check the spelling (aws ec2 describe-instance-types) and that the type exists in this region"),
            );
        }
    };

    for lt in stack.resources.iter().filter(|r| r.kind.name() == "launch_template") {
        let types = by_lt.get(&lt.address).cloned().unwrap_or_default();
        let own = lit_str(lt, "instance_type");
        let own = own.as_deref();
        for t in &types {
            if info(t).is_none() {
                unknown(lt, if own.is_some() { "instance_type" } else { "gpu_sharing" }, t, &mut d);
            }
        }
        if let (Some(t), Some(i)) = (own, own.and_then(info)) {
            let mut note = format!("{t}: {}", i.summary());
            if let Some(efa) = efa_table(lt) {
                let asked = efa.get("interfaces").and_then(|e| e.as_literal()).cloned().unwrap_or(Value::str("max"));
                if i.max_efa_interfaces == 0 {
                    d.push(
                        Diagnostic::error(format!("`{}`: {t} does not support EFA", lt.address), span(lt, "efa"))
                            .help("remove `efa`, or pick an EFA type (p5.48xlarge, p4d.24xlarge, g6.12xlarge…)"),
                    );
                } else if let Some(n) = asked.as_int().filter(|n| *n as u32 > i.max_efa_interfaces) {
                    d.push(
                        Diagnostic::error(
                            format!(
                                "`{}`: {t} has at most {} EFA interfaces, not {n}",
                                lt.address, i.max_efa_interfaces
                            ),
                            span(lt, "efa"),
                        )
                        .help(format!("set interfaces = {} or \"max\"", i.max_efa_interfaces)),
                    );
                } else if let Ok(efa) = i.efa_interfaces(asked.as_int()) {
                    let n = efa.efa_count();
                    note.push_str(&format!("; {n} EFA interface{}", if n == 1 { "" } else { "s" }));
                    if efa.ena_primary() {
                        note.push_str(" (card 0 is ENA-only: an ENA primary plus efa-only on the EFA cards)");
                    }
                }
            }
            notes.insert(lt.address.clone(), note);
        }
        if let Some(n) = max_pods(lt) {
            // Without VPC CNI prefix delegation a node has (ENIs x (IPv4 addresses per ENI - 1))
            // + 2 pod addresses (EKS UG "choose-instance-type", max pods; nodeadm's default is
            // that formula); pods past it stay ContainerCreating without an IP. The catalog has
            // no ENI limits, so the plan says it.
            let text = format!(
                "maxPods {n} fits only if each type has (ENIs x (IPv4 per ENI - 1)) + 2 >= {n} pod addresses, or vpc-cni runs with ENABLE_PREFIX_DELEGATION"
            );
            notes.entry(lt.address.clone()).and_modify(|x| x.push_str(&format!("; {text}"))).or_insert(text);
        }
        if let Some(strategy) = local_storage(lt) {
            // nodeadm's local-disk aspect runs amazon-eks-ami templates/al2023/runtime/bin/
            // setup-local-disks, which exits 1 ("raid10 requires at least 4 disks") on fewer
            // NVMe instance stores, and the node never joins; RAID0/Mount on a type without
            // instance stores do nothing. The catalog holds no disk counts, so the plan says it.
            let need = if strategy == "RAID10" {
                "at least 4 NVMe instance-store disks (fewer: setup-local-disks exits 1 and the node never joins)"
            } else {
                "NVMe instance-store disks (none: it does nothing)"
            };
            let text = format!(
                "local_storage {strategy} needs {need} on every type it runs; check `aws ec2 describe-instance-types --query 'InstanceTypes[].[InstanceType,InstanceStorageInfo.Disks[0].Count]'`"
            );
            notes.entry(lt.address.clone()).and_modify(|n| n.push_str(&format!("; {text}"))).or_insert(text);
        }
        // A GPU pool on the AMI's small default data volume runs out of disk on CUDA images
        // (10–20 GB each): say so (audit 2026-11 #21). Only Bottlerocket uses a data volume;
        // AL2023 keeps images on its root volume (`al2023_data_volume` in the offline rules).
        // root_volume answers it only on AL2023: Bottlerocket's /dev/xvda is the OS volume and
        // images go on the data volume /dev/xvdb (Bottlerocket README, "Default volumes").
        let room =
            lt.attrs.contains_key("data_volume") || (lt.attrs.contains_key("root_volume") && runs_al2023(stack, lt));
        if !room && let Some((t, i)) = types.iter().find_map(|t| info(t).filter(|i| i.gpus > 0).map(|i| (t, i))) {
            d.push(no_data_volume(stack, lt, t, &i));
        }
        if let Some(sharing) = sharing(lt) {
            for t in &types {
                let Some(i) = info(t) else { continue };
                check_sharing(lt, t, &i, &sharing, &mut d);
            }
        }
    }

    for ng in node_groups(stack) {
        let types = by_ng.get(&ng.address).cloned().unwrap_or_default();
        let ami = lit_str(ng, "ami_type").unwrap_or_else(|| "auto".into());
        let ami = ami.as_str();
        for t in &types {
            let Some(i) = info(t) else {
                if ng.attrs.contains_key("instance_types") {
                    unknown(ng, "instance_types", t, &mut d);
                }
                if !live {
                    d.extend(nvidia_ami_on_a_standard_type(ng, ami, t));
                }
                continue;
            };
            let nvidia_ami = nvidia_ami(ami);
            if ami != "auto" && i.is_nvidia() && !nvidia_ami {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: {ami} has no NVIDIA driver, but {t} has {}", ng.address, i.summary()),
                        span(ng, "ami_type"),
                    )
                    .help(format!("use ami_type = \"{}\" or \"auto\"", auto_ami_type(Some(&i)))),
                );
            }
            if ami != "auto" && nvidia_ami && !i.is_nvidia() {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: {ami} is an NVIDIA AMI, but {t} has no NVIDIA GPU", ng.address),
                        span(ng, "ami_type"),
                    )
                    .help(format!("use ami_type = \"{}\" or \"auto\"", auto_ami_type(Some(&i)))),
                );
            }
            let arm_ami = ami.contains("ARM_64");
            if ami != "auto" && arm_ami != (i.arch() == "arm64") {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: {ami} does not run on {t} ({})", ng.address, i.arch()),
                        span(ng, "ami_type"),
                    )
                    .help(format!("use ami_type = \"{}\" or \"auto\"", auto_ami_type(Some(&i)))),
                );
            }
        }
        for t in &types {
            if let Some(i) = info(t) {
                d.extend(unsupported_accelerator(ng, t, &i));
            }
        }
        d.extend(mixed_shapes(ng, &types, info));
        let first = types.first().and_then(|t| info(t));
        let mut note = vec![];
        let lt = referenced(stack, ng, "launch_template", "launch_template");
        if ami == "auto"
            && let Some(i) = &first
        {
            // A template written for AL2023 (nodeadm) makes `auto` pick AL2023 at apply.
            let al2023 = lt.is_some_and(crate::resources::launch_template::is_al2023_template);
            let picked = if al2023 {
                crate::resources::node_group::al2023_ami_type(&auto_ami_type(Some(i)))
            } else {
                auto_ami_type(Some(i))
            };
            note.push(format!("ami_type auto → {picked} ({}: {})", i.name, i.summary()));
        }
        let reserved = lit_str(ng, "capacity_type").as_deref() == Some("CAPACITY_BLOCK")
            || lt.is_some_and(|lt| lt.attrs.contains_key("capacity_reservation"));
        let inputs: crate::value::Attrs =
            lit(ng, "update_strategy").map(|v| ("update_strategy".to_string(), v)).into_iter().collect();
        let (strategy, why) = crate::resources::node_group::update_strategy(&inputs, first.as_ref(), reserved);
        note.push(format!("update strategy {strategy} ({why})"));
        notes.insert(ng.address.clone(), note.join("; "));
    }
    for g in super::self_managed::groups(stack) {
        let types = strings(lit(g, "instance_types"));
        for t in &types {
            if info(t).is_none() {
                unknown(g, "instance_types", t, &mut d);
            }
        }
        d.extend(mixed_shapes(g, &types, info));
    }
    super::karpenter::check_catalog(stack, info, &mut unknown, &mut d, &mut notes);
    super::auto_mode::notes(stack, &mut notes);
    for c in super::hyperpod::clusters(stack) {
        notes.insert(c.address.clone(), super::hyperpod::chart_note(c));
    }
    Preflight { diags: d, notes }
}

/// The warning for a GPU template without `data_volume`. Its help offers only what the
/// template's node groups can use: when every one of them runs AL2023, a data volume would
/// never be mounted, so the help says what AL2023 does instead.
/// `nodeadm.kubelet.config.maxPods`, if literal.
fn max_pods(lt: &Resource) -> Option<i64> {
    let n = lt.attrs.get("nodeadm")?.resolve(&|_| Value::Unknown);
    n.as_table()?.get("kubelet")?.as_table()?.get("config")?.as_table()?.get("maxPods")?.as_int()
}

/// The instance-store strategy the template asks nodeadm for (RAID0, RAID10, Mount), if literal.
fn local_storage(lt: &Resource) -> Option<String> {
    if let Some(short) = lit_str(lt, "local_storage") {
        return Some(if short == "mount" { "Mount".into() } else { short.to_uppercase() });
    }
    let n = lt.attrs.get("nodeadm")?.resolve(&|_| Value::Unknown);
    let strategy = n.as_table()?.get("instance")?.as_table()?.get("local_storage")?.as_table()?.get("strategy")?;
    strategy.as_str().map(str::to_string)
}

/// The template boots AL2023: written for it, or every node group using it says AL2023_*.
fn runs_al2023(stack: &Stack, lt: &Resource) -> bool {
    let users: Vec<String> = node_groups(stack)
        .filter(|ng| {
            referenced(stack, ng, "launch_template", "launch_template").is_some_and(|x| x.address == lt.address)
        })
        .map(|ng| lit_str(ng, "ami_type").unwrap_or_else(|| "auto".into()))
        .collect();
    crate::resources::launch_template::is_al2023_template(lt)
        || (!users.is_empty() && users.iter().all(|a| a.starts_with("AL2023_")))
}

fn no_data_volume(stack: &Stack, lt: &Resource, t: &str, i: &InstanceInfo) -> Diagnostic {
    let al2023 = runs_al2023(stack, lt);
    let summary = i.summary();
    if al2023 {
        return Diagnostic::warning(
            format!("`{}` runs {t} ({summary}) on AL2023, which keeps container images on the root volume", lt.address),
            lt.span.clone(),
        )
        .help("set root_volume = { size_gib = 200 } (the AMI's root volume is 20 GiB), and on types with instance stores local_storage = \"raid0\"");
    }
    Diagnostic::warning(
        format!("`{}` runs {t} ({summary}) with no `data_volume`: container images share the AMI's small default data volume", lt.address),
        lt.span.clone(),
    )
    .help("add data_volume = { size_gib = 200 } (CUDA images are 10–20 GB each), or an image_cache snapshot")
}

/// A type whose accelerators no EKS AMI drives: g4ad (AMD Radeon Pro V520), dl1 (Habana
/// Gaudi), dl2q (Qualcomm AI 100). EKS UG `ml-eks-optimized-ami` lists accelerated AMIs for
/// NVIDIA GPUs (AL2023 / Bottlerocket NVIDIA) and AWS Neuron (inf1, inf2, trn1, trn2) only,
/// so these nodes join the cluster, billed at the accelerated rate, with no driver and no
/// device plugin: pods cannot request the accelerators. A warning, whatever `ami_type` says.
fn unsupported_accelerator(ng: &Resource, t: &str, i: &InstanceInfo) -> Option<Diagnostic> {
    let family = t.split('.').next().unwrap_or(t);
    let neuron = family.starts_with("inf") || family.starts_with("trn");
    if i.is_nvidia() || neuron || !crate::aws::catalog::embedded().accelerated_family(family) {
        return None;
    }
    let what = match &i.gpu_model {
        Some(m) if i.gpus > 0 => format!("{}× {m}", i.gpus),
        _ => "its accelerators".to_string(),
    };
    Some(
        Diagnostic::warning(
            format!(
                "`{}`: no EKS AMI drives {t}'s accelerators ({what}): its nodes join the cluster without them exposed to pods",
                ng.address
            ),
            span(ng, if ng.attrs.contains_key("instance_types") { "instance_types" } else { "launch_template" }),
        )
        .help("EKS's accelerated AMIs support NVIDIA GPUs and AWS Neuron (Inferentia, Trainium) only; use such a type, or a custom AMI with the vendor's driver and device plugin, which gpustack does not build"),
    )
}

/// Offline, a type the embedded catalog lacks. Of a family known to be CPU-only (m6i.large)
/// an NVIDIA AMI is refused as a refreshing plan refuses it, and the help offers the same AMI
/// family without the driver. Of any other family (p6e-gb200.36xlarge: EKS UG
/// `ml-eks-optimized-ami` runs it on AL2023_ARM_64_NVIDIA only, and the catalog has no
/// record of it; or a GPU family newer than the file) nothing is known: a warning that the
/// AMI is not checked offline, never an error.
fn nvidia_ami_on_a_standard_type(ng: &Resource, ami: &str, t: &str) -> Option<Diagnostic> {
    let catalog = crate::aws::catalog::embedded();
    if !nvidia_ami(ami) || catalog.accelerated_family(t) {
        return None;
    }
    if !catalog.cpu_only_family(t) {
        return Some(
            Diagnostic::warning(
                format!(
                    "`{}`: {t} is not in {}, so {ami} is not checked against it offline",
                    ng.address,
                    catalog.label()
                ),
                span(ng, "ami_type"),
            )
            .help("a refreshing plan reads the type from EC2 and checks the AMI then"),
        );
    }
    Some(
        Diagnostic::error(
            format!("`{}`: {ami} is an NVIDIA AMI, but {t} has no NVIDIA GPU", ng.address),
            span(ng, "ami_type"),
        )
        .help(format!("use ami_type = \"{}\" or \"auto\"", plain_ami_type(ami))),
    )
}

pub(super) struct Sharing {
    pub(super) strategy: String,
    profile: BTreeMap<String, Value>,
}

pub(super) fn sharing(lt: &Resource) -> Option<Sharing> {
    let v = lt.attrs.get("gpu_sharing")?.resolve(&|_| Value::Unknown);
    let t = v.as_table()?;
    let strategy = t.get("strategy").and_then(Value::as_str).unwrap_or("none").to_string();
    let profile = t.get("mig_profile").and_then(Value::as_table).cloned().unwrap_or_default();
    (strategy != "none").then_some(Sharing { strategy, profile })
}

pub(super) fn check_sharing(lt: &Resource, t: &str, i: &InstanceInfo, s: &Sharing, d: &mut Vec<Diagnostic>) {
    let at = span(lt, "gpu_sharing");
    if !i.is_nvidia() {
        d.push(
            Diagnostic::error(
                format!("`{}`: gpu_sharing \"{}\" on {t}, which has no NVIDIA GPU", lt.address, s.strategy),
                at,
            )
            .help("GPU sharing applies to NVIDIA GPU types (g5, g6, p4d, p5…); remove gpu_sharing for this template"),
        );
        return;
    }
    if s.strategy != "mig" {
        return;
    }
    let model = i.gpu_model.clone().unwrap_or_default();
    if !i.mig_capable() {
        d.push(
            Diagnostic::error(
                format!("`{}`: MIG needs an A100, A30, H100, H200 or B200 GPU; {t} has {model}", lt.address),
                at,
            )
            .help("use time-slicing or mps to share this GPU, or a MIG-capable type (p4d, p5, p5e…)"),
        );
        return;
    }
    let Some(mig) = i.mig_model() else {
        d.push(
            Diagnostic::error(
                format!("`{}`: Bottlerocket's MIG manager has no profile table for {model} ({t})", lt.address),
                at,
            )
            .help(format!(
                "MIG on Bottlerocket covers {}; use time-slicing or mps on {t}",
                crate::aws::catalog::MIG_MODELS.iter().map(|m| m.key).collect::<Vec<_>>().join(", ")
            )),
        );
        return;
    };
    let key = mig.key;
    match s.profile.get(key) {
        None => d.push(
            Diagnostic::error(format!("`{}`: mig_profile has no entry for {key}, the GPU of {t}", lt.address), at)
                .help(format!(
                    "add \"{key}\" = \"{}\"; the choices are {}; keys present: {}",
                    mig.layouts[0].0,
                    mig.choices(),
                    s.profile.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
        ),
        Some(Value::Str(v)) if !mig.accepts(v) => d.push(
            Diagnostic::error(
                format!("`{}`: mig_profile \"{key}\" = \"{v}\" is not a layout of {key} ({t})", lt.address),
                at,
            )
            .help(format!(
                "Bottlerocket would silently give each GPU whole instead; the choices are {}",
                mig.choices()
            )),
        ),
        _ => {}
    }
}
