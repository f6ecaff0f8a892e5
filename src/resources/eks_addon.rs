//! `eks_addon`: an EKS add-on (vpc-cni, coredns, kube-proxy, eks-pod-identity-agent…)
//! with its `configuration` table sent as JSON (for example vpc-cni's
//! `env.ENABLE_PREFIX_DELEGATION` for pod density on time-sliced nodes). `version =
//! "default"` resolves, once, to EKS's default for the cluster's Kubernetes version, and
//! `"latest"` to the newest version EKS offers for it (DescribeAddonVersions); either is then
//! pinned (recorded, not chased). An add-on's AWS permissions come from an IRSA role
//! (`service_account_role`) or EKS Pod Identity (`pod_identity = [{ service_account, role }]`,
//! CreateAddon/UpdateAddon `podIdentityAssociations`: EKS makes and owns the associations).
//! `preserve = true` keeps the add-on's Kubernetes objects when it is deleted (DeleteAddon
//! `preserve`). `resolve_conflicts` is the update's mode; CreateAddon refuses PRESERVE
//! ("Resolve conflicts option PRESERVE is not supported for operation CreateAddon",
//! hashicorp/terraform-provider-aws#27481, eksctl-io/eksctl#5880), so a create sends NONE for
//! it, which likewise leaves values EKS finds changed ("Preserve – This is similar to the NONE
//! option", botocore eks `CreateAddonRequest.resolveConflicts`).

use async_trait::async_trait;
use aws_sdk_eks::types::{Addon, AddonPodIdentityAssociations, AddonStatus, ResolveConflicts};

use super::iam_role::propagation::{retrying, role_not_visible};
use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, str_attr};
use crate::aws::eks::{self, UpdateOf};
use crate::aws::wait::{Status, until_status};
use crate::aws::{Absent, AwsError, Ctx, Service, tags};
use crate::stack::expr::ExprKind;
use crate::stack::schema::{Attr, Default as Dflt, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct EksAddon;

const ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Replace),
    Attr::req("addon", Ty::Str, OnChange::Replace),
    Attr::opt("version", Ty::Str, Dflt::Str("default"), OnChange::Update),
    Attr::opt("configuration", Ty::Any, Dflt::EmptyMap, OnChange::Update),
    Attr::opt(
        "resolve_conflicts",
        Ty::Enum(&["OVERWRITE", "PRESERVE", "NONE"]),
        Dflt::Str("OVERWRITE"),
        OnChange::Update,
    ),
    Attr::opt("service_account_role", Ty::Str, Dflt::None, OnChange::Update),
    Attr::opt("pod_identity", Ty::List(&Ty::Object(POD_IDENTITY)), Dflt::EmptyList, OnChange::Update),
    Attr::opt("preserve", Ty::Bool, Dflt::Bool(false), OnChange::Update),
    TAGS,
];

/// One `pod_identity` entry (botocore eks `AddonPodIdentityAssociations`: both required).
const POD_IDENTITY: &[Attr] =
    &[Attr::req("service_account", Ty::Str, OnChange::Update), Attr::req("role", Ty::Str, OnChange::Update)];

/// Versions resolved once by gpustack and then pinned: not drift when EKS's answer moves on.
const RESOLVED: [&str; 2] = ["default", "latest"];

/// Marks the current inputs of an import (`import` puts it in, `settle` takes it out): not an
/// attribute, never diffed or stored.
const IMPORTED: &str = "~imported";

impl Schema for EksAddon {
    fn name(&self) -> &'static str {
        "eks_addon"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("arn", Ty::Str), ("version", Ty::Str), ("name", Ty::Str)]
    }
}

