//! IPv4 CIDR blocks as EC2 takes them, checked offline with `ipnet`: the syntax, the
//! /16 to /28 size of a VPC or subnet block, a subnet inside its VPC's block, and no two
//! subnets of one VPC overlapping, and a VPC's `secondary_cidr_blocks` (EC2 API
//! `AssociateVpcCidrBlock`; VPC UG `vpc-cidr-blocks`: the association restrictions by the
//! primary block's range, the per-VPC quota); a subnet may sit in any of its VPC's blocks.
//! Only literal blocks are checked (variables count as
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

/// A VPC's literal, well-formed secondary blocks (problems are reported by [`check_secondary`]).
fn secondary_blocks(vpc: &Resource) -> Vec<Ipv4Net> {
    let Some(e) = vpc.attrs.get("secondary_cidr_blocks").filter(|_| vpc.kind.name() == "vpc") else { return vec![] };
    let Some(Value::List(items)) = Some(e.resolve(&|_| Value::Unknown)) else { return vec![] };
    items.iter().filter_map(|v| v.as_str()?.parse::<Ipv4Net>().ok()).filter(|n| n.addr() == n.network()).collect()
}

/// The ranges a secondary block may not come from, given the primary's range: the VPC UG's
/// "IPv4 CIDR block association restrictions" table (`awsdocs/amazon-vpc-user-guide`
/// `doc_source/VPC_Subnets.md`): with a primary in 10.0.0.0/8, no 172.16.0.0/12,
/// 192.168.0.0/16 or 198.19.0.0/16, and "if your primary CIDR falls within the 10.0.0.0/15
/// range, you cannot add a CIDR block from the 10.0.0.0/16 range"; in 172.16.0.0/12, no
/// 10.0.0.0/8, 192.168.0.0/16, 198.19.0.0/16 or 172.31.0.0/16; in 192.168.0.0/16, no
/// 10.0.0.0/8, 172.16.0.0/12 or 198.19.0.0/16; in 198.19.0.0/16, none of the three RFC 1918
/// ranges; a publicly routable primary, or one in 100.64.0.0/10, excludes all four.
/// 100.64.0.0/10 (RFC 6598, the range the EKS custom-networking guides use for pods) is
/// allowed with every primary. (The same page also refuses a block the same as or larger
/// than a route of the VPC's route tables: not checkable offline.)
fn restricted(primary: &Ipv4Net) -> Vec<Ipv4Net> {
    let net = |s: &str| s.parse::<Ipv4Net>().unwrap_or_default();
    let all: [Ipv4Net; 4] = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "198.19.0.0/16"].map(net);
    let Some(home) = all.iter().position(|r| r.contains(primary)) else { return all.to_vec() };
    let mut out: Vec<Ipv4Net> = all.iter().enumerate().filter(|(i, _)| *i != home).map(|(_, r)| *r).collect();
    if net("10.0.0.0/15").contains(primary) {
        out.push(net("10.0.0.0/16"));
    }
    if home == 1 {
        out.push(net("172.31.0.0/16"));
    }
    out
}

/// AWS's default quota of IPv4 blocks per VPC, primary included (VPC UG `amazon-vpc-limits`,
/// "IPv4 CIDR blocks per VPC": 5, adjustable up to 50).
const BLOCKS_PER_VPC: usize = 5;

