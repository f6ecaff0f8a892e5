//! `vpc_endpoint`: an AWS service reached from private subnets without the internet.
//! `service = "s3"` is a gateway endpoint on the route tables of `subnets`; the others
//! (`ecr.api`, `ecr.dkr`, `ec2`, `sts`, `ssm`, `eks-auth`, `sqs`, `logs`, …) are interface endpoints
//! in `subnets` with `security_groups` and private DNS, so nodes reach the public service
//! names privately (EKS UG `private-clusters`: ec2, ecr.api, ecr.dkr, the S3 gateway and sts
//! are what nodes need to join and pull). Private DNS needs the VPC's DNS support and DNS
//! hostnames, which `vpc` always turns on.

use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, ResourceType, VpcEndpoint, VpcEndpointType};

use super::import_ec2::{imported, note, tag};
use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, str_attr, strings_attr};
use crate::aws::wait::{Status, until_status};
use crate::aws::{Absent, AwsError, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::value::{Attrs, Value};

pub struct VpcEndpointKind;

/// The short service names gpustack knows: `com.amazonaws.<region>.<name>`.
pub const SERVICES: &[&str] = &[
    "s3",
    "ecr.api",
    "ecr.dkr",
    "ec2",
    "sts",
    "ssm",
    "ssmmessages",
    "ec2messages",
    "eks",
    "eks-auth",
    // Karpenter's interruption queue ("com.amazonaws.<region>.sqs - For accessing SQS if
    // using interruption handling": Karpenter docs, Getting started → Private Clusters).
    "sqs",
    "logs",
    "elasticloadbalancing",
    "autoscaling",
    "xray",
];

const ATTRS: &[Attr] = &[
    Attr::req("vpc", Ty::Str, OnChange::Replace),
    Attr::req("service", Ty::Enum(SERVICES), OnChange::Replace),
    Attr::req("subnets", Ty::List(&Ty::Str), OnChange::Update),
    Attr::opt("security_groups", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    TAGS,
];

const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10 * 60);

fn is_gateway(service: &str) -> bool {
    service == "s3"
}

impl Schema for VpcEndpointKind {
    fn name(&self) -> &'static str {
        "vpc_endpoint"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("id", Ty::Str)]
    }
}

