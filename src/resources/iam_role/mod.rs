//! `iam_role`: a role named `<stack>-<name>` under the path `/gpustack/<stack>/`
//! (refresh lists by that prefix), trusted by one AWS service, with managed and
//! inline policies and optionally an instance profile of the same name.
//! Everything but the name updates in place. Its trust (`trust.rs`) is any of AWS services
//! (`service`), EKS Pod Identity (`pod_identity = true`) and service accounts through the
//! cluster's OIDC provider (`service_accounts`, IRSA); a change of trust is
//! UpdateAssumeRolePolicy.

pub mod propagation;
mod trust;

use async_trait::async_trait;
use aws_sdk_iam::types::Tag;

use super::{Create, Imported, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, bool_attr, str_attr};
use crate::aws::{Absent, Ctx, Service, iam, tags};
use crate::stack::expr::ExprKind;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};
use trust::Trust;

pub struct IamRole;

/// One IRSA service account (`service_accounts` entry).
const SERVICE_ACCOUNT: &[Attr] = &[
    Attr::req("oidc_provider", Ty::Str, OnChange::Update),
    Attr::req("namespace", Ty::Str, OnChange::Update),
    Attr::req("name", Ty::Str, OnChange::Update),
];

/// The attributes that make the trust policy.
const TRUST: [&str; 4] = ["service", "pod_identity", "service_accounts", "tag_session"];

