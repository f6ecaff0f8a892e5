//! Cluster options that need the resources around the cluster (issue 19): the service CIDR
//! must not overlap the VPC ("Doesn't overlap with any CIDR block assigned to the VPC that you
//! selected", botocore `KubernetesNetworkConfigRequest.serviceIpv4Cidr`), and an `ipv6`
//! cluster needs subnets with IPv6 blocks ("the VPC and subnets that you specify for cluster
//! creation must have both IPv4 and IPv6 CIDR blocks assigned to them", same shape, `ipFamily`).
//! Only what the stack declares is judged: literal subnet ids and VPC blocks made elsewhere are
//! EKS's to check at apply time.

use ipnet::Ipv4Net;

use super::{lit, lit_str, span, strings, target};
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Resource, Stack};

pub fn cluster(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    for c in stack.resources.iter().filter(|r| r.kind.name() == "eks_cluster" && r.values_ok) {
        let subnets = stack_subnets(stack, c);
        service_cidr(stack, c, &subnets, &mut d);
        ipv6(c, &subnets, &mut d);
        kms_key_region(stack, c, &mut d);
    }
    d
}

/// The cluster's subnets that are resources of this stack.
fn stack_subnets<'a>(stack: &'a Stack, c: &Resource) -> Vec<&'a Resource> {
    let Some(e) = c.attrs.get("subnets") else { return vec![] };
    let refs: Vec<String> = match &e.kind {
        ExprKind::List(items) => items.iter().filter_map(|i| i.as_single_ref().map(|x| x.address.clone())).collect(),
        _ => e.as_single_ref().map(|x| vec![x.address.clone()]).unwrap_or_default(),
    };
    refs.iter().filter_map(|a| stack.get(a)).filter(|r| r.kind.name() == "subnet").collect()
}

fn service_cidr(stack: &Stack, c: &Resource, subnets: &[&Resource], d: &mut Vec<Diagnostic>) {
    let Some(service) = lit_str(c, "service_cidr").and_then(|s| s.parse::<Ipv4Net>().ok()) else { return };
    let mut seen = vec![];
    for vpc in subnets.iter().filter_map(|s| target(stack, s, "vpc")).filter(|v| v.kind.name() == "vpc") {
        if seen.contains(&vpc.address) {
            continue;
        }
        seen.push(vpc.address.clone());
        // The primary block, and any secondary blocks the VPC declares.
        let mut blocks: Vec<String> = lit_str(vpc, "cidr_block").into_iter().collect();
        blocks.extend(strings(lit(vpc, "secondary_cidr_blocks")));
        for block in blocks.iter().filter_map(|b| b.parse::<Ipv4Net>().ok()) {
            if block.contains(&service.network()) || service.contains(&block.network()) {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}`: service_cidr {service} overlaps {block}, a block of `{}`, the cluster's VPC",
                            c.address, vpc.address
                        ),
                        span(c, "service_cidr"),
                    )
                    .help("EKS refuses a service CIDR inside the VPC: pick a block outside it, e.g. \"172.20.0.0/16\" for a 10.x VPC"),
                );
            }
        }
    }
}

fn ipv6(c: &Resource, subnets: &[&Resource], d: &mut Vec<Diagnostic>) {
    if lit_str(c, "ip_family").as_deref() != Some("ipv6") {
        return;
    }
    // An attribute that gives the subnet an IPv6 block (`ipv6…`, not set to false); today's
    // `subnet` kind has none, so only subnets made outside the stack (literal ids) can be IPv6.
    let has_ipv6 = |r: &Resource| {
        r.attrs.iter().any(|(k, e)| {
            k.starts_with("ipv6")
                && !matches!(e.resolve(&|_| crate::value::Value::Unknown), crate::value::Value::Bool(false))
        })
    };
    let ipv6_attrs: Vec<&str> = subnets
        .first()
        .map(|s| s.kind.attrs().iter().map(|a| a.name).filter(|n| n.starts_with("ipv6")).collect())
        .unwrap_or_default();
    let help = if ipv6_attrs.is_empty() {
        "the `subnet` kind cannot give a subnet an IPv6 block: list subnets made outside the stack that have IPv4 and IPv6 blocks (their literal ids), or keep ip_family = \"ipv4\"".to_string()
    } else {
        format!(
            "give each cluster subnet an IPv6 block ({}; EKS needs both IPv4 and IPv6 on them), or keep ip_family = \"ipv4\"",
            ipv6_attrs.join(", ")
        )
    };
    let without: Vec<&str> = subnets.iter().filter(|s| !has_ipv6(s)).map(|s| s.address.as_str()).collect();
    if !without.is_empty() {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` is ip_family = \"ipv6\", but {} {} no IPv6 block",
                    c.address,
                    without.join(", "),
                    if without.len() == 1 { "has" } else { "have" }
                ),
                span(c, "ip_family"),
            )
            .help(help),
        );
    }
}

/// "The KMS key must be symmetric and created in the same Amazon Web Services Region as the
/// cluster" (botocore eks `Provider.keyArn`); the emulator refuses another region too.
fn kms_key_region(stack: &Stack, c: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(e) = c.attrs.get("encryption") else { return };
    let crate::value::Value::Table(t) = e.resolve(&|_| crate::value::Value::Unknown) else { return };
    let Some(key) = t.get("kms_key").and_then(|k| k.as_str().map(str::to_string)) else { return };
    let Some(region) = key.split(':').nth(3).filter(|r| key.starts_with("arn:") && !r.is_empty()) else { return };
    if region != stack.region {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: encryption.kms_key is in {region}, but the cluster is in {}; EKS takes a key of the cluster's region only",
                    c.address, stack.region
                ),
                e.span.clone(),
            )
            .help(format!("use a key (or a multi-Region replica key) in {}", stack.region)),
        );
    }
}
