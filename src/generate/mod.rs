//! `gpustack import generate`: reads a live EKS cluster and what it stands on, imports each
//! object with its kind's [`Kind::import`] (the one mapping from AWS to attributes; nothing
//! here maps attributes itself), and writes a stack file ([`write`]).
//!
//! Discovery, in waves of independent reads (each held to its service's concurrency limit by
//! [`Ctx::call`]):
//! 1. `eks:DescribeCluster`: the VPC, the cluster's subnets and additional security groups, its
//!    role, its OIDC issuer. The security group EKS makes for the cluster
//!    (`clusterSecurityGroupId`) is not imported: EKS creates and deletes it with the cluster,
//!    and the stack refers to it as `${eks_cluster.NAME.security_group_id}` (EKS UG
//!    `sec-group-reqs`: "Amazon EKS creates a cluster security group").
//! 2. At once: the VPC's subnets (`ec2:DescribeSubnets`), NAT gateways
//!    (`ec2:DescribeNatGateways`) and endpoints (`ec2:DescribeVpcEndpoints`); the cluster's
//!    add-ons, access entries, Pod Identity associations and managed node groups
//!    (`eks:List*`, `eks:DescribeNodegroup`); the IAM OIDC provider of its issuer
//!    (`iam:ListOpenIDConnectProviders`).
//! 3. Every object so far imported (`Kind::import`, in parallel).
//! 4. What the imported attributes name that is not in the file yet: roles of Pod Identity
//!    associations, security groups of launch templates, the reservations (`cr-…`) and
//!    placement groups launch templates target (`ec2:DescribeCapacityReservations` tells an
//!    ODCR from a Capacity Block by its `ReservationType`), imported in turn.
//!
//! Access entries EKS makes itself for the node role of a managed node group (type
//! `EC2_LINUX`/`EC2_WINDOWS`) are left out: EKS creates them when a managed node group is
//! created with access entries on, and they belong to the node group's lifecycle (EKS UG
//! `access-entries`, "Amazon EKS automatically creates access entries for ... managed node
//! groups"; terraform-aws-eks documents the same and does not manage them either).
//!
//! All subnets of the VPC are imported, not only the cluster's: the VPC is imported, so
//! destroying the stack must be able to delete it, which AWS refuses while a subnet is left.

pub mod write;

use std::collections::BTreeSet;

use anyhow::{Context, bail};
use aws_sdk_ec2::types::Filter;

use crate::aws::{Absent, Ctx, Service};
use crate::resources::{self, Kind};
use crate::value::Value;
use write::Found;

/// The AWS read actions discovery makes itself (each kind's `import` reads with the actions
/// its `actions()` lists): documented in the README so a read-only role can run generate.
pub const DISCOVERY_ACTIONS: &[&str] = &[
    "eks:DescribeCluster",
    "eks:ListAddons",
    "eks:ListAccessEntries",
    "eks:ListPodIdentityAssociations",
    "eks:ListNodegroups",
    "eks:DescribeNodegroup",
    "ec2:DescribeSubnets",
    "ec2:DescribeNatGateways",
    "ec2:DescribeVpcEndpoints",
    "ec2:DescribeCapacityReservations",
    "iam:ListOpenIDConnectProviders",
    // The eks_cluster import reads its control-plane log group's retention (`log_retention_days`);
    // without this permission it reports the retention as not readable instead.
    "logs:DescribeLogGroups",
];

/// What to read and how to write it.
pub struct Request {
    pub cluster: String,
    pub region: String,
    pub stack_name: String,
    pub prevent_destroy: bool,
}

/// One object discovery found: its kind, its `[import]` id and a name hint.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Candidate {
    pub kind: &'static str,
    pub id: String,
    pub hint: String,
}