#[async_trait]
impl Kind for EksAddon {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "eks:CreateAddon",
            "eks:DeleteAddon",
            "eks:DescribeAddon",
            "eks:DescribeAddonVersions",
            "eks:UpdateAddon",
            "eks:ListAddons",
            "eks:ListClusters",
            "eks:DescribeCluster",
            "eks:DescribeUpdate",
            "eks:TagResource",
            "eks:UntagResource",
            // `pod_identity`: EKS reads the associations it made for the add-on, and the
            // roles are passed to it (EKS UG `add-ons-iam`).
            "eks:DescribePodIdentityAssociation",
            "iam:PassRole",
        ]
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        super::node_group::require_stack_cluster(r, diags);
        if let Some(e) = r.attrs.get("configuration")
            && !matches!(e.kind, ExprKind::Table(_) | ExprKind::Value(Value::Table(_)))
        {
            diags.push(
                Diagnostic::error("`configuration` must be a table; gpustack sends it to EKS as JSON", e.span.clone())
                    .help("for example configuration = { env = { ENABLE_PREFIX_DELEGATION = \"true\" } }"),
            );
        }
        // NONE on create, and PRESERVE (sent as NONE there): "None – If the self-managed
        // version of the add-on is installed on your cluster, Amazon EKS doesn't change the
        // value. Creation of the add-on might fail." (botocore eks
        // `CreateAddonRequest.resolveConflicts`). A new cluster runs vpc-cni, coredns and
        // kube-proxy self-managed unless `bootstrapSelfManagedAddons` is false ("the default
        // networking add-ons include vpc-cni, coredns, and kube-proxy", botocore
        // `CreateClusterRequest.bootstrapSelfManagedAddons`). Review r19-iam m9.
        if let (Some(e), Some(Value::Str(addon))) =
            (r.attrs.get("resolve_conflicts"), r.attrs.get("addon").and_then(|a| a.as_literal()))
            && let Some(Value::Str(mode)) = e.as_literal()
            && matches!(mode.as_str(), "NONE" | "PRESERVE")
            && matches!(addon.as_str(), "vpc-cni" | "coredns" | "kube-proxy")
        {
            diags.push(
                Diagnostic::warning(
                    format!("`{}`: resolve_conflicts = \"{mode}\" is sent as NONE when {addon} is created, and CreateAddon may then fail on the self-managed {addon} a new cluster runs", r.address),
                    e.span.clone(),
                )
                .help("leave resolve_conflicts at \"OVERWRITE\" for the first apply; set it afterwards (updates send it as written)"),
            );
        }
        // Each pod_identity entry names a Kubernetes service account, at most once: EKS keeps
        // one association per service account (EKS UG `pod-id-association`) and refuses a name
        // that is not a DNS-1123 subdomain (as for CreatePodIdentityAssociation).
        // Review r19-iam m5 / m6.
        if let Some(ExprKind::List(items)) = r.attrs.get("pod_identity").map(|e| &e.kind) {
            let mut seen = std::collections::BTreeSet::new();
            for item in items {
                let ExprKind::Table(t) = &item.kind else { continue };
                let Some(e) = t.get("service_account") else { continue };
                let Some(Value::Str(sa)) = e.as_literal() else { continue };
                if !super::pod_identity_association::kubernetes_name(sa, false) {
                    diags.push(
                        Diagnostic::error(
                            format!(
                                "`{}`: pod_identity service_account \"{sa}\" is not a DNS-1123 subdomain",
                                r.address
                            ),
                            e.span.clone(),
                        )
                        .help("Kubernetes names are lowercase letters, digits, '-' and '.', at most 253 characters"),
                    );
                } else if !seen.insert(sa.clone()) {
                    diags.push(
                        Diagnostic::error(
                            format!("`{}`: pod_identity names service account \"{sa}\" twice; EKS keeps one association per service account", r.address),
                            e.span.clone(),
                        )
                        .help("keep one entry per service account"),
                    );
                }
            }
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        if let Some(Value::List(l)) = inputs.get_mut("pod_identity") {
            l.sort_by_key(|v| v.to_string());
        }
    }

    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        // State written before `preserve` existed recorded none: the default, not a change.
        cur.entry("preserve".into()).or_insert(Value::Bool(false));
        for (k, v) in observed {
            // `preserve` only says what a delete does: nothing to observe (an import marks it
            // unknown, for `settle` to take the file's word).
            if k == "preserve" && v.is_known() {
                continue;
            }
            // "default" and "latest" were resolved once and are not drift.
            if k == "version" && RESOLVED.contains(&str_attr(recorded, "version")) {
                continue;
            }
            cur.insert(k.clone(), v.clone());
        }
        cur
    }

    /// An import reads neither `resolve_conflicts` (the mode of a call, not a setting) nor
    /// `preserve` (what a delete does): the file's values stand. A file whose `version` is
    /// "default" or "latest" (resolved once at create, then pinned) takes the installed version
    /// as that pin, as a refresh does: an import never moves an add-on to EKS's default, which
    /// is often older than what eksctl or Terraform installed (review imp-eks M1).
    fn settle(&self, current: &mut Attrs, desired: &Attrs) {
        super::eks_cluster::settle_unreadable(current, desired);
        if current.remove(IMPORTED).is_some() && RESOLVED.contains(&str_attr(desired, "version")) {
            current.insert("version".into(), Value::str(str_attr(desired, "version")));
        }
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("CLUSTER:ADDON_NAME")
    }

    /// DescribeAddon: the installed version (pinned as such), the configuration values, the
    /// IRSA role and the Pod Identity associations EKS made for it.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let Some((cluster, name)) = eks::split_import_id(id) else { return Ok(None) };
        let Some(a) = describe(ctx, cluster, name).await? else { return Ok(None) };
        let all: std::collections::BTreeMap<String, String> =
            a.tags().cloned().unwrap_or_default().into_iter().collect();
        let mut attrs = observe(ctx, cluster, name, &a, &all).await?;
        for k in ["resolve_conflicts", "preserve"] {
            attrs.insert(k.into(), Value::Unknown);
        }
        attrs.insert(IMPORTED.into(), Value::Bool(true));
        let mut unexpressed = vec![];
        // Configuration values that are not a mapping cannot be a table.
        if let Some(raw) = a.configuration_values().filter(|j| !j.trim().is_empty())
            && !matches!(serde_yaml_ng::from_str::<serde_json::Value>(raw), Ok(serde_json::Value::Object(_)))
        {
            unexpressed.push(("configurationValues".into(), raw.to_string()));
        }
        let observed =
            Observed { address: None, id: id.to_string(), attrs, outputs: recorded(&a).outputs, retained: false };
        Ok(Some(Imported { observed, unexpressed }))
    }

    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, outputs: &Attrs) -> Result<()> {
        let arn = match outputs.get("arn").and_then(Value::as_str) {
            Some(a) if !a.is_empty() => a.to_string(),
            _ => {
                let (cluster, name) = eks::split_import_id(id).unwrap_or_default();
                describe(ctx, cluster, name).await?.and_then(|a| a.addon_arn).unwrap_or_default()
            }
        };
        eks::tag_owned(ctx, &arn, address).await
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let i = req.inputs;
        let (cluster, addon) = (str_attr(i, "cluster"), str_attr(i, "addon"));
        let version = match str_attr(i, "version") {
            v @ ("default" | "latest") => resolve_version(ctx, cluster, addon, v == "latest").await?,
            v => v.to_string(),
        };
        let resolve = match str_attr(i, "resolve_conflicts") {
            "PRESERVE" => ResolveConflicts::None,
            r => ResolveConflicts::from(r),
        };
        let call = ctx
            .eks
            .create_addon()
            .cluster_name(cluster)
            .addon_name(addon)
            .addon_version(&version)
            .set_configuration_values(configuration(i))
            .resolve_conflicts(resolve)
            .set_pod_identity_associations(Some(pod_identity(i)).filter(|p| !p.is_empty()))
            .set_service_account_role_arn(
                Some(str_attr(i, "service_account_role").to_string()).filter(|x| !x.is_empty()),
            )
            .set_tags(Some(eks::tag_map(ctx, req.address, i)))
            .client_request_token(req.token);
        // A role made in this apply (service_account_role, pod_identity) may not be visible to
        // EKS yet (propagation.rs); the refused call made nothing.
        let created = retrying(role_not_visible, || ctx.call(Service::Eks, "CreateAddon", call.clone().send()));
        match created.await {
            Ok(_) => {}
            Err(e) if e.has_code("ResourceInUseException") => match describe(ctx, cluster, addon).await? {
                Some(a) if eks::is_ours(ctx, a.tags(), req.address) => {}
                _ => {
                    return Err(e.taken_by_other(&format!(
                        "the cluster already has {addon} installed by someone else; delete it (aws eks delete-addon) or leave it out of the stack"
                    )));
                }
            },
            Err(e) => return Err(e),
        }
        let a = wait_installed(ctx, cluster, addon).await?;
        Ok(recorded(&a))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let mut out = vec![];
        for c in ctx.stack_clusters().await? {
            let cluster = c.name().unwrap_or_default().to_string();
            let pages = ctx.eks.list_addons().cluster_name(&cluster).into_paginator().send();
            let names = ctx.all_pages(Service::Eks, "ListAddons", pages, |p| p.addons.unwrap_or_default());
            let Some(names) = names.await.absent_ok()? else { continue };
            for name in names {
                let Some(a) = describe(ctx, &cluster, &name).await? else { continue };
                let all: std::collections::BTreeMap<String, String> =
                    a.tags().cloned().unwrap_or_default().into_iter().collect();
                if all.get(tags::STACK) != Some(&ctx.stack) {
                    continue;
                }
                let attrs = observe(ctx, &cluster, &name, &a, &all).await?;
                let rec = recorded(&a);
                out.push(Observed::tagged(&all, rec, attrs));
            }
        }
        Ok(out)
    }

    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        _id: &str,
        old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded> {
        let (cluster, addon) = (str_attr(new, "cluster"), str_attr(new, "addon"));
        // `preserve` is for the delete, tags are set by ARN: neither needs UpdateAddon.
        if changed.iter().any(|c| c != "tags" && c != "preserve") {
            // A resolved version stays pinned, unless `version` itself was changed to
            // "default" or "latest": then it is resolved again now, as a create would.
            let version_changed = changed.iter().any(|c| c == "version");
            let version = match str_attr(new, "version") {
                v @ ("default" | "latest") if version_changed => {
                    Some(resolve_version(ctx, cluster, addon, v == "latest").await?)
                }
                v if RESOLVED.contains(&v) => None,
                v => Some(v.to_string()),
            };
            // Left out, UpdateAddon keeps the associations; an empty list deletes them
            // (botocore eks `UpdateAddonRequest.podIdentityAssociations`).
            let associations = changed.iter().any(|c| c == "pod_identity").then(|| pod_identity(new));
            let request = ctx
                .eks
                .update_addon()
                .cluster_name(cluster)
                .addon_name(addon)
                .set_addon_version(version)
                .configuration_values(configuration(new).unwrap_or_else(|| "{}".into()))
                .resolve_conflicts(ResolveConflicts::from(str_attr(new, "resolve_conflicts")))
                .set_service_account_role_arn(
                    Some(str_attr(new, "service_account_role").to_string()).filter(|x| !x.is_empty()),
                )
                .set_pod_identity_associations(associations);
            let sent = retrying(role_not_visible, || ctx.call(Service::Eks, "UpdateAddon", request.clone().send()));
            let out = sent.await?;
            let uid = out.update().and_then(|u| u.id()).unwrap_or_default().to_string();
            let of = UpdateOf { cluster, nodegroup: None, addon: Some(addon) };
            eks::wait_update(ctx, &of, &uid, &format!("update of add-on {addon} in {cluster}")).await?;
        }
        let a = wait_installed(ctx, cluster, addon).await?;
        if changed.iter().any(|c| c == "tags") {
            eks::sync_tags(ctx, a.addon_arn().unwrap_or_default(), old, new).await?;
        }
        Ok(recorded(&a))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, _id: &str, inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let (cluster, addon) = (str_attr(inputs, "cluster"), str_attr(inputs, "addon"));
        // `preserve`: "preserves the add-on software on your cluster but Amazon EKS stops
        // managing any settings for the add-on" (botocore eks `DeleteAddonRequest.preserve`).
        let preserve = inputs.get("preserve").and_then(Value::as_bool).unwrap_or(false);
        let request = ctx.eks.delete_addon().cluster_name(cluster).addon_name(addon).preserve(preserve);
        if ctx.call(Service::Eks, "DeleteAddon", request.send()).await.absent_ok()?.is_none() {
            return Ok(());
        }
        let what = format!("deletion of add-on {addon} in {cluster}");
        eks::wait_deleted(&what, || describe(ctx, cluster, addon), |a| a.status().map(|s| s.as_str())).await
    }
}

