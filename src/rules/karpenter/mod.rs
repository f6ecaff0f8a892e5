//! The rules of the Kubernetes side (DESIGN.md "The Kubernetes side"): a `karpenter_pool`
//! that could never use the capacity it names (karpenter#8514), shares a reservation with a
//! node group, or is capped below one instance's GPUs; and the node labels the NVIDIA device
//! plugin's config needs on AL2023 node groups. The GPU accounting of pools (limits as nodes
//! report them, zero-GPU types, shared pools, tied weights) is in `gpus.rs`. The egress rule
//! covers pools in `egress.rs`. [`offline`] needs only the stack; [`check_catalog`] runs with
//! the other catalog rules.

pub(crate) use crate::stack::query::taints;
use std::collections::{BTreeMap, BTreeSet};

use super::{lit, lit_str, node_groups, referenced, span, strings, subnet_zones, written};
use crate::aws::catalog::{self, InstanceInfo};
use crate::resources::karpenter_pool::advertised_per_gpu;

mod gpus;
mod notes;
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Resource, Stack};
use crate::value::Value;
use gpus::{
    burst_bound, derived_needs_cap, derived_zero_gpu, gpu_limit_binds, limit_admits_one_instance,
    one_accelerator_maker, reservations_launchable, shared_sizes, shared_taint, sharing_table, tied_pools,
    zero_gpu_types,
};
use notes::{al2023, derived_note, device_plugin_note, unchecked_note};

/// The stack's karpenter pools.
pub(crate) fn pools(stack: &Stack) -> impl Iterator<Item = &Resource> {
    stack.resources.iter().filter(|r| r.kind.name() == "karpenter_pool")
}

/// The capacity types a pool allows, as written or defaulted (`KarpenterPool::normalize`).
fn capacity_types(pool: &Resource) -> Vec<String> {
    let written = strings(lit(pool, "capacity_types"));
    if !written.is_empty() || pool.attrs.contains_key("capacity_types") {
        return written;
    }
    // A `karpenter.sh/capacity-type In [...]` requirement, as normalize reads it.
    let reqs = lit(pool, "requirements")
        .map(|v| crate::resources::karpenter_pool::requirements::parse(&[("requirements".to_string(), v)].into()))
        .unwrap_or_default();
    if let Some(types) = crate::resources::karpenter_pool::requirements::capacity_types(&reqs) {
        return types;
    }
    vec![if written_reservations(pool) { "reserved" } else { "on-demand" }.to_string()]
}

fn written_reservations(pool: &Resource) -> bool {
    written(pool, "capacity_reservations") || pool.attrs.contains_key("capacity_reservation_tags")
}

/// The pool's launchable instance types (`karpenter_pool::requirements::launchable`) from
/// its attributes as written.
pub(crate) fn launchable(pool: &Resource) -> crate::resources::karpenter_pool::requirements::Launchable {
    let written: crate::value::Attrs = pool.attrs.keys().filter_map(|k| Some((k.clone(), lit(pool, k)?))).collect();
    crate::resources::karpenter_pool::requirements::launchable(&written)
}

/// The stack's reservations (ODCRs and Capacity Blocks) a pool names, with where each is
/// written; items that are not a reference to one are `Err` with their span.
fn reservations<'a>(stack: &'a Stack, pool: &Resource) -> Vec<Result<&'a Resource, crate::stack::Span>> {
    let Some(ExprKind::List(items)) = pool.attrs.get("capacity_reservations").map(|e| &e.kind) else { return vec![] };
    items
        .iter()
        // A literal id (`cr-…`) is a reservation outside the stack: nothing to check it by.
        .filter(|e| e.as_literal().and_then(Value::as_str).is_none_or(|s| !s.starts_with("cr-")))
        .map(|e| {
            e.as_single_ref()
                .filter(|x| x.output == "id")
                .and_then(|x| stack.get(&x.address))
                .filter(|r| matches!(r.kind.name(), "capacity_reservation" | "capacity_block"))
                .ok_or(e.span.clone())
        })
        .collect()
}

