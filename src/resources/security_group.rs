//! `security_group`: a VPC security group whose rules are the complete set —
//! what is not declared is revoked, AWS's default allow-all egress included.
//! `efa = true` adds the rule EFA needs: all traffic in from and out to the
//! group itself (aws-facts §3). Rules and `efa` update in place; `description`
//! and `vpc` replace (create before destroy, the new group with a fresh name).

use async_trait::async_trait;
use aws_sdk_ec2::types::{IpPermission, IpRange, Ipv6Range, ResourceType, UserIdGroupPair};

use super::import_ec2::{imported, note, tag};
use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, bool_attr, i32_of, str_attr};
use crate::aws::{Absent, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct SecurityGroup;

const RULE: &[Attr] = &[
    Attr::opt("protocol", Ty::Str, Default::Str("-1"), OnChange::Update),
    Attr::opt("from_port", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("to_port", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("cidr", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("security_group", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("self", Ty::Bool, Default::None, OnChange::Update),
    Attr::opt("description", Ty::Str, Default::None, OnChange::Update),
];

const ATTRS: &[Attr] = &[
    Attr::req("vpc", Ty::Str, OnChange::Replace),
    Attr::opt("description", Ty::Str, Default::None, OnChange::Replace),
    Attr::opt("efa", Ty::Bool, Default::Bool(false), OnChange::Update),
    Attr::opt("ingress", Ty::List(&Ty::Object(RULE)), Default::EmptyList, OnChange::Update),
    Attr::opt("egress", Ty::List(&Ty::Object(RULE)), Default::EmptyList, OnChange::Update),
    Attr::opt("name", Ty::Str, Default::None, OnChange::Replace),
    TAGS,
    super::existing::EXISTING,
];

impl Schema for SecurityGroup {
    fn name(&self) -> &'static str {
        "security_group"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("id", Ty::Str), ("name", Ty::Str)]
    }
}

#[async_trait]
impl Kind for SecurityGroup {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:CreateSecurityGroup",
            "ec2:DeleteSecurityGroup",
            "ec2:DescribeSecurityGroups",
            "ec2:AuthorizeSecurityGroupIngress",
            "ec2:AuthorizeSecurityGroupEgress",
            "ec2:RevokeSecurityGroupIngress",
            "ec2:RevokeSecurityGroupEgress",
            "ec2:DescribeSecurityGroupRules",
        ]
    }

    async fn read_existing(
        &self,
        ctx: &Ctx,
        lookups: &[super::existing::Lookup],
    ) -> Result<Vec<std::result::Result<Recorded, String>>> {
        super::existing::resolve(lookups, "security group", "group-id", |filters| async move {
            let pages = ctx.ec2.describe_security_groups().set_filters(Some(filters)).into_paginator().send();
            let groups = ctx
                .all_pages(Service::Ec2, "DescribeSecurityGroups", pages, |p| p.security_groups.unwrap_or_default())
                .await?;
            Ok(groups
                .iter()
                .map(|g| {
                    let id = g.group_id().unwrap_or_default().to_string();
                    recorded(id, g.group_name().unwrap_or_default().to_string())
                })
                .collect())
        })
        .await
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        super::existing::validate(r, "sg-", true, diags);
        for dir in ["ingress", "egress"] {
            let Some(crate::stack::expr::ExprKind::List(rules)) = r.attrs.get(dir).map(|e| &e.kind) else { continue };
            // Literal rules seen so far, by meaning (description aside), for duplicates.
            let mut seen: Vec<(usize, Value)> = vec![];
            for (n, rule) in rules.iter().enumerate() {
                let crate::stack::expr::ExprKind::Table(t) = &rule.kind else { continue };
                let sources = ["cidr", "security_group", "self"].iter().filter(|k| t.contains_key(**k)).count();
                if sources != 1 {
                    diags.push(
                        Diagnostic::error(format!("`{dir}[{n}]` needs exactly one of `cidr`, `security_group` or `self`"), rule.span.clone())
                            .help("for example { protocol = \"tcp\", from_port = 443, to_port = 443, cidr = \"10.0.0.0/16\" }"),
                    );
                }
                let proto = t.get("protocol").and_then(|e| e.as_literal()).and_then(|v| v.as_str()).unwrap_or("-1");
                if matches!(proto, "tcp" | "udp" | "6" | "17") && !t.contains_key("from_port") {
                    diags.push(
                        Diagnostic::error(
                            format!("`{dir}[{n}]` with protocol \"{proto}\" needs `from_port`"),
                            rule.span.clone(),
                        )
                        .help("add from_port (and to_port for a range), or use protocol = \"-1\" for all traffic"),
                    );
                }
                check_ports(&format!("{dir}[{n}]"), t, diags);
                if let Some(e) = t.get("cidr")
                    && let Some(Value::Str(text)) = e.as_literal()
                    && let Some(problem) = super::cidr::rule_cidr_problem(text)
                {
                    diags.push(
                        Diagnostic::error(format!("`{dir}[{n}].cidr`: {problem}"), e.span.clone()).help(
                            "write an address and a prefix length: \"10.0.0.0/16\", \"203.0.113.7/32\", \"::/0\"",
                        ),
                    );
                }
                let value = rule.resolve(&|_| Value::Unknown);
                if !value.is_known() {
                    continue;
                }
                let mut meaning = canonical_rule(&value);
                if let Value::Table(m) = &mut meaning {
                    m.remove("description");
                }
                match seen.iter().find(|(_, v)| *v == meaning) {
                    Some((first, _)) => diags.push(
                        Diagnostic::error(format!("`{dir}[{n}]` repeats `{dir}[{first}]`"), rule.span.clone()).help(
                            "remove one of them (rules compare by meaning: \"all\" is \"-1\", \"6\" is \"tcp\", to_port defaults to from_port, descriptions aside)",
                        ),
                    ),
                    None => seen.push((n, meaning)),
                }
            }
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        for dir in ["ingress", "egress"] {
            if let Some(Value::List(rules)) = inputs.get(dir) {
                let mut canon: Vec<Value> = rules.iter().map(canonical_rule).collect();
                canon.sort_by_key(|r| r.to_string());
                canon.dedup();
                inputs.insert(dir.into(), Value::List(canon));
            }
        }
    }

    /// Observed rules are the whole effective set; fold the EFA self rules back into `efa`
    /// when the recorded inputs had it, so an unchanged group shows no drift.
    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        cur.extend(observed.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.normalize(&mut cur);
        let efa_rule = canonical_rule(&self_all_traffic());
        let has = |dir: &str, cur: &Attrs| cur.get(dir).and_then(Value::as_list).is_some_and(|l| l.contains(&efa_rule));
        let efa = bool_attr(recorded, "efa") && has("ingress", &cur) && has("egress", &cur);
        if efa {
            for dir in ["ingress", "egress"] {
                if let Some(Value::List(l)) = cur.get_mut(dir) {
                    l.retain(|r| *r != efa_rule);
                }
            }
        }
        cur.insert("efa".into(), Value::Bool(efa));
        cur
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let mut name = str_attr(req.inputs, "name").to_string();
        if req.replacing {
            name = format!("{name}-{}", &req.token[..8.min(req.token.len())]);
        }
        let vpc = str_attr(req.inputs, "vpc");
        let request = ctx
            .ec2
            .create_security_group()
            .group_name(&name)
            .description(str_attr(req.inputs, "description"))
            .vpc_id(vpc)
            .tag_specifications(tags::ec2_spec(ctx, ResourceType::SecurityGroup, req.address, req.inputs));
        let created = ctx.call(Service::Ec2, "CreateSecurityGroup", request.send()).await;
        // A new VPC group starts with AWS's allow-all egress; declared rules are the whole set.
        let mut current = Attrs::from([
            ("ingress".into(), Value::List(vec![])),
            ("egress".into(), Value::List(vec![canonical_rule(&rule("-1", "cidr", Value::str("0.0.0.0/0")))])),
        ]);
        let id = match created {
            Ok(out) => out.group_id().unwrap_or_default().to_string(),
            // The name is taken: by this very resource (a create that raced a crash) it is
            // adopted, with whatever rules it has now as the starting point.
            Err(e) if e.has_code("InvalidGroup.Duplicate") => {
                let request = ctx
                    .ec2
                    .describe_security_groups()
                    .filters(aws_sdk_ec2::types::Filter::builder().name("group-name").values(&name).build())
                    .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(vpc).build());
                let found = ctx.call(Service::Ec2, "DescribeSecurityGroups", request.send()).await?;
                let Some(g) = found.security_groups().iter().find(|g| tags::is_ours(ctx, g.tags(), req.address)) else {
                    return Err(e.taken_by_other("set `name` to another name"));
                };
                let id = g.group_id().unwrap_or_default().to_string();
                current.insert("ingress".into(), Value::List(observed_rules(g.ip_permissions(), &id)));
                current.insert("egress".into(), Value::List(observed_rules(g.ip_permissions_egress(), &id)));
                id
            }
            Err(e) => return Err(e),
        };
        sync_rules(ctx, &id, &current, req.inputs).await?;
        Ok(recorded(id, name))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let pages = ctx.ec2.describe_security_groups().filters(tags::stack_filter(ctx)).into_paginator().send();
        let groups = ctx
            .all_pages(Service::Ec2, "DescribeSecurityGroups", pages, |p| p.security_groups.unwrap_or_default())
            .await?;
        Ok(observed_groups(ctx, &groups)
            .await?
            .into_iter()
            .map(|(g, rec, attrs)| Observed::tagged(&tags::ec2_map(g.tags()), rec, attrs))
            .collect())
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("sg-…")
    }

    /// The group read with DescribeSecurityGroups by id, its rules observed exactly as refresh
    /// observes them (CIDRs v4 and v6, other groups, the group itself as `self`), less those a
    /// `security_group_rule` of any stack owns. Rules the language cannot say go to
    /// `unexpressed` and are never revoked by a later apply (a rule update revokes only rules
    /// the old inputs list): sources that are managed prefix lists, and groups of another
    /// account. Two groups are refused, because deleting them is not the stack's to do: the
    /// VPC's `default` group (AWS deletes it with the VPC: VPC UG "Default security groups
    /// for your VPCs") and the cluster security group EKS creates for a cluster (tagged
    /// `aws:eks:cluster-name`; EKS deletes it with the cluster: EKS UG `sec-group-reqs`),
    /// which a stack reaches as `${eks_cluster.NAME.security_group_id}` and adds rules to with
    /// `security_group_rule`.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let filter = aws_sdk_ec2::types::Filter::builder().name("group-id").values(id).build();
        let request = ctx.ec2.describe_security_groups().filters(filter);
        let out = ctx.call(Service::Ec2, "DescribeSecurityGroups", request.send()).await.absent_ok()?;
        let groups: Vec<aws_sdk_ec2::types::SecurityGroup> = out
            .map(|o| o.security_groups().to_vec())
            .unwrap_or_default()
            .into_iter()
            .filter(|g| g.group_id() == Some(id))
            .collect();
        let Some(g) = groups.first() else { return Ok(None) };
        let all = tags::ec2_map(g.tags());
        let refuse =
            |why: String| crate::aws::AwsError { operation: "DescribeSecurityGroups", code: None, detail: why };
        if let Some(cluster) = all.get(EKS_CLUSTER_TAG) {
            return Err(refuse(format!(
                "{id} is the cluster security group EKS made for cluster {cluster}: it belongs to the cluster (EKS deletes it with the cluster); refer to it as ${{eks_cluster.<name>.security_group_id}} and add rules to it with security_group_rule"
            )));
        }
        if g.group_name() == Some("default") {
            return Err(refuse(format!(
                "{id} is the default security group of {}: AWS makes and deletes it with the VPC, so a stack cannot own it; leave it out",
                g.vpc_id().unwrap_or("its VPC")
            )));
        }
        let (g, rec, mut attrs) = observed_groups(ctx, &groups).await?.remove(0);
        attrs.insert("name".into(), Value::str(g.group_name().unwrap_or_default()));
        attrs.insert("efa".into(), Value::Bool(false));
        let mut unexpressed: Vec<(String, String)> = super::import_ec2::cloudformation_note(&all).into_iter().collect();
        for (dir, perms) in [("ingress", g.ip_permissions()), ("egress", g.ip_permissions_egress())] {
            for p in perms {
                let what = || {
                    let ports = match (p.from_port(), p.to_port()) {
                        (Some(f), Some(t)) => format!(" {f}-{t}"),
                        _ => String::new(),
                    };
                    format!("{}{ports}", p.ip_protocol().unwrap_or("-1"))
                };
                for pl in p.prefix_list_ids() {
                    unexpressed.push(note(
                        dir,
                        format!("{} from prefix list {}", what(), pl.prefix_list_id().unwrap_or_default()),
                    ));
                }
                for pair in
                    p.user_id_group_pairs().iter().filter(|x| x.user_id().is_some_and(|u| Some(u) != g.owner_id()))
                {
                    unexpressed.push(note(
                        dir,
                        format!(
                            "{} from {} of account {}",
                            what(),
                            pair.group_id().unwrap_or_default(),
                            pair.user_id().unwrap_or_default()
                        ),
                    ));
                }
            }
        }
        Ok(Some(imported(rec, attrs, unexpressed)))
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
        if changed.iter().any(|c| matches!(c.as_str(), "ingress" | "egress" | "efa")) {
            sync_rules(ctx, id, old, new).await?;
        }
        if changed.iter().any(|c| c == "tags") {
            tags::sync_ec2(ctx, id, old, new).await?;
        }
        Ok(recorded(id.to_string(), String::new()))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let request = ctx.ec2.delete_security_group().group_id(id);
        ctx.call(Service::Ec2, "DeleteSecurityGroup", request.send()).await.absent_ok()?;
        Ok(())
    }
}

