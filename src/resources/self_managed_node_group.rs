//! `self_managed_node_group`: an EC2 Auto Scaling group whose instances join an EKS cluster
//! themselves (terraform-aws-eks `self_managed_node_group`, eksctl `nodeGroups`). The launch
//! template carries what EKS would otherwise supply: the AMI, the instance profile and user
//! data with the cluster's endpoint, CA and service CIDR (`launch_template.cluster`). The
//! group adds the subnets, the sizes, Spot diversification (`instance_types` and
//! `mixed_instances`, EC2 Auto Scaling `MixedInstancesPolicy`), capacity reservations
//! (`CapacityReservationSpecification`) and the tags the Kubernetes AWS cloud provider and the
//! Cluster Autoscaler look for.
//!
//! Names are unique per region and `CreateAutoScalingGroup` takes no client token: a create
//! that finds the name taken by this very address (a crash between create and record) adopts
//! the group and makes it what the stack says. A new template version reaches new instances
//! only; the plan says how to roll the running ones (`StartInstanceRefresh`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_autoscaling::types::{
    AutoScalingGroup, CapacityReservationPreference, CapacityReservationSpecification, CapacityReservationTarget,
    Filter, InstancesDistribution, LaunchTemplate, LaunchTemplateOverrides, LaunchTemplateSpecification,
    MixedInstancesPolicy, Tag,
};

use super::{Create, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, i32_of, int_attr, str_attr};
use crate::aws::{Ctx, Service, tags};
use crate::stack::expr::{ExprKind, OutputRef, Part};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Expr, Resource};
use crate::value::{Attrs, Value};

pub struct SelfManagedNodeGroup;

/// EC2 Auto Scaling `InstancesDistribution.SpotAllocationStrategy` (botocore autoscaling
/// model; "price-capacity-optimized (recommended)").
pub const SPOT_STRATEGIES: &[&str] =
    &["price-capacity-optimized", "capacity-optimized", "capacity-optimized-prioritized", "lowest-price"];
const ON_DEMAND_STRATEGIES: &[&str] = &["prioritized", "lowest-price"];
/// `CapacityReservationSpecification.CapacityReservationPreference` (botocore autoscaling model).
pub const RESERVATION_PREFERENCES: &[&str] =
    &["capacity-reservations-only", "capacity-reservations-first", "none", "default"];

const SCALING: &[Attr] = &[
    Attr::req("min", Ty::Int, OnChange::Update),
    Attr::opt("desired", Ty::Int, Default::None, OnChange::Update),
    Attr::req("max", Ty::Int, OnChange::Update),
];
const MIXED: &[Attr] = &[
    Attr::opt("on_demand_base_capacity", Ty::Int, Default::Int(0), OnChange::Update),
    // The share of capacity above the base that is On-Demand; the rest is Spot. EC2 Auto
    // Scaling's default is 100 (all On-Demand).
    Attr::opt("on_demand_percentage_above_base", Ty::Int, Default::Int(100), OnChange::Update),
    Attr::opt(
        "spot_allocation_strategy",
        Ty::Enum(SPOT_STRATEGIES),
        Default::Str("price-capacity-optimized"),
        OnChange::Update,
    ),
    Attr::opt("on_demand_allocation_strategy", Ty::Enum(ON_DEMAND_STRATEGIES), Default::None, OnChange::Update),
    // Spot pools to spread across, 1–20; "valid only when the SpotAllocationStrategy is
    // lowest-price" (API reference, InstancesDistribution.SpotInstancePools).
    Attr::opt("spot_instance_pools", Ty::Int, Default::None, OnChange::Update),
    // The most to pay per instance-hour for Spot, USD (InstancesDistribution.SpotMaxPrice);
    // unset, the On-Demand price, which AWS recommends.
    Attr::opt("spot_max_price", Ty::Number, Default::None, OnChange::Update),
];
const RESERVATION: &[Attr] = &[
    Attr::req("preference", Ty::Enum(RESERVATION_PREFERENCES), OnChange::Update),
    Attr::opt("ids", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
];

const ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Replace),
    // The role the instance profile of the template holds: its access entry (EC2_LINUX) is
    // what lets the nodes register (rules `access`).
    Attr::req("node_role", Ty::Str, OnChange::Update),
    Attr::req("subnets", Ty::List(&Ty::Str), OnChange::Update),
    Attr::req("launch_template", Ty::Str, OnChange::Update),
    Attr::opt("launch_template_version", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("instance_types", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    Attr::opt("scaling", Ty::Object(SCALING), Default::None, OnChange::Update),
    Attr::opt("mixed_instances", Ty::Object(MIXED), Default::None, OnChange::Update),
    Attr::opt("capacity_reservation", Ty::Object(RESERVATION), Default::None, OnChange::Update),
    // Launch a replacement when EC2 signals a Spot instance at elevated risk (EC2 Auto Scaling
    // `CapacityRebalance`); defaults to true when the group runs Spot.
    Attr::opt("capacity_rebalance", Ty::Bool, Default::None, OnChange::Update),
    Attr::opt("name", Ty::Str, Default::None, OnChange::Replace),
    TAGS,
];

impl Schema for SelfManagedNodeGroup {
    fn name(&self) -> &'static str {
        "self_managed_node_group"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("name", Ty::Str), ("arn", Ty::Str)]
    }

    /// `launch_template_version` defaults to the referenced template's `version`, as for a
    /// managed node group.
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

