//! The GPU rules (DESIGN.md §2): checks across resources that catch a wrong GPU
//! setup before anything is created or bought. `offline` needs only the stack (it
//! runs in `validate` too); `preflight` reads the instance catalog and runs at plan
//! and apply time, before any call that changes anything.

use std::collections::{BTreeMap, BTreeSet};

use crate::aws::catalog::InstanceInfo;
use crate::aws::{AwsError, Ctx};
use crate::resources::node_group::auto_ami_type;
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Expr, Resource, Stack};
use crate::value::Value;

/// An attribute's value when it is known offline (no references to other resources).
pub(crate) fn lit(r: &Resource, k: &str) -> Option<Value> {
    r.attrs.get(k).map(|e| e.resolve(&|_| Value::Unknown)).filter(Value::is_known)
}

fn lit_str(r: &Resource, k: &str) -> Option<String> {
    lit(r, k).and_then(|v| v.as_str().map(str::to_string))
}

fn span(r: &Resource, k: &str) -> crate::stack::Span {
    r.attrs.get(k).and_then(|e| e.span.clone()).or(r.span.clone())
}

/// The stack resource an attribute refers to (`"${kind.name.out}"`).
pub(crate) fn target<'a>(stack: &'a Stack, r: &Resource, attr: &str) -> Option<&'a Resource> {
    stack.get(&r.attrs.get(attr)?.as_single_ref()?.address)
}

/// The stack resource of `kind` an attribute refers to.
fn referenced<'a>(stack: &'a Stack, r: &Resource, attr: &str, kind: &str) -> Option<&'a Resource> {
    target(stack, r, attr).filter(|t| t.kind.name() == kind)
}