const ATTRS: &[Attr] = &[
    Attr::opt("service", Ty::Str, Default::None, OnChange::Update),
    // The `service` may also tag its sessions (`"Action": ["sts:AssumeRole", "sts:TagSession"]`):
    // an EKS Auto Mode cluster role needs it ("The Cluster IAM Role must have an updated trust
    // policy including the sts:TagSession action", EKS UG `auto-enable-existing`; aws-facts-auto-mode §4.1).
    Attr::opt("tag_session", Ty::Bool, Default::Bool(false), OnChange::Update),
    Attr::opt("pod_identity", Ty::Bool, Default::Bool(false), OnChange::Update),
    Attr::opt("service_accounts", Ty::List(&Ty::Object(SERVICE_ACCOUNT)), Default::EmptyList, OnChange::Update),
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
            "iam:GetRolePolicy",
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
        trust_sources(r, diags);
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
        // `service = "pods.eks.amazonaws.com"` means EKS Pod Identity, whose trust also needs
        // sts:TagSession (EKS UG `pod-id-role`): the same as `pod_identity = true`.
        if inputs.get("service").and_then(Value::as_str) == Some(trust::POD_IDENTITY_PRINCIPAL) {
            inputs.remove("service");
            inputs.insert("pod_identity".into(), Value::Bool(true));
        }
        // Unset and false are the same trust: a role recorded before the attribute compares equal.
        if inputs.get("tag_session") == Some(&Value::Bool(false)) || !inputs.contains_key("service") {
            inputs.remove("tag_session");
        }
        for k in ["managed_policies", "service_accounts"] {
            if let Some(Value::List(l)) = inputs.get_mut(k) {
                l.sort_by_key(|v| v.to_string());
                l.dedup();
            }
        }
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let name = str_attr(req.inputs, "name");
        let tags: Vec<Tag> = tags::all_tags(ctx, req.address, req.inputs)
            .into_iter()
            .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
            .collect();
        let request = ctx
            .iam
            .create_role()
            .role_name(name)
            .path(path(ctx))
            .assume_role_policy_document(Trust::of(req.inputs).document())
            .set_tags(Some(tags));
        // A trust naming a principal made moments before (an oidc_provider of this apply) can be
        // refused until IAM sees it (propagation.rs).
        let created = propagation::retrying(propagation::principal_not_visible, || {
            ctx.call(Service::Iam, "CreateRole", request.clone().send())
        });
        let arn = match created.await {
            Ok(out) => out.role().map(|r| r.arn().to_string()).unwrap_or_default(),
            // An interrupted earlier run may have created it: adopt it only if it is ours.
            Err(e) if e.has_code(ALREADY_EXISTS) => {
                iam::adopt_role(ctx, name, req.address, e, "set `name` to another name").await?
            }
            Err(e) => return Err(e),
        };
        let empty = Attrs::new();
        sync_policies(ctx, name, &empty, req.inputs).await?;
        if bool_attr(req.inputs, "instance_profile") {
            add_instance_profile(ctx, name).await?;
        }
        Ok(recorded(name, &arn, bool_attr(req.inputs, "instance_profile")))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let pages = ctx.iam.list_roles().path_prefix(path(ctx)).into_paginator().send();
        let roles = ctx.all_pages(Service::Iam, "ListRoles", pages, |p| p.roles).await?;
        let mut found = vec![];
        // PathPrefix also lists deeper paths: `karpenter_controller` keeps its roles under
        // `/gpustack/<stack>/karpenter/`, and they are not iam_role's.
        for r in roles.into_iter().filter(|r| r.path() == path(ctx)) {
            let name = r.role_name().to_string();
            let address = match name.strip_prefix(&format!("{}-", ctx.stack)) {
                Some(rest) => Some(format!("iam_role.{rest}")),
                None => address_tag(ctx, &name).await?,
            };
            let mut attrs = Attrs::new();
            if let Some(t) = r.assume_role_policy_document().and_then(Trust::read) {
                attrs.extend(t.attrs());
            }
            attrs.insert("name".into(), Value::str(name.clone()));
            let outputs = Attrs::from([("arn".into(), Value::str(r.arn())), ("name".into(), Value::str(name.clone()))]);
            found.push(Observed { address, id: name, attrs, outputs, retained: false });
        }
        // Roles the state records that the path listing does not reach (imported from another
        // path): read by name, and the stack's if they carry its tag.
        let recorded: Vec<String> = ctx
            .recorded_ids
            .read()
            .map(|r| r.get("iam_role").cloned().unwrap_or_default())
            .unwrap_or_default()
            .into_iter()
            .filter(|id| !found.iter().any(|o| &o.id == id))
            .collect();
        for name in recorded {
            let request = ctx.iam.get_role().role_name(&name);
            let Some(role) = ctx.call(Service::Iam, "GetRole", request.send()).await.absent_ok()?.and_then(|o| o.role)
            else {
                continue;
            };
            let all: std::collections::BTreeMap<String, String> =
                role.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
            if all.get(tags::STACK) != Some(&ctx.stack) {
                continue;
            }
            let mut attrs = Attrs::new();
            if let Some(t) = role.assume_role_policy_document().and_then(Trust::read) {
                attrs.extend(t.attrs());
            }
            attrs.insert("name".into(), Value::str(name.clone()));
            let outputs =
                Attrs::from([("arn".into(), Value::str(role.arn())), ("name".into(), Value::str(name.clone()))]);
            found.push(Observed {
                address: all.get(tags::ADDRESS).cloned(),
                id: name,
                attrs,
                outputs,
                retained: false,
            });
        }
        Ok(found)
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("role name")
    }

    /// GetRole, the attached and inline policies and the instance profiles holding the role,
    /// mapped onto the inputs. A trust policy is expressed when reading it into `service`,
    /// `pod_identity` and `service_accounts` and writing those back gives the same statements
    /// ([`trust_expressed`]); otherwise it goes to `unexpressed` whole, and a later trust change is
    /// refused rather than rewrite it (`update`). Also unexpressed: a path other than
    /// gpustack's, a maximum session other than IAM's default hour, a permissions boundary, a
    /// description, and instance profiles not named after the role (the role leaves them when
    /// deleted; they are not deleted). Service-linked roles (path `/aws-service-role/`) belong
    /// to their service and are refused (IAM UG `using-service-linked-roles`).
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let request = ctx.iam.get_role().role_name(id);
        let Some(role) = ctx.call(Service::Iam, "GetRole", request.send()).await.absent_ok()?.and_then(|o| o.role)
        else {
            return Ok(None);
        };
        if role.path().starts_with("/aws-service-role/") {
            return Err(crate::aws::AwsError {
                operation: "GetRole",
                code: None,
                detail: format!(
                    "{id} is a service-linked role: its service makes and deletes it; leave it out of the stack"
                ),
            });
        }
        let note = |f: &str, v: String| (f.to_string(), v);
        let mut unexpressed = vec![];
        let doc = role.assume_role_policy_document().map(percent_decode).unwrap_or_default();
        let trust = Trust::read(&doc).unwrap_or_default();
        if !trust_expressed(&doc) {
            unexpressed.push(note("assume_role_policy", doc.clone()));
        }
        let mut attrs = trust.attrs();
        attrs.insert("name".into(), Value::str(id));
        let pages = ctx.iam.list_attached_role_policies().role_name(id).into_paginator().send();
        let attached = ctx
            .all_pages(Service::Iam, "ListAttachedRolePolicies", pages, |p| p.attached_policies.unwrap_or_default())
            .await?;
        let managed = attached.iter().filter_map(|p| p.policy_arn()).map(Value::str).collect();
        attrs.insert("managed_policies".into(), Value::List(managed));
        let pages = ctx.iam.list_role_policies().role_name(id).into_paginator().send();
        let mut inline = std::collections::BTreeMap::new();
        for name in ctx.all_pages(Service::Iam, "ListRolePolicies", pages, |p| p.policy_names).await? {
            let request = ctx.iam.get_role_policy().role_name(id).policy_name(&name);
            let out = ctx.call(Service::Iam, "GetRolePolicy", request.send()).await?;
            inline.insert(name, Value::str(percent_decode(out.policy_document())));
        }
        attrs.insert("inline_policies".into(), Value::Table(inline));
        let pages = ctx.iam.list_instance_profiles_for_role().role_name(id).into_paginator().send();
        let profiles =
            ctx.all_pages(Service::Iam, "ListInstanceProfilesForRole", pages, |p| p.instance_profiles).await?;
        let own = profiles.iter().any(|p| p.instance_profile_name() == id);
        attrs.insert("instance_profile".into(), Value::Bool(own));
        for p in profiles.iter().filter(|p| p.instance_profile_name() != id) {
            unexpressed.push(note("instance_profile", p.instance_profile_name().to_string()));
        }
        let all: std::collections::BTreeMap<String, String> =
            role.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
        attrs.insert("tags".into(), tags::observed(&all));
        if role.path() != path(ctx) {
            unexpressed.push(note("path", role.path().to_string()));
        }
        if let Some(d) = role.max_session_duration().filter(|d| *d != DEFAULT_SESSION) {
            unexpressed.push(note("max_session_duration", d.to_string()));
        }
        if let Some(b) = role.permissions_boundary().and_then(|b| b.permissions_boundary_arn()) {
            unexpressed.push(note("permissions_boundary", b.to_string()));
        }
        if let Some(d) = role.description().filter(|d| !d.is_empty()) {
            unexpressed.push(note("description", d.to_string()));
        }
        self.normalize(&mut attrs);
        let rec = recorded(id, role.arn(), own);
        Ok(Some(Imported {
            observed: Observed { address: None, id: rec.id, attrs, outputs: rec.outputs, retained: false },
            unexpressed,
        }))
    }

    /// TagRole (and TagInstanceProfile on the profile named after the role, which the role's
    /// `instance_profile` owns): adds or overwrites only the tags given (IAM API reference).
    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, outputs: &Attrs) -> Result<()> {
        let ours = || {
            [(tags::STACK, ctx.stack.as_str()), (tags::ADDRESS, address)]
                .into_iter()
                .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
                .collect::<Vec<_>>()
        };
        let request = ctx.iam.tag_role().role_name(id).set_tags(Some(ours()));
        ctx.call(Service::Iam, "TagRole", request.send()).await?;
        if str_attr(outputs, "instance_profile") == id {
            let request = ctx.iam.tag_instance_profile().instance_profile_name(id).set_tags(Some(ours()));
            ctx.call(Service::Iam, "TagInstanceProfile", request.send()).await.absent_ok()?;
        }
        Ok(())
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
        if TRUST.iter().any(|f| has(f)) {
            // A trust policy the inputs cannot say (an imported role's conditions, several
            // services, other principals) is not rewritten from them: that would drop the rest.
            let role = ctx.call(Service::Iam, "GetRole", ctx.iam.get_role().role_name(id).send()).await?;
            let doc = role.role().and_then(|r| r.assume_role_policy_document()).map(percent_decode).unwrap_or_default();
            if !trust_expressed(&doc) {
                return Err(crate::aws::AwsError {
                    operation: "UpdateAssumeRolePolicy",
                    code: None,
                    detail: format!(
                        "role {id}'s trust policy says more than service, pod_identity and service_accounts can ({doc}); change it with aws iam update-assume-role-policy, or make it one of those forms first"
                    ),
                });
            }
            let request = ctx.iam.update_assume_role_policy().role_name(id).policy_document(Trust::of(new).document());
            propagation::retrying(propagation::principal_not_visible, || {
                ctx.call(Service::Iam, "UpdateAssumeRolePolicy", request.clone().send())
            })
            .await?;
        }
        if has("managed_policies") || has("inline_policies") {
            sync_policies(ctx, id, old, new).await?;
        }
        if has("instance_profile") {
            if bool_attr(new, "instance_profile") {
                add_instance_profile(ctx, id).await?;
            } else {
                remove_instance_profiles(ctx, id).await?;
            }
        }
        if has("tags") {
            iam::sync_role_tags(ctx, id, &tags::changes(old, new)).await?;
        }
        let role = ctx.call(Service::Iam, "GetRole", ctx.iam.get_role().role_name(id).send()).await?;
        let arn = role.role().map(|r| r.arn().to_string()).unwrap_or_default();
        Ok(recorded(id, &arn, bool_attr(new, "instance_profile")))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        if remove_instance_profiles(ctx, id).await.absent_ok()?.is_none() {
            return Ok(());
        }
        let pages = ctx.iam.list_attached_role_policies().role_name(id).into_paginator().send();
        let attached =
            ctx.all_pages(Service::Iam, "ListAttachedRolePolicies", pages, |p| p.attached_policies.unwrap_or_default());
        let Some(attached) = attached.await.absent_ok()? else { return Ok(()) };
        for arn in attached.iter().filter_map(|p| p.policy_arn()) {
            let request = ctx.iam.detach_role_policy().role_name(id).policy_arn(arn);
            ctx.call(Service::Iam, "DetachRolePolicy", request.send()).await.absent_ok()?;
        }
        let pages = ctx.iam.list_role_policies().role_name(id).into_paginator().send();
        for name in ctx.all_pages(Service::Iam, "ListRolePolicies", pages, |p| p.policy_names).await? {
            let request = ctx.iam.delete_role_policy().role_name(id).policy_name(name);
            ctx.call(Service::Iam, "DeleteRolePolicy", request.send()).await.absent_ok()?;
        }
        ctx.call(Service::Iam, "DeleteRole", ctx.iam.delete_role().role_name(id).send()).await.absent_ok()?;
        Ok(())
    }
}