/// The share of a group's capacity that may be Spot: any when the percentage above the base
/// is below 100.
fn runs_spot(i: &Attrs) -> bool {
    i.get("mixed_instances")
        .and_then(Value::as_table)
        .and_then(|m| m.get("on_demand_percentage_above_base"))
        .and_then(Value::as_int)
        .is_some_and(|p| p < 100)
}

#[async_trait]
impl Kind for SelfManagedNodeGroup {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "autoscaling:CreateAutoScalingGroup",
            "autoscaling:UpdateAutoScalingGroup",
            "autoscaling:DeleteAutoScalingGroup",
            "autoscaling:DescribeAutoScalingGroups",
            "autoscaling:CreateOrUpdateTags",
            "autoscaling:DeleteTags",
            // Using a launch template that names an instance profile: EC2 Auto Scaling UG
            // "Control the use of launch templates in Auto Scaling groups" (ec2:RunInstances,
            // ec2:CreateTags, iam:PassRole on the template's role).
            "ec2:RunInstances",
            "ec2:DescribeLaunchTemplateVersions",
            "iam:PassRole",
            // The first group in an account creates AWSServiceRoleForAutoScaling.
            "iam:CreateServiceLinkedRole",
        ]
    }
    fn replace_order(&self) -> ReplaceOrder {
        ReplaceOrder::DeleteBeforeCreate
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        super::node_group::require_stack_cluster(r, diags);
        let lit = |k: &str| r.attrs.get(k).map(|e| e.resolve(&|_| Value::Unknown));
        if let Some(Value::Table(t)) = lit("scaling") {
            let n = |k: &str| t.get(k).and_then(Value::as_int);
            if let (Some(min), Some(max)) = (n("min"), n("max")) {
                let desired = n("desired").unwrap_or(min);
                if min < 0 || min > max || desired < min || desired > max {
                    diags.push(
                        Diagnostic::error(
                            format!(
                                "`{}`: scaling needs 0 ≤ min ≤ desired ≤ max (min {min}, desired {desired}, max {max})",
                                r.address
                            ),
                            r.attrs["scaling"].span.clone(),
                        )
                        .help("for example scaling = { min = 0, desired = 1, max = 4 }"),
                    );
                }
            }
        }
        let types = lit("instance_types").and_then(|v| v.as_list().map(<[Value]>::len)).unwrap_or(0);
        // MixedInstancesPolicy: "You can specify up to 40 instance types per Auto Scaling group"
        // (EC2 Auto Scaling UG, `ec2-auto-scaling-mixed-instances-groups`).
        if types > 40 {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: an Auto Scaling group takes at most 40 instance_types, not {types}", r.address),
                    r.attrs["instance_types"].span.clone(),
                )
                .help("keep the 40 most interchangeable types"),
            );
        }
        if let Some(Value::Table(m)) = lit("mixed_instances") {
            let pct = m.get("on_demand_percentage_above_base").and_then(Value::as_int);
            if let Some(p) = pct.filter(|p| !(0..=100).contains(p)) {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: on_demand_percentage_above_base = {p} is outside 0–100", r.address),
                        r.attrs["mixed_instances"].span.clone(),
                    )
                    .help("0 runs everything above the base on Spot, 100 everything On-Demand"),
                );
            }
            if let Some(b) = m.get("on_demand_base_capacity").and_then(Value::as_int).filter(|b| *b < 0) {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: on_demand_base_capacity = {b} is negative", r.address),
                        r.attrs["mixed_instances"].span.clone(),
                    )
                    .help("the base is a number of instances, 0 or more"),
                );
            }
            if let Some(n) = m.get("spot_instance_pools").and_then(Value::as_int) {
                let strategy =
                    m.get("spot_allocation_strategy").and_then(Value::as_str).unwrap_or("price-capacity-optimized");
                if strategy != "lowest-price" || !(1..=20).contains(&n) {
                    diags.push(
                        Diagnostic::error(format!("`{}`: spot_instance_pools = {n} needs spot_allocation_strategy = \"lowest-price\" and 1 to 20 pools", r.address), r.attrs["mixed_instances"].span.clone())
                            .help("Auto Scaling spreads over pools only with lowest-price; with price-capacity-optimized remove spot_instance_pools"),
                    );
                }
            }
            if let Some(p) = m.get("spot_max_price").and_then(Value::as_f64).filter(|p| *p <= 0.0) {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: spot_max_price = {p} is not a price", r.address),
                        r.attrs["mixed_instances"].span.clone(),
                    )
                    .help("a price in USD per instance-hour, e.g. 1.5; or remove it to pay up to the On-Demand price"),
                );
            }
            if pct.is_some_and(|p| p < 100) && types < 2 {
                diags.push(
                    Diagnostic::warning(
                        format!("`{}` runs Spot with {} instance type{}: one Spot pool often has no capacity", r.address, types, if types == 1 { "" } else { "s" }),
                        r.attrs["mixed_instances"].span.clone(),
                    )
                    .help("list several interchangeable types, e.g. instance_types = [\"g6e.2xlarge\", \"g6.2xlarge\", \"g5.2xlarge\"]"),
                );
            }
        }
        if let Some(Value::Table(c)) = lit("capacity_reservation") {
            let pref = c.get("preference").and_then(Value::as_str).unwrap_or_default();
            let ids = c.get("ids").and_then(Value::as_list).map_or(0, <[Value]>::len);
            // Reservations hold On-Demand capacity: "capacity-reservations-only" with Spot
            // above the base cannot launch the Spot share (CapacityReservationSpecification,
            // botocore autoscaling 2011-01-01: instances "launch into On-Demand Capacity
            // Reservations only"; EC2 Auto Scaling UG, "Use On-Demand Capacity Reservations").
            let spot = match lit("mixed_instances") {
                Some(Value::Table(m)) => {
                    m.get("on_demand_percentage_above_base").and_then(Value::as_int).unwrap_or(100) < 100
                }
                _ => false,
            };
            if pref == "capacity-reservations-only" && spot {
                diags.push(
                    Diagnostic::error(format!("`{}`: capacity_reservation.preference \"capacity-reservations-only\" launches On-Demand reservations only, but mixed_instances puts part of the group on Spot", r.address), r.attrs["capacity_reservation"].span.clone())
                        .help("use preference = \"capacity-reservations-first\", or on_demand_percentage_above_base = 100"),
                );
            }
            if matches!(pref, "none" | "default") && ids > 0 {
                diags.push(
                    Diagnostic::error(format!("`{}`: capacity_reservation.ids need preference \"capacity-reservations-only\" or \"capacity-reservations-first\"", r.address), r.attrs["capacity_reservation"].span.clone())
                        .help("Auto Scaling targets reservations only with those two preferences"),
                );
            }
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        for k in ["subnets", "instance_types"] {
            if k == "subnets"
                && let Some(Value::List(l)) = inputs.get_mut(k)
            {
                l.sort_by_key(Value::interpolate);
            }
        }
        let scaling = inputs.entry("scaling".into()).or_insert_with(|| Value::Table(BTreeMap::new()));
        if let Value::Table(t) = scaling {
            let min = t.get("min").cloned().unwrap_or(Value::Int(1));
            t.entry("min".into()).or_insert(min.clone());
            t.entry("max".into()).or_insert(min.clone());
            t.entry("desired".into()).or_insert(min);
        }
        if let Some(Value::Table(m)) = inputs.get_mut("mixed_instances") {
            m.entry("on_demand_base_capacity".into()).or_insert(Value::Int(0));
            m.entry("on_demand_percentage_above_base".into()).or_insert(Value::Int(100));
            m.entry("spot_allocation_strategy".into()).or_insert(Value::str("price-capacity-optimized"));
        }
        if let Some(Value::Table(c)) = inputs.get_mut("capacity_reservation") {
            c.entry("ids".into()).or_insert(Value::List(vec![]));
        }
        if !inputs.contains_key("capacity_rebalance") {
            let spot = runs_spot(inputs);
            inputs.insert("capacity_rebalance".into(), Value::Bool(spot));
        }
    }

    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        cur.extend(observed.iter().map(|(k, v)| (k.clone(), v.clone())));
        // The Cluster Autoscaler moves `desired`; only min and max are compared.
        if let (Some(Value::Table(rec)), Some(Value::Table(c))) = (recorded.get("scaling"), cur.get_mut("scaling"))
            && let Some(d) = rec.get("desired")
        {
            c.insert("desired".into(), d.clone());
        }
        self.normalize(&mut cur);
        cur
    }

    fn update_note(&self, _old: &Attrs, _new: &Attrs, changed: &[String]) -> Option<String> {
        changed.iter().any(|c| c == "launch_template_version" || c == "launch_template").then(|| {
            "running instances keep the old template until replaced; roll them with `aws autoscaling start-instance-refresh` (new instances use the new version at once)".to_string()
        })
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let i = req.inputs;
        let name = str_attr(i, "name");
        let (min, desired, max) = sizes(i);
        let (lt, mixed) = placement(i, None);
        let call = ctx
            .autoscaling
            .create_auto_scaling_group()
            .auto_scaling_group_name(name)
            .min_size(min)
            .max_size(max)
            .desired_capacity(desired)
            .vpc_zone_identifier(strings(i.get("subnets")).join(","))
            .set_launch_template(lt)
            .set_mixed_instances_policy(mixed)
            .set_capacity_reservation_specification(reservation(i, None))
            .capacity_rebalance(i.get("capacity_rebalance").and_then(Value::as_bool).unwrap_or(false))
            .set_tags(Some(group_tags(ctx, req.address, i, name)));
        match propagated(|| ctx.call(Service::AutoScaling, "CreateAutoScalingGroup", call.clone().send())).await {
            Ok(_) => {}
            Err(e) if e.has_code("AlreadyExists") => match describe(ctx, name).await? {
                Some(g) if is_ours(ctx, &g, req.address) => {
                    // Ours from an apply that died before recording it: created with these
                    // sizes, so leave its desired capacity (an autoscaler may have moved it).
                    update_group(ctx, i, name, None).await?;
                }
                _ => return Err(e.taken_by_other("set `name` to another Auto Scaling group name")),
            },
            Err(e) => return Err(e),
        }
        let g = describe(ctx, name).await?;
        Ok(recorded(name, g.as_ref()))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let filter = Filter::builder().name(format!("tag:{}", tags::STACK)).values(ctx.stack.clone()).build();
        let pages = ctx.autoscaling.describe_auto_scaling_groups().filters(filter).into_paginator().send();
        let groups = ctx
            .all_pages(Service::AutoScaling, "DescribeAutoScalingGroups", pages, |p| {
                p.auto_scaling_groups.unwrap_or_default()
            })
            .await?;
        Ok(groups.iter().map(observe).collect())
    }

    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        _id: &str,
        old: &Attrs,
        new: &Attrs,
        _changed: &[String],
    ) -> Result<Recorded> {
        let name = str_attr(new, "name");
        update_group(ctx, new, name, Some(old)).await?;
        sync_tags(ctx, name, old, new).await?;
        let g = describe(ctx, name).await?;
        Ok(recorded(name, g.as_ref()))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, _id: &str, inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let name = str_attr(inputs, "name");
        if describe(ctx, name).await?.is_none() {
            return Ok(());
        }
        // ForceDelete terminates the instances with the group (DeleteAutoScalingGroup).
        let request = ctx.autoscaling.delete_auto_scaling_group().auto_scaling_group_name(name).force_delete(true);
        match ctx.call(Service::AutoScaling, "DeleteAutoScalingGroup", request.send()).await {
            Ok(_) => {}
            Err(e) if e.detail.contains("not found") => return Ok(()),
            Err(e) => return Err(e),
        }
        let what = format!("deletion of Auto Scaling group {name}");
        crate::aws::wait::until_status(
            &what,
            std::time::Duration::from_secs(1800),
            || describe(ctx, name),
            |g| match g {
                None => crate::aws::wait::Status::Reached(()),
                Some(_) => crate::aws::wait::Status::Pending("Delete in progress".to_string()),
            },
        )
        .await
    }
}