#[async_trait]
impl Kind for VpcEndpointKind {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:CreateVpcEndpoint",
            "ec2:ModifyVpcEndpoint",
            "ec2:DeleteVpcEndpoints",
            "ec2:DescribeVpcEndpoints",
            "ec2:DescribeRouteTables",
        ]
    }

    fn validate(&self, r: &crate::stack::Resource, diags: &mut Vec<crate::stack::Diagnostic>) {
        let service = r.attrs.get("service").and_then(|e| e.as_literal()).and_then(|v| v.as_str().map(str::to_string));
        if service.as_deref().is_some_and(|s| !is_gateway(s)) && !r.attrs.contains_key("security_groups") {
            diags.push(
                crate::stack::Diagnostic::error(
                    format!("`{}`: an interface endpoint needs `security_groups` that admit HTTPS from the nodes", r.address),
                    r.attrs.get("service").and_then(|e| e.span.clone()).or(r.span.clone()),
                )
                .help("without them AWS uses the VPC's default group, which admits only its own members, and nodes cannot reach the endpoint; e.g. security_groups = [\"${security_group.nodes.id}\"] with ingress 443 from the VPC"),
            );
        }
        if service.as_deref().is_some_and(is_gateway)
            && let Some(e) = r.attrs.get("security_groups")
        {
            diags.push(
                crate::stack::Diagnostic::error(
                    "an s3 gateway endpoint takes no `security_groups`: it is a route, not an interface",
                    e.span.clone(),
                )
                .help("remove security_groups; the endpoint goes on the route tables of `subnets`"),
            );
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        for k in ["subnets", "security_groups"] {
            if let Some(Value::List(l)) = inputs.get_mut(k) {
                l.sort_by_key(|v| v.interpolate());
            }
        }
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let inp = req.inputs;
        let service = str_attr(inp, "service");
        let vpc = str_attr(inp, "vpc");
        let mut call = ctx
            .ec2
            .create_vpc_endpoint()
            .vpc_id(vpc)
            .service_name(service_name(ctx, service))
            .client_token(req.token)
            .tag_specifications(tags::ec2_spec(ctx, ResourceType::VpcEndpoint, req.address, inp));
        if is_gateway(service) {
            call = call
                .vpc_endpoint_type(VpcEndpointType::Gateway)
                .set_route_table_ids(Some(route_tables(ctx, vpc, &strings_attr(inp, "subnets")).await?));
        } else {
            call = call
                .vpc_endpoint_type(VpcEndpointType::Interface)
                .set_subnet_ids(Some(strings_attr(inp, "subnets")))
                .set_security_group_ids(Some(strings_attr(inp, "security_groups")).filter(|g| !g.is_empty()))
                .private_dns_enabled(true);
        }
        let out = ctx.call(Service::Ec2, "CreateVpcEndpoint", call.send()).await?;
        let id = out.vpc_endpoint().and_then(|e| e.vpc_endpoint_id()).unwrap_or_default().to_string();
        let ep = until_status(
            &format!("VPC endpoint {id}"),
            TIMEOUT,
            || describe(ctx, &id),
            |e| match e {
                Some(e) if state_is(&e, &["available"]) => Status::Reached(e),
                Some(e) if state_is(&e, &["failed", "rejected"]) => Status::Failed(AwsError {
                    operation: "CreateVpcEndpoint",
                    code: e.last_error().and_then(|l| l.code()).map(str::to_string),
                    detail: format!(
                        "VPC endpoint {id} is {}: {}",
                        e.state().map_or("failed", |s| s.as_str()),
                        e.last_error().and_then(|l| l.message()).unwrap_or("no reason given")
                    ),
                }),
                e => Status::Pending(e.and_then(|e| e.state().map(|s| s.as_str().to_string())).unwrap_or_default()),
            },
        )
        .await?;
        Ok(recorded(&ep))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let pages = ctx.ec2.describe_vpc_endpoints().filters(tags::stack_filter(ctx)).into_paginator().send();
        let all =
            ctx.all_pages(Service::Ec2, "DescribeVpcEndpoints", pages, |p| p.vpc_endpoints.unwrap_or_default()).await?;
        let prefix = service_name(ctx, "");
        Ok(all
            .iter()
            .filter(|e| !state_is(e, &["deleted", "deleting"]))
            .map(|e| {
                let all = tags::ec2_map(e.tags());
                let attrs = self.attrs_of(e, &prefix, &all);
                Observed::tagged(&all, recorded(e), attrs)
            })
            .collect())
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("vpce-…")
    }

    /// An interface endpoint's inputs as refresh reads them; a gateway endpoint (s3) lists
    /// route tables, not subnets (EC2 API `VpcEndpoint.RouteTableIds`), so its `subnets` are
    /// the VPC's subnets whose route table (their own, else the main one: VPC UG "Subnet
    /// route tables") is among the endpoint's. What gpustack never sets goes to `unexpressed`:
    /// private DNS off, a policy other than the default full access, dual-stack addressing, and
    /// a route table no subnet uses. A service the language has no name for is refused.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let Some(e) = describe(ctx, id).await? else { return Ok(None) };
        if state_is(&e, &["deleted", "deleting", "failed", "rejected"]) {
            return Ok(None);
        }
        let prefix = service_name(ctx, "");
        let service = e.service_name().unwrap_or_default();
        let short = service.strip_prefix(&prefix).unwrap_or_default();
        let kind = e.vpc_endpoint_type().map(|t| t.as_str()).unwrap_or_default();
        let expected = if is_gateway(short) { "Gateway" } else { "Interface" };
        if !SERVICES.contains(&short) || !kind.eq_ignore_ascii_case(expected) {
            return Err(AwsError {
                operation: "DescribeVpcEndpoints",
                code: None,
                detail: format!(
                    "VPC endpoint {id} is a {kind} endpoint for {service}: a vpc_endpoint says one of {} (s3 as a gateway, the rest as interfaces) in this region; leave it out of the stack",
                    SERVICES.join(", ")
                ),
            });
        }
        let all = tags::ec2_map(e.tags());
        let mut attrs = self.attrs_of(&e, &prefix, &all);
        let mut unexpressed = vec![];
        if is_gateway(short) {
            let vpc = e.vpc_id().unwrap_or_default();
            let (subnets, unused) = subnets_on(ctx, vpc, e.route_table_ids()).await?;
            attrs.insert("subnets".into(), Value::List(subnets.into_iter().map(Value::str).collect()));
            if !unused.is_empty() {
                unexpressed.push(note("route_table_ids", unused.join(", ")));
            }
        } else if e.private_dns_enabled() == Some(false) {
            unexpressed.push(note("private_dns_enabled", "false"));
        }
        if let Some(doc) = e.policy_document().filter(|d| !is_full_access(d)) {
            unexpressed.push(note("policy_document", doc));
        }
        if let Some(t) = e.ip_address_type().filter(|t| t.as_str() != "ipv4") {
            unexpressed.push(note("ip_address_type", t.as_str()));
        }
        self.normalize(&mut attrs);
        Ok(Some(imported(recorded(&e), attrs, unexpressed)))
    }

    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, _outputs: &Attrs) -> Result<()> {
        tag(ctx, &[id.to_string()], address, &[]).await
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
        let has = |k: &str| changed.iter().any(|c| c == k);
        let diff = |k: &str| {
            let (o, n) = (strings_attr(old, k), strings_attr(new, k));
            let add: Vec<String> = n.iter().filter(|x| !o.contains(x)).cloned().collect();
            let remove: Vec<String> = o.iter().filter(|x| !n.contains(x)).cloned().collect();
            (add, remove)
        };
        if has("subnets") || has("security_groups") {
            let mut call = ctx.ec2.modify_vpc_endpoint().vpc_endpoint_id(id);
            if is_gateway(str_attr(new, "service")) {
                let vpc = str_attr(new, "vpc");
                let (o, n) = (
                    route_tables(ctx, vpc, &strings_attr(old, "subnets")).await?,
                    route_tables(ctx, vpc, &strings_attr(new, "subnets")).await?,
                );
                call = call
                    .set_add_route_table_ids(Some(n.iter().filter(|x| !o.contains(x)).cloned().collect()))
                    .set_remove_route_table_ids(Some(o.iter().filter(|x| !n.contains(x)).cloned().collect()));
            } else {
                let (add, remove) = diff("subnets");
                call = call.set_add_subnet_ids(Some(add)).set_remove_subnet_ids(Some(remove));
                let (add, remove) = diff("security_groups");
                call = call.set_add_security_group_ids(Some(add)).set_remove_security_group_ids(Some(remove));
            }
            ctx.call(Service::Ec2, "ModifyVpcEndpoint", call.send()).await?;
        }
        tags::sync_ec2(ctx, id, old, new).await?;
        let ep = describe(ctx, id).await?;
        Ok(ep.as_ref().map(recorded).unwrap_or_else(|| Recorded::id_only(id)))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let request = ctx.ec2.delete_vpc_endpoints().vpc_endpoint_ids(id);
        let Some(out) = ctx.call(Service::Ec2, "DeleteVpcEndpoints", request.send()).await.absent_ok()? else {
            return Ok(());
        };
        // DeleteVpcEndpoints reports failures per endpoint instead of failing the call.
        if let Some(u) = out.unsuccessful().iter().find(|u| u.resource_id() == Some(id)) {
            let e = u.error();
            let code = e.and_then(|e| e.code()).map(str::to_string);
            if !code.as_deref().is_some_and(|c| c.contains("NotFound")) {
                return Err(AwsError {
                    operation: "DeleteVpcEndpoints",
                    detail: format!("{id}: {}", e.and_then(|e| e.message()).unwrap_or("not deleted")),
                    code,
                });
            }
        }
        until_status(
            &format!("deletion of VPC endpoint {id}"),
            TIMEOUT,
            || describe(ctx, id),
            |e| match e {
                None => Status::Reached(()),
                Some(e) if state_is(&e, &["deleted"]) => Status::Reached(()),
                Some(e) => Status::Pending(e.state().map_or("deleting", |s| s.as_str()).to_string()),
            },
        )
        .await
    }
}