/// The tag EKS puts on the cluster security group it creates (EKS UG `sec-group-reqs`).
pub const EKS_CLUSTER_TAG: &str = "aws:eks:cluster-name";

/// Each group with its outputs and its inputs as refresh reads them: the inline rules, less
/// those that `security_group_rule` resources own (theirs, not the group's). One paged
/// DescribeSecurityGroupRules call for all the groups.
async fn observed_groups(
    ctx: &Ctx,
    groups: &[aws_sdk_ec2::types::SecurityGroup],
) -> Result<Vec<(aws_sdk_ec2::types::SecurityGroup, Recorded, Attrs)>> {
    let ids: Vec<String> = groups.iter().filter_map(|g| g.group_id().map(str::to_string)).collect();
    let owned = super::security_group_rule::owned_rules(ctx, &ids).await?;
    let inline = |perms: &[IpPermission], id: &str, egress: bool| {
        let mut rules = observed_rules(perms, id);
        rules.retain(|r| !owned.iter().any(|(g, e, o)| g == id && *e == egress && o == r));
        Value::List(rules)
    };
    Ok(groups
        .iter()
        .map(|g| {
            let all = tags::ec2_map(g.tags());
            let id = g.group_id().unwrap_or_default().to_string();
            let attrs = Attrs::from([
                ("vpc".into(), Value::str(g.vpc_id().unwrap_or_default())),
                ("description".into(), Value::str(g.description().unwrap_or_default())),
                ("ingress".into(), inline(g.ip_permissions(), &id, false)),
                ("egress".into(), inline(g.ip_permissions_egress(), &id, true)),
                ("tags".into(), tags::observed(&all)),
            ]);
            let name = g.group_name().unwrap_or_default().to_string();
            (g.clone(), recorded(id, name), attrs)
        })
        .collect())
}