/// The reservation a node group runs on, through its launch template.
fn node_group_reservation<'a>(stack: &'a Stack, ng: &Resource) -> Option<&'a Resource> {
    let lt = referenced(stack, ng, "launch_template", "launch_template")?;
    super::target(stack, lt, "capacity_reservation")
        .filter(|r| matches!(r.kind.name(), "capacity_reservation" | "capacity_block"))
}

/// `p5.48xlarge` → `p5`: the family Karpenter's `instance-family` label holds.
fn family(instance_type: &str) -> &str {
    instance_type.split('.').next().unwrap_or(instance_type)
}

/// Rules that need only the stack.
pub(super) fn offline(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    for pool in pools(stack) {
        reserved_capacity(stack, pool, &mut d);
        spot_breadth(pool, &mut d);
        node_role_entered(stack, pool, &mut d);
        zero_gpu_types(pool, &mut d);
        shared_taint(pool, &mut d);
        burst_bound(pool, &mut d);
    }
    tied_pools(stack, &mut d);
    d.extend(device_plugin_labels(stack));
    d
}

/// The GPU accounting a pool's limit needs against the embedded catalog, for pools outside
/// [`check_catalog`] (Auto Mode's: `rules::auto_mode`): GPU types need a gpu_limit that binds,
/// admits one instance of each type, and does not strand the paid reservation's instances.
pub(crate) fn limits_against_catalog(stack: &Stack, pool: &Resource, d: &mut Vec<Diagnostic>) {
    let info = |t: &str| catalog::embedded().get(t).cloned();
    let known: Vec<(String, InstanceInfo)> =
        launchable(pool).types.iter().filter_map(|t| Some((t.clone(), info(t)?))).collect();
    let limit = lit(pool, "gpu_limit").and_then(|v| v.as_int());
    gpu_limit_binds(pool, &known, d);
    limit_admits_one_instance(pool, &known, limit, d);
    if let Some(limit) = limit {
        reservations_launchable(stack, pool, &info, limit, d);
    }
}

/// `disruption.policy` as written.
fn disruption_policy(pool: &Resource) -> Option<String> {
    lit(pool, "disruption")?.as_table()?.get("policy")?.as_str().map(str::to_string)
}

