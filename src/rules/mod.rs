//! The GPU rules (DESIGN.md §2): checks across resources that catch a wrong GPU
//! setup before anything is created or bought. `offline` needs only the stack (the load
//! step runs it, so `validate` does too); `egress` is the nodes' way out; `karpenter` checks
//! the Kubernetes side (pools, device-plugin labels); `catalog` reads the instance catalog
//! (embedded, or EC2's at plan and apply time, before any call that changes anything).
//! The rules never call a mutating API and know nothing of plans.

pub(crate) use crate::resources::gpu_nodes::al2023_sharing;
pub(crate) use crate::stack::query::{lit, lit_str, node_groups, referenced, same_object, span, strings, target};

mod access;
pub(crate) mod auto_mode;
mod catalog;
mod cluster;
mod egress;
mod eks_versions;
pub(crate) mod gpu_addons;
pub(crate) mod hyperpod;
pub(crate) mod karpenter;
pub mod outside;
mod self_managed;
#[cfg(test)]
mod tests;
mod workload_iam;

pub use catalog::{Preflight, catalog_types, preflight, preflight_offline};

use std::collections::{BTreeMap, BTreeSet};

use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Expr, Resource, Stack};
use crate::value::Value;

pub(crate) fn has_user_data(lt: &Resource) -> bool {
    ["node_labels", "node_taints", "gpu_sharing", "bottlerocket_settings"].iter().any(|k| written(lt, k))
}