/// UpdateAutoScalingGroup with the stack's settings. Sizes go only when the stack changed them
/// (`old` is the recorded inputs; `None`: adopting a group this apply created): a desired
/// capacity the Cluster Autoscaler moved is not drift, and resending the stack's value would
/// scale in ("If a scale-in activity occurs as a result of a new DesiredCapacity value that is
/// lower than the current size of the group, the Auto Scaling group uses its termination policy
/// to determine which instances to terminate", botocore autoscaling 2011-01-01,
/// UpdateAutoScalingGroup) — on every tag or template change. A new MinSize above the current
/// size raises the desired capacity itself (same doc), as managed node groups do.
async fn update_group(ctx: &Ctx, i: &Attrs, name: &str, old: Option<&Attrs>) -> Result<()> {
    let (min, desired, max) = sizes(i);
    let was = old.map(sizes);
    let (lt, mixed) = placement(i, old);
    let call = ctx
        .autoscaling
        .update_auto_scaling_group()
        .auto_scaling_group_name(name)
        .set_min_size(was.is_none_or(|w| w.0 != min).then_some(min))
        .set_max_size(was.is_none_or(|w| w.2 != max).then_some(max))
        .set_desired_capacity(was.is_some_and(|w| w.1 != desired).then_some(desired))
        .vpc_zone_identifier(strings(i.get("subnets")).join(","))
        .set_launch_template(lt)
        .set_mixed_instances_policy(mixed)
        .set_capacity_reservation_specification(reservation(i, old))
        .capacity_rebalance(i.get("capacity_rebalance").and_then(Value::as_bool).unwrap_or(false));
    propagated(|| ctx.call(Service::AutoScaling, "UpdateAutoScalingGroup", call.clone().send())).await?;
    Ok(())
}