/// The endpoint's state. EC2 answers it in lower case ("available", as the CLI examples in the
/// VPC UG show) while the model's `State` enum is capitalised ("Available"), so the SDK parses
/// it as an unknown value: compare the text, ignoring case.
fn state_is(e: &VpcEndpoint, any: &[&str]) -> bool {
    e.state().is_some_and(|s| any.iter().any(|a| s.as_str().eq_ignore_ascii_case(a)))
}

impl VpcEndpointKind {
    /// The inputs refresh and import read from an endpoint (`prefix` is
    /// `com.amazonaws.<region>.`). A gateway endpoint lists route tables, not subnets: its
    /// `subnets` are left to the caller.
    fn attrs_of(&self, e: &VpcEndpoint, prefix: &str, all: &std::collections::BTreeMap<String, String>) -> Attrs {
        let list = |v: Vec<String>| Value::List(v.into_iter().map(Value::str).collect());
        let mut attrs = Attrs::from([
            ("vpc".into(), Value::str(e.vpc_id().unwrap_or_default())),
            (
                "service".into(),
                Value::str(e.service_name().unwrap_or_default().strip_prefix(prefix).unwrap_or_default()),
            ),
            ("tags".into(), tags::observed(all)),
        ]);
        if e.vpc_endpoint_type() == Some(&VpcEndpointType::Interface) {
            attrs.insert("subnets".into(), list(e.subnet_ids().to_vec()));
            attrs.insert(
                "security_groups".into(),
                list(e.groups().iter().filter_map(|g| g.group_id().map(str::to_string)).collect()),
            );
        }
        self.normalize(&mut attrs);
        attrs
    }
}

