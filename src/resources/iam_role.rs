//! `iam_role`: a role named `<stack>-<name>` under the path `/gpustack/<stack>/`
//! (refresh lists by that prefix), trusted by one AWS service, with managed and
//! inline policies and optionally an instance profile of the same name.
//! Everything but the name updates in place.

use async_trait::async_trait;
use aws_sdk_iam::types::Tag;

use super::{Create, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, b, s};
use crate::aws::{AwsError, Ctx, Service, err, gone_is_ok, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct IamRole;

const ATTRS: &[Attr] = &[
    Attr::req("service", Ty::Str, OnChange::Update),
    Attr::opt("managed_policies", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    Attr::opt("inline_policies", Ty::Map(&Ty::Str), Default::EmptyMap, OnChange::Update),
    Attr::opt("instance_profile", Ty::Bool, Default::Bool(false), OnChange::Update),
    Attr::opt("name", Ty::Str, Default::None, OnChange::Replace),
    TAGS,
];

impl Schema for IamRole {
    fn name(&self) -> &'static str {
        "iam_role"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("arn", Ty::Str), ("name", Ty::Str), ("instance_profile", Ty::Str)]
    }
}

#[async_trait]
impl Kind for IamRole {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "iam:CreateRole",
            "iam:DeleteRole",
            "iam:GetRole",
            "iam:ListRoles",
            "iam:TagRole",
            "iam:UntagRole",
            "iam:ListRoleTags",
            "iam:UpdateAssumeRolePolicy",
            "iam:AttachRolePolicy",
            "iam:DetachRolePolicy",
            "iam:ListAttachedRolePolicies",
            "iam:PutRolePolicy",
            "iam:DeleteRolePolicy",
            "iam:ListRolePolicies",
            "iam:CreateInstanceProfile",
            "iam:DeleteInstanceProfile",
            "iam:AddRoleToInstanceProfile",
            "iam:RemoveRoleFromInstanceProfile",
            "iam:ListInstanceProfilesForRole",
            "iam:ListInstanceProfiles",
            "iam:GetInstanceProfile",
            "iam:TagInstanceProfile",
        ]
    }
    fn replace_order(&self) -> ReplaceOrder {
        ReplaceOrder::DeleteBeforeCreate
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        if let Some(e) = r.attrs.get("inline_policies")
            && let Some(Value::Table(t)) = e.as_literal()
        {
            for (name, doc) in t {
                if let Some(Err(je)) = doc.as_str().map(serde_json::from_str::<serde_json::Value>) {
                    diags.push(
                        Diagnostic::error(format!("inline policy `{name}` is not valid JSON: {je}"), e.span.clone())
                            .help("write the policy document as a JSON string, e.g. with '''...''' quotes"),
                    );
                }
            }
        }
        if let Some(e) = r.attrs.get("managed_policies")
            && let Some(Value::List(l)) = e.as_literal()
        {
            for p in l.iter().filter_map(Value::as_str).filter(|p| !p.starts_with("arn:")) {
                diags.push(
                    Diagnostic::error(format!("managed policy \"{p}\" is not an ARN"), e.span.clone())
                        .help(format!("write the full ARN: \"arn:aws:iam::aws:policy/{p}\"")),
                );
            }
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        if let Some(Value::List(l)) = inputs.get_mut("managed_policies") {
            l.sort_by_key(|v| v.to_string());
            l.dedup();
        }
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let name = s(req.inputs, "name");
        let tags: Vec<Tag> = tags::all_tags(ctx, req.address, req.inputs)
            .into_iter()
            .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
            .collect();
        let created = {
            let _p = ctx.permit(Service::Iam).await;
            ctx.iam
                .create_role()
                .role_name(name)
                .path(path(ctx))
                .assume_role_policy_document(trust_policy(s(req.inputs, "service")))
                .set_tags(Some(tags))
                .send()
                .await
        };
        let arn = match created {
            Ok(out) => out.role().map(|r| r.arn().to_string()).unwrap_or_default(),
            // An interrupted earlier run may have created it: adopt it only if it is ours.
            Err(e) if e.as_service_error().is_some_and(|se| se.is_entity_already_exists_exception()) => {
                adopt_existing(ctx, name, req.address).await?
            }
            Err(e) => return Err(err("CreateRole")(e)),
        };
        let empty = Attrs::new();
        sync_policies(ctx, name, &empty, req.inputs).await?;
        if b(req.inputs, "instance_profile") {
            add_instance_profile(ctx, name).await?;
        }
        Ok(recorded(name, &arn, b(req.inputs, "instance_profile")))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let mut found = vec![];
        let mut pages = ctx.iam.list_roles().path_prefix(path(ctx)).into_paginator().send();
        while let Some(page) = {
            let _p = ctx.permit(Service::Iam).await;
            pages.next().await
        } {
            // PathPrefix also lists deeper paths: `karpenter_controller` keeps its roles under
            // `/gpustack/<stack>/karpenter/`, and they are not iam_role's.
            for r in page.map_err(err("ListRoles"))?.roles().iter().filter(|r| r.path() == path(ctx)) {
                let name = r.role_name().to_string();
                let address = match name.strip_prefix(&format!("{}-", ctx.stack)) {
                    Some(rest) => Some(format!("iam_role.{rest}")),
                    None => address_tag(ctx, &name).await?,
                };
                let mut attrs = Attrs::new();
                if let Some(svc) = r.assume_role_policy_document().and_then(trusted_service) {
                    attrs.insert("service".into(), Value::str(svc));
                }
                attrs.insert("name".into(), Value::str(name.clone()));
                let outputs =
                    Attrs::from([("arn".into(), Value::str(r.arn())), ("name".into(), Value::str(name.clone()))]);
                found.push(Observed { address, id: name, attrs, outputs, retained: false });
            }
        }
        Ok(found)
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
        let has = |f: &str| changed.iter().any(|c| c == f);
        if has("service") {
            let _p = ctx.permit(Service::Iam).await;
            ctx.iam
                .update_assume_role_policy()
                .role_name(id)
                .policy_document(trust_policy(s(new, "service")))
                .send()
                .await
                .map_err(err("UpdateAssumeRolePolicy"))?;
        }
        if has("managed_policies") || has("inline_policies") {
            sync_policies(ctx, id, old, new).await?;
        }
        if has("instance_profile") {
            if b(new, "instance_profile") {
                add_instance_profile(ctx, id).await?;
            } else {
                remove_instance_profiles(ctx, id).await?;
            }
        }
        if has("tags") {
            sync_tags(ctx, id, old, new).await?;
        }
        let arn = {
            let _p = ctx.permit(Service::Iam).await;
            ctx.iam
                .get_role()
                .role_name(id)
                .send()
                .await
                .map_err(err("GetRole"))?
                .role()
                .map(|r| r.arn().to_string())
                .unwrap_or_default()
        };
        Ok(recorded(id, &arn, b(new, "instance_profile")))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        match remove_instance_profiles(ctx, id).await {
            Err(e) if e.is_not_found() => return Ok(()),
            other => other?,
        }
        let _p = ctx.permit(Service::Iam).await;
        let attached =
            ctx.iam.list_attached_role_policies().role_name(id).send().await.map_err(err("ListAttachedRolePolicies"));
        let attached = match attached {
            Err(e) if e.is_not_found() => return Ok(()),
            other => other?,
        };
        for p in attached.attached_policies() {
            if let Some(arn) = p.policy_arn() {
                gone_is_ok(
                    ctx.iam
                        .detach_role_policy()
                        .role_name(id)
                        .policy_arn(arn)
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(err("DetachRolePolicy")),
                )?;
            }
        }
        let inline = ctx.iam.list_role_policies().role_name(id).send().await.map_err(err("ListRolePolicies"))?;
        for p in inline.policy_names() {
            gone_is_ok(
                ctx.iam
                    .delete_role_policy()
                    .role_name(id)
                    .policy_name(p)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(err("DeleteRolePolicy")),
            )?;
        }
        gone_is_ok(ctx.iam.delete_role().role_name(id).send().await.map(|_| ()).map_err(err("DeleteRole")))
    }
}