/// Nodes Karpenter launches join only if their role may: an `EC2_LINUX` access entry of the
/// pool's cluster (EKS UG `creating-access-entries`: nodes outside managed node groups need
/// one), unless a managed node group of that cluster uses the same role (EKS enters that role
/// itself: aws-facts §12). Without a `karpenter_controller` for the cluster, nothing in the
/// stack runs Karpenter: a warning, as it may be installed otherwise.
fn node_role_entered(stack: &Stack, pool: &Resource, d: &mut Vec<Diagnostic>) {
    let cluster = pool.attrs.get("cluster");
    let same_cluster = |r: &Resource| super::same_object(r.attrs.get("cluster"), cluster);
    let role = pool.attrs.get("node_role");
    let entered = stack.resources.iter().any(|r| {
        r.kind.name() == "eks_access_entry"
            && same_cluster(r)
            && super::same_object(r.attrs.get("principal_arn"), role)
            && lit_str(r, "type").as_deref() == Some("EC2_LINUX")
    });
    let managed = node_groups(stack).any(|ng| same_cluster(ng) && super::same_object(ng.attrs.get("node_role"), role));
    if !entered && !managed {
        d.push(
            Diagnostic::error(
                format!("`{}`: its node role has no EC2_LINUX access entry, so its nodes could not join the cluster", pool.address),
                span(pool, "node_role"),
            )
            .help("add [eks_access_entry.NAME] with the same cluster, principal_arn = the role's ARN (\"${iam_role.NAME.arn}\") and type = \"EC2_LINUX\""),
        );
    }
    let controllers: Vec<&Resource> =
        stack.resources.iter().filter(|r| r.kind.name() == "karpenter_controller" && same_cluster(r)).collect();
    // The controller may pass only its own node role to EC2 (iam:PassRole in its policy).
    if let Some(c) = controllers.first()
        && !super::same_object(c.attrs.get("node_role"), role)
    {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` launches with another node role than `{}`, which may pass only its own",
                    pool.address, c.address
                ),
                span(pool, "node_role"),
            )
            .help(format!("use the node_role of `{}` (its policy allows iam:PassRole on that role alone)", c.address)),
        );
    }
    // networkInterfaces (EFA) and placementGroupSelector arrived in Karpenter 1.11 (aws-facts §10;
    // the EC2NodeClass CRD has neither at v1.10.0). EFA itself works on older releases: Karpenter
    // adds EFA interfaces when a pod requests `vpc.amazonaws.com/efa` (karpenter-provider-aws
    // v1.10.0 `pkg/providers/amifamily/resolver.go`, `EFACount`), so the message says which.
    let version = controllers.first().and_then(|c| lit_str(c, "version"));
    if let Some(v) = version.as_deref().and_then(|v| crate::resources::karpenter_controller::version(v).map(|n| (v, n)))
        && v.1 < (1, 11)
    {
        for attr in ["efa", "placement_group"].into_iter().filter(|a| pool.attrs.contains_key(*a)) {
            let (field, help) = if attr == "efa" {
                (
                    "networkInterfaces",
                    "set the karpenter_controller's version to \"1.11.0\" or later, or remove `efa`: Karpenter before 1.11 adds EFA interfaces by itself to nodes for pods that request vpc.amazonaws.com/efa",
                )
            } else {
                (
                    "placementGroupSelector",
                    "set the karpenter_controller's version to \"1.11.0\" or later (EC2NodeClass placementGroupSelector came in 1.11)",
                )
            };
            d.push(
                Diagnostic::error(
                    format!("`{}`: {attr} is rendered as EC2NodeClass {field}, which Karpenter {} does not have (1.11 or later)", pool.address, v.0),
                    span(pool, attr),
                )
                .help(help),
            );
        }
    }
    if let Some(v) = version.as_deref().and_then(|v| crate::resources::karpenter_controller::version(v).map(|n| (v, n)))
        && v.1 < (1, 14)
        && disruption_policy(pool).as_deref() == Some("Balanced")
    {
        d.push(
            Diagnostic::error(
                format!("`{}`: disruption.policy \"Balanced\" is new in Karpenter 1.14, but the controller runs {}", pool.address, v.0),
                span(pool, "disruption"),
            )
            .help("set the karpenter_controller's version to \"1.14.0\" or later, or use \"WhenEmptyOrUnderutilized\" (the NodePool CRD before 1.14 refuses \"Balanced\")"),
        );
    }
    if controllers.is_empty() {
        d.push(
            Diagnostic::warning(
                format!("`{}`: no karpenter_controller in the stack for its cluster, so nothing here runs Karpenter", pool.address),
                span(pool, "cluster"),
            )
            .help("add [karpenter_controller.NAME] (role, interruption queue, Pod Identity), or install Karpenter's AWS side yourself"),
        );
    }
}

/// "reserved" and `capacity_reservations` go together, the reservations are this stack's,
/// in the pool's zones, of a type the pool runs, and not also a node group's.
pub(crate) fn reserved_capacity(stack: &Stack, pool: &Resource, d: &mut Vec<Diagnostic>) {
    let capacity = capacity_types(pool);
    let reserved = capacity.iter().any(|c| c == "reserved");
    if reserved && !written_reservations(pool) {
        d.push(
            Diagnostic::error(
                format!("`{}` allows \"reserved\" capacity but names no `capacity_reservations`", pool.address),
                span(pool, "capacity_types"),
            )
            .help(
                "add capacity_reservations = [\"${capacity_block.NAME.id}\"] (or an ODCR's id), or remove \"reserved\"",
            ),
        );
    }
    if !reserved && written_reservations(pool) {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` names capacity_reservations, but its capacity_types ({}) leave out \"reserved\": the reservations would never be used",
                    pool.address,
                    capacity.join(", ")
                ),
                span(pool, "capacity_types"),
            )
            .help("add \"reserved\" to capacity_types (Karpenter fills reserved capacity first), or remove capacity_reservations"),
        );
    }
    let zones = subnet_zones(stack, pool);
    let l = launchable(pool);
    let (types, families) = (l.types, l.families);
    for r in reservations(stack, pool) {
        let res = match r {
            Ok(res) => res,
            Err(at) => {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: capacity_reservations takes this stack's reservations", pool.address),
                        at.or(span(pool, "capacity_reservations")),
                    )
                    .help("refer to one: \"${capacity_reservation.NAME.id}\" or \"${capacity_block.NAME.id}\", so gpustack can check its zone and type, or write a reservation's id (\"cr-…\")"),
                );
                continue;
            }
        };
        let zone = lit_str(res, "availability_zone");
        match &zone {
            Some(z) if !zones.is_empty() && !zones.contains(z) => d.push(
                Diagnostic::error(
                    format!(
                        "`{}` reserves capacity in {z}, but the subnets of `{}` are in {}",
                        res.address,
                        pool.address,
                        zones.join(", ")
                    ),
                    span(pool, "subnets"),
                )
                .help(format!("add a subnet in {z} to the pool: a reservation serves one zone")),
            ),
            None if res.kind.name() == "capacity_block" => d.push(
                Diagnostic::error(
                    format!("`{}` names no availability_zone, and `{}` runs on it", res.address, pool.address),
                    res.span.clone(),
                )
                .help(format!(
                    "set availability_zone to the zone of the pool's subnets{}: the offering search only looks at node groups' zones",
                    zones.first().map(|z| format!(" (\"{z}\")")).unwrap_or_default()
                )),
            ),
            _ => {}
        }
        if let Some(t) = lit_str(res, "instance_type") {
            let runs = if families.is_empty() { types.contains(&t) } else { families.iter().any(|f| f == family(&t)) };
            if (!types.is_empty() || !families.is_empty()) && !runs {
                d.push(
                    Diagnostic::error(
                        format!("`{}` reserves {t}, which `{}` never launches", res.address, pool.address),
                        span(pool, if families.is_empty() { "instance_types" } else { "instance_families" }),
                    )
                    .help(format!(
                        "add {} to the pool, or it pays for the reservation and runs elsewhere",
                        if families.is_empty() { t.clone() } else { family(&t).to_string() }
                    )),
                );
            }
        }
        for ng in
            node_groups(stack).filter(|ng| node_group_reservation(stack, ng).is_some_and(|x| x.address == res.address))
        {
            d.push(
                Diagnostic::error(
                    format!("`{}` and `{}` both run on `{}`", pool.address, ng.address, res.address),
                    span(pool, "capacity_reservations"),
                )
                .help(
                    "give the reservation to one of them: the other would take its instances and leave the first short",
                ),
            );
        }
    }
}