/// The policy AWS gives an endpoint created without one: full access ("If you don't specify
/// a policy, we attach a default policy that allows full access to the service", EC2 API
/// `CreateVpcEndpoint` `PolicyDocument`), as JSON with any whitespace.
fn is_full_access(doc: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(doc) else { return false };
    let Some([st]) = v.get("Statement").and_then(|s| s.as_array()).map(Vec::as_slice) else { return false };
    let star = |k: &str| st.get(k).is_some_and(|x| x == "*" || *x == serde_json::json!(["*"]));
    st.get("Effect").is_some_and(|e| e == "Allow") && star("Action") && star("Resource") && star("Principal")
}

/// For a gateway endpoint on `tables`: the VPC's subnets whose route table (their own, else
/// the main one) is one of them, and the tables of `tables` no subnet uses.
async fn subnets_on(ctx: &Ctx, vpc: &str, tables: &[String]) -> Result<(Vec<String>, Vec<String>)> {
    let request = ctx.ec2.describe_subnets().filters(Filter::builder().name("vpc-id").values(vpc).build());
    let pages = request.into_paginator().send();
    let subnets = ctx.all_pages(Service::Ec2, "DescribeSubnets", pages, |p| p.subnets.unwrap_or_default()).await?;
    let pages =
        ctx.ec2.describe_route_tables().filters(Filter::builder().name("vpc-id").values(vpc).build()).into_paginator();
    let all = ctx
        .all_pages(Service::Ec2, "DescribeRouteTables", pages.send(), |p| p.route_tables.unwrap_or_default())
        .await?;
    let main = all.iter().find(|t| t.associations().iter().any(|a| a.main() == Some(true)));
    let mut on = vec![];
    let mut used = vec![];
    for sn in subnets.iter().filter_map(|s| s.subnet_id()) {
        let own = all.iter().find(|t| t.associations().iter().any(|a| a.subnet_id() == Some(sn)));
        if let Some(t) = own.or(main).and_then(|t| t.route_table_id()).filter(|t| tables.iter().any(|x| x == t)) {
            on.push(sn.to_string());
            used.push(t.to_string());
        }
    }
    let unused = tables.iter().filter(|t| !used.contains(t)).cloned().collect();
    Ok((on, unused))
}

/// `com.amazonaws.<region>.<service>`.
fn service_name(ctx: &Ctx, service: &str) -> String {
    let region = ctx.ec2.config().region().map(|r| r.as_ref().to_string()).unwrap_or_default();
    format!("com.amazonaws.{region}.{service}")
}

/// The route tables `subnets` use: each one's associated table, else the VPC's main table.
async fn route_tables(ctx: &Ctx, vpc: &str, subnets: &[String]) -> Result<Vec<String>> {
    let pages =
        ctx.ec2.describe_route_tables().filters(Filter::builder().name("vpc-id").values(vpc).build()).into_paginator();
    let tables = ctx
        .all_pages(Service::Ec2, "DescribeRouteTables", pages.send(), |p| p.route_tables.unwrap_or_default())
        .await?;
    let main = tables
        .iter()
        .find(|t| t.associations().iter().any(|a| a.main() == Some(true)))
        .and_then(|t| t.route_table_id().map(str::to_string));
    let mut ids: Vec<String> = subnets
        .iter()
        .filter_map(|sn| {
            tables
                .iter()
                .find(|t| t.associations().iter().any(|a| a.subnet_id() == Some(sn.as_str())))
                .and_then(|t| t.route_table_id().map(str::to_string))
                .or_else(|| main.clone())
        })
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

async fn describe(ctx: &Ctx, id: &str) -> Result<Option<VpcEndpoint>> {
    let request = ctx.ec2.describe_vpc_endpoints().vpc_endpoint_ids(id);
    let out = ctx.call(Service::Ec2, "DescribeVpcEndpoints", request.send()).await.absent_ok()?;
    Ok(out.and_then(|o| o.vpc_endpoints().first().cloned()))
}

fn recorded(e: &VpcEndpoint) -> Recorded {
    let id = e.vpc_endpoint_id().unwrap_or_default().to_string();
    Recorded { outputs: Attrs::from([("id".into(), Value::str(id.clone()))]), id }
}