fn recorded(id: String, name: String) -> Recorded {
    let mut outputs = Attrs::from([("id".into(), Value::str(id.clone()))]);
    if !name.is_empty() {
        outputs.insert("name".into(), Value::str(name));
    }
    Recorded { outputs, id }
}

fn rule(protocol: &str, source: &str, value: Value) -> Value {
    Value::Table([("protocol".into(), Value::str(protocol)), (source.into(), value)].into())
}

fn self_all_traffic() -> Value {
    rule("-1", "self", Value::Bool(true))
}

/// One rule in canonical form: protocol names lowercased (`all` → `-1`), no ports for
/// all-traffic, `to_port` defaulting to `from_port`.
/// Ports of a TCP or UDP rule are 0 to 65535 with from_port ≤ to_port; an ICMP rule's are
/// the type and code, -1 (any) to 255. Other protocols ignore ports. Only literal values.
pub(super) fn check_ports(
    what: &str,
    t: &std::collections::BTreeMap<String, crate::stack::Expr>,
    diags: &mut Vec<Diagnostic>,
) {
    let proto = t.get("protocol").and_then(|e| e.as_literal()).and_then(Value::as_str).unwrap_or("-1");
    let (range, limits) = match proto.to_ascii_lowercase().as_str() {
        "tcp" | "udp" | "6" | "17" => (0..=65535, "ports are 0 to 65535"),
        "icmp" | "1" => (-1..=255, "an ICMP type or code is -1 (any) to 255"),
        _ => return,
    };
    let port = |k: &str| t.get(k).and_then(|e| Some((e.as_literal()?.as_int()?, e.span.clone())));
    for (k, p) in [("from_port", port("from_port")), ("to_port", port("to_port"))] {
        if let Some((v, span)) = p
            && !range.contains(&v)
        {
            diags.push(Diagnostic::error(format!("`{what}.{k}` is {v}: {limits}"), span).help(format!(
                "write a {k} from {} to {}",
                range.start(),
                range.end()
            )));
        }
    }
    if range.start() == &0
        && let (Some((from, _)), Some((to, span))) = (port("from_port"), port("to_port"))
        && from > to
    {
        diags.push(
            Diagnostic::error(format!("`{what}`: from_port {from} is above to_port {to}"), span)
                .help(format!("a range runs from from_port up to to_port: from_port = {to}, to_port = {from}")),
        );
    }
}