fn path(ctx: &Ctx) -> String {
    format!("/gpustack/{}/", ctx.stack)
}

fn trust_policy(service: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{ "Effect": "Allow", "Principal": { "Service": service }, "Action": "sts:AssumeRole" }]
    })
    .to_string()
}

/// The service a trust policy names (AWS returns the document URL-encoded).
fn trusted_service(doc: &str) -> Option<String> {
    let decoded = percent_decode(doc);
    let j: serde_json::Value = serde_json::from_str(&decoded).or_else(|_| serde_json::from_str(doc)).ok()?;
    let p = &j["Statement"][0]["Principal"]["Service"];
    p.as_str().map(str::to_string).or_else(|| p[0].as_str().map(str::to_string))
}

/// `%XX` escapes decoded; a malformed escape or invalid UTF-8 is kept as written (lossy),
/// never a panic: the document comes from AWS, but nothing guarantees its shape.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

fn recorded(name: &str, arn: &str, profile: bool) -> Recorded {
    Recorded {
        id: name.to_string(),
        outputs: Attrs::from([
            ("arn".into(), Value::str(arn)),
            ("name".into(), Value::str(name)),
            ("instance_profile".into(), Value::str(if profile { name } else { "" })),
        ]),
    }
}

async fn address_tag(ctx: &Ctx, role: &str) -> Result<Option<String>> {
    let _p = ctx.permit(Service::Iam).await;
    let out = ctx.iam.list_role_tags().role_name(role).send().await.map_err(err("ListRoleTags"))?;
    Ok(out.tags().iter().find(|t| t.key() == tags::ADDRESS).map(|t| t.value().to_string()))
}