fn strings(v: Option<Value>) -> Vec<String> {
    v.as_ref()
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn node_groups(stack: &Stack) -> impl Iterator<Item = &Resource> {
    stack.resources.iter().filter(|r| r.kind.name() == "node_group")
}

fn has_user_data(lt: &Resource) -> bool {
    ["node_labels", "node_taints", "gpu_sharing"].iter().any(|k| lt.attrs.contains_key(*k))
        || matches!(lt.attrs.get("bottlerocket_settings").map(|e| &e.kind), Some(ExprKind::Table(t)) if !t.is_empty())
        || matches!(lt.attrs.get("bottlerocket_settings").and_then(Expr::as_literal), Some(Value::Table(t)) if !t.is_empty())
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
            if ami != "auto" && !ami.starts_with("BOTTLEROCKET_") && has_user_data(lt) {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` runs {ami}, but `{}` carries Bottlerocket settings (labels, taints, GPU sharing)",
                            ng.address, lt.address
                        ),
                        span(ng, "ami_type"),
                    )
                    .help("use a BOTTLEROCKET_* ami_type (or \"auto\"), or move labels and taints to the node group"),
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
    d.extend(egress(stack));
    // CoreDNS and most controllers tolerate only the control-plane taint and CriticalAddonsOnly
    // (eksctl `pkg/addons/default/assets/coredns-*.json`): a cluster whose every node group is
    // tainted leaves them Pending.
    for cluster in stack.resources.iter().filter(|r| r.kind.name() == "eks_cluster") {
        let groups: Vec<&Resource> = node_groups(stack)
            .filter(|ng| target(stack, ng, "cluster").is_some_and(|c| c.address == cluster.address))
            .collect();
        let tainted = |ng: &Resource| {
            let listed = |r: &Resource, k: &str| {
                r.attrs.get(k).is_some_and(|e| !matches!(e.as_literal(), Some(Value::List(l)) if l.is_empty()))
            };
            listed(ng, "taints")
                || referenced(stack, ng, "launch_template", "launch_template")
                    .is_some_and(|lt| listed(lt, "node_taints"))
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

/// How a subnet of the stack reaches AWS's APIs and registries, if it does.
fn way_out(stack: &Stack, subnet: &Resource, many_interfaces: bool, internet: bool) -> Result<(), String> {
    if subnet.attrs.contains_key("nat_gateway") {
        return Ok(());
    }
    let public = lit(subnet, "public").and_then(|v| v.as_bool()) == Some(true);
    let vpc = referenced(stack, subnet, "vpc", "vpc");
    let igw = vpc.is_some_and(|v| lit(v, "internet_gateway").and_then(|b| b.as_bool()) == Some(true));
    if public && igw && !many_interfaces {
        return Ok(());
    }
    if internet {
        return Err(if public && !igw {
            "is public, but its VPC has no internet gateway".to_string()
        } else {
            "has no route to the internet (the builder pulls from public registries and needs SSM), only a NAT gateway or a public subnet will do".to_string()
        });
    }
    // Endpoints in this subnet (interface) or on its route table (the s3 gateway).
    let served: BTreeSet<String> = stack
        .resources
        .iter()
        .filter(|r| r.kind.name() == "vpc_endpoint")
        .filter(|e| match e.attrs.get("subnets").map(|x| &x.kind) {
            Some(ExprKind::List(items)) => {
                items.iter().filter_map(|i| i.as_single_ref()).any(|x| x.address == subnet.address)
            }
            _ => false,
        })
        .filter_map(|e| lit_str(e, "service"))
        .collect();
    let missing: Vec<&str> =
        crate::resources::vpc_endpoint_essentials().iter().copied().filter(|s| !served.contains(*s)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(if public && igw {
        "is public, but EFA's several network interfaces get no public IP (EC2 UG efa-acc-inst-types)".to_string()
    } else if public {
        "is public, but its VPC has no internet gateway".to_string()
    } else if served.is_empty() {
        "is private with no NAT gateway and no VPC endpoints".to_string()
    } else {
        format!("is private with no NAT gateway, and VPC endpoints for {} are missing", missing.join(", "))
    })
}

/// Nodes need a way out: the VPC CNI calls the EC2 API, and images come from ECR and S3
/// (EKS UG `private-clusters`; "EKS does not check that nodes join", `capacity-blocks-mng`).
/// A node group or image cache in a subnet with none never becomes Ready while it bills.
fn egress(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    let users = stack.resources.iter().filter(|r| matches!(r.kind.name(), "node_group" | "image_cache"));
    for r in users {
        let (attr, subnets): (&str, Vec<&Resource>) = match r.kind.name() {
            "node_group" => ("subnets", subnet_resources(stack, r)),
            _ => ("subnet", referenced(stack, r, "subnet", "subnet").into_iter().collect()),
        };
        let many = referenced(stack, r, "launch_template", "launch_template")
            .and_then(efa_table)
            .is_some_and(|efa| efa.get("interfaces").and_then(|e| e.as_literal()).and_then(Value::as_int) != Some(1));
        // The image-cache builder pulls from registries on the internet (nvcr.io, public.ecr.aws…)
        // and talks to SSM: VPC endpoints for the node essentials are not enough for it.
        let internet = r.kind.name() == "image_cache";
        for sn in subnets {
            if let Err(why) = way_out(stack, sn, many, internet) {
                let public = sn.attrs.keys().any(|k| k == "public");
                let nat_home = stack
                    .resources
                    .iter()
                    .find(|x| x.kind.name() == "subnet" && lit(x, "public").and_then(|v| v.as_bool()) == Some(true))
                    .map_or("PUBLIC_SUBNET".to_string(), |x| x.address.replace("subnet.", ""));
                d.push(
                    Diagnostic::error(
                        format!("`{}` runs in `{}`, which {why}: its nodes could never join the cluster", r.address, sn.address),
                        span(r, attr),
                    )
                    .help(format!(
                        "give it a way out through a NAT gateway in a public subnet:\n        [nat_gateway.main]\n        subnet = \"${{subnet.{nat_home}.id}}\"\n      and in [{}]{}: nat_gateway = \"${{nat_gateway.main.id}}\"\n      (or VPC endpoints for ecr.api, ecr.dkr, s3, ec2 and sts in that subnet)",
                        sn.address,
                        if public { ", with public = false" } else { "" }
                    )),
                );
            }
        }
    }
    d
}

/// The stack's subnet resources a node group names.
fn subnet_resources<'a>(stack: &'a Stack, ng: &Resource) -> Vec<&'a Resource> {
    match ng.attrs.get("subnets").map(|e| &e.kind) {
        Some(ExprKind::List(items)) => items
            .iter()
            .filter_map(|e| e.as_single_ref())
            .filter_map(|x| stack.get(&x.address))
            .filter(|s| s.kind.name() == "subnet")
            .collect(),
        _ => vec![],
    }
}

/// The zones of a node group's subnets that the stack defines (sorted, unique).
fn subnet_zones(stack: &Stack, ng: &Resource) -> Vec<String> {
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

/// What an offering search for the block `r` asks, from `inputs` (the block's attributes):
/// in the zone of the node groups that will use it when the block names none. Returns the
/// search inputs and a note saying where it searched.
fn block_search(stack: &Stack, r: &Resource, mut inputs: crate::value::Attrs) -> (crate::value::Attrs, String) {
    let users: Vec<&Resource> = node_groups(stack)
        .filter(|ng| {
            referenced(stack, ng, "launch_template", "launch_template")
                .and_then(|lt| referenced(stack, lt, "capacity_reservation", "capacity_block"))
                .is_some_and(|b| b.address == r.address)
        })
        .collect();
    let zones: BTreeSet<String> = users.iter().flat_map(|ng| subnet_zones(stack, ng)).collect();
    let mut zone_note = String::new();
    if !inputs.contains_key("availability_zone") && zones.len() == 1 {
        let z = zones.iter().next().cloned().unwrap_or_default();
        zone_note = format!(
            " (searched in {z}, the zone of {})",
            users.iter().map(|u| u.address.as_str()).collect::<Vec<_>>().join(", ")
        );
        inputs.insert("availability_zone".into(), Value::str(z));
    }
    (inputs, zone_note)
}

/// Offering searches already made, by what they asked ([`search_key`]).
pub type Offers = std::collections::HashMap<String, Vec<aws_sdk_ec2::types::CapacityBlockOffering>>;

/// The attributes an offering search depends on, as one key.
fn search_key(inputs: &crate::value::Attrs) -> String {
    ["instance_type", "instance_count", "duration_hours", "start_after", "start_before", "availability_zone"]
        .map(|k| inputs.get(k).map(Value::interpolate).unwrap_or_default())
        .join("|")
}

/// Searches the offerings of every Capacity Block the stack declares and `known` does not
/// (the state has no object for it, so the plan will likely buy it), all at once: run
/// together with the refresh, so `price` finds them ready.
pub async fn prefetch_offers(ctx: &Ctx, stack: &Stack, known: &dyn Fn(&str) -> bool) -> Result<Offers, AwsError> {
    let mut tasks = tokio::task::JoinSet::new();
    for r in stack.resources.iter().filter(|r| r.kind.name() == "capacity_block" && !known(&r.address)) {
        let attrs: crate::value::Attrs = r.attrs.keys().filter_map(|k| Some((k.clone(), lit(r, k)?))).collect();
        let (inputs, _) = block_search(stack, r, attrs);
        let ctx = ctx.clone();
        tasks.spawn(async move {
            let found = crate::resources::capacity_block::search(&ctx, &inputs).await;
            (search_key(&inputs), found)
        });
    }
    let mut offers = Offers::new();
    while let Some(joined) = tasks.join_next().await {
        // A search task only fails by panicking; the price step then searches again.
        let Ok((key, found)) = joined else { continue };
        offers.insert(key, found?);
    }
    Ok(offers)
}

/// Without AWS (`plan --refresh=false`): each block the plan creates is shown as a
/// purchase whose offering and price a refreshing plan looks up.
pub fn price_offline(stack: &Stack, plan: &mut crate::plan::Plan) {
    for c in plan.changes.iter_mut().filter(|c| c.action == crate::plan::Action::Create && c.kind == "capacity_block") {
        let Some(r) = stack.get(&c.address) else { continue };
        let fields: crate::value::Attrs =
            c.fields.iter().filter_map(|f| Some((f.path.clone(), f.new.clone()?))).collect();
        let (inputs, _) = block_search(stack, r, fields);
        let s = |k: &str| inputs.get(k).map(Value::interpolate).unwrap_or_else(|| "?".into());
        c.unpriced_purchase = Some(format!(
            "{}× {}{}, {} h starting between {} and {}: offering and price not looked up (--refresh=false); a refreshing plan searches them (max {} USD)",
            s("instance_count"),
            s("instance_type"),
            inputs.get("availability_zone").map(|z| format!(" in {}", z.interpolate())).unwrap_or_default(),
            s("duration_hours"),
            s("start_after"),
            s("start_before"),
            s("max_upfront_usd"),
        ));
    }
}

/// Proposes an offering for every capacity block the plan creates: the cheapest, then
/// the earliest, in the zone of the node groups that will use it. No offering, or one
/// dearer than `max_upfront_usd`, is an error. Searches `offers` lacks are made here.
pub async fn price(
    ctx: &Ctx,
    stack: &Stack,
    plan: &mut crate::plan::Plan,
    offers: &Offers,
) -> Result<Vec<Diagnostic>, AwsError> {
    use crate::resources::capacity_block::{choose, purchase_of, search};
    let mut d = vec![];
    for c in plan.changes.iter_mut().filter(|c| c.action == crate::plan::Action::Create && c.kind == "capacity_block") {
        let Some(r) = stack.get(&c.address) else { continue };
        let fields: crate::value::Attrs =
            c.fields.iter().filter_map(|f| Some((f.path.clone(), f.new.clone()?))).collect();
        // A block is only useful in the zone its node groups run in.
        let (inputs, zone_note) = block_search(stack, r, fields);
        let offers = match offers.get(&search_key(&inputs)) {
            Some(found) => found.clone(),
            None => search(ctx, &inputs).await?,
        };
        let s = |k: &str| inputs.get(k).map(Value::interpolate).unwrap_or_default();
        let hours = inputs.get("duration_hours").and_then(Value::as_int).unwrap_or(0);
        let Some(best) = choose(&offers, hours) else {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: no Capacity Block offering for {}× {} for at least {} h starting between {} and {}{}",
                        c.address, s("instance_count"), s("instance_type"), s("duration_hours"), s("start_after"), s("start_before"),
                        inputs.get("availability_zone").map(|z| format!(" in {z}")).unwrap_or_default()
                    ),
                    r.span.clone(),
                )
                .help("widen the window (start_before), try another length or count, or another zone; offerings come and go"),
            );
            continue;
        };
        let p = purchase_of(best, &inputs);
        if p.upfront_usd > p.max_upfront_usd {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: the cheapest offering ({} in {}, starting {}) costs ${:.2} up front, more than max_upfront_usd = {}",
                        c.address, p.offering_id, p.availability_zone, p.start, p.upfront_usd, p.max_upfront_usd
                    ),
                    span(r, "max_upfront_usd"),
                )
                .help("nothing was bought; raise max_upfront_usd if the price is acceptable, or change the window"),
            );
            continue;
        }
        c.note = Some(format!(
            "{} offering(s) matched; the cheapest at least {hours} h long, then the earliest, is proposed{zone_note}; bought last, once every change it does not depend on has succeeded (a failing apply buys nothing)",
            offers.len()
        ));
        c.purchase = Some(p);
    }
    Ok(d)
}

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
    wanted
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
        // A GPU pool on the AMI's small default data volume runs out of disk on CUDA images
        // (10–20 GB each): say so (audit 2026-11 #21).
        if !lt.attrs.contains_key("data_volume")
            && let Some((t, i)) = types.iter().find_map(|t| info(t).filter(|i| i.gpus > 0).map(|i| (t, i)))
        {
            d.push(
                Diagnostic::warning(
                    format!("`{}` runs {t} ({}) with no `data_volume`: container images share the AMI's small default data volume", lt.address, i.summary()),
                    lt.span.clone(),
                )
                .help("add data_volume = { size_gib = 200 } (CUDA images are 10–20 GB each), or an image_cache snapshot"),
            );
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
                continue;
            };
            let nvidia_ami = ami.contains("NVIDIA") || ami.contains("GPU");
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
        let first = types.first().and_then(|t| info(t));
        let mut note = vec![];
        if ami == "auto"
            && let Some(i) = &first
        {
            note.push(format!("ami_type auto → {} ({}: {})", auto_ami_type(Some(i)), i.name, i.summary()));
        }
        let lt = referenced(stack, ng, "launch_template", "launch_template");
        let reserved = lit_str(ng, "capacity_type").as_deref() == Some("CAPACITY_BLOCK")
            || lt.is_some_and(|lt| lt.attrs.contains_key("capacity_reservation"));
        let inputs: crate::value::Attrs =
            lit(ng, "update_strategy").map(|v| ("update_strategy".to_string(), v)).into_iter().collect();
        let (strategy, why) = crate::resources::node_group::update_strategy(&inputs, first.as_ref(), reserved);
        note.push(format!("update strategy {strategy} ({why})"));
        notes.insert(ng.address.clone(), note.join("; "));
    }
    Preflight { diags: d, notes }
}

fn efa_table(lt: &Resource) -> Option<BTreeMap<String, Expr>> {
    match lt.attrs.get("efa").map(|e| &e.kind) {
        Some(ExprKind::Table(t)) => Some(t.clone()),
        Some(ExprKind::Value(Value::Table(t))) => {
            Some(t.iter().map(|(k, v)| (k.clone(), Expr::value(v.clone(), lt.attrs["efa"].span.clone()))).collect())
        }
        _ => None,
    }
}

struct Sharing {
    strategy: String,
    profile: BTreeMap<String, Value>,
}

fn sharing(lt: &Resource) -> Option<Sharing> {
    let v = lt.attrs.get("gpu_sharing")?.resolve(&|_| Value::Unknown);
    let t = v.as_table()?;
    let strategy = t.get("strategy").and_then(Value::as_str).unwrap_or("none").to_string();
    let profile = t.get("mig_profile").and_then(Value::as_table).cloned().unwrap_or_default();
    (strategy != "none").then_some(Sharing { strategy, profile })
}

fn check_sharing(lt: &Resource, t: &str, i: &InstanceInfo, s: &Sharing, d: &mut Vec<Diagnostic>) {
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