/// Spot needs room to find capacity: as node groups are warned about a single type.
pub(crate) fn spot_breadth(pool: &Resource, d: &mut Vec<Diagnostic>) {
    if !capacity_types(pool).iter().any(|c| c == "spot") {
        return;
    }
    for k in ["instance_types", "instance_families"] {
        let n = strings(lit(pool, k)).len();
        if pool.attrs.contains_key(k) && (1..3).contains(&n) {
            d.push(
                Diagnostic::warning(
                    format!(
                        "`{}`: Spot over {n} instance {} often finds no capacity",
                        pool.address,
                        if k == "instance_types" { "type(s)" } else { "family(ies)" }
                    ),
                    span(pool, k),
                )
                .help("list at least three interchangeable ones, e.g. instance_families = [\"g6\", \"g6e\", \"g5\"]"),
            );
        }
    }
}

/// The node labels the NVIDIA device plugin needs on an AL2023 NVIDIA node group whose
/// launch template shares GPUs (`gpu_sharing::nvidia_labels`: the config's selector,
/// `nvidia.com/gpu.present=true`, and for MPS `nvidia.com/mps.capable=true`).
pub(super) fn device_plugin_labels(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    // A group's own gpu_sharing gets these labels from gpustack (NodeGroup::normalize).
    for (ng, _, sharing) in
        super::al2023_sharing(stack).into_iter().filter(|(ng, _, _)| !ng.attrs.contains_key("gpu_sharing"))
    {
        let labels = lit(ng, "labels").and_then(|v| v.as_table().cloned()).unwrap_or_default();
        let want = crate::resources::launch_template::gpu_sharing::nvidia_labels(&sharing).unwrap_or_default().1;
        let missing: Vec<String> = want
            .iter()
            .filter(|(k, v)| labels.get(*k).and_then(Value::as_str) != Some(v.as_str()))
            .map(|(k, v)| format!("\"{k}\" = \"{v}\""))
            .collect();
        if !missing.is_empty() {
            d.push(
                Diagnostic::warning(
                    format!(
                        "`{}`: the NVIDIA device plugin (nvidia-device-plugin/values.yaml) applies GPU sharing only to nodes labelled {}",
                        ng.address,
                        missing.join(" and ")
                    ),
                    span(ng, "labels"),
                )
                .help(format!("add to the node group: labels = {{ {} }}", missing.join(", "))),
            );
        }
    }
    d
}