/// The result: the file's text, what it holds, and what could not be imported.
pub struct Generated {
    pub text: String,
    /// (address, import id) of every object in the file, in the file's order.
    pub imported: Vec<(String, String)>,
    /// (kind, id, why) of objects found but left out of the file.
    pub skipped: Vec<(String, String, String)>,
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// The role name of a role ARN (`arn:aws:iam::1:role/path/name` → `name`).
pub fn role_name(arn: &str) -> Option<&str> {
    let rest = arn.split_once(":role/")?.1;
    rest.rsplit('/').next().filter(|n| !n.is_empty())
}

/// The IAM OIDC provider ARN of an issuer: IAM names providers by the issuer's host and path
/// (IAM API `CreateOpenIDConnectProvider`: the ARN ends `oidc-provider/<url without https://>`).
pub fn provider_matches(arn: &str, issuer: &str) -> bool {
    let want = issuer.trim_start_matches("https://").trim_end_matches('/');
    arn.split_once(":oidc-provider/").is_some_and(|(_, p)| p.trim_end_matches('/') == want)
}

/// Reads the cluster and what it stands on, imports every object and writes the file.
pub async fn generate(ctx: &Ctx, req: &Request, progress: &(dyn Fn(&str) + Sync)) -> anyhow::Result<Generated> {
    let name = req.cluster.as_str();
    progress(&format!("reading EKS cluster {name} in {}", req.region));
    let described = ctx.call(Service::Eks, "DescribeCluster", ctx.eks.describe_cluster().name(name).send()).await;
    let Some(out) = described.absent_ok()? else {
        bail!(
            "there is no EKS cluster named {name} in {}: check the name and --region (`aws eks list-clusters --region {}` lists them)",
            req.region,
            req.region
        );
    };
    let cluster = out.cluster.context("DescribeCluster answered without a cluster")?;
    let vpc_cfg = cluster
        .resources_vpc_config
        .clone()
        .unwrap_or_else(|| aws_sdk_eks::types::VpcConfigResponse::builder().build());
    let vpc_id = vpc_cfg.vpc_id.clone().context("the cluster's DescribeCluster shows no VPC")?;
    let cluster_sg = vpc_cfg.cluster_security_group_id.clone();
    let issuer = cluster.identity.as_ref().and_then(|i| i.oidc.as_ref()).and_then(|o| o.issuer.clone());

    let mut cands: BTreeSet<Candidate> = BTreeSet::new();
    let mut add = |kind: &'static str, id: &str, hint: &str| {
        cands.insert(Candidate { kind, id: id.to_string(), hint: hint.to_string() });
    };
    add("eks_cluster", name, name);
    add("vpc", &vpc_id, name);
    if let Some(role) = cluster.role_arn.as_deref().and_then(role_name) {
        add("iam_role", role, role);
    }
    for sg in vpc_cfg.security_group_ids() {
        if Some(sg) != cluster_sg.as_ref() {
            add("security_group", sg, sg);
        }
    }
    for s in vpc_cfg.subnet_ids() {
        add("subnet", s, s);
    }

