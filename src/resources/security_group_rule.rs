//! `security_group_rule`: one ingress or egress rule of a security group, as an object of
//! its own (Terraform's `aws_vpc_security_group_ingress_rule` / `_egress_rule`). It breaks
//! the reference cycle of two groups that admit each other (the EKS cluster and node pair:
//! each group's rule names the other group) and adds rules to a group the stack does not own
//! (the cluster security group EKS creates, a group read with `existing`).
//!
//! AWS gives each rule an id (`sgr-…`) and takes tags on it: AuthorizeSecurityGroupIngress
//! and AuthorizeSecurityGroupEgress accept `TagSpecifications` with resource type
//! `security-group-rule` and answer with the new `SecurityGroupRules` (EC2 API reference;
//! botocore `ec2/2016-11-15` `AuthorizeSecurityGroupIngressResult`); RevokeSecurityGroup*
//! takes `SecurityGroupRuleIds`; DescribeSecurityGroupRules filters by `group-id`,
//! `security-group-rule-id` and `tag:<key>`. The rule is tagged like every object gpustack
//! makes, and its `gpustack:address` tag is how a `security_group`, whose inline rules are
//! the complete set, tells these rules apart and leaves them alone ([`owned_rules`]).
//! Every attribute but `description` and `tags` replaces the rule, deleting the old one
//! first (AWS refuses a duplicate rule; Terraform does the same).

use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, ResourceType, SecurityGroupRule};