/// Reports an instance type the catalog does not know (`resource`, attribute, type): shared
/// with the node groups' checks so a type is reported once.
pub(super) type Unknown<'a> = dyn FnMut(&Resource, &str, &str, &mut Vec<Diagnostic>) + 'a;

/// The catalog rules of pools: every listed type known, `gpu_limit` at least one instance's
/// GPUs, EFA on types that have it (one layout, which gpustack's embedded catalog must know:
/// the YAML is rendered from it), GPU sharing on GPUs that take it. Notes say what the
/// catalog made of each pool.
pub(super) fn check_catalog(
    stack: &Stack,
    info: &dyn Fn(&str) -> Option<InstanceInfo>,
    unknown: &mut Unknown<'_>,
    d: &mut Vec<Diagnostic>,
    notes: &mut BTreeMap<String, String>,
) {
    for pool in pools(stack) {
        let l = launchable(pool);
        let types = &l.types;
        // Types derived from requirements come from the embedded catalog itself.
        let known: Vec<(String, InstanceInfo)> = types
            .iter()
            .filter_map(|t| match if l.derived { catalog::embedded().get(t).cloned() } else { info(t) } {
                Some(i) => Some((t.clone(), i)),
                None => {
                    unknown(pool, "instance_types", t, d);
                    None
                }
            })
            .collect();
        let limit = lit(pool, "gpu_limit").and_then(|v| v.as_int());
        gpu_limit_binds(pool, &known, d);
        derived_needs_cap(pool, &known, d);
        one_accelerator_maker(pool, &known, d);
        derived_zero_gpu(pool, &known, d);
        limit_admits_one_instance(pool, &known, limit, d);
        if let Some(limit) = limit {
            reservations_launchable(stack, pool, info, limit, d);
        }
        shared_sizes(pool, &known, d);
        let mut note: Vec<String> = if l.derived {
            derived_note(&known)
        } else {
            known.iter().take(1).map(|(t, i)| format!("{t}: {}", i.summary())).collect()
        };
        note.extend(unchecked_note(pool, &l));
        note.extend(device_plugin_note(pool, &known, &l.families));
        if pool.attrs.contains_key("efa") {
            note.extend(efa(pool, &known, d));
        }
        if let Some(s) = super::catalog::sharing(pool) {
            for (t, i) in &known {
                super::catalog::check_sharing(pool, t, i, &s, d);
            }
            let per_gpu = advertised_per_gpu(sharing_table(pool).as_ref(), None);
            let (types, families) = (strings(lit(pool, "instance_types")), strings(lit(pool, "instance_families")));
            let cpu = match crate::resources::karpenter_pool::vcpus_per_gpu(&types, &families) {
                Some((v, g)) if per_gpu > 1 => format!(
                    " and cpu = gpu_limit × {} vCPUs per GPU, which holds it to gpu_limit physical GPUs before nodes initialize too",
                    v as f64 / g as f64
                ),
                _ => String::new(),
            };
            // In-flight nodes count with their NodeClaim's physical capacity (kubernetes-sigs/karpenter
            // v1.14.1 `pkg/controllers/state/statenode.go` l.359-368) and sharing is not modelled
            // (kubernetes-sigs/karpenter#729): the scheduler moves on to the next pool by weight
            // (`pkg/controllers/provisioning/scheduling/scheduler.go`).
            note.push(format!(
                "gpu_sharing {} → Bottlerocket user data, for Bottlerocket's own device plugin: no nvidia-device-plugin values, and none to install; limits nvidia.com/gpu = gpu_limit × {per_gpu} (what initialized nodes report){cpu}; Karpenter counts a node that has not initialized as one pod per physical GPU (kubernetes-sigs/karpenter#729), so a cold scale-up starts more nodes than the shares need, in this pool and in lower-weight pools whose taints the pods tolerate, until consolidation removes them",
                s.strategy
            ));
        }
        if !pool.attrs.contains_key("data_volume")
            && !al2023(pool)
            && let Some((t, i)) = known.iter().find(|(_, i)| i.gpus > 0)
        {
            d.push(
                Diagnostic::warning(
                    format!(
                        "`{}` runs {t} ({}) with no `data_volume`: container images get Karpenter's {} GiB default",
                        pool.address,
                        i.summary(),
                        crate::resources::karpenter_pool::DEFAULT_DATA_GIB
                    ),
                    pool.span.clone(),
                )
                .help(
                    "add data_volume = { size_gib = 200 } (CUDA images are 10–20 GB each), or an image_cache snapshot",
                ),
            );
        }
        // AL2023 runs images from its root volume: Karpenter's 20 GiB default holds no CUDA image.
        // With instance_store = "raid0" images and pods live on the NVMe RAID (the help's own
        // alternative; karpenter-provider-aws `types.go` `ephemeralStorage`), so no warning.
        if al2023(pool)
            && !pool.attrs.contains_key("root_volume")
            && !pool.attrs.contains_key("instance_store")
            && let Some((t, i)) = known.iter().find(|(_, i)| i.gpus > 0)
        {
            d.push(
                Diagnostic::warning(
                    format!(
                        "`{}` runs {t} ({}) on AL2023 with no `root_volume`: images and pods get Karpenter's {} GiB default",
                        pool.address,
                        i.summary(),
                        crate::resources::karpenter_pool::node_class::AL2023_ROOT_GIB
                    ),
                    pool.span.clone(),
                )
                .help("add root_volume = { size_gib = 200 } (CUDA images are 10–20 GB each), or instance_store = \"raid0\" on types with NVMe"),
            );
        }
        if !note.is_empty() {
            notes.insert(pool.address.clone(), note.join("; "));
        }
    }
    bottlerocket_sharing_notes(stack, notes);
}