/// The inputs as DescribeAddon shows them (refresh and import).
async fn observe(
    ctx: &Ctx,
    cluster: &str,
    name: &str,
    a: &Addon,
    all: &std::collections::BTreeMap<String, String>,
) -> Result<Attrs> {
    let mut attrs = Attrs::from([
        ("cluster".into(), Value::str(cluster)),
        ("addon".into(), Value::str(name)),
        ("version".into(), Value::str(a.addon_version().unwrap_or_default())),
        (
            "configuration".into(),
            // EKS takes the values as JSON or YAML ([UG] `add-ons-configuration`: "in JSON or
            // YAML format"); YAML reads JSON too, and either becomes the same table.
            a.configuration_values()
                .and_then(|j| serde_yaml_ng::from_str::<serde_json::Value>(j).ok())
                .filter(serde_json::Value::is_object)
                .map_or(Value::Table(std::collections::BTreeMap::new()), |j| Value::from_json(&j)),
        ),
        ("tags".into(), tags::observed(all)),
    ]);
    if let Some(r) = a.service_account_role_arn() {
        attrs.insert("service_account_role".into(), Value::str(r));
    }
    attrs.insert("pod_identity".into(), observed_pod_identity(ctx, cluster, a).await?);
    Ok(attrs)
}

/// The `configuration` table as the JSON EKS takes; None when empty.
fn configuration(i: &Attrs) -> Option<String> {
    match i.get("configuration") {
        Some(Value::Table(t)) if !t.is_empty() => Some(Value::Table(t.clone()).to_json().to_string()),
        _ => None,
    }
}