use super::security_group::{canonical_rule, check_ports, permission};
use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, str_attr};
use crate::aws::{Absent, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct SecurityGroupRuleKind;

const ATTRS: &[Attr] = &[
    Attr::req("security_group", Ty::Str, OnChange::Replace),
    Attr::req("type", Ty::Enum(&["ingress", "egress"]), OnChange::Replace),
    Attr::opt("protocol", Ty::Str, Default::Str("-1"), OnChange::Update),
    Attr::opt("from_port", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("to_port", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("cidr", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("source_security_group", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("self", Ty::Bool, Default::None, OnChange::Update),
    Attr::opt("description", Ty::Str, Default::None, OnChange::Update),
    TAGS,
];

/// The attributes that say what traffic the rule admits, in a security group's rule form.
const RULE_KEYS: &[&str] = &["protocol", "from_port", "to_port", "cidr", "self", "description"];

impl Schema for SecurityGroupRuleKind {
    fn name(&self) -> &'static str {
        "security_group_rule"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("id", Ty::Str)]
    }
}

#[async_trait]
impl Kind for SecurityGroupRuleKind {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:AuthorizeSecurityGroupIngress",
            "ec2:AuthorizeSecurityGroupEgress",
            "ec2:RevokeSecurityGroupIngress",
            "ec2:RevokeSecurityGroupEgress",
            "ec2:ModifySecurityGroupRules",
            "ec2:DescribeSecurityGroupRules",
        ]
    }
    /// Ports, protocol and source change in place (ModifySecurityGroupRules keeps the rule's
    /// id), except a source of another type (CIDR v4, CIDR v6, group): "When you modify a
    /// rule, you cannot change the rule type" (botocore `SecurityGroupRuleRequest`);
    /// terraform-provider-aws `vpc_security_group_ingress_rule.go` replaces only then (and on
    /// a new group). A replacement never collides with the old rule (another group,
    /// direction or source type), so it creates before it deletes: no window without the rule.
    fn replaces(&self, old: &Attrs, new: &Attrs) -> Vec<&'static str> {
        let source = |a: &Attrs| match a.get("cidr").and_then(Value::as_str) {
            Some(c) if c.contains(':') => "cidr6",
            Some(_) => "cidr4",
            None => "group",
        };
        if source(old) == source(new) { vec![] } else { vec!["cidr", "source_security_group", "self"] }
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        let a = &r.address;
        let is_self = r.attrs.get("self").and_then(|e| e.as_literal()) == Some(&Value::Bool(true));
        let sources = r.attrs.contains_key("cidr") as usize
            + r.attrs.contains_key("source_security_group") as usize
            + is_self as usize;
        if sources != 1 {
            diags.push(
                Diagnostic::error(
                    format!("`{a}` needs exactly one of `cidr`, `source_security_group` or `self = true`"),
                    r.span.clone(),
                )
                .help("for example source_security_group = \"${security_group.node.id}\", or cidr = \"10.0.0.0/16\""),
            );
        }
        let proto = r.attrs.get("protocol").and_then(|e| e.as_literal()).and_then(Value::as_str).unwrap_or("-1");
        if matches!(proto.to_ascii_lowercase().as_str(), "tcp" | "udp" | "6" | "17")
            && !r.attrs.contains_key("from_port")
        {
            diags.push(
                Diagnostic::error(format!("`{a}` with protocol \"{proto}\" needs `from_port`"), r.span.clone())
                    .help("add from_port (and to_port for a range), or use protocol = \"-1\" for all traffic"),
            );
        }
        check_ports(a, &r.attrs, diags);
        if let Some(e) = r.attrs.get("cidr")
            && let Some(Value::Str(text)) = e.as_literal()
            && let Some(problem) = super::cidr::rule_cidr_problem(text)
        {
            diags.push(
                Diagnostic::error(format!("`{a}.cidr`: {problem}"), e.span.clone())
                    .help("write an address and a prefix length: \"10.0.0.0/16\", \"203.0.113.7/32\", \"::/0\""),
            );
        }
    }

    /// One canonical spelling: protocol names (`all` is `-1`, `6` is `tcp`), no ports for all
    /// traffic, `to_port` defaulting to `from_port`, and a source that is the group itself
    /// written as `self`, which is how AWS shows it back.
    fn normalize(&self, inputs: &mut Attrs) {
        let own = inputs.get("security_group").cloned();
        if own.as_ref().is_some_and(Value::is_known) && inputs.get("source_security_group") == own.as_ref() {
            inputs.remove("source_security_group");
            inputs.insert("self".into(), Value::Bool(true));
        }
        let table: std::collections::BTreeMap<String, Value> =
            RULE_KEYS.iter().filter_map(|k| Some((k.to_string(), inputs.get(*k)?.clone()))).collect();
        if let Value::Table(c) = canonical_rule(&Value::Table(table)) {
            for k in RULE_KEYS {
                inputs.remove(*k);
            }
            inputs.extend(c);
        }
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let group = str_attr(req.inputs, "security_group");
        let perm = permission(&as_group_rule(req.inputs), group);
        let spec = tags::ec2_spec(ctx, ResourceType::SecurityGroupRule, req.address, req.inputs);
        let rules = if str_attr(req.inputs, "type") == "egress" {
            let call =
                ctx.ec2.authorize_security_group_egress().group_id(group).ip_permissions(perm).tag_specifications(spec);
            ctx.call(Service::Ec2, "AuthorizeSecurityGroupEgress", call.send())
                .await
                .map(|o| o.security_group_rules().to_vec())
        } else {
            let call = ctx
                .ec2
                .authorize_security_group_ingress()
                .group_id(group)
                .ip_permissions(perm)
                .tag_specifications(spec);
            ctx.call(Service::Ec2, "AuthorizeSecurityGroupIngress", call.send())
                .await
                .map(|o| o.security_group_rules().to_vec())
        };
        let rules = match rules {
            Ok(r) => r,
            // The rule exists: made by this very resource (a create that raced a crash) it is
            // adopted; otherwise another rule (inline in a group, or made outside) holds it.
            Err(e) if e.has_code("InvalidPermission.Duplicate") => {
                let mine =
                    group_rules(ctx, group).await?.into_iter().find(|r| tags::is_ours(ctx, r.tags(), req.address));
                match mine {
                    Some(r) => vec![r],
                    None => return Err(e.taken_by_other("remove the same rule from the group's inline ingress/egress, or from wherever else it is declared")),
                }
            }
            Err(e) => return Err(e),
        };
        let id = rules.first().and_then(|r| r.security_group_rule_id()).unwrap_or_default().to_string();
        Ok(recorded(id))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let pages = ctx.ec2.describe_security_group_rules().filters(tags::stack_filter(ctx)).into_paginator().send();
        let rules = ctx
            .all_pages(Service::Ec2, "DescribeSecurityGroupRules", pages, |p| {
                p.security_group_rules.unwrap_or_default()
            })
            .await?;
        Ok(rules
            .iter()
            .map(|r| {
                let all = tags::ec2_map(r.tags());
                let mut attrs = observed(r);
                attrs.insert("tags".into(), tags::observed(&all));
                self.normalize(&mut attrs);
                Observed::tagged(&all, recorded(r.security_group_rule_id().unwrap_or_default().to_string()), attrs)
            })
            .collect())
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("sgr-…")
    }

    /// One rule read with DescribeSecurityGroupRules by its `security-group-rule-id` filter
    /// (EC2 API reference). A rule whose source is a managed prefix list (`PrefixListId`) has
    /// no attribute to say it: import refuses it rather than import a rule that would plan as
    /// one with no source.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let request = ctx
            .ec2
            .describe_security_group_rules()
            .filters(Filter::builder().name("security-group-rule-id").values(id).build());
        let out = ctx.call(Service::Ec2, "DescribeSecurityGroupRules", request.send()).await.absent_ok()?;
        let Some(r) =
            out.and_then(|o| o.security_group_rules().iter().find(|r| r.security_group_rule_id() == Some(id)).cloned())
        else {
            return Ok(None);
        };
        if let Some(pl) = r.prefix_list_id() {
            return Err(crate::aws::AwsError {
                operation: "DescribeSecurityGroupRules",
                code: None,
                detail: format!(
                    "rule {id} admits the prefix list {pl}, which a security_group_rule cannot say (it takes `cidr`, `source_security_group` or `self`); leave it out of the stack"
                ),
            });
        }
        let all = tags::ec2_map(r.tags());
        let mut attrs = observed(&r);
        attrs.insert("tags".into(), tags::observed(&all));
        self.normalize(&mut attrs);
        let mut unexpressed = vec![];
        if let Some(g) = r.referenced_group_info()
            && let Some(owner) = g.user_id().filter(|u| Some(*u) != r.group_owner_id())
        {
            unexpressed.push(super::import_ec2::note("referenced_group_info.user_id", owner));
        }
        Ok(Some(super::import_ec2::imported(recorded(id.to_string()), attrs, unexpressed)))
    }

    /// The rule's `gpustack:address` tag is also what tells its group's inline rules apart
    /// from it ([`owned_rules`]).
    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, _outputs: &Attrs) -> Result<()> {
        super::import_ec2::tag(ctx, &[id.to_string()], address, &[]).await
    }

    /// New ports, protocol, source or description go through ModifySecurityGroupRules, which
    /// keeps the rule's id (EC2 API reference: it takes the whole `SecurityGroupRuleRequest`;
    /// a change of source type is a replacement, [`Kind::replaces`]).
    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded> {
        if changed.iter().any(|c| RULE_KEYS.contains(&c.as_str()) || c == "source_security_group") {
            let group = str_attr(new, "security_group");
            let t = as_group_rule(new);
            let t = t.as_table().cloned().unwrap_or_default();
            let int = |k: &str| t.get(k).and_then(Value::as_int).map(super::i32_of);
            let mut req = aws_sdk_ec2::types::SecurityGroupRuleRequest::builder()
                .ip_protocol(t.get("protocol").and_then(Value::as_str).unwrap_or("-1"))
                .set_from_port(int("from_port"))
                .set_to_port(int("to_port"))
                .description(str_attr(new, "description"));
            req = match t.get("cidr").and_then(Value::as_str) {
                Some(c) if c.contains(':') => req.cidr_ipv6(c),
                Some(c) => req.cidr_ipv4(c),
                None => req.referenced_group_id(t.get("security_group").and_then(Value::as_str).unwrap_or(group)),
            };
            let rule = aws_sdk_ec2::types::SecurityGroupRuleUpdate::builder()
                .security_group_rule_id(id)
                .security_group_rule(req.build())
                .build();
            let call = ctx.ec2.modify_security_group_rules().group_id(group).security_group_rules(rule);
            ctx.call(Service::Ec2, "ModifySecurityGroupRules", call.send()).await?;
        }
        if changed.iter().any(|c| c == "tags") {
            tags::sync_ec2(ctx, id, old, new).await?;
        }
        Ok(recorded(id.to_string()))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let group = str_attr(inputs, "security_group");
        if str_attr(inputs, "type") == "egress" {
            let call = ctx.ec2.revoke_security_group_egress().group_id(group).security_group_rule_ids(id);
            ctx.call(Service::Ec2, "RevokeSecurityGroupEgress", call.send()).await.absent_ok()?;
        } else {
            let call = ctx.ec2.revoke_security_group_ingress().group_id(group).security_group_rule_ids(id);
            ctx.call(Service::Ec2, "RevokeSecurityGroupIngress", call.send()).await.absent_ok()?;
        }
        Ok(())
    }
}