/// A Bottlerocket node group whose template shares GPUs gets no NVIDIA device-plugin values:
/// its plugin runs on the host and reads the sharing from user data, and a second plugin as
/// a DaemonSet conflicts with it (bottlerocket#4309). The plan says so beside the group.
fn bottlerocket_sharing_notes(stack: &Stack, notes: &mut BTreeMap<String, String>) {
    for ng in node_groups(stack) {
        let ami = lit_str(ng, "ami_type").unwrap_or_else(|| "auto".into());
        let Some(lt) = referenced(stack, ng, "launch_template", "launch_template") else { continue };
        let Some(s) = super::catalog::sharing(lt) else { continue };
        if ami == "auto" || ami.starts_with("BOTTLEROCKET_") {
            let line = format!(
                "gpu_sharing {} runs in Bottlerocket's own device plugin: no nvidia-device-plugin values, and none to install",
                s.strategy
            );
            let note = notes.entry(ng.address.clone()).or_default();
            if !note.is_empty() {
                note.push_str("; ");
            }
            note.push_str(&line);
        }
    }
}

/// EFA on each listed type, one layout for all, known to the embedded catalog. The note.
fn efa(pool: &Resource, known: &[(String, InstanceInfo)], d: &mut Vec<Diagnostic>) -> Option<String> {
    let asked = lit(pool, "efa")
        .and_then(|v| v.as_table().and_then(|t| t.get("interfaces")).and_then(Value::as_int))
        .map(|n| n.max(1) as u32);
    let mut layouts: BTreeMap<Vec<u32>, Vec<&str>> = BTreeMap::new();
    for (t, i) in known {
        if i.max_efa_interfaces == 0 {
            d.push(
                Diagnostic::error(format!("`{}`: {t} does not support EFA", pool.address), span(pool, "efa"))
                    .help("remove `efa`, or list only EFA types (p5.48xlarge, p4d.24xlarge, g6.12xlarge…)"),
            );
            continue;
        }
        if let Some(n) = asked.filter(|n| *n > i.max_efa_interfaces) {
            d.push(
                Diagnostic::error(
                    format!("`{}`: {t} has at most {} EFA interfaces, not {n}", pool.address, i.max_efa_interfaces),
                    span(pool, "efa"),
                )
                .help(format!("set interfaces = {} or \"max\"", i.max_efa_interfaces)),
            );
            continue;
        }
        if catalog::embedded().get(t).is_none() {
            d.push(
                Diagnostic::error(
                    format!("`{}`: {} does not know {t}'s EFA cards, which the pool's networkInterfaces are rendered from", pool.address, catalog::embedded().label()),
                    span(pool, "instance_types"),
                )
                .help("use a type gpustack knows, or a newer gpustack; a launch_template with efa lays out any type EC2 knows"),
            );
            continue;
        }
        layouts
            .entry(i.efa_interfaces(asked.map(i64::from)).map(|l| l.efa_cards()).unwrap_or_default())
            .or_default()
            .push(t);
    }
    if layouts.len() > 1 {
        let groups: Vec<String> =
            layouts.iter().map(|(c, ts)| format!("{} ({} EFA)", ts.join(", "), c.len())).collect();
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: one EC2NodeClass has one EFA layout, but its types differ: {}",
                    pool.address,
                    groups.join(" vs ")
                ),
                span(pool, "instance_types"),
            )
            .help("split the pool by layout, or set efa.interfaces to a count every type has on the same cards"),
        );
        return None;
    }
    let (cards, _) = layouts.into_iter().next()?;
    let shown = match (cards.first(), cards.last()) {
        (Some(a), Some(b)) if a != b => format!("cards {a}–{b}"),
        (Some(a), _) => format!("card {a}"),
        _ => String::new(),
    };
    Some(format!(
        "{} EFA interface(s): efa-only on {shown}, an ENA primary on card 0; the EFA device plugin's values: efa-device-plugin/values.yaml",
        cards.len()
    ))
}