/// The `pod_identity` entries as CreateAddon and UpdateAddon take them.
fn pod_identity(i: &Attrs) -> Vec<AddonPodIdentityAssociations> {
    let field = |t: &std::collections::BTreeMap<String, Value>, k: &str| {
        t.get(k).and_then(Value::as_str).unwrap_or_default().to_string()
    };
    i.get("pod_identity")
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_table)
        .filter_map(|t| {
            AddonPodIdentityAssociations::builder()
                .service_account(field(t, "service_account"))
                .role_arn(field(t, "role"))
                .build()
                .ok()
        })
        .collect()
}

/// The associations EKS made for the add-on (`Addon.podIdentityAssociations` lists their
/// ARNs, `arn:…:podidentityassociation/<cluster>/<id>`), as `pod_identity` entries.
async fn observed_pod_identity(ctx: &Ctx, cluster: &str, a: &Addon) -> Result<Value> {
    let mut entries = vec![];
    for arn in a.pod_identity_associations() {
        let id = arn.rsplit('/').next().unwrap_or_default();
        if let Some(p) = crate::resources::pod_identity_association::describe(ctx, cluster, id).await? {
            entries.push(Value::Table(
                [
                    ("role".to_string(), Value::str(p.role_arn().unwrap_or_default())),
                    ("service_account".to_string(), Value::str(p.service_account().unwrap_or_default())),
                ]
                .into(),
            ));
        }
    }
    entries.sort_by_key(|v| v.to_string());
    Ok(Value::List(entries))
}

