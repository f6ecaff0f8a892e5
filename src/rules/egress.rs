//! The nodes' way out (EKS UG `private-clusters`): a node group, Karpenter pool, HyperPod
//! cluster or image cache in a subnet that cannot reach the AWS APIs and registries its
//! nodes need never becomes Ready while it bills. What "need" means grows with what the
//! stack runs: Pod Identity adds `eks-auth`, the Karpenter controller needs the internet.
//! Also the cluster endpoint those nodes register with (`endpoint_private_access`).

use std::collections::BTreeSet;

use super::{efa_table, lit, lit_str, referenced, span, subnet_resources};
use crate::stack::{Diagnostic, Resource, Stack};
use crate::value::Value;

/// What a private node needs to join a cluster and pull its images (EKS UG `private-clusters`);
/// each is a `vpc_endpoint.service` value.
const NODE_ESSENTIALS: &[&str] = &["ecr.api", "ecr.dkr", "s3", "ec2", "sts"];

/// What the nodes of one resource need from their subnets.
struct Needs {
    /// The services VPC endpoints must serve when the subnet has no route to the internet.
    endpoints: Vec<&'static str>,
    /// Why nothing but a route to the internet will do, when that is so.
    internet: Option<String>,
}

/// How a subnet reaches AWS: through the internet (a NAT gateway or a public IP), or
/// through VPC endpoints only.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Internet,
    EndpointsOnly,
}

fn is_public(subnet: &Resource) -> bool {
    lit(subnet, "public").and_then(|v| v.as_bool()) == Some(true)
}

/// The subnet's VPC (in the stack) has an internet gateway.
fn has_igw(stack: &Stack, subnet: &Resource) -> bool {
    referenced(stack, subnet, "vpc", "vpc")
        .is_some_and(|v| lit(v, "internet_gateway").and_then(|b| b.as_bool()) == Some(true))
}

/// A NAT gateway is a way out only from a public subnet of a VPC with an internet gateway:
/// "the route table associated with the subnet in which your NAT gateway resides must
/// include a route that points internet traffic to an internet gateway" (VPC UG
/// `vpc-nat-gateway`). In a private subnet it turns `available` and drops the traffic.
/// A gateway that is not a resource of the stack (a literal id) is taken on trust.
fn through_nat(stack: &Stack, subnet: &Resource) -> Result<(), String> {
    let Some(nat) = referenced(stack, subnet, "nat_gateway", "nat_gateway") else { return Ok(()) };
    let Some(home) = referenced(stack, nat, "subnet", "subnet") else { return Ok(()) };
    // An imported home subnet is read, not written: its file may not say `public` (a
    // terraform-aws-modules/vpc public subnet has MapPublicIpOnLaunch off), so its gateway is
    // taken on trust like one outside the stack.
    if stack.import_of(&home.address).is_some() {
        return Ok(());
    }
    let why = if !is_public(home) {
        "is not public"
    } else if !has_igw(stack, home) {
        "is public, but its VPC has no internet gateway"
    } else {
        return Ok(());
    };
    Err(format!(
        "is routed through `{}`, whose subnet `{}` {why}: a NAT gateway reaches the internet only from a public subnet of a VPC with an internet gateway (VPC UG vpc-nat-gateway)",
        nat.address, home.address
    ))
}

/// The services VPC endpoints serve for `subnet`. An interface endpoint serves its whole
/// zone: AWS takes "one subnet per Availability Zone" (PrivateLink guide,
/// `create-interface-endpoint`) and private DNS sends every subnet of the VPC to it, so a
/// sibling subnet of the same zone and VPC counts. The s3 gateway endpoint is a route on
/// the route tables of its own `subnets`, so only those count for it.
fn served(stack: &Stack, subnet: &Resource) -> BTreeSet<String> {
    let vpc = subnet.attrs.get("vpc").and_then(|e| e.as_single_ref()).map(|x| x.address.clone());
    let zone = lit_str(subnet, "availability_zone");
    let same_zone = |s: &Resource| {
        s.address == subnet.address
            || (zone.is_some()
                && lit_str(s, "availability_zone") == zone
                && s.attrs.get("vpc").and_then(|e| e.as_single_ref()).map(|x| x.address.clone()) == vpc)
    };
    stack
        .resources
        .iter()
        .filter(|r| r.kind.name() == "vpc_endpoint")
        .filter_map(|e| Some((e, lit_str(e, "service")?)))
        .filter(|(e, service)| {
            let listed = subnet_resources(stack, e);
            if service == "s3" {
                listed.iter().any(|s| s.address == subnet.address)
            } else {
                listed.iter().any(|s| same_zone(s))
            }
        })
        .map(|(_, service)| service)
        .collect()
}