/// Node groups that share one Capacity Block share its zone and its instances: groups in
/// two zones leave one without nodes, and maxima that add up past the block over-promise.
fn shared_blocks(stack: &Stack) -> Vec<Diagnostic> {
    let mut users: BTreeMap<&str, (&Resource, Vec<&Resource>)> = BTreeMap::new();
    for ng in node_groups(stack) {
        let Some(lt) = referenced(stack, ng, "launch_template", "launch_template") else { continue };
        let Some(block) = referenced(stack, lt, "capacity_reservation", "capacity_block") else { continue };
        users.entry(block.address.as_str()).or_insert((block, vec![])).1.push(ng);
    }
    let mut d = vec![];
    for (block, groups) in users.values().filter(|(_, g)| g.len() > 1) {
        let zones: BTreeSet<String> = groups.iter().flat_map(|ng| subnet_zones(stack, ng)).collect();
        let names = groups.iter().map(|g| g.address.as_str()).collect::<Vec<_>>().join(", ");
        if zones.len() > 1 {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` is used by {names} in {} zones ({}); a Capacity Block lives in one",
                        block.address,
                        zones.len(),
                        zones.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                    block.span.clone(),
                )
                .help(
                    "put every node group of the block in subnets of one zone (and set the block's availability_zone)",
                ),
            );
        }
        let maxima: Vec<i64> =
            groups.iter().filter_map(|ng| lit(ng, "scaling")?.as_table()?.get("max")?.as_int()).collect();
        let total: i64 = maxima.iter().sum();
        if let Some(count) = lit(block, "instance_count").and_then(|v| v.as_int())
            && maxima.len() == groups.len()
            && total > count
        {
            d.push(
                Diagnostic::error(
                    format!(
                        "{names} may scale to {total} nodes together, but `{}` holds {count} instances",
                        block.address
                    ),
                    block.span.clone(),
                )
                .help(format!("keep the groups' scaling.max at {count} or less in total, or buy a bigger block")),
            );
        }
    }
    d
}

/// A managed node group and its launch template agree on the AMI family: a Bottlerocket
/// group cannot read a nodeadm NodeConfig (nor an AL2023 group TOML settings, checked above),
/// and a template that joins a cluster itself (`cluster`, an AMI, an instance profile) is a
/// self-managed group's: EKS refuses an IAM instance profile in a managed group's template
/// and skips its own bootstrap when the template names an AMI (EKS UG `launch-templates`).
fn template_family(ng: &Resource, lt: &Resource, ami: &str, al2023_lt: bool) -> Vec<Diagnostic> {
    let mut d = vec![];
    if al2023_lt && ami.starts_with("BOTTLEROCKET_") {
        d.push(
            Diagnostic::error(
                format!("`{}` runs {ami}, but `{}` is written for AL2023 (nodeadm user data)", ng.address, lt.address),
                span(ng, "ami_type"),
            )
            .help("set ami_type = \"AL2023_x86_64_NVIDIA\" (or \"auto\", which then picks AL2023), or write the template for Bottlerocket (bottlerocket_settings)"),
        );
    }
    if let Some(t) = lit_str(lt, "ami_type")
        && ami != "auto"
        && t != ami
    {
        d.push(
            Diagnostic::error(format!("`{}` runs {ami}, but `{}` says ami_type = \"{t}\"", ng.address, lt.address), span(ng, "ami_type"))
                .help("name the same AMI type in both, or drop ami_type from the template (a managed group's AMI comes from the group)"),
        );
    }
    // `auto` is resolved at apply from the template in AWS (its user data: a nodeadm part means
    // AL2023, node_group/auto.rs); a template whose family is only its `ami_type` renders no user
    // data and would get Bottlerocket there while the plan note said AL2023 (review r19-lt m10).
    if let Some(t) = lit_str(lt, "ami_type")
        && ami == "auto"
    {
        d.push(
            Diagnostic::error(
                format!("`{}` has ami_type \"auto\", but its template `{}` says ami_type = \"{t}\"", ng.address, lt.address),
                span(ng, "ami_type"),
            )
            .help(format!("set ami_type = \"{t}\" on the node group too (auto decides from the template's user data at apply, which may not say it)")),
        );
    }
    if lt.attrs.contains_key("cluster") {
        d.push(
            Diagnostic::error(
                format!("`{}` uses `{}`, a self-managed group's template (it sets `cluster`)", ng.address, lt.address),
                span(ng, "launch_template"),
            )
            .help("EKS bootstraps managed nodes itself and refuses an instance profile in their template: remove cluster, ami_id and instance_profile, or use the template from a self_managed_node_group"),
        );
    }
    d
}

/// `data_volume` is Bottlerocket's `/dev/xvdb`, where it keeps container images. The EKS
/// AL2023 AMI keeps them on the root volume and leaves a second volume unformatted and
/// unmounted unless a NodeConfig says otherwise (awslabs/amazon-eks-ami#2122: "We do not do
/// this by default for managed nodegroups"; mounting one needs nodeadm's
/// `spec.instance.storage.volumes`, amazon-eks-ami PR #2759, which gpustack does not write):
/// the volume would bill and hold nothing. The root volume, where the images go, is grown with
/// `root_volume` (`/dev/xvda`; the AMI's own is 20 GiB, AL2023 build default
/// `launch_block_device_mappings_volume_size = "20"`, amazon-eks-ami
/// `templates/al2023/variables-default.json`); the help says so.
fn al2023_data_volume(ng: &Resource, lt: &Resource, ami: &str) -> Diagnostic {
    Diagnostic::error(
        format!(
            "`{}` runs {ami}, but `{}` sets data_volume: AL2023 keeps container images on its root volume and never mounts /dev/xvdb",
            ng.address, lt.address
        ),
        span(lt, "data_volume"),
    )
    .help("for AL2023 replace data_volume with root_volume = { size_gib = 200 } (images live on /dev/xvda), and local_storage = \"raid0\" to put them on the instance stores; or use a BOTTLEROCKET_* ami_type, whose data volume is /dev/xvdb")
}

/// The attribute is written with content: an empty list or table (`taints = []`) says nothing.
pub(crate) fn written(r: &Resource, k: &str) -> bool {
    r.attrs.get(k).is_some_and(|e| match (&e.kind, e.as_literal()) {
        (ExprKind::List(l), _) => !l.is_empty(),
        (ExprKind::Table(t), _) => !t.is_empty(),
        (_, Some(Value::List(l))) => !l.is_empty(),
        (_, Some(Value::Table(t))) => !t.is_empty(),
        _ => true,
    })
}

/// The Kubernetes version of each EKS cluster `creates` says is created, against EKS's
/// release calendar today, and the AMI of each node group `changes` says is created or
/// changed against its cluster's version (no AL2 after 1.32). Not part of `offline`: what
/// already runs is never refused for its version (see `eks_versions`), and `destroy` loads
/// through `offline`.
pub fn cluster_versions(
    stack: &Stack,
    creates: &dyn Fn(&str) -> bool,
    changes: &dyn Fn(&str) -> bool,
) -> Vec<Diagnostic> {
    let mut d = eks_versions::check(stack, eks_versions::today(), creates);
    d.extend(eks_versions::al2_node_groups(stack, changes));
    d
}

/// The network rules for objects the stack does not define, from what a refreshing plan read
/// of them (`outside::read`): the egress rule and the reservation-zone check. The offline pass
/// (`offline`) has already said once per rule family what it could not check.
pub fn network_online(stack: &Stack, outside: &outside::Outside) -> Vec<Diagnostic> {
    let net = outside::Net { stack, outside };
    let mut d = egress::check(&net, true);
    d.extend(outside::reservation_zones(&net).0);
    d.extend(outside::one_vpc(&net));
    d.extend(outside::missing(outside));
    d
}

/// Rules that need only the stack.
pub fn offline(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    for ng in node_groups(stack) {
        let capacity = lit_str(ng, "capacity_type").unwrap_or_else(|| "ON_DEMAND".into());
        let capacity = capacity.as_str();
        let lt = referenced(stack, ng, "launch_template", "launch_template");
        if let Some(lt) = lt {
            let market = lit_str(lt, "market");
            let market = market.as_deref();
            if capacity == "CAPACITY_BLOCK"
                && (market != Some("capacity-block") || !lt.attrs.contains_key("capacity_reservation"))
            {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` is CAPACITY_BLOCK, but its launch template `{}` does not set market = \"capacity-block\" and the block's capacity_reservation",
                            ng.address, lt.address
                        ),
                        span(ng, "capacity_type"),
                    )
                    .help(format!("in [{}] set market = \"capacity-block\" and capacity_reservation = \"${{capacity_block.NAME.id}}\"", lt.address)),
                );
            }
            if capacity != "CAPACITY_BLOCK" && market == Some("capacity-block") {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` uses `{}`, a capacity-block template, but its capacity_type is {capacity}",
                            ng.address, lt.address
                        ),
                        span(ng, "capacity_type"),
                    )
                    .help("set capacity_type = \"CAPACITY_BLOCK\" on the node group"),
                );
            }
            if ng.attrs.contains_key("instance_types") && lt.attrs.contains_key("instance_type") {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` sets instance_types, but its launch template `{}` already sets instance_type",
                            ng.address, lt.address
                        ),
                        span(ng, "instance_types"),
                    )
                    .help(
                        "EKS takes the type from one place: remove instance_types, or instance_type from the template",
                    ),
                );
            }
            let ami = lit_str(ng, "ami_type").unwrap_or_else(|| "auto".into());
            let al2023_lt = crate::resources::launch_template::is_al2023_template(lt);
            d.extend(template_family(ng, lt, &ami, al2023_lt));
            if ami != "auto" && !ami.starts_with("BOTTLEROCKET_") && !al2023_lt && has_user_data(lt) {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` runs {ami}, but `{}` carries Bottlerocket settings (labels, taints, GPU sharing)",
                            ng.address, lt.address
                        ),
                        span(ng, "ami_type"),
                    )
                    .help("use a BOTTLEROCKET_* ami_type (or \"auto\"), or write the template for AL2023: nodeadm = { kubelet = { … } } (labels and taints become kubelet flags)"),
                );
            }
            if (ami.starts_with("AL2023_") || (ami == "auto" && al2023_lt)) && lt.attrs.contains_key("data_volume") {
                d.push(al2023_data_volume(ng, lt, &ami));
            }
            // On AL2023 the template's node_taints become `--register-with-taints`, and kubelet
            // keeps only the last such flag (k8s pkg/util/taints `taintsVar.Set` replaces the
            // list); nodeadm appends flags across NodeConfigs (amazon-eks-ami
            // nodeadm/internal/api/merge.go) and EKS appends its own NodeConfig, carrying the
            // node group's taints, after the template's (eksctl docs "node-bootstrapping"). One
            // set would be lost: refuse both.
            if (ami.starts_with("AL2023_") || (ami == "auto" && al2023_lt))
                && written(lt, "node_taints")
                && written(ng, "taints")
            {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` has taints and its AL2023 template `{}` has node_taints: kubelet keeps only one --register-with-taints, so one set would be silently lost",
                            ng.address, lt.address
                        ),
                        span(lt, "node_taints"),
                    )
                    .help("put every taint on the node group (`taints = [{ key, value, effect }]`) and remove node_taints from the template"),
                );
            }
            if capacity == "SPOT" && !ng.attrs.contains_key("instance_types") && lt.attrs.contains_key("instance_type")
            {
                d.push(
                    Diagnostic::warning(
                        format!("`{}`: SPOT with a single instance type (from `{}`) often finds no capacity", ng.address, lt.address),
                        span(ng, "capacity_type"),
                    )
                    .help("drop instance_type from the template and list several types in the node group's instance_types"),
                );
            }
        }
        if capacity == "CAPACITY_BLOCK" {
            let zones = subnet_zones(stack, ng);
            if zones.len() > 1 {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` is CAPACITY_BLOCK, but its subnets span {} zones ({}); a Capacity Block lives in one",
                            ng.address,
                            zones.len(),
                            zones.join(", ")
                        ),
                        span(ng, "subnets"),
                    )
                    .help("list only subnets in the block's availability zone"),
                );
            }
        }
    }
    for ng in node_groups(stack) {
        let Some(lt) = referenced(stack, ng, "launch_template", "launch_template") else { continue };
        let Some(block) = referenced(stack, lt, "capacity_reservation", "capacity_block") else { continue };
        let count = lit(block, "instance_count").and_then(|v| v.as_int());
        let max = lit(ng, "scaling").and_then(|v| v.as_table().and_then(|t| t.get("max")).and_then(Value::as_int));
        if let (Some(count), Some(max)) = (count, max)
            && max > count
        {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` may scale to {max} nodes, but `{}` holds {count} instances",
                        ng.address, block.address
                    ),
                    span(ng, "scaling"),
                )
                .help(format!("set scaling.max ≤ {count}, or buy a bigger block")),
            );
        }
        if let (Some(a), Some(b)) = (lit_str(lt, "instance_type"), lit_str(block, "instance_type"))
            && a != b
        {
            d.push(
                Diagnostic::error(
                    format!("`{}` runs {a}, but `{}` reserves {b}", lt.address, block.address),
                    span(lt, "instance_type"),
                )
                .help("a Capacity Block only runs the instance type it was bought for"),
            );
        }
        let zones = subnet_zones(stack, ng);
        if let (Some(z), Some(want)) = (lit_str(block, "availability_zone"), zones.first())
            && zones.len() == 1
            && &z != want
        {
            d.push(
                Diagnostic::error(
                    format!("`{}` is in {want}, but `{}` is bought in {z}", ng.address, block.address),
                    span(ng, "subnets"),
                )
                .help("a Capacity Block serves one zone: use subnets in the block's zone"),
            );
        }
    }
    d.extend(shared_blocks(stack));
    d.extend(reservation_note(stack));
    d.extend(egress::egress(stack));
    d.extend(karpenter::offline(stack));
    d.extend(auto_mode::offline(stack));
    d.extend(access::access(stack));
    d.extend(cluster::cluster(stack));
    d.extend(hyperpod::offline(stack));
    d.extend(workload_iam::workload_iam(stack));
    d.extend(gpu_addons::offline(stack));
    d.extend(self_managed::offline(stack));
    // CoreDNS and most controllers tolerate only the control-plane taint and CriticalAddonsOnly
    // (eksctl `pkg/addons/default/assets/coredns-*.json`): a cluster whose every node group is
    // tainted leaves them Pending.
    for cluster in stack.resources.iter().filter(|r| r.kind.name() == "eks_cluster") {
        let groups: Vec<&Resource> = node_groups(stack)
            .filter(|ng| target(stack, ng, "cluster").is_some_and(|c| c.address == cluster.address))
            .collect();
        let tainted = |ng: &Resource| {
            written(ng, "taints")
                || referenced(stack, ng, "launch_template", "launch_template")
                    .is_some_and(|lt| written(lt, "node_taints"))
        };
        if !groups.is_empty() && groups.iter().all(|ng| tainted(ng)) {
            d.push(
                Diagnostic::warning(
                    format!(
                        "every node group of `{}` is tainted ({}): CoreDNS and other add-ons have nowhere to run",
                        cluster.address,
                        groups.iter().map(|g| g.address.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                    cluster.span.clone(),
                )
                .help("add a small untainted node group, e.g. instance_types = [\"m6i.large\"] with scaling = { min = 1, desired = 2, max = 3 }"),
            );
        }
    }
    for lt in stack.resources.iter().filter(|r| r.kind.name() == "launch_template") {
        // A data volume from an image cache must hold the snapshot.
        if let Some(ExprKind::Table(dv)) = lt.attrs.get("data_volume").map(|e| &e.kind)
            && let Some(cache) = dv.get("snapshot").and_then(|e| e.as_single_ref()).and_then(|x| stack.get(&x.address))
            && cache.kind.name() == "image_cache"
        {
            let size = dv.get("size_gib").and_then(|e| e.as_literal()).and_then(Value::as_int);
            let needed = lit(cache, "volume_size_gib").and_then(|v| v.as_int()).unwrap_or(50);
            if let Some(size) = size
                && size < needed
            {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}`: data_volume.size_gib = {size} is smaller than the {needed} GiB snapshot of `{}`",
                            lt.address, cache.address
                        ),
                        dv.get("size_gib").and_then(|e| e.span.clone()),
                    )
                    .help(format!("set size_gib ≥ {needed}")),
                );
            }
        }
        if lt.attrs.contains_key("placement_group") && lt.attrs.contains_key("capacity_reservation") {
            d.push(
                Diagnostic::warning(
                    format!("`{}` puts reserved capacity in a placement group: instances that do not fit the group strand the reservation", lt.address),
                    span(lt, "placement_group"),
                )
                .help("Capacity Blocks are already co-located; remove placement_group (eksctl#7949)"),
            );
        }
    }
    d
}

/// The security groups `r.security_groups` names, when every one is a `security_group` of this
/// stack (an empty list gives none); None when the list is not literal or names a group from
/// outside the stack, whose rules cannot be read offline.
pub(crate) fn stack_security_groups<'a>(stack: &'a Stack, r: &Resource) -> Option<Vec<&'a Resource>> {
    let Some(ExprKind::List(items)) = r.attrs.get("security_groups").map(|e| &e.kind) else {
        return None;
    };
    let groups: Vec<&Resource> = items
        .iter()
        .filter_map(|e| e.as_single_ref())
        .filter_map(|x| stack.get(&x.address))
        // A group read with `existing` has rules the stack file does not show.
        .filter(|g| g.kind.name() == "security_group" && !crate::resources::existing::is_existing(g))
        .collect();
    (groups.len() == items.len()).then_some(groups)
}

/// The stack's subnet resources a node group names (those the stack defines: a subnet
/// read with `existing` has no attributes to check offline, see [`outside::Net`]).
pub(crate) fn subnet_resources<'a>(stack: &'a Stack, ng: &Resource) -> Vec<&'a Resource> {
    match ng.attrs.get("subnets").map(|e| &e.kind) {
        Some(ExprKind::List(items)) => items
            .iter()
            .filter_map(|e| e.as_single_ref())
            .filter_map(|x| stack.get(&x.address))
            .filter(|s| s.kind.name() == "subnet" && !crate::resources::existing::is_existing(s))
            .collect(),
        _ => vec![],
    }
}

/// The zones of a node group's subnets that the stack defines (sorted, unique).
pub(crate) fn subnet_zones(stack: &Stack, ng: &Resource) -> Vec<String> {
    let zones: BTreeSet<String> = match ng.attrs.get("subnets").map(|e| &e.kind) {
        Some(ExprKind::List(items)) => items
            .iter()
            .filter_map(|e| e.as_single_ref())
            .filter_map(|x| stack.get(&x.address))
            .filter_map(|s| lit_str(s, "availability_zone"))
            .collect(),
        _ => BTreeSet::new(),
    };
    zones.into_iter().collect()
}

/// A launch template's `efa` table, when written.
pub(crate) fn efa_table(lt: &Resource) -> Option<BTreeMap<String, Expr>> {
    let efa = lt.attrs.get("efa")?;
    matches!(efa.kind, ExprKind::Table(_) | ExprKind::Value(Value::Table(_))).then(|| efa.table_entries())
}

/// Offline, one note naming the reservations and subnets the reservation-zone check could
/// not see (literal ids and `existing` objects); a refreshing plan reads and checks them.
fn reservation_note(stack: &Stack) -> Option<Diagnostic> {
    let empty = outside::Outside::default();
    let (_, unchecked) = outside::reservation_zones(&outside::Net { stack, outside: &empty });
    if unchecked.is_empty() {
        return None;
    }
    let names: Vec<String> = unchecked.into_iter().collect();
    Some(
        Diagnostic::warning(
            format!(
                "the reservation-zone check did not check {} offline: {} not in the stack file",
                names.join(", "),
                if names.len() == 1 { "its zone is" } else { "their zones are" }
            ),
            None,
        )
        .help("a refreshing `gpustack plan` reads their zones and checks that node groups' subnets are in their reservation's zone"),
    )
}