/// How long a new instance profile may take to reach Auto Scaling.
const PROFILE_PROPAGATION: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs an Auto Scaling create/update, retrying while the template's new instance profile has
/// not propagated: Auto Scaling validates it at CreateAutoScalingGroup and
/// UpdateAutoScalingGroup and answers `ValidationError` "You must use a valid fully-formed launch
/// template. Value (…) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance
/// Profile name" for a minute or two after IAM made it (hashicorp/terraform-provider-aws#5633
/// retries it for 2 minutes; eksctl-io/eksctl#8039). Backoff 1 s doubling to 15 s; nothing was
/// created by a refused call.
async fn propagated<T, F, Fut>(mut call: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let deadline = std::time::Instant::now() + PROFILE_PROPAGATION;
    let mut pause = std::time::Duration::from_secs(1);
    loop {
        match call().await {
            Err(e) if profile_not_ready(&e) && std::time::Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(15));
            }
            other => return other,
        }
    }
}

fn profile_not_ready(e: &crate::aws::AwsError) -> bool {
    e.has_code("ValidationError") && e.detail.contains("Invalid IAM Instance Profile")
}

async fn describe(ctx: &Ctx, name: &str) -> Result<Option<AutoScalingGroup>> {
    let request = ctx.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(name);
    let out = ctx.call(Service::AutoScaling, "DescribeAutoScalingGroups", request.send()).await?;
    Ok(out.auto_scaling_groups().iter().find(|g| g.auto_scaling_group_name() == Some(name)).cloned())
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_list).unwrap_or_default().iter().filter_map(|x| x.as_str().map(str::to_string)).collect()
}