/// How a subnet of the stack reaches what `needs` lists, or why it does not.
fn way_out(stack: &Stack, subnet: &Resource, many_interfaces: bool, needs: &Needs) -> Result<Path, String> {
    if subnet.attrs.contains_key("nat_gateway") {
        return through_nat(stack, subnet).map(|()| Path::Internet);
    }
    let public = is_public(subnet);
    let igw = has_igw(stack, subnet);
    if public && igw && !many_interfaces {
        return Ok(Path::Internet);
    }
    if let Some(why) = &needs.internet {
        return Err(if public && !igw {
            "is public, but its VPC has no internet gateway".to_string()
        } else {
            format!("has no route to the internet ({why}), only a NAT gateway or a public subnet will do")
        });
    }
    let served = served(stack, subnet);
    let missing: Vec<&str> = needs.endpoints.iter().copied().filter(|s| !served.contains(*s)).collect();
    if missing.is_empty() {
        return Ok(Path::EndpointsOnly);
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

/// The address a `cluster` (or HyperPod's `eks_cluster`) attribute names, or its text.
fn cluster_of(r: &Resource) -> Option<String> {
    let e = r.attrs.get("cluster").or(r.attrs.get("eks_cluster"))?;
    e.as_single_ref().map(|x| x.address.clone()).or_else(|| lit_str(r, "cluster"))
}

/// Pods with EKS Pod Identity get their credentials from the EKS Auth API: "If there is no
/// outbound internet access, you must create and use a VPC endpoint for the EKS Auth API:
/// com.amazonaws.region-code.eks-auth" (EKS UG `private-clusters`). The Karpenter controller
/// gets its role that way; so does anything once the agent add-on is in the stack.
fn runs_pod_identity(stack: &Stack) -> bool {
    stack.resources.iter().any(|r| {
        r.kind.name() == "karpenter_controller"
            || (r.kind.name() == "eks_addon" && lit_str(r, "addon").as_deref() == Some("eks-pod-identity-agent"))
    })
}

/// The Karpenter controller that a node group of its cluster would host. It calls IAM to
/// make the pools' instance profiles (`spec.role`), and "there is currently no VPC private
/// endpoint for the IAM API" outside us-east-1 (Karpenter docs, Getting started → Private
/// Clusters; IAM UG `reference_iam_vpc_endpoint_create`); its chart and image come from
/// public.ecr.aws, which no endpoint serves.
fn hosted_controller<'a>(stack: &'a Stack, r: &Resource) -> Option<&'a Resource> {
    if r.kind.name() != "node_group" {
        return None;
    }
    let cluster = cluster_of(r)?;
    stack.resources.iter().find(|k| k.kind.name() == "karpenter_controller" && cluster_of(k).as_ref() == Some(&cluster))
}

fn needs(stack: &Stack, r: &Resource) -> Needs {
    let mut endpoints = NODE_ESSENTIALS.to_vec();
    if runs_pod_identity(stack) {
        endpoints.push("eks-auth");
    }
    let internet = if r.kind.name() == "image_cache" {
        // The builder pulls from registries on the internet (nvcr.io, public.ecr.aws…) and
        // talks to SSM: VPC endpoints for the node essentials are not enough for it.
        Some("the builder pulls from public registries and needs SSM".to_string())
    } else {
        hosted_controller(stack, r).map(|k| {
            format!("its nodes host `{}`, which calls IAM and pulls from public.ecr.aws, and neither has a VPC endpoint here", k.address)
        })
    };
    Needs { endpoints, internet }
}