fn recorded(id: String) -> Recorded {
    Recorded { outputs: Attrs::from([("id".into(), Value::str(id.clone()))]), id }
}

/// The rule in a `security_group`'s inline form (`security_group` = the source group).
fn as_group_rule(inputs: &Attrs) -> Value {
    let mut t: std::collections::BTreeMap<String, Value> =
        RULE_KEYS.iter().filter_map(|k| Some((k.to_string(), inputs.get(*k)?.clone()))).collect();
    if let Some(src) = inputs.get("source_security_group") {
        t.insert("security_group".into(), src.clone());
    }
    Value::Table(t)
}

/// A rule's attributes as AWS shows it.
fn observed(r: &SecurityGroupRule) -> Attrs {
    let group = r.group_id().unwrap_or_default();
    let mut a = Attrs::from([
        ("security_group".into(), Value::str(group)),
        ("type".into(), Value::str(if r.is_egress() == Some(true) { "egress" } else { "ingress" })),
        ("protocol".into(), Value::str(r.ip_protocol().unwrap_or("-1"))),
    ]);
    if let Some(f) = r.from_port() {
        a.insert("from_port".into(), Value::Int(f.into()));
    }
    if let Some(t) = r.to_port() {
        a.insert("to_port".into(), Value::Int(t.into()));
    }
    if let Some(c) = r.cidr_ipv4().or(r.cidr_ipv6()) {
        a.insert("cidr".into(), Value::str(c));
    }
    if let Some(g) = r.referenced_group_info().and_then(|g| g.group_id()) {
        if g == group {
            a.insert("self".into(), Value::Bool(true));
        } else {
            a.insert("source_security_group".into(), Value::str(g));
        }
    }
    if let Some(d) = r.description().filter(|d| !d.is_empty()) {
        a.insert("description".into(), Value::str(d));
    }
    a
}