/// A role needs someone to trust, and each IRSA entry a provider and a service account:
/// every problem at the key it is about.
fn trust_sources(r: &Resource, diags: &mut Vec<Diagnostic>) {
    let pod_identity = r.attrs.get("pod_identity").and_then(|e| e.as_literal()) == Some(&Value::Bool(true));
    let accounts = r.attrs.get("service_accounts");
    let any_account = accounts.is_some_and(|e| match (&e.kind, e.as_literal()) {
        (ExprKind::List(l), _) => !l.is_empty(),
        (_, Some(Value::List(l))) => !l.is_empty(),
        _ => true,
    });
    if !r.attrs.contains_key("service") && !pod_identity && !any_account {
        diags.push(
            Diagnostic::error(format!("`{}` says no one may assume it", r.address), r.span.clone())
                .help("set service = \"ec2.amazonaws.com\" (an AWS service), pod_identity = true (EKS Pod Identity), or service_accounts = [{ oidc_provider = \"${oidc_provider.main.arn}\", namespace = \"...\", name = \"...\" }] (IRSA)"),
        );
    }
    let Some(ExprKind::List(items)) = accounts.map(|e| &e.kind) else { return };
    for (n, item) in items.iter().enumerate() {
        let ExprKind::Table(t) = &item.kind else { continue };
        if let Some(e) = t.get("oidc_provider")
            && let Some(Value::Str(arn)) = e.as_literal()
            && (!arn.starts_with("arn:") || crate::resources::oidc_provider::issuer_of_arn(arn).is_none())
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: service_accounts[{n}].oidc_provider \"{arn}\" is not an IAM OIDC provider ARN", r.address),
                    e.span.clone(),
                )
                .help("refer to the stack's provider, oidc_provider = \"${oidc_provider.main.arn}\", or write its ARN: arn:aws:iam::<account>:oidc-provider/oidc.eks.<region>.amazonaws.com/id/<id>"),
            );
        }
        for (key, label) in [("namespace", true), ("name", false)] {
            // `*` and `?` are StringLike wildcards (EKS UG `associate-service-account-role`).
            if let Some(e) = t.get(key)
                && let Some(Value::Str(v)) = e.as_literal()
                && !crate::resources::pod_identity_association::kubernetes_name(&v.replace(['*', '?'], "x"), label)
            {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: service_accounts[{n}].{key} \"{v}\" is not a Kubernetes name", r.address),
                        e.span.clone(),
                    )
                    .help("lowercase letters, digits and '-' (a service account may have '.'), or * to match any"),
                );
            }
        }
    }
}