/// EFA with more than one interface: the instance gets no public IP.
fn many_interfaces(stack: &Stack, r: &Resource) -> bool {
    // A pool carries its own `efa`; a node group's is on its launch template.
    let efa = match r.kind.name() {
        "karpenter_pool" => efa_table(r),
        _ => referenced(stack, r, "launch_template", "launch_template").and_then(efa_table),
    };
    efa.is_some_and(|efa| efa.get("interfaces").and_then(|e| e.as_literal()).and_then(Value::as_int) != Some(1))
}

/// Nodes need a way out: the VPC CNI calls the EC2 API, and images come from ECR and S3
/// (EKS UG `private-clusters`; "EKS does not check that nodes join", `capacity-blocks-mng`).
/// A node group, Karpenter pool, HyperPod cluster or image cache in a subnet with none never
/// becomes Ready while it bills (HyperPod's instances also fetch their lifecycle scripts from
/// S3: SageMaker DG `sagemaker-hyperpod-eks-prerequisites`).
pub(super) fn egress(stack: &Stack) -> Vec<Diagnostic> {
    let offline = super::outside::Outside::default();
    check(&super::outside::Net { stack, outside: &offline }, false)
}

/// The egress rule over every subnet the node users name, through the one network view:
/// the stack's own subnets are judged from the stack file, outside ones from what a
/// refreshing plan read of them ([`outside_way_out`]), and outside ones nobody read (offline)
/// are named in one note. `only_outside` (the plan-time pass) judges only outside subnets,
/// since the offline pass has already judged the stack's.
pub(super) fn check(net: &super::outside::Net, only_outside: bool) -> Vec<Diagnostic> {
    use super::outside::SubnetView;
    let stack = net.stack;
    let mut d = vec![];
    // Clusters with a node user in an endpoint-only subnet, for the endpoint-access check.
    let mut endpoint_only: Vec<(String, String)> = vec![];
    // Subnets the stack does not define and nobody read, for one note.
    let mut unknown: BTreeSet<String> = BTreeSet::new();
    let users = super::outside::subnet_users(stack).filter(|(r, _)| r.kind.name() != "eks_cluster");
    for (r, attr) in users {
        let needs = needs(stack, r);
        let many = many_interfaces(stack, r);
        for view in net.subnets(r, attr) {
            match view {
                SubnetView::Stack(_) if only_outside => {}
                SubnetView::Stack(sn) => match way_out(stack, sn, many, &needs) {
                    Ok(Path::Internet) => {}
                    Ok(Path::EndpointsOnly) => {
                        if let Some(c) = cluster_of(r) {
                            endpoint_only.push((c, sn.address.clone()));
                        }
                    }
                    Err(why) => d.push(no_way_out(stack, r, attr, sn, &why, &needs)),
                },
                SubnetView::Facts(f) => match outside_way_out(f, many, &needs) {
                    Ok(Path::Internet) => {}
                    Ok(Path::EndpointsOnly) => {
                        if let Some(c) = cluster_of(r) {
                            endpoint_only.push((c, f.id.clone()));
                        }
                    }
                    Err(why) => d.push(outside_no_way_out(r, attr, f, &why, &needs)),
                },
                SubnetView::Unknown(name) => {
                    unknown.insert(name);
                }
            }
        }
    }
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.iter().map(String::as_str).collect();
        d.push(
            Diagnostic::warning(
                format!(
                    "the egress rule did not check {} subnet{} the stack does not define ({}) offline: their routes, NAT gateways and VPC endpoints are not in the stack file",
                    names.len(),
                    crate::stack::diag::plural(names.len()),
                    and_list(&names)
                ),
                None,
            )
            .help("a refreshing `gpustack plan` reads their route tables and VPC endpoints and checks them; or make sure they route to a NAT gateway or an internet gateway, or have VPC endpoints for ecr.api, ecr.dkr, s3, ec2 and sts"),
        );
    }
    if !only_outside {
        d.extend(endpoint_groups(stack));
        d.extend(public_registries(stack, &endpoint_only));
        d.extend(endpoint_access(stack, &endpoint_only));
    } else {
        // Only what the stack pass could not know: endpoint-only subnets outside the stack.
        let outside: Vec<(String, String)> =
            endpoint_only.into_iter().filter(|(_, s)| stack.get(s).is_none()).collect();
        d.extend(public_registries(stack, &outside));
        d.extend(endpoint_access(stack, &outside));
    }
    d
}