pub(super) fn canonical_rule(r: &Value) -> Value {
    let Some(t) = r.as_table() else { return r.clone() };
    let mut c = t.clone();
    let proto = match t.get("protocol").and_then(Value::as_str).unwrap_or("-1").to_ascii_lowercase().as_str() {
        "all" | "-1" => "-1".to_string(),
        "6" => "tcp".into(),
        "17" => "udp".into(),
        "1" => "icmp".into(),
        p => p.to_string(),
    };
    if proto == "-1" {
        c.remove("from_port");
        c.remove("to_port");
    } else if let (Some(f), None) = (t.get("from_port"), t.get("to_port")) {
        c.insert("to_port".into(), f.clone());
    }
    if c.get("self") == Some(&Value::Bool(false)) {
        c.remove("self");
    }
    c.insert("protocol".into(), Value::str(proto));
    Value::Table(c)
}

/// The group's effective rules: declared ones plus the EFA self rule.
fn effective(inputs: &Attrs, dir: &str) -> Vec<Value> {
    let mut rules: Vec<Value> =
        inputs.get(dir).and_then(Value::as_list).unwrap_or_default().iter().map(canonical_rule).collect();
    if bool_attr(inputs, "efa") {
        rules.push(canonical_rule(&self_all_traffic()));
    }
    rules.sort_by_key(|r| r.to_string());
    rules.dedup();
    rules
}