/// "v1.19.5-eksbuild.1" → [1, 19, 5, 1]: add-on versions compare by their numbers.
fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty()).filter_map(|p| p.parse().ok()).collect()
}

/// EKS's default version of `addon` for the cluster's Kubernetes version, or with `latest`
/// the newest one offered for it.
async fn resolve_version(ctx: &Ctx, cluster: &str, addon: &str, latest: bool) -> Result<String> {
    let k8s = super::eks_cluster::describe(ctx, cluster)
        .await?
        .and_then(|c| c.version().map(str::to_string))
        .unwrap_or_default();
    // One add-on by name: one page.
    let request = ctx.eks.describe_addon_versions().addon_name(addon).kubernetes_version(&k8s);
    let out = ctx.call(Service::Eks, "DescribeAddonVersions", request.send()).await?;
    let versions: Vec<&aws_sdk_eks::types::AddonVersionInfo> =
        out.addons().iter().filter(|a| a.addon_name() == Some(addon)).flat_map(|a| a.addon_versions()).collect();
    let default = versions
        .iter()
        .find(|v| v.compatibilities().iter().any(|c| c.default_version() && c.cluster_version() == Some(k8s.as_str())));
    let newest = versions.iter().max_by_key(|v| version_key(v.addon_version().unwrap_or_default()));
    let chosen = if latest { newest } else { default.or(versions.first()) };
    match chosen.and_then(|v| v.addon_version()) {
        Some(v) => Ok(v.to_string()),
        None => Err(AwsError {
            operation: "DescribeAddonVersions",
            code: Some("InvalidParameterException".into()),
            detail: format!(
                "EKS has no add-on named {addon} for Kubernetes {k8s}; check the name (aws eks describe-addon-versions)"
            ),
        }),
    }
}

async fn describe(ctx: &Ctx, cluster: &str, addon: &str) -> Result<Option<Addon>> {
    let request = ctx.eks.describe_addon().cluster_name(cluster).addon_name(addon);
    Ok(ctx.call(Service::Eks, "DescribeAddon", request.send()).await.absent_ok()?.and_then(|o| o.addon))
}