/// A VPC's `secondary_cidr_blocks`: each a /16 to /28 block without host bits, apart from the
/// primary and from each other, from a range the primary allows; more than the default quota
/// is a warning (it can be raised).
fn check_secondary(vpc: &Resource, primary: Option<Ipv4Net>, diags: &mut Vec<Diagnostic>) {
    let Some(e) = vpc.attrs.get("secondary_cidr_blocks") else { return };
    let Value::List(items) = e.resolve(&|_| Value::Unknown) else { return };
    let a = &vpc.address;
    let mut seen: Vec<Ipv4Net> = primary.into_iter().collect();
    for v in &items {
        let Some(text) = v.as_str() else { continue };
        let net = match text.parse::<Ipv4Net>() {
            Ok(n) if PREFIXES.contains(&n.prefix_len()) && n.addr() == n.network() => n,
            _ => {
                diags.push(
                    Diagnostic::error(
                        format!("`{a}`: secondary block \"{text}\" is not an IPv4 /16 to /28 block"),
                        e.span.clone(),
                    )
                    .help("write the first address and a prefix length from /16 to /28, e.g. \"100.64.0.0/16\""),
                );
                continue;
            }
        };
        if let Some(range) =
            primary.and_then(|p| restricted(&p).into_iter().find(|r| r.contains(&net) || net.contains(r)))
        {
            diags.push(
                Diagnostic::error(
                    format!("`{a}`: secondary block {net} is in {range}, which AWS refuses next to a primary block in {}", primary.map(|p| p.to_string()).unwrap_or_default()),
                    e.span.clone(),
                )
                .help("pick a block from the primary's own private range or from 100.64.0.0/10 (VPC UG vpc-cidr-blocks, association restrictions)"),
            );
        }
        if let Some(other) = seen.iter().find(|o| o.contains(&net) || net.contains(*o)) {
            diags.push(
                Diagnostic::error(format!("`{a}`: secondary block {net} overlaps {other}"), e.span.clone())
                    .help("a VPC's blocks are apart from each other; pick a range none of them covers"),
            );
        } else {
            seen.push(net);
        }
    }
    if items.len() + 1 > BLOCKS_PER_VPC {
        diags.push(
            Diagnostic::warning(
                format!("`{a}` has {} IPv4 blocks; AWS's default quota is {BLOCKS_PER_VPC} per VPC", items.len() + 1),
                e.span.clone(),
            )
            .help("ask for more with Service Quotas (VPC: IPv4 CIDR blocks per VPC, up to 50) before applying"),
        );
    }
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
    for (i, r) in resources.iter().enumerate().filter(|(_, r)| r.kind.name() == "vpc" && r.values_ok) {
        check_secondary(r, blocks[i], diags);
    }
    // Subnets per VPC address, in file order: (index, block).
    let mut seen: HashMap<&str, Vec<(usize, Ipv4Net)>> = HashMap::new();
    for (i, r) in resources.iter().enumerate().filter(|(_, r)| r.kind.name() == "subnet") {
        let (Some(net), Some(vpc)) = (blocks[i], r.attrs.get("vpc").and_then(Expr::as_single_ref)) else { continue };
        let Some(&v) = by_address.get(&vpc.address) else { continue };
        let span = r.attrs.get("cidr_block").and_then(|e| e.span.clone());
        // A subnet may sit in any of the VPC's blocks, the primary or a secondary one.
        let secondary = secondary_blocks(&resources[v]);
        if secondary.iter().any(|b| b.contains(&net)) {
            let siblings = seen.entry(vpc.address.as_str()).or_default();
            siblings.push((i, net));
            continue;
        }
        if let Some(vpc_net) = blocks[v].filter(|_| resources[v].kind.name() == "vpc")
            && !vpc_net.contains(&net)
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: cidr_block {net} is not inside {}'s {vpc_net}", r.address, vpc.address),
                    span.clone(),
                )
                .help(format!(
                    "a subnet's block lies within one of its VPC's blocks ({} to {}), or add its range to the VPC's secondary_cidr_blocks",
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

/// A rule's `cidr`: IPv4 or IPv6 CIDR syntax, without host bits. AWS canonicalizes a block
/// with host bits ("100.68.0.18/18 … to 100.68.0.0/18. Any subsequent DescribeSecurityGroups
/// and DescribeSecurityGroupRules calls will return the canonicalized form": botocore
/// `AuthorizeSecurityGroupIngressRequest.CidrIp`), so such a block would differ from what
/// refresh reads on every plan; Terraform refuses it too. `None` when it is well formed.
pub fn rule_cidr_problem(text: &str) -> Option<String> {
    match text.parse::<IpNet>() {
        Ok(net) if net.addr() != net.network() => Some(format!(
            "\"{text}\" has host bits set; AWS stores it as \"{}\" and every plan would show a change: write \"{}\"",
            net.trunc(),
            net.trunc()
        )),
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
        // Review r19-net minor 1: host bits would be canonicalized by AWS and diff forever.
        let p = rule_cidr_problem("10.0.0.5/16").unwrap_or_default();
        assert!(p.contains("write \"10.0.0.0/16\""), "{p}");
        assert!(rule_cidr_problem("2001:db8::1/64").is_some_and(|p| p.contains("2001:db8::/64")));
    }

    #[test]
    fn secondary_ranges_follow_the_primary() {
        let n = |s: &str| s.parse::<Ipv4Net>().unwrap();
        let r10 = restricted(&n("10.0.0.0/16"));
        assert!(r10.iter().any(|r| r.contains(&n("192.168.0.0/20"))));
        assert!(r10.iter().any(|r| r.contains(&n("198.19.0.0/16"))));
        assert!(!r10.iter().any(|r| r.contains(&n("10.1.0.0/16")) || r.contains(&n("100.64.0.0/16"))));
        let public = restricted(&n("52.0.0.0/16"));
        assert_eq!(public.len(), 4);
        assert!(restricted(&n("192.168.0.0/16")).iter().any(|r| r.contains(&n("10.0.0.0/16"))));
    }

    /// Review r19-net M3: the three rows of the VPC UG's table the first version missed.
    #[test]
    fn secondary_ranges_follow_the_whole_vpc_user_guide_table() {
        let n = |s: &str| s.parse::<Ipv4Net>().unwrap();
        let refused = |primary: &str, block: &str| restricted(&n(primary)).iter().any(|r| r.contains(&n(block)));
        // A primary in 100.64.0.0/10 excludes RFC 1918 and 198.19.0.0/16, not 100.64.0.0/10.
        for block in ["10.1.0.0/16", "172.16.0.0/16", "192.168.0.0/16", "198.19.0.0/16"] {
            assert!(refused("100.64.0.0/16", block), "{block}");
        }
        assert!(!refused("100.64.0.0/16", "100.65.0.0/16"));
        // A primary in 10.0.0.0/15 cannot add from 10.0.0.0/16; one outside it can.
        assert!(refused("10.1.0.0/16", "10.0.0.0/16") && refused("10.1.0.0/16", "10.0.128.0/17"));
        assert!(!refused("10.2.0.0/16", "10.0.0.0/16") && !refused("10.0.0.0/16", "10.1.0.0/16"));
        // A primary in 172.16.0.0/12 cannot add from 172.31.0.0/16.
        assert!(refused("172.16.0.0/16", "172.31.0.0/16") && !refused("172.16.0.0/16", "172.17.0.0/16"));
    }
}