/// An existing role of that name: ours (tagged with this stack and address) is reused.
async fn adopt_existing(ctx: &Ctx, name: &str, address: &str) -> Result<String> {
    let _p = ctx.permit(Service::Iam).await;
    let role = ctx.iam.get_role().role_name(name).send().await.map_err(err("GetRole"))?;
    let r = role.role();
    let tagged = |k: &str, v: &str| r.is_some_and(|r| r.tags().iter().any(|t| t.key() == k && t.value() == v));
    if tagged(tags::STACK, &ctx.stack) && tagged(tags::ADDRESS, address) {
        Ok(r.map(|r| r.arn().to_string()).unwrap_or_default())
    } else {
        Err(AwsError {
            operation: "CreateRole",
            code: Some("EntityAlreadyExists".into()),
            detail: format!(
                "a role named {name} already exists and was not created by {address} of stack {}; set `name` to another name",
                ctx.stack
            ),
        })
    }
}

fn policy_list(a: &Attrs) -> Vec<String> {
    a.get("managed_policies")
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn inline_map(a: &Attrs) -> std::collections::BTreeMap<String, String> {
    a.get("inline_policies")
        .and_then(Value::as_table)
        .map(|t| t.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

async fn sync_policies(ctx: &Ctx, role: &str, old: &Attrs, new: &Attrs) -> Result<()> {
    let _p = ctx.permit(Service::Iam).await;
    let (o, n) = (policy_list(old), policy_list(new));
    for arn in o.iter().filter(|p| !n.contains(p)) {
        gone_is_ok(
            ctx.iam
                .detach_role_policy()
                .role_name(role)
                .policy_arn(arn)
                .send()
                .await
                .map(|_| ())
                .map_err(err("DetachRolePolicy")),
        )?;
    }
    for arn in n.iter().filter(|p| !o.contains(p)) {
        ctx.iam.attach_role_policy().role_name(role).policy_arn(arn).send().await.map_err(err("AttachRolePolicy"))?;
    }
    let (o, n) = (inline_map(old), inline_map(new));
    for name in o.keys().filter(|k| !n.contains_key(*k)) {
        gone_is_ok(
            ctx.iam
                .delete_role_policy()
                .role_name(role)
                .policy_name(name)
                .send()
                .await
                .map(|_| ())
                .map_err(err("DeleteRolePolicy")),
        )?;
    }
    for (name, doc) in n.iter().filter(|(k, v)| o.get(*k) != Some(v)) {
        ctx.iam
            .put_role_policy()
            .role_name(role)
            .policy_name(name)
            .policy_document(doc)
            .send()
            .await
            .map_err(err("PutRolePolicy"))?;
    }
    Ok(())
}

async fn sync_tags(ctx: &Ctx, role: &str, old: &Attrs, new: &Attrs) -> Result<()> {
    let (o, n) = (tags::user_tags(old), tags::user_tags(new));
    let _p = ctx.permit(Service::Iam).await;
    let removed: Vec<String> = o.keys().filter(|k| !n.contains_key(*k)).cloned().collect();
    if !removed.is_empty() {
        ctx.iam.untag_role().role_name(role).set_tag_keys(Some(removed)).send().await.map_err(err("UntagRole"))?;
    }
    let set: Vec<Tag> = n
        .iter()
        .filter(|(k, v)| o.get(*k) != Some(v))
        .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
        .collect();
    if !set.is_empty() {
        ctx.iam.tag_role().role_name(role).set_tags(Some(set)).send().await.map_err(err("TagRole"))?;
    }
    Ok(())
}

/// Creates the instance profile of the role's name and adds the role; both steps
/// tolerate an earlier interrupted attempt.
async fn add_instance_profile(ctx: &Ctx, role: &str) -> Result<()> {
    let _p = ctx.permit(Service::Iam).await;
    match ctx.iam.create_instance_profile().instance_profile_name(role).path(path(ctx)).send().await {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|se| se.is_entity_already_exists_exception()) => {}
        Err(e) => return Err(err("CreateInstanceProfile")(e)),
    }
    match ctx.iam.add_role_to_instance_profile().instance_profile_name(role).role_name(role).send().await {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_limit_exceeded_exception() || se.is_entity_already_exists_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(err("AddRoleToInstanceProfile")(e)),
    }
}

async fn remove_instance_profiles(ctx: &Ctx, role: &str) -> Result<()> {
    let _p = ctx.permit(Service::Iam).await;
    let out = ctx
        .iam
        .list_instance_profiles_for_role()
        .role_name(role)
        .send()
        .await
        .map_err(err("ListInstanceProfilesForRole"))?;
    for ip in out.instance_profiles() {
        let name = ip.instance_profile_name();
        gone_is_ok(
            ctx.iam
                .remove_role_from_instance_profile()
                .instance_profile_name(name)
                .role_name(role)
                .send()
                .await
                .map(|_| ())
                .map_err(err("RemoveRoleFromInstanceProfile")),
        )?;
        if name == role {
            gone_is_ok(
                ctx.iam
                    .delete_instance_profile()
                    .instance_profile_name(name)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(err("DeleteInstanceProfile")),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_service_from_url_encoded_trust_policy() {
        let doc = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Principal%22%3A%7B%22Service%22%3A%22eks.amazonaws.com%22%7D%2C%22Action%22%3A%22sts%3AAssumeRole%22%7D%5D%7D";
        assert_eq!(trusted_service(doc).as_deref(), Some("eks.amazonaws.com"));
        assert_eq!(trusted_service(&trust_policy("ec2.amazonaws.com")).as_deref(), Some("ec2.amazonaws.com"));
    }

    #[test]
    fn decoding_never_slices_inside_a_character() {
        // A `%` followed by a multi-byte character once cut a &str mid-character (panic).
        assert_eq!(percent_decode("%é1"), "%é1");
        assert_eq!(percent_decode("a%€"), "a%€");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%E2%82%AC%2"), "€%2");
        assert_eq!(percent_decode("%FF"), "\u{FFFD}");
        assert_eq!(trusted_service("{\"Statement\":[{\"Principal\":{\"Service\":\"é%é\"}}]}").as_deref(), Some("é%é"));
    }
}