/// How an outside subnet reaches what `needs` lists, from its route table's 0.0.0.0/0
/// target, `MapPublicIpOnLaunch` and the services its VPC's endpoints serve there. A route
/// to a NAT gateway, transit gateway or appliance is taken on trust (gpustack cannot follow
/// it further).
fn outside_way_out(f: &super::outside::SubnetFacts, many_interfaces: bool, needs: &Needs) -> Result<Path, String> {
    use super::outside::DefaultRoute;
    let igw_why = match &f.default_route {
        DefaultRoute::Nat | DefaultRoute::Other(_) => return Ok(Path::Internet),
        // A public IP and an IGW route; EFA's several interfaces leave the instance without a
        // public IP (EC2 UG efa-acc-inst-types).
        DefaultRoute::InternetGateway if f.map_public && !many_interfaces => return Ok(Path::Internet),
        DefaultRoute::InternetGateway if !f.map_public => {
            Some("routes to an internet gateway, but does not give instances public IPs (MapPublicIpOnLaunch is false)")
        }
        DefaultRoute::InternetGateway => {
            Some("is public, but EFA's several network interfaces get no public IP (EC2 UG efa-acc-inst-types)")
        }
        DefaultRoute::None => None,
    };
    if let Some(internet) = &needs.internet {
        return Err(format!(
            "has no route to the internet ({internet}), only a NAT gateway or a public subnet will do"
        ));
    }
    let missing: Vec<&str> = needs.endpoints.iter().copied().filter(|s| !f.services.contains(*s)).collect();
    if missing.is_empty() {
        return Ok(Path::EndpointsOnly);
    }
    Err(match igw_why {
        Some(why) => why.to_string(),
        None if f.services.is_empty() => {
            "has no route to the internet (no 0.0.0.0/0 route to a NAT or internet gateway) and no VPC endpoints"
                .to_string()
        }
        None => format!("has no route to the internet, and VPC endpoints for {} are missing", missing.join(", ")),
    })
}

fn outside_no_way_out(
    r: &Resource,
    attr: &str,
    f: &super::outside::SubnetFacts,
    why: &str,
    needs: &Needs,
) -> Diagnostic {
    let endpoints = match needs.internet {
        Some(_) => String::new(),
        None => format!(", or add VPC endpoints for {} in {}", and_list(&needs.endpoints), f.vpc),
    };
    Diagnostic::error(
        format!(
            "`{}` runs in {} ({}, {} in {}), which {why}: its nodes could never join the cluster",
            r.address, f.id, f.zone, f.cidr, f.vpc
        ),
        span(r, attr),
    )
    .help(format!(
        "route {}'s 0.0.0.0/0 to a NAT gateway{endpoints} (gpustack read its route table and the VPC's endpoints at plan time)",
        f.id
    ))
}

fn no_way_out(stack: &Stack, r: &Resource, attr: &str, sn: &Resource, why: &str, needs: &Needs) -> Diagnostic {
    let public = sn.attrs.keys().any(|k| k == "public");
    let nat_home = stack
        .resources
        .iter()
        .find(|x| x.kind.name() == "subnet" && is_public(x))
        .map_or("PUBLIC_SUBNET".to_string(), |x| x.address.replace("subnet.", ""));
    let endpoints = match needs.internet {
        Some(_) => String::new(),
        None => format!("\n      (or VPC endpoints for {} in that subnet's zone)", and_list(&needs.endpoints)),
    };
    Diagnostic::error(
        format!("`{}` runs in `{}`, which {why}: its nodes could never join the cluster", r.address, sn.address),
        span(r, attr),
    )
    .help(format!(
        "give it a way out through a NAT gateway in a public subnet:\n        [nat_gateway.main]\n        subnet = \"${{subnet.{nat_home}.id}}\"\n      and in [{}]{}: nat_gateway = \"${{nat_gateway.main.id}}\"{endpoints}",
        sn.address,
        if public { ", with public = false" } else { "" }
    ))
}