    progress(
        "listing the VPC's subnets, NAT gateways and endpoints, and the cluster's add-ons, access entries, Pod Identity associations, node groups and OIDC provider",
    );
    let subnets = ctx.all_pages(
        Service::Ec2,
        "DescribeSubnets",
        ctx.ec2.describe_subnets().filters(filter("vpc-id", &vpc_id)).into_paginator().send(),
        |p| p.subnets.unwrap_or_default(),
    );
    let nats = ctx.all_pages(
        Service::Ec2,
        "DescribeNatGateways",
        ctx.ec2.describe_nat_gateways().filter(filter("vpc-id", &vpc_id)).into_paginator().send(),
        |p| p.nat_gateways.unwrap_or_default(),
    );
    let endpoints = ctx.all_pages(
        Service::Ec2,
        "DescribeVpcEndpoints",
        ctx.ec2.describe_vpc_endpoints().filters(filter("vpc-id", &vpc_id)).into_paginator().send(),
        |p| p.vpc_endpoints.unwrap_or_default(),
    );
    let addons = ctx.all_pages(
        Service::Eks,
        "ListAddons",
        ctx.eks.list_addons().cluster_name(name).into_paginator().send(),
        |p| p.addons.unwrap_or_default(),
    );
    let entries = ctx.all_pages(
        Service::Eks,
        "ListAccessEntries",
        ctx.eks.list_access_entries().cluster_name(name).into_paginator().send(),
        |p| p.access_entries.unwrap_or_default(),
    );
    let pods = ctx.all_pages(
        Service::Eks,
        "ListPodIdentityAssociations",
        ctx.eks.list_pod_identity_associations().cluster_name(name).into_paginator().send(),
        |p| p.associations.unwrap_or_default(),
    );
    let nodegroups = async {
        let names = ctx
            .all_pages(
                Service::Eks,
                "ListNodegroups",
                ctx.eks.list_nodegroups().cluster_name(name).into_paginator().send(),
                |p| p.nodegroups.unwrap_or_default(),
            )
            .await?;
        let mut set = tokio::task::JoinSet::new();
        for ng in names {
            let (ctx, cluster) = (ctx.clone(), name.to_string());
            set.spawn(async move {
                let req = ctx.eks.describe_nodegroup().cluster_name(&cluster).nodegroup_name(&ng).send();
                ctx.call(Service::Eks, "DescribeNodegroup", req).await.absent_ok()
            });
        }
        let mut groups = vec![];
        while let Some(r) = set.join_next().await {
            if let Some(out) = r.context("a DescribeNodegroup task failed")?? {
                groups.extend(out.nodegroup);
            }
        }
        anyhow::Ok(groups)
    };
    let providers = async {
        let Some(issuer) = issuer.as_deref() else { return Ok(vec![]) };
        let out = ctx
            .call(Service::Iam, "ListOpenIDConnectProviders", ctx.iam.list_open_id_connect_providers().send())
            .await?;
        Ok::<_, crate::aws::AwsError>(
            out.open_id_connect_provider_list()
                .iter()
                .filter_map(|p| p.arn.clone())
                .filter(|a| provider_matches(a, issuer))
                .collect::<Vec<_>>(),
        )
    };
    let (subnets, nats, endpoints, addons, entries, pods, nodegroups, providers) =
        tokio::join!(subnets, nats, endpoints, addons, entries, pods, nodegroups, providers);
    // A listing that fails (a permission the role lacks, an API the endpoint does not offer)
    // leaves that kind out, said in the file and on stderr, rather than losing the whole file.
    let mut unlisted: Vec<(String, String, String)> = vec![];

    for s in listed(subnets, "subnet", &mut unlisted) {
        if let Some(id) = s.subnet_id() {
            add("subnet", id, id);
        }
    }
    use aws_sdk_ec2::types::{NatGatewayState, State as EndpointState};
    for n in listed(nats, "nat_gateway", &mut unlisted) {
        // A deleted gateway stays listed for about an hour (EC2 API DescribeNatGateways).
        if matches!(n.state(), Some(NatGatewayState::Available | NatGatewayState::Pending))
            && let Some(id) = n.nat_gateway_id()
        {
            add("nat_gateway", id, id);
        }
    }
    for e in listed(endpoints, "vpc_endpoint", &mut unlisted) {
        let gone = matches!(
            e.state(),
            Some(EndpointState::Deleted | EndpointState::Deleting | EndpointState::Rejected | EndpointState::Failed)
        );
        if !gone && let Some(id) = e.vpc_endpoint_id() {
            let hint = e.service_name().and_then(|s| s.rsplit('.').next()).unwrap_or(id).to_string();
            add("vpc_endpoint", id, &hint);
        }
    }
    for a in listed(addons, "eks_addon", &mut unlisted) {
        add("eks_addon", &format!("{name}:{a}"), &a);
    }
    let nodegroups = listed(nodegroups.map_err(|e| format!("{e:#}")), "node_group", &mut unlisted);
    let node_roles: BTreeSet<String> = nodegroups.iter().filter_map(|g| g.node_role.clone()).collect();
    for g in &nodegroups {
        let Some(ng) = g.nodegroup_name() else { continue };
        add("node_group", &format!("{name}:{ng}"), ng);
        if let Some(role) = g.node_role().and_then(role_name) {
            add("iam_role", role, role);
        }
        if let Some(lt) = g.launch_template().and_then(|l| l.id()) {
            let hint = g.launch_template().and_then(|l| l.name()).unwrap_or(ng);
            add("launch_template", lt, hint);
        }
    }
    for principal in listed(entries, "eks_access_entry", &mut unlisted) {
        if node_roles.contains(&principal) {
            continue;
        }
        let hint = principal.rsplit(['/', ':']).next().unwrap_or("access").to_string();
        add("eks_access_entry", &format!("{name}:{principal}"), &hint);
    }
    for p in listed(pods, "pod_identity_association", &mut unlisted) {
        // Review imp-gen M3: "If defined, the association is owned by an Amazon EKS add-on"
        // (botocore eks `PodIdentityAssociationSummary.ownerArn`); the add-on's import reads it
        // as `eks_addon.pod_identity`, so importing it again would manage it twice.
        if let (Some(owner), Some(id)) = (p.owner_arn(), p.association_id()) {
            let why = format!("owned by the add-on {owner}: its `pod_identity` says it");
            unlisted.push(("pod_identity_association".to_string(), format!("{name}:{id}"), why));
            continue;
        }
        if let Some(id) = p.association_id() {
            let hint = format!("{}_{}", p.namespace().unwrap_or_default(), p.service_account().unwrap_or_default());
            add("pod_identity_association", &format!("{name}:{id}"), &hint);
        }
    }
    for arn in listed(providers, "oidc_provider", &mut unlisted) {
        add("oidc_provider", &arn, name);
    }