/// IAM's default maximum session: one hour ("If you do not specify a value for this setting,
/// the default value of one hour is applied", botocore iam `CreateRoleRequest.MaxSessionDuration`).
const DEFAULT_SESSION: i32 = 3600;

/// A trust policy's statements in a form that compares by meaning: `Sid`s dropped, a
/// one-element list read as its element and lists as sets (IAM UG
/// `reference_policies_elements`: an element may be a string or an array of strings).
fn statements(doc: &str) -> Option<Vec<serde_json::Value>> {
    fn canon(v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value as J;
        match v {
            J::Array(items) if items.len() == 1 => canon(&items[0]),
            J::Array(items) => {
                let mut c: Vec<J> = items.iter().map(canon).collect();
                c.sort_by_key(|x| x.to_string());
                c.dedup();
                J::Array(c)
            }
            J::Object(m) => {
                J::Object(m.iter().filter(|(k, _)| k.as_str() != "Sid").map(|(k, x)| (k.clone(), canon(x))).collect())
            }
            other => other.clone(),
        }
    }
    let j: serde_json::Value = serde_json::from_str(doc).ok()?;
    match &j["Statement"] {
        serde_json::Value::Array(a) => Some(a.iter().map(canon).collect()),
        s @ serde_json::Value::Object(_) => Some(vec![canon(s)]),
        _ => None,
    }
}