/// Every instance type the pools list, for the catalog read.
pub(super) fn catalog_types(stack: &Stack) -> BTreeSet<String> {
    pools(stack).flat_map(|p| strings(lit(p, "instance_types"))).collect()
}

#[cfg(test)]
mod tests {
    use crate::stack::{Source, Stack, VarSources};

    /// The stack as the language reads it (an AL2023 group with a sharing template is also
    /// refused by the Bottlerocket user-data rule, so the load step cannot be used here).
    fn parsed(text: &str) -> Stack {
        let vars = VarSources { cli: &[], env: &|_| None };
        let (stack, diags) =
            Stack::parse(Source::new("t.toml", text.into()), &vars, &crate::resources::schemas()).unwrap();
        assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
        stack
    }

    fn group(labels: &str) -> String {
        format!(
            r#"[stack]
name = "m"
region = "us-west-2"

[launch_template.shared]
gpu_sharing = {{ strategy = "mps", replicas = 4 }}

[node_group.inference]
cluster         = "main"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["subnet-1"]
launch_template = "${{launch_template.shared.id}}"
ami_type        = "AL2023_x86_64_NVIDIA"
instance_types  = ["g6.xlarge"]
labels          = {labels}
"#
        )
    }

    /// Issue 18 item 2 / audit B2: an MPS group also needs `nvidia.com/mps.capable=true`, the
    /// nodeSelector of the chart's MPS control daemon ("We only deploy this pod if the
    /// following sharing label is applied", NVIDIA/k8s-device-plugin v0.20.0
    /// `templates/daemonset-mps-control-daemon.yml`), without which the plugin never starts.
    #[test]
    fn an_al2023_sharing_group_is_told_which_labels_select_its_config() {
        let d = super::device_plugin_labels(&parsed(&group("{}")));
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(!d[0].is_error());
        assert!(
            d[0].message.contains(
                "\"nvidia.com/device-plugin.config\" = \"mps-4\" and \"nvidia.com/gpu.present\" = \"true\" and \"nvidia.com/mps.capable\" = \"true\""
            ),
            "{}",
            d[0].message
        );
        assert_eq!(
            d[0].help.as_deref(),
            Some(
                "add to the node group: labels = { \"nvidia.com/device-plugin.config\" = \"mps-4\", \"nvidia.com/gpu.present\" = \"true\", \"nvidia.com/mps.capable\" = \"true\" }"
            )
        );
        let labelled = group(
            r#"{ "nvidia.com/device-plugin.config" = "mps-4", "nvidia.com/gpu.present" = "true", "nvidia.com/mps.capable" = "true" }"#,
        );
        assert!(super::device_plugin_labels(&parsed(&labelled)).is_empty());
        // Bottlerocket: the host's plugin takes the sharing from user data; no labels needed.
        let bottlerocket = group("{}").replace("ami_type        = \"AL2023_x86_64_NVIDIA\"\n", "");
        assert!(super::device_plugin_labels(&parsed(&bottlerocket)).is_empty());
    }