/// Revokes the rules `old` has and `new` lacks, then authorizes the rest.
async fn sync_rules(ctx: &Ctx, id: &str, old: &Attrs, new: &Attrs) -> Result<()> {
    for dir in ["ingress", "egress"] {
        let (o, n) = (effective(old, dir), effective(new, dir));
        let revoke: Vec<IpPermission> = o.iter().filter(|r| !n.contains(r)).map(|r| permission(r, id)).collect();
        let grant: Vec<IpPermission> = n.iter().filter(|r| !o.contains(r)).map(|r| permission(r, id)).collect();
        match (dir, revoke.is_empty()) {
            ("ingress", false) => {
                let request = ctx.ec2.revoke_security_group_ingress().group_id(id).set_ip_permissions(Some(revoke));
                ctx.call(Service::Ec2, "RevokeSecurityGroupIngress", request.send()).await?;
            }
            ("egress", false) => {
                let request = ctx.ec2.revoke_security_group_egress().group_id(id).set_ip_permissions(Some(revoke));
                ctx.call(Service::Ec2, "RevokeSecurityGroupEgress", request.send()).await?;
            }
            _ => {}
        }
        match (dir, grant.is_empty()) {
            ("ingress", false) => {
                let request = ctx.ec2.authorize_security_group_ingress().group_id(id).set_ip_permissions(Some(grant));
                ctx.call(Service::Ec2, "AuthorizeSecurityGroupIngress", request.send()).await?;
            }
            ("egress", false) => {
                let request = ctx.ec2.authorize_security_group_egress().group_id(id).set_ip_permissions(Some(grant));
                ctx.call(Service::Ec2, "AuthorizeSecurityGroupEgress", request.send()).await?;
            }
            _ => {}
        }
    }
    Ok(())
}