/// True when `service`, `pod_identity` and `service_accounts` say the whole trust policy
/// `doc` (decoded JSON): every statement is one that reading it into the inputs and writing
/// them back gives again. Only the missing `sts:TagSession` of a Pod Identity statement
/// counts as said (refresh shows it as drift the inputs repair): the statement is otherwise
/// exactly the one written — `Allow`, that one principal, no `Condition`, its actions among
/// AssumeRole and TagSession. A Pod Identity statement narrowed by conditions (the EKS UG
/// `pod-id-role` shows `aws:RequestTag/kubernetes-namespace` and
/// `…/kubernetes-service-account` ones) or a `Deny` is not said, so it is reported and a
/// trust change never rewrites it away (review imp-net M1).
fn trust_expressed(doc: &str) -> bool {
    let (Some(have), Some(trust)) = (statements(doc), Trust::read(doc)) else { return false };
    let written = statements(&trust.document()).unwrap_or_default();
    let bare_pod_identity = |s: &serde_json::Value| {
        let Some(m) = s.as_object() else { return false };
        let actions_ok = match &s["Action"] {
            serde_json::Value::String(a) => trust::POD_IDENTITY_ACTIONS.contains(&a.as_str()),
            serde_json::Value::Array(a) => {
                a.iter().all(|x| x.as_str().is_some_and(|x| trust::POD_IDENTITY_ACTIONS.contains(&x)))
            }
            _ => false,
        };
        actions_ok
            && s["Effect"] == "Allow"
            && s["Principal"] == serde_json::json!({ "Service": trust::POD_IDENTITY_PRINCIPAL })
            && m.keys().all(|k| matches!(k.as_str(), "Effect" | "Principal" | "Action"))
    };
    have.iter().all(|s| written.contains(s) || bare_pod_identity(s))
}

/// IAM's answer when a name is taken.
const ALREADY_EXISTS: &str = "EntityAlreadyExists";