/// Waits until the add-on is installed. DEGRADED counts: coredns, for one, stays degraded
/// until node groups exist to run it.
async fn wait_installed(ctx: &Ctx, cluster: &str, addon: &str) -> Result<Addon> {
    let what = format!("add-on {addon} in {cluster}");
    until_status(
        &what,
        eks::CREATE_TIMEOUT,
        || describe(ctx, cluster, addon),
        |a| {
            let Some(a) = a else {
                return Status::Failed(eks::disappeared(
                    "DescribeAddon",
                    format!("add-on {addon} disappeared from {cluster}"),
                ));
            };
            match a.status() {
                Some(AddonStatus::Active | AddonStatus::Degraded) => Status::Reached(a),
                Some(s @ (AddonStatus::CreateFailed | AddonStatus::UpdateFailed)) => {
                    let issues = a.health().map(|h| h.issues()).unwrap_or_default().iter().map(|i| i.message());
                    let detail = format!("add-on {addon} in {cluster} is {}", s.as_str());
                    Status::Failed(eks::failed("CreateAddon", s.as_str(), detail, issues))
                }
                other => Status::Pending(other.map_or("CREATING", |s| s.as_str()).to_string()),
            }
        },
    )
    .await
}

fn recorded(a: &Addon) -> Recorded {
    let (cluster, name) = (a.cluster_name().unwrap_or_default(), a.addon_name().unwrap_or_default());
    Recorded {
        id: format!("{cluster}:{name}"),
        outputs: Attrs::from([
            ("arn".into(), Value::str(a.addon_arn().unwrap_or_default())),
            ("version".into(), Value::str(a.addon_version().unwrap_or_default())),
            ("name".into(), Value::str(name)),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_their_numbers() {
        let mut v = ["v1.9.0-eksbuild.1", "v1.19.5-eksbuild.1", "v1.19.5-eksbuild.10", "v1.19.5-eksbuild.2"];
        v.sort_by_key(|x| version_key(x));
        assert_eq!(v, ["v1.9.0-eksbuild.1", "v1.19.5-eksbuild.1", "v1.19.5-eksbuild.2", "v1.19.5-eksbuild.10"]);
    }

    #[test]
    fn resolved_versions_and_preserve_are_not_drift() {
        let recorded = Attrs::from([("version".into(), Value::str("latest")), ("preserve".into(), Value::Bool(true))]);
        let observed =
            Attrs::from([("version".into(), Value::str("v1.2.3-eksbuild.1")), ("preserve".into(), Value::Bool(false))]);
        let cur = EksAddon.current(&recorded, &observed);
        assert_eq!((cur["version"].clone(), cur["preserve"].clone()), (Value::str("latest"), Value::Bool(true)));
    }

    /// An import cannot read the conflict mode or `preserve`: the file's values are no change;
    /// an installed version is compared as it is.
    #[test]
    fn an_import_takes_the_files_unreadable_settings() {
        let observed = Attrs::from([
            ("version".into(), Value::str("v1.19.5-eksbuild.1")),
            ("resolve_conflicts".into(), Value::Unknown),
            ("preserve".into(), Value::Unknown),
        ]);
        let wants = Attrs::from([
            ("version".into(), Value::str("v1.19.5-eksbuild.1")),
            ("resolve_conflicts".into(), Value::str("OVERWRITE")),
            ("preserve".into(), Value::Bool(true)),
        ]);
        let mut cur = EksAddon.current(&Attrs::new(), &observed);
        EksAddon.settle(&mut cur, &wants);
        assert_eq!(cur, wants);
    }

    /// M1 (review imp-eks): an import whose file leaves the version "default" or "latest"
    /// pins the installed one (no change); an explicit other version still differs; a refresh
    /// (no import mark) is untouched.
    #[test]
    fn an_import_pins_the_installed_version_for_default() {
        let observed =
            Attrs::from([("version".into(), Value::str("v1.19.5-eksbuild.1")), (IMPORTED.into(), Value::Bool(true))]);
        for v in ["default", "latest"] {
            let mut cur = EksAddon.current(&Attrs::new(), &observed);
            EksAddon.settle(&mut cur, &Attrs::from([("version".into(), Value::str(v))]));
            assert_eq!(cur["version"], Value::str(v));
            assert!(!cur.contains_key(IMPORTED));
        }
        let mut cur = EksAddon.current(&Attrs::new(), &observed);
        EksAddon.settle(&mut cur, &Attrs::from([("version".into(), Value::str("v1.20.0-eksbuild.1"))]));
        assert_eq!(cur["version"], Value::str("v1.19.5-eksbuild.1"));
        let mut cur =
            EksAddon.current(&Attrs::new(), &Attrs::from([("version".into(), Value::str("v1.19.5-eksbuild.1"))]));
        EksAddon.settle(&mut cur, &Attrs::from([("version".into(), Value::str("default"))]));
        assert_eq!(cur["version"], Value::str("v1.19.5-eksbuild.1"), "only an import pins");
    }
}