fn sizes(i: &Attrs) -> (i32, i32, i32) {
    let t = i.get("scaling").and_then(Value::as_table);
    let n = |k: &str| t.and_then(|t| t.get(k)).and_then(Value::as_int).map_or(1, i32_of);
    (n("min"), n("desired"), n("max"))
}

fn template_spec(i: &Attrs) -> LaunchTemplateSpecification {
    let version = int_attr(i, "launch_template_version").map_or("$Default".to_string(), |v| v.to_string());
    LaunchTemplateSpecification::builder().launch_template_id(str_attr(i, "launch_template")).version(version).build()
}

/// The template alone, or a mixed instances policy when the group lists types or mixes
/// On-Demand and Spot (the two are exclusive in CreateAutoScalingGroup).
///
/// `old` (an update's recorded inputs): a spot_max_price it had and `i` lacks is sent as ""
/// — "To remove a maximum price that you previously set, include the property but specify an
/// empty string" (botocore autoscaling 2011-01-01, InstancesDistribution.SpotMaxPrice); left
/// out, the old price would stay.
fn placement(i: &Attrs, old: Option<&Attrs>) -> (Option<LaunchTemplateSpecification>, Option<MixedInstancesPolicy>) {
    let types = strings(i.get("instance_types"));
    let mixed = i.get("mixed_instances").and_then(Value::as_table);
    if types.is_empty() && mixed.is_none() {
        return (Some(template_spec(i)), None);
    }
    let overrides: Vec<LaunchTemplateOverrides> =
        types.iter().map(|t| LaunchTemplateOverrides::builder().instance_type(t).build()).collect();
    let lt = LaunchTemplate::builder()
        .launch_template_specification(template_spec(i))
        .set_overrides(Some(overrides).filter(|o| !o.is_empty()))
        .build();
    let mut dist = InstancesDistribution::builder();
    if let Some(m) = mixed {
        let n = |k: &str| m.get(k).and_then(Value::as_int).map(i32_of);
        let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        dist = dist
            .set_on_demand_base_capacity(n("on_demand_base_capacity"))
            .set_on_demand_percentage_above_base_capacity(n("on_demand_percentage_above_base"))
            .set_spot_allocation_strategy(s("spot_allocation_strategy"))
            .set_on_demand_allocation_strategy(s("on_demand_allocation_strategy"))
            .set_spot_instance_pools(n("spot_instance_pools"))
            .set_spot_max_price(m.get("spot_max_price").and_then(Value::as_f64).map(|p| p.to_string()));
        let had_price = old
            .and_then(|o| o.get("mixed_instances"))
            .and_then(Value::as_table)
            .is_some_and(|o| o.contains_key("spot_max_price"));
        if had_price && !m.contains_key("spot_max_price") {
            dist = dist.spot_max_price("");
        }
    }
    (None, Some(MixedInstancesPolicy::builder().launch_template(lt).instances_distribution(dist.build()).build()))
}