fn path(ctx: &Ctx) -> String {
    format!("/gpustack/{}/", ctx.stack)
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
    let pages = ctx.iam.list_role_tags().role_name(role).into_paginator().send();
    let all = ctx.all_pages(Service::Iam, "ListRoleTags", pages, |p| p.tags).await?;
    Ok(all.iter().find(|t| t.key() == tags::ADDRESS).map(|t| t.value().to_string()))
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
    let (o, n) = (policy_list(old), policy_list(new));
    for arn in o.iter().filter(|p| !n.contains(p)) {
        let request = ctx.iam.detach_role_policy().role_name(role).policy_arn(arn);
        ctx.call(Service::Iam, "DetachRolePolicy", request.send()).await.absent_ok()?;
    }
    for arn in n.iter().filter(|p| !o.contains(p)) {
        let request = ctx.iam.attach_role_policy().role_name(role).policy_arn(arn);
        ctx.call(Service::Iam, "AttachRolePolicy", request.send()).await?;
    }
    let (o, n) = (inline_map(old), inline_map(new));
    for name in o.keys().filter(|k| !n.contains_key(*k)) {
        let request = ctx.iam.delete_role_policy().role_name(role).policy_name(name);
        ctx.call(Service::Iam, "DeleteRolePolicy", request.send()).await.absent_ok()?;
    }
    for (name, doc) in n.iter().filter(|(k, v)| o.get(*k) != Some(v)) {
        let request = ctx.iam.put_role_policy().role_name(role).policy_name(name).policy_document(doc);
        ctx.call(Service::Iam, "PutRolePolicy", request.send()).await?;
    }
    Ok(())
}

/// Creates the instance profile of the role's name and adds the role; both steps
/// tolerate an earlier interrupted attempt.
async fn add_instance_profile(ctx: &Ctx, role: &str) -> Result<()> {
    let request = ctx.iam.create_instance_profile().instance_profile_name(role).path(path(ctx));
    match ctx.call(Service::Iam, "CreateInstanceProfile", request.send()).await {
        Err(e) if !e.has_code(ALREADY_EXISTS) => return Err(e),
        _ => {}
    }
    let request = ctx.iam.add_role_to_instance_profile().instance_profile_name(role).role_name(role);
    match ctx.call(Service::Iam, "AddRoleToInstanceProfile", request.send()).await {
        // A profile holds one role: LimitExceeded means it has one already.
        Err(e) if !e.has_code("LimitExceeded") && !e.has_code(ALREADY_EXISTS) => Err(e),
        _ => Ok(()),
    }
}