/// Every rule of `group`.
async fn group_rules(ctx: &Ctx, group: &str) -> Result<Vec<SecurityGroupRule>> {
    let pages = ctx
        .ec2
        .describe_security_group_rules()
        .filters(Filter::builder().name("group-id").values(group).build())
        .into_paginator()
        .send();
    ctx.all_pages(Service::Ec2, "DescribeSecurityGroupRules", pages, |p| p.security_group_rules.unwrap_or_default())
        .await
}

/// The rules of `groups` that a `security_group_rule` owns (any stack's: its
/// `gpustack:address` tag names that kind), each as (group id, egress, the rule in a
/// security group's canonical inline form). A `security_group` leaves these out of the
/// rules it reconciles. One paged call for all the groups.
pub(super) async fn owned_rules(ctx: &Ctx, groups: &[String]) -> Result<Vec<(String, bool, Value)>> {
    if groups.is_empty() {
        return Ok(vec![]);
    }
    let pages = ctx
        .ec2
        .describe_security_group_rules()
        .filters(Filter::builder().name("group-id").set_values(Some(groups.to_vec())).build())
        .into_paginator()
        .send();
    let rules = ctx
        .all_pages(Service::Ec2, "DescribeSecurityGroupRules", pages, |p| p.security_group_rules.unwrap_or_default())
        .await?;
    Ok(rules
        .iter()
        .filter(|r| tags::ec2_map(r.tags()).get(tags::ADDRESS).is_some_and(|a| a.starts_with("security_group_rule.")))
        .map(|r| {
            let attrs = observed(r);
            (
                r.group_id().unwrap_or_default().to_string(),
                r.is_egress() == Some(true),
                canonical_rule(&as_group_rule(&attrs)),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_that_is_the_group_itself_is_self() {
        let mut inputs = Attrs::from([
            ("security_group".into(), Value::str("sg-1")),
            ("type".into(), Value::str("ingress")),
            ("protocol".into(), Value::str("6")),
            ("from_port".into(), Value::Int(443)),
            ("source_security_group".into(), Value::str("sg-1")),
        ]);
        SecurityGroupRuleKind.normalize(&mut inputs);
        assert_eq!(inputs.get("self"), Some(&Value::Bool(true)));
        assert_eq!(inputs.get("source_security_group"), None);
        assert_eq!(inputs.get("protocol"), Some(&Value::str("tcp")));
        assert_eq!(inputs.get("to_port"), Some(&Value::Int(443)));
    }

    #[test]
    fn the_inline_form_names_the_source_as_security_group() {
        let inputs = Attrs::from([
            ("security_group".into(), Value::str("sg-1")),
            ("protocol".into(), Value::str("-1")),
            ("source_security_group".into(), Value::str("sg-2")),
        ]);
        let t = as_group_rule(&inputs);
        assert_eq!(t.as_table().unwrap().get("security_group"), Some(&Value::str("sg-2")));
    }
}