pub(super) fn permission(r: &Value, own_id: &str) -> IpPermission {
    let t = r.as_table().cloned().unwrap_or_default();
    let proto = t.get("protocol").and_then(Value::as_str).unwrap_or("-1");
    let desc = t.get("description").and_then(Value::as_str).map(str::to_string);
    let mut p = IpPermission::builder().ip_protocol(proto);
    if proto != "-1" {
        if let Some(f) = t.get("from_port").and_then(Value::as_int) {
            p = p.from_port(i32_of(f));
        }
        if let Some(to) = t.get("to_port").and_then(Value::as_int) {
            p = p.to_port(i32_of(to));
        }
    }
    if let Some(c) = t.get("cidr").and_then(Value::as_str) {
        p = if c.contains(':') {
            p.ipv6_ranges(Ipv6Range::builder().cidr_ipv6(c).set_description(desc).build())
        } else {
            p.ip_ranges(IpRange::builder().cidr_ip(c).set_description(desc).build())
        };
    } else {
        let group = match t.get("security_group").and_then(Value::as_str) {
            Some(g) => g,
            None => own_id,
        };
        p = p.user_id_group_pairs(UserIdGroupPair::builder().group_id(group).set_description(desc).build());
    }
    p.build()
}

/// AWS's permissions as canonical rules, one per source.
fn observed_rules(perms: &[IpPermission], own_id: &str) -> Vec<Value> {
    let mut out = vec![];
    for p in perms {
        let base = |source: &str, v: Value, desc: Option<&str>| {
            let mut t = std::collections::BTreeMap::from([
                ("protocol".to_string(), Value::str(p.ip_protocol().unwrap_or("-1"))),
                (source.to_string(), v),
            ]);
            if let Some(f) = p.from_port() {
                t.insert("from_port".into(), Value::Int(f.into()));
            }
            if let Some(to) = p.to_port() {
                t.insert("to_port".into(), Value::Int(to.into()));
            }
            if let Some(d) = desc.filter(|d| !d.is_empty()) {
                t.insert("description".into(), Value::str(d));
            }
            canonical_rule(&Value::Table(t))
        };
        for r in p.ip_ranges() {
            out.push(base("cidr", Value::str(r.cidr_ip().unwrap_or_default()), r.description()));
        }
        for r in p.ipv6_ranges() {
            out.push(base("cidr", Value::str(r.cidr_ipv6().unwrap_or_default()), r.description()));
        }
        for g in p.user_id_group_pairs() {
            let gid = g.group_id().unwrap_or_default();
            if gid == own_id {
                out.push(base("self", Value::Bool(true), g.description()));
            } else {
                out.push(base("security_group", Value::str(gid), g.description()));
            }
        }
    }
    out.sort_by_key(|r| r.to_string());
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efa_adds_self_all_traffic_both_ways() {
        let inputs = Attrs::from([("efa".into(), Value::Bool(true))]);
        for dir in ["ingress", "egress"] {
            let rules = effective(&inputs, dir);
            assert_eq!(rules, vec![canonical_rule(&self_all_traffic())]);
        }
    }

    #[test]
    fn canonical_rules_compare_by_meaning() {
        let a = rule("ALL", "cidr", Value::str("10.0.0.0/8"));
        let b = rule("-1", "cidr", Value::str("10.0.0.0/8"));
        assert_eq!(canonical_rule(&a), canonical_rule(&b));
        let mut tcp = rule("tcp", "cidr", Value::str("0.0.0.0/0")).as_table().cloned().unwrap();
        tcp.insert("from_port".into(), Value::Int(443));
        let c = canonical_rule(&Value::Table(tcp));
        assert_eq!(c.as_table().unwrap().get("to_port"), Some(&Value::Int(443)));
    }

    #[test]
    fn current_folds_observed_efa_rules() {
        let recorded = Attrs::from([("efa".into(), Value::Bool(true)), ("ingress".into(), Value::List(vec![]))]);
        let observed = Attrs::from([
            ("ingress".into(), Value::List(vec![canonical_rule(&self_all_traffic())])),
            ("egress".into(), Value::List(vec![canonical_rule(&self_all_traffic())])),
        ]);
        let cur = SecurityGroup.current(&recorded, &observed);
        assert_eq!(cur.get("efa"), Some(&Value::Bool(true)));
        assert_eq!(cur.get("ingress"), Some(&Value::List(vec![])));
        // The egress self rule missing is drift: efa shows false.
        let observed = Attrs::from([
            ("ingress".into(), Value::List(vec![canonical_rule(&self_all_traffic())])),
            ("egress".into(), Value::List(vec![])),
        ]);
        assert_eq!(SecurityGroup.current(&recorded, &observed).get("efa"), Some(&Value::Bool(false)));
    }
}