    // Import wave 1, then follow what the imported attributes name.
    let mut results: Vec<(Candidate, Outcome)> = import_all(ctx, cands.iter().cloned().collect(), progress).await;
    let mut seen = cands.clone();
    let followed = follow(ctx, &results, cluster_sg.as_deref(), &seen).await?;
    let fresh: Vec<Candidate> = followed.into_iter().filter(|c| seen.insert(c.clone())).collect();
    if !fresh.is_empty() {
        results.extend(import_all(ctx, fresh, progress).await);
    }

    let mut found = vec![];
    let mut skipped = unlisted;
    for (c, outcome) in results {
        match outcome {
            Outcome::Imported(kind, imported) => {
                found.push(Found { kind, import_id: c.id, hint: c.hint, imported: *imported })
            }
            Outcome::Skipped(why) => skipped.push((c.kind.to_string(), c.id, why)),
        }
    }
    let opts = write::Options {
        stack_name: req.stack_name.clone(),
        region: req.region.clone(),
        cluster: name.to_string(),
        prevent_destroy: req.prevent_destroy,
    };
    let mut text = write::render(&found, &opts);
    if !skipped.is_empty() {
        text.push_str("\n# Found but not imported (add them by hand, or leave them outside the stack):\n");
        for (kind, id, why) in &skipped {
            text.push_str(&format!("# not imported: {kind} {id}: {}\n", why.replace('\n', " ")));
        }
    }
    let imported = write::addresses(&found, name);
    Ok(Generated { text, imported, skipped })
}

/// The items of a listing, or none with the failure recorded as (kind, "*", why).
fn listed<T, E: std::fmt::Display>(
    r: std::result::Result<Vec<T>, E>,
    kind: &str,
    unlisted: &mut Vec<(String, String, String)>,
) -> Vec<T> {
    r.unwrap_or_else(|e| {
        unlisted.push((kind.to_string(), "*".to_string(), format!("could not list them: {e}")));
        vec![]
    })
}

