//! IPv4 CIDR blocks as EC2 takes them, checked offline with `ipnet`: the syntax, the
//! /16 to /28 size of a VPC or subnet block, a subnet inside its VPC's block, and no two
//! subnets of one VPC overlapping. The third is gpustack's limit, not AWS's: a `vpc` has
//! exactly one IPv4 block, while AWS lets a VPC take secondary blocks ("You can associate
//! secondary IPv4 CIDR blocks with your VPC", VPC UG `vpc-cidr-blocks`; EC2 API
//! `AssociateVpcCidrBlock`), which gpustack does not manage. Only literal blocks are checked (variables count as
//! literal once substituted); a block that comes from another resource's output is AWS's to
//! judge at apply time.

use std::collections::HashMap;
use std::ops::RangeInclusive;

use ipnet::{IpNet, Ipv4Net};

use crate::stack::{Diagnostic, Expr, Resource, Span};
use crate::value::Value;

/// The prefix lengths EC2 allows for a VPC's or a subnet's IPv4 block.
const PREFIXES: RangeInclusive<u8> = 16..=28;

/// A literal string attribute and where it is written.
fn literal<'a>(r: &'a Resource, attr: &str) -> Option<(&'a str, &'a Span)> {
    let e: &Expr = r.attrs.get(attr)?;
    Some((e.as_literal().and_then(Value::as_str)?, &e.span))
}

/// The block of a VPC or subnet, if it is literal and well formed; problems are reported.
fn block(r: &Resource, diags: &mut Vec<Diagnostic>) -> Option<Ipv4Net> {
    let (text, span) = literal(r, "cidr_block")?;
    let Ok(net) = text.parse::<Ipv4Net>() else {
        diags.push(
            Diagnostic::error(
                format!("`{}`: cidr_block \"{text}\" is not an IPv4 CIDR block", r.address),
                span.clone(),
            )
            .help("write the first address and the prefix length, e.g. \"10.42.0.0/16\""),
        );
        return None;
    };
    if !PREFIXES.contains(&net.prefix_len()) {
        diags.push(
            Diagnostic::error(
                format!("`{}`: cidr_block \"{text}\" is a /{}; EC2 takes /16 to /28", r.address, net.prefix_len()),
                span.clone(),
            )
            .help(format!(
                "a {} block is between /16 (65,536 addresses) and /28 (16 addresses)",
                r.kind.name().replace('_', " ")
            )),
        );
        return None;
    }
    if net.addr() != net.network() {
        diags.push(
            Diagnostic::error(format!("`{}`: cidr_block \"{text}\" has host bits set", r.address), span.clone())
                .help(format!("the block starting there is \"{}\"", net.trunc())),
        );
        return None;
    }
    Some(net)
}

/// Every VPC and subnet block of the stack, and how the subnets sit in their VPCs.
pub fn check(resources: &[Resource], by_address: &HashMap<String, usize>, diags: &mut Vec<Diagnostic>) {
    let blocks: Vec<Option<Ipv4Net>> = resources
        .iter()
        .map(|r| match r.kind.name() {
            "vpc" | "subnet" if r.values_ok => block(r, diags),
            _ => None,
        })
        .collect();
    // Subnets per VPC address, in file order: (index, block).
    let mut seen: HashMap<&str, Vec<(usize, Ipv4Net)>> = HashMap::new();
    for (i, r) in resources.iter().enumerate().filter(|(_, r)| r.kind.name() == "subnet") {
        let (Some(net), Some(vpc)) = (blocks[i], r.attrs.get("vpc").and_then(Expr::as_single_ref)) else { continue };
        let Some(&v) = by_address.get(&vpc.address) else { continue };
        let span = r.attrs.get("cidr_block").and_then(|e| e.span.clone());
        if let Some(vpc_net) = blocks[v].filter(|_| resources[v].kind.name() == "vpc")
            && !vpc_net.contains(&net)
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: cidr_block {net} is not inside {}'s {vpc_net}", r.address, vpc.address),
                    span.clone(),
                )
                .help(format!(
                    "gpustack gives a VPC one IPv4 block, so a subnet's block lies within it ({} to {}); AWS's secondary VPC blocks (VPC UG vpc-cidr-blocks) are not managed by gpustack",
                    vpc_net.network(),
                    vpc_net.broadcast()
                )),
            );
            continue;
        }
        let siblings = seen.entry(vpc.address.as_str()).or_default();
        if let Some((j, other)) = siblings.iter().find(|(_, o)| o.contains(&net) || net.contains(o)) {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: cidr_block {net} overlaps `{}`'s {other}", r.address, resources[*j].address),
                    span,
                )
                .help(format!("subnets of {} need separate ranges; pick a block no other subnet uses", vpc.address)),
            );
        } else {
            siblings.push((i, net));
        }
    }
}

/// A rule's `cidr`: IPv4 or IPv6 CIDR syntax. `None` when it is well formed (or not literal).
pub fn rule_cidr_problem(text: &str) -> Option<String> {
    match text.parse::<IpNet>() {
        Ok(_) => None,
        Err(_) => Some(format!("\"{text}\" is not a CIDR block")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment_and_overlap_use_whole_blocks() {
        let vpc: Ipv4Net = "10.42.0.0/16".parse().unwrap();
        let a: Ipv4Net = "10.42.16.0/20".parse().unwrap();
        let inner: Ipv4Net = "10.42.17.0/24".parse().unwrap();
        let outside: Ipv4Net = "10.43.0.0/20".parse().unwrap();
        assert!(vpc.contains(&a) && a.contains(&inner) && !vpc.contains(&outside));
        assert!(rule_cidr_problem("::/0").is_none() && rule_cidr_problem("10.0.0.1/32").is_none());
        assert!(rule_cidr_problem("10.0.0.0/33").is_some() && rule_cidr_problem("10.0.0.0").is_some());
    }
}