/// "a, b and c".
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The NVIDIA device plugin gpustack writes values for (AL2023 groups that share GPUs)
/// pulls `nvcr.io/nvidia/k8s-device-plugin`, which no VPC endpoint serves: "Your cluster
/// must pull images from a container registry that's in your VPC" (EKS UG
/// `private-clusters`). A warning: the user may have mirrored the image into ECR.
fn public_registries(stack: &Stack, endpoint_only: &[(String, String)]) -> Option<Diagnostic> {
    let (_, subnet) = endpoint_only.first()?;
    crate::manifests::nvidia_device_plugin(stack)?;
    Some(
        Diagnostic::warning(
            format!("`{subnet}` reaches AWS through VPC endpoints only, but the NVIDIA device plugin's image comes from nvcr.io"),
            stack.get(subnet).and_then(|s| s.span.clone()),
        )
        .help("copy nvcr.io/nvidia/k8s-device-plugin into ECR private and point the chart's image.repository at it, or route the subnet through a NAT gateway"),
    )
}

/// Nodes register with the cluster endpoint. "Your cluster must have endpoint private
/// access enabled. This is required for nodes to register with the cluster endpoint" (EKS
/// UG `private-clusters`), and with private access off, nodes reach the public endpoint
/// only from addresses its allowlist admits (EKS UG `cluster-endpoint`: "ensure that the
/// CIDR blocks that you specify include the addresses that nodes … access the public
/// endpoint from").
fn endpoint_access(stack: &Stack, endpoint_only: &[(String, String)]) -> Vec<Diagnostic> {
    let mut d = vec![];
    for c in stack.resources.iter().filter(|r| r.kind.name() == "eks_cluster") {
        if lit(c, "endpoint_private_access").and_then(|v| v.as_bool()) != Some(false) {
            continue;
        }
        let cidrs = super::strings(lit(c, "public_access_cidrs"));
        let public_off = lit(c, "endpoint_public_access").and_then(|v| v.as_bool()) == Some(false);
        let why = if let Some((_, subnet)) = endpoint_only.iter().find(|(k, _)| *k == c.address) {
            format!(
                "its nodes in `{subnet}` reach AWS through VPC endpoints only and so cannot reach the public endpoint"
            )
        } else if public_off {
            "endpoint_public_access = false leaves nodes no endpoint at all".to_string()
        } else if !cidrs.is_empty() && cidrs != ["0.0.0.0/0"] {
            format!("public_access_cidrs admits only {}, not the addresses nodes come from", cidrs.join(", "))
        } else {
            continue;
        };
        d.push(
            Diagnostic::error(
                format!("`{}` has endpoint_private_access = false, and {why}: nodes could not register", c.address),
                span(c, "endpoint_private_access"),
            )
            .help("remove endpoint_private_access = false (private access is on by default): nodes register through the private endpoint (EKS UG private-clusters)"),
        );
    }
    d
}