    fn block_pool(disruption: &str) -> String {
        format!(
            r#"[stack]
name = "m"
region = "us-west-2"

[capacity_block.train]
instance_type     = "p5.48xlarge"
instance_count    = 1
duration_hours    = 24
start_after       = "2026-12-01T00:00:00Z"
start_before      = "2026-12-08T00:00:00Z"
availability_zone = "us-west-2a"
max_upfront_usd   = 40000

[karpenter_pool.train]
cluster               = "main"
node_role             = "node"
subnets               = ["subnet-1"]
security_groups       = ["sg-1"]
capacity_reservations = ["${{capacity_block.train.id}}"]
instance_types        = ["p5.48xlarge"]
gpu_limit             = 8
{disruption}
"#
        )
    }

    /// Review r18 m2: Karpenter deletes a Capacity Block's NodeClaims 40 minutes before its
    /// end, 10 minutes before EC2 reclaims (aws/karpenter-provider-aws v1.14.1
    /// `pkg/controllers/capacityreservation/expiration/controller.go` l.46-48); without a
    /// grace period the drain never evicts do-not-disrupt pods. A pool on a block defaults to
    /// a 10m grace period and a Drifted budget of 0 beside a reason-less one, unless either
    /// is written.
    #[test]
    fn a_pool_on_a_capacity_block_drains_before_the_reclaim() {
        let rendered = |text: &str| {
            let stack = parsed(text);
            let idx = stack.resources.iter().position(|r| r.address == "karpenter_pool.train").unwrap();
            let inputs = crate::plan::desired_inputs(&stack, idx, &|_| None);
            let m = crate::resources::of(&stack.resources[idx])
                .render("karpenter_pool.train", &inputs, &Default::default())
                .unwrap();
            let docs: Vec<serde_json::Value> = m
                .yaml
                .split("---\n")
                .filter(|d| !d.trim().is_empty())
                .map(|d| serde_yaml_ng::from_str(d).unwrap())
                .collect();
            docs[1]["spec"].clone()
        };
        let spec = rendered(&block_pool(""));
        assert_eq!(spec["template"]["spec"]["terminationGracePeriod"], "10m");
        assert_eq!(
            spec["disruption"]["budgets"],
            serde_json::json!([{ "nodes": "1" }, { "nodes": "0", "reasons": ["Drifted"] }])
        );
        // Either written: the user's choice stands.
        let spec = rendered(&block_pool("disruption = { budget = \"2\" }"));
        assert_eq!(spec["template"]["spec"].get("terminationGracePeriod"), None);
        assert_eq!(spec["disruption"]["budgets"], serde_json::json!([{ "nodes": "2" }]));
        let spec = rendered(&block_pool("disruption = { termination_grace_period = \"30m\" }"));
        assert_eq!(spec["template"]["spec"]["terminationGracePeriod"], "30m");
        assert_eq!(spec["disruption"]["budgets"], serde_json::json!([{ "nodes": "1" }]));
    }
}