enum Outcome {
    Imported(&'static dyn Kind, Box<resources::Imported>),
    Skipped(String),
}

/// Imports every candidate with its kind's `import`, in parallel (each call holds its
/// service's slot only for the call, so the per-service limits hold).
async fn import_all(ctx: &Ctx, cands: Vec<Candidate>, progress: &(dyn Fn(&str) + Sync)) -> Vec<(Candidate, Outcome)> {
    progress(&format!("importing {} object{}", cands.len(), crate::stack::diag::plural(cands.len())));
    let mut set = tokio::task::JoinSet::new();
    for (i, c) in cands.iter().enumerate() {
        let (ctx, c) = (ctx.clone(), c.clone());
        set.spawn(async move {
            let Some(kind) = resources::kind(c.kind) else {
                return (i, Outcome::Skipped(format!("no kind {}", c.kind)));
            };
            if kind.import_id().is_none() {
                return (i, Outcome::Skipped(format!("gpustack cannot import a {} yet", c.kind)));
            }
            match kind.import(&ctx, &c.id).await {
                Ok(Some(imp)) => (i, Outcome::Imported(kind, Box::new(imp))),
                Ok(None) => (i, Outcome::Skipped("gone before it could be read".into())),
                Err(e) => (i, Outcome::Skipped(format!("{e}"))),
            }
        });
    }
    let mut out: Vec<Option<Outcome>> = cands.iter().map(|_| None).collect();
    while let Some(r) = set.join_next().await {
        match r {
            Ok((i, o)) => out[i] = Some(o),
            Err(e) => progress(&format!("an import task failed: {e}")),
        }
    }
    cands
        .into_iter()
        .zip(out)
        .map(|(c, o)| (c, o.unwrap_or_else(|| Outcome::Skipped("the import task failed".into()))))
        .collect()
}

/// Every string in a value tree.
fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Str(s) => out.push(s),
        Value::List(l) => l.iter().for_each(|x| strings(x, out)),
        Value::Table(t) => t.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// What imported objects name that discovery did not list: Pod Identity roles, launch
/// templates' security groups, reservations and placement groups.
async fn follow(
    ctx: &Ctx,
    results: &[(Candidate, Outcome)],
    cluster_sg: Option<&str>,
    seen: &BTreeSet<Candidate>,
) -> anyhow::Result<Vec<Candidate>> {
    let mut out = vec![];
    let mut reservations = BTreeSet::new();
    for (c, o) in results {
        let Outcome::Imported(_, imp) = o else { continue };
        let attrs = &imp.observed.attrs;
        match c.kind {
            "pod_identity_association" => {
                if let Some(role) = attrs.get("role").and_then(Value::as_str).and_then(role_name) {
                    out.push(Candidate { kind: "iam_role", id: role.into(), hint: role.into() });
                }
            }
            "launch_template" | "node_group" => {
                for (k, v) in attrs.iter().filter(|(k, _)| k.as_str() != "tags") {
                    let mut all = vec![];
                    strings(v, &mut all);
                    for s in all {
                        if s.starts_with("sg-") && Some(s) != cluster_sg {
                            out.push(Candidate { kind: "security_group", id: s.into(), hint: s.into() });
                        } else if s.starts_with("cr-") {
                            reservations.insert(s.to_string());
                        } else if k == "placement_group" && !s.is_empty() {
                            out.push(Candidate { kind: "placement_group", id: s.into(), hint: s.into() });
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let known: BTreeSet<(&str, &str)> = seen.iter().map(|c| (c.kind, c.id.as_str())).collect();
    out.retain(|c| !known.contains(&(c.kind, c.id.as_str())));
    if !reservations.is_empty() {
        let ids: Vec<String> = reservations.into_iter().collect();
        let req = ctx.ec2.describe_capacity_reservations().set_capacity_reservation_ids(Some(ids.clone())).send();
        let found = ctx.call(Service::Ec2, "DescribeCapacityReservations", req).await?;
        for r in found.capacity_reservations() {
            let Some(id) = r.capacity_reservation_id() else { continue };
            // ReservationType: "default" (an ODCR) or "capacity-block" (EC2 API
            // CapacityReservation.ReservationType, botocore ec2 CapacityReservationType).
            let block = r.reservation_type().is_some_and(|t| t.as_str() == "capacity-block");
            let kind = if block { "capacity_block" } else { "capacity_reservation" };
            let hint = r.instance_type().map(|t| t.replace('.', "_")).unwrap_or_else(|| id.to_string());
            out.push(Candidate { kind, id: id.into(), hint });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}