/// The group's CapacityReservationSpecification. A reservation `old` had and `i` lacks is sent
/// as preference "default" (the group's setting without one, CapacityReservationPreference in
/// botocore autoscaling 2011-01-01): fields left out of UpdateAutoScalingGroup stay as they were.
fn reservation(i: &Attrs, old: Option<&Attrs>) -> Option<CapacityReservationSpecification> {
    let Some(c) = i.get("capacity_reservation").and_then(Value::as_table) else {
        return old.and_then(|o| o.get("capacity_reservation")).map(|_| {
            CapacityReservationSpecification::builder()
                .capacity_reservation_preference(CapacityReservationPreference::Default)
                .build()
        });
    };
    let ids = strings(c.get("ids"));
    let target =
        (!ids.is_empty()).then(|| CapacityReservationTarget::builder().set_capacity_reservation_ids(Some(ids)).build());
    Some(
        CapacityReservationSpecification::builder()
            .capacity_reservation_preference(CapacityReservationPreference::from(
                c.get("preference").and_then(Value::as_str).unwrap_or("default"),
            ))
            .set_capacity_reservation_target(target)
            .build(),
    )
}

/// The tags the nodes and the tools around them need, besides gpustack's and the user's:
/// `kubernetes.io/cluster/<cluster> = owned` (the Kubernetes AWS cloud provider finds its
/// instances by it), and the Cluster Autoscaler's auto-discovery tags
/// `k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>` (its AWS
/// README, "Auto-Discovery Setup"). All propagate to the instances.
fn wanted_tags(ctx: &Ctx, address: &str, i: &Attrs) -> Vec<(String, String)> {
    let cluster = str_attr(i, "cluster");
    let mut t = tags::all_tags(ctx, address, i);
    t.push((format!("kubernetes.io/cluster/{cluster}"), "owned".into()));
    t.push(("k8s.io/cluster-autoscaler/enabled".into(), "true".into()));
    t.push((format!("k8s.io/cluster-autoscaler/{cluster}"), "owned".into()));
    t
}