/// Interface endpoints answer on HTTPS, so their security groups must admit TCP 443 from the
/// nodes: "the security group associated with the endpoint network interface must allow
/// communication between the endpoint network interface and the resources in your VPC that
/// communicate with the service" (PrivateLink guide, `create-interface-endpoint`, prerequisites;
/// paraphrased), and for managed node groups "the VPC interface endpoint security group must
/// allow the CIDR for the subnets, or you must add the created node security group to the VPC
/// interface endpoint security group" (EKS UG `private-clusters`; wording UNVERIFIED). With
/// private DNS every subnet of the VPC resolves the service to the endpoint, so every node
/// subnet of the endpoint's VPC counts, whatever its route out. Judged only when every group
/// is a stack `security_group` with literal rules; a warning, as a node security group named
/// by id cannot be seen offline.
fn endpoint_groups(stack: &Stack) -> Vec<Diagnostic> {
    let vpc_of = |r: &Resource| r.attrs.get("vpc").and_then(|e| e.as_single_ref()).map(|x| x.address.clone());
    let mut node_subnets: Vec<&Resource> = vec![];
    for r in stack.resources.iter() {
        let subnets: Vec<&Resource> = match r.kind.name() {
            "node_group" | "karpenter_pool" | "hyperpod_cluster" => subnet_resources(stack, r),
            "image_cache" => referenced(stack, r, "subnet", "subnet").into_iter().collect(),
            _ => continue,
        };
        for sn in subnets {
            if !node_subnets.iter().any(|x| x.address == sn.address) {
                node_subnets.push(sn);
            }
        }
    }
    let mut d = vec![];
    for e in stack.resources.iter().filter(|r| r.kind.name() == "vpc_endpoint") {
        if lit_str(e, "service").is_none_or(|s| s == "s3") {
            continue;
        }
        let Some(groups) = super::stack_security_groups(stack, e) else { continue };
        if groups.is_empty() {
            continue;
        }
        let vpc = vpc_of(e);
        let shut: Vec<&Resource> = node_subnets
            .iter()
            .copied()
            .filter(|sn| vpc.is_some() && vpc_of(sn) == vpc)
            .filter(|sn| !groups.iter().any(|g| admits_https(stack, g, sn)))
            .collect();
        let Some(first) = shut.first() else { continue };
        let names: Vec<String> = shut.iter().map(|sn| format!("`{}`", sn.address)).collect();
        let group = &groups[0].address;
        let cidr = lit_str(first, "cidr_block").unwrap_or_else(|| "NODE_SUBNET_CIDR".into());
        d.push(
            Diagnostic::warning(
                format!(
                    "the security groups of `{}` admit no HTTPS (TCP 443) from {}: nodes there resolve the service to the endpoint, time out, and never join",
                    e.address,
                    names.join(", ")
                ),
                span(e, "security_groups"),
            )
            .help(format!(
                "in [{group}] admit the node subnets (or the node security group, as `security_group`):\n        ingress = [{{ protocol = \"tcp\", from_port = 443, to_port = 443, cidr = \"{cidr}\" }}]"
            )),
        );
    }
    d
}

/// Whether security group `g` admits TCP 443 from the nodes of `subnet`. Rules that cannot be
/// judged offline (not literal, a CIDR from an output, a source security group) count as
/// admitting; `self` (and `efa = true`, all traffic from the group itself) only when the group
/// is also on something other than VPC endpoints, which is where the nodes would be.
fn admits_https(stack: &Stack, g: &Resource, subnet: &Resource) -> bool {
    let on_nodes = || {
        stack.resources.iter().filter(|r| r.kind.name() != "vpc_endpoint" && r.address != g.address).any(|r| {
            r.attrs.values().any(|x| {
                let mut refs = vec![];
                x.refs(&mut refs);
                refs.iter().any(|o| o.address == g.address)
            })
        })
    };
    if lit(g, "efa").and_then(|v| v.as_bool()) == Some(true) && on_nodes() {
        return true;
    }
    let Some(attr) = g.attrs.get("ingress") else { return false };
    let Some(rules) = lit(g, "ingress") else { return attr.as_literal().is_none() };
    let subnet_net = lit_str(subnet, "cidr_block").and_then(|c| c.parse::<ipnet::IpNet>().ok());
    rules.as_list().unwrap_or_default().iter().filter_map(Value::as_table).any(|rule| {
        let proto = rule.get("protocol").and_then(Value::as_str).unwrap_or("-1");
        let port_ok = match proto {
            "-1" => true,
            "tcp" | "6" => {
                let from = rule.get("from_port").and_then(Value::as_int);
                let to = rule.get("to_port").and_then(Value::as_int).or(from);
                matches!((from, to), (Some(f), Some(t)) if f <= 443 && 443 <= t)
            }
            _ => false,
        };
        let source_ok = if let Some(c) = rule.get("cidr").and_then(Value::as_str) {
            match (c.parse::<ipnet::IpNet>(), subnet_net) {
                (Ok(net), Some(sub)) => net.contains(&sub),
                _ => true,
            }
        } else if rule.contains_key("security_group") {
            true
        } else {
            rule.get("self").and_then(Value::as_bool) == Some(true) && on_nodes()
        };
        port_ok && source_ok
    })
}