async fn remove_instance_profiles(ctx: &Ctx, role: &str) -> Result<()> {
    let pages = ctx.iam.list_instance_profiles_for_role().role_name(role).into_paginator().send();
    let mut profiles =
        ctx.all_pages(Service::Iam, "ListInstanceProfilesForRole", pages, |p| p.instance_profiles).await?;
    // Profiles the stack does not own first (an imported role's, reported at import: the role
    // leaves them and they stay), so a refusal there changes nothing of the role's own. The
    // deploy policy allows RemoveRoleFromInstanceProfile only on the stack's profiles (its only
    // resource type is `instance-profile`, SAR for IAM): say what to do rather than fail
    // halfway (review imp-net M6).
    let stacks =
        |ip: &aws_sdk_iam::types::InstanceProfile| ip.instance_profile_name() == role || ip.path() == path(ctx);
    profiles.sort_by_key(stacks);
    for ip in profiles {
        let name = ip.instance_profile_name();
        let request = ctx.iam.remove_role_from_instance_profile().instance_profile_name(name).role_name(role);
        let removed = ctx.call(Service::Iam, "RemoveRoleFromInstanceProfile", request.send()).await.absent_ok();
        if let Err(e) = removed {
            if stacks(&ip) {
                return Err(e);
            }
            return Err(crate::aws::AwsError {
                detail: format!(
                    "{}; instance profile {name} is not this stack's and still holds role {role}: take the role out \
                     (aws iam remove-role-from-instance-profile --instance-profile-name {name} --role-name {role}) \
                     or delete the profile, then destroy again",
                    e.detail
                ),
                ..e
            });
        }
        if name == role {
            let request = ctx.iam.delete_instance_profile().instance_profile_name(name);
            ctx.call(Service::Iam, "DeleteInstanceProfile", request.send()).await.absent_ok()?;
        }
    }
    // The profile named after the role, found by its name and path even when it no longer
    // holds the role: a delete killed after RemoveRoleFromInstanceProfile, or a create killed
    // before AddRoleToInstanceProfile, leaves it where ListInstanceProfilesForRole cannot see it.
    let request = ctx.iam.get_instance_profile().instance_profile_name(role);
    let own = ctx.call(Service::Iam, "GetInstanceProfile", request.send()).await.absent_ok()?;
    if own.and_then(|o| o.instance_profile).is_some_and(|ip| ip.path() == path(ctx) && ip.roles().is_empty()) {
        let request = ctx.iam.delete_instance_profile().instance_profile_name(role);
        ctx.call(Service::Iam, "DeleteInstanceProfile", request.send()).await.absent_ok()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted_service(doc: &str) -> Option<String> {
        Trust::read(doc)?.service
    }

    #[test]
    fn reads_service_from_url_encoded_trust_policy() {
        let doc = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Principal%22%3A%7B%22Service%22%3A%22eks.amazonaws.com%22%7D%2C%22Action%22%3A%22sts%3AAssumeRole%22%7D%5D%7D";
        assert_eq!(trusted_service(doc).as_deref(), Some("eks.amazonaws.com"));
        let ec2 = Trust { service: Some("ec2.amazonaws.com".into()), ..Trust::default() };
        assert_eq!(trusted_service(&ec2.document()).as_deref(), Some("ec2.amazonaws.com"));
    }

    #[test]
    fn the_pod_identity_principal_as_a_service_is_pod_identity() {
        let mut i = Attrs::from([
            ("service".into(), Value::str("pods.eks.amazonaws.com")),
            ("pod_identity".into(), Value::Bool(false)),
        ]);
        IamRole.normalize(&mut i);
        assert_eq!(Trust::of(&i), Trust { pod_identity: true, ..Trust::default() });
        let doc: serde_json::Value = serde_json::from_str(&Trust::of(&i).document()).unwrap();
        assert_eq!(doc["Statement"][0]["Action"], serde_json::json!(["sts:AssumeRole", "sts:TagSession"]));
    }

    /// Review imp-net M1: only a Pod Identity statement's missing TagSession counts as said; its
    /// conditions (EKS UG `pod-id-role`) or a Deny make the trust unexpressed, so the import
    /// reports it and `update` refuses to rewrite it.
    #[test]
    fn a_pod_identity_trust_with_conditions_or_a_deny_is_not_expressed() {
        let doc = |statement: &str| format!("{{\"Version\":\"2012-10-17\",\"Statement\":[{statement}]}}");
        let bare = r#"{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":["sts:AssumeRole","sts:TagSession"]}"#;
        assert!(trust_expressed(&doc(bare)));
        let no_tag = r#"{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":"sts:AssumeRole"}"#;
        assert!(trust_expressed(&doc(no_tag)), "the missing TagSession is drift the inputs repair");
        let narrowed = r#"{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":["sts:AssumeRole","sts:TagSession"],"Condition":{"StringEquals":{"aws:RequestTag/kubernetes-namespace":"ml"}}}"#;
        assert!(!trust_expressed(&doc(narrowed)));
        let deny = r#"{"Effect":"Deny","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":"sts:AssumeRole"}"#;
        assert!(!trust_expressed(&doc(&format!("{bare},{deny}"))));
        let wider = r#"{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":"sts:*"}"#;
        assert!(!trust_expressed(&doc(wider)));
    }

    #[test]
    fn decoding_never_slices_inside_a_character() {
        // A `%` followed by a multi-byte character once cut a &str mid-character (panic).
        assert_eq!(percent_decode("%é1"), "%é1");
        assert_eq!(percent_decode("a%€"), "a%€");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%E2%82%AC%2"), "€%2");
        assert_eq!(percent_decode("%FF"), "\u{FFFD}");
        assert_eq!(
            trusted_service("{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{\"Service\":\"é%é\"}}]}").as_deref(),
            Some("é%é")
        );
    }
}