fn group_tags(ctx: &Ctx, address: &str, i: &Attrs, name: &str) -> Vec<Tag> {
    wanted_tags(ctx, address, i)
        .into_iter()
        .map(|(k, v)| {
            Tag::builder()
                .resource_id(name)
                .resource_type("auto-scaling-group")
                .key(k)
                .value(v)
                .propagate_at_launch(true)
                .build()
        })
        .collect()
}

fn is_generated(k: &str) -> bool {
    k.starts_with("kubernetes.io/cluster/") || k.starts_with("k8s.io/cluster-autoscaler/")
}

fn is_ours(ctx: &Ctx, g: &AutoScalingGroup, address: &str) -> bool {
    let m = tag_map(g);
    m.get(tags::STACK) == Some(&ctx.stack) && m.get(tags::ADDRESS).map(String::as_str) == Some(address)
}

fn tag_map(g: &AutoScalingGroup) -> BTreeMap<String, String> {
    g.tags().iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

async fn sync_tags(ctx: &Ctx, name: &str, old: &Attrs, new: &Attrs) -> Result<()> {
    let changes = tags::changes(old, new);
    let tag = |k: String, v: Option<String>| {
        Tag::builder()
            .resource_id(name)
            .resource_type("auto-scaling-group")
            .key(k)
            .set_value(v)
            .propagate_at_launch(true)
            .build()
    };
    if !changes.removed.is_empty() {
        let removed = changes.removed.into_iter().map(|k| tag(k, None)).collect();
        let call = ctx.autoscaling.delete_tags().set_tags(Some(removed));
        ctx.call(Service::AutoScaling, "DeleteTags", call.send()).await?;
    }
    if !changes.set.is_empty() {
        let set = changes.set.into_iter().map(|(k, v)| tag(k, Some(v))).collect();
        let call = ctx.autoscaling.create_or_update_tags().set_tags(Some(set));
        ctx.call(Service::AutoScaling, "CreateOrUpdateTags", call.send()).await?;
    }
    Ok(())
}

fn observe(g: &AutoScalingGroup) -> Observed {
    let all = tag_map(g);
    let name = g.auto_scaling_group_name().unwrap_or_default();
    let user: BTreeMap<String, String> =
        all.iter().filter(|(k, _)| !is_generated(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut subnets: Vec<Value> = g
        .vpc_zone_identifier()
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| Value::str(s.trim()))
        .collect();
    subnets.sort_by_key(Value::interpolate);
    let attrs = Attrs::from([
        ("name".into(), Value::str(name)),
        ("subnets".into(), Value::List(subnets)),
        (
            "scaling".into(),
            Value::Table(BTreeMap::from([
                ("min".into(), Value::Int(g.min_size().unwrap_or(0).into())),
                ("desired".into(), Value::Int(g.desired_capacity().unwrap_or(0).into())),
                ("max".into(), Value::Int(g.max_size().unwrap_or(0).into())),
            ])),
        ),
        ("tags".into(), tags::observed(&user)),
    ]);
    Observed::tagged(&all, recorded(name, Some(g)), attrs)
}

fn recorded(name: &str, g: Option<&AutoScalingGroup>) -> Recorded {
    Recorded {
        id: name.to_string(),
        outputs: Attrs::from([
            ("name".into(), Value::str(name)),
            ("arn".into(), Value::str(g.and_then(|g| g.auto_scaling_group_arn()).unwrap_or_default())),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pairs: Vec<(&str, Value)>) -> Value {
        Value::Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    #[test]
    fn spot_groups_get_a_mixed_policy_and_rebalance() {
        let mut i: Attrs = [
            ("launch_template".to_string(), Value::str("lt-1")),
            ("launch_template_version".to_string(), Value::Int(3)),
            ("instance_types".to_string(), Value::List(vec![Value::str("g6e.2xlarge"), Value::str("g6.2xlarge")])),
            (
                "mixed_instances".to_string(),
                t(vec![("on_demand_percentage_above_base", Value::Int(0)), ("spot_max_price", Value::Float(1.5))]),
            ),
        ]
        .into();
        SelfManagedNodeGroup.normalize(&mut i);
        assert_eq!(i["capacity_rebalance"], Value::Bool(true));
        let (lt, mixed) = placement(&i, None);
        assert!(lt.is_none());
        let mixed = mixed.unwrap();
        let d = mixed.instances_distribution().unwrap();
        assert_eq!(d.spot_allocation_strategy(), Some("price-capacity-optimized"));
        assert_eq!(d.on_demand_percentage_above_base_capacity(), Some(0));
        assert_eq!(d.spot_max_price(), Some("1.5"));
        assert_eq!(d.spot_instance_pools(), None);
        let lt = mixed.launch_template().unwrap();
        assert_eq!(lt.overrides().len(), 2);
        assert_eq!(lt.launch_template_specification().unwrap().version(), Some("3"));
    }

    #[test]
    fn an_on_demand_group_on_its_template_alone_does_not_rebalance() {
        let mut i: Attrs = [("launch_template".to_string(), Value::str("lt-1"))].into();
        SelfManagedNodeGroup.normalize(&mut i);
        assert_eq!(i["capacity_rebalance"], Value::Bool(false));
        let (lt, mixed) = placement(&i, None);
        assert!(mixed.is_none());
        assert_eq!(lt.unwrap().version(), Some("$Default"));
    }

    /// Fields left out of UpdateAutoScalingGroup stay: removing spot_max_price sends "", and
    /// removing capacity_reservation sends preference "default" (review r19-lt m4).
    #[test]
    fn removed_spot_price_and_reservation_reach_auto_scaling() {
        let mixed = |price: bool| {
            let mut m = vec![("on_demand_percentage_above_base", Value::Int(0))];
            if price {
                m.push(("spot_max_price", Value::Float(1.5)));
            }
            t(m)
        };
        let mut old: Attrs = [
            ("launch_template".to_string(), Value::str("lt-1")),
            ("instance_types".to_string(), Value::List(vec![Value::str("g6e.2xlarge"), Value::str("g6.2xlarge")])),
            ("mixed_instances".to_string(), mixed(true)),
            ("capacity_reservation".to_string(), t(vec![("preference", Value::str("capacity-reservations-first"))])),
        ]
        .into();
        let mut new = old.clone();
        new.insert("mixed_instances".into(), mixed(false));
        new.remove("capacity_reservation");
        SelfManagedNodeGroup.normalize(&mut old);
        SelfManagedNodeGroup.normalize(&mut new);
        let (_, m) = placement(&new, Some(&old));
        assert_eq!(m.unwrap().instances_distribution().unwrap().spot_max_price(), Some(""));
        let (_, m) = placement(&new, Some(&new));
        assert_eq!(m.unwrap().instances_distribution().unwrap().spot_max_price(), None, "nothing to remove");
        let r = reservation(&new, Some(&old)).expect("the removal is sent");
        assert_eq!(r.capacity_reservation_preference(), Some(&CapacityReservationPreference::Default));
        assert!(reservation(&new, Some(&new)).is_none());
    }
}
