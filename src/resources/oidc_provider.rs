//! `oidc_provider`: the IAM OpenID Connect provider for a cluster's issuer, which IAM roles
//! for service accounts (IRSA) trust (EKS UG `enable-iam-roles-for-service-accounts`).
//! `url = "${eks_cluster.main.oidc_issuer}"`; `client_ids` default to `["sts.amazonaws.com"]`
//! (the audience the EKS pod identity webhook puts in projected tokens, EKS UG
//! `associate-service-account-role`); `thumbprints` are optional and sent only when written:
//! `ThumbprintList` is optional in the IAM model ("If it is not included, IAM will retrieve and
//! use the top intermediate certificate authority (CA) thumbprint", botocore iam 2010-05-08
//! `CreateOpenIDConnectProviderRequest`), and IAM verifies well-known issuers such as EKS's
//! against its library of trusted root CAs ("only then we secure communication using the
//! thumbprints", same model, `CreateOpenIDConnectProvider`).
//!
//! The physical id is the provider's ARN. Client ids and thumbprints change in place
//! (Add/RemoveClientIDToOpenIDConnectProvider, UpdateOpenIDConnectProviderThumbprint); a new
//! URL is a new provider. Refresh lists the account's providers (one call, no paging in the
//! API) and reads each one (GetOpenIDConnectProvider gives its URL, lists and tags at once).

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_iam::types::Tag;

use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, str_attr, strings_attr};
use crate::aws::{Absent, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct OidcProvider;

/// The audience of the tokens EKS's pod identity webhook projects for IRSA.
pub const STS_AUDIENCE: &str = "sts.amazonaws.com";

const ATTRS: &[Attr] = &[
    Attr::req("url", Ty::Str, OnChange::Replace),
    Attr::opt("client_ids", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    Attr::opt("thumbprints", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    TAGS,
];

/// IAM's limits (botocore iam: `clientIDType` 1..255 characters, at most 100 client ids per
/// provider per the `ClientIDList` doc; `thumbprintType` exactly 40 characters, "up to five
/// thumbprints" per the `ThumbprintList` doc; `OpenIDConnectProviderUrlType` up to 255).
const CLIENT_IDS_MAX: usize = 100;
const CLIENT_ID_CHARS: std::ops::RangeInclusive<usize> = 1..=255;
const THUMBPRINTS_MAX: usize = 5;
const URL_MAX: usize = 255;

impl Schema for OidcProvider {
    fn name(&self) -> &'static str {
        "oidc_provider"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("arn", Ty::Str), ("url", Ty::Str)]
    }
}

#[async_trait]
impl Kind for OidcProvider {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "iam:CreateOpenIDConnectProvider",
            "iam:GetOpenIDConnectProvider",
            "iam:ListOpenIDConnectProviders",
            "iam:DeleteOpenIDConnectProvider",
            "iam:AddClientIDToOpenIDConnectProvider",
            "iam:RemoveClientIDFromOpenIDConnectProvider",
            "iam:UpdateOpenIDConnectProviderThumbprint",
            "iam:TagOpenIDConnectProvider",
            "iam:UntagOpenIDConnectProvider",
        ]
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        if let Some(e) = r.attrs.get("url")
            && let Some(Value::Str(url)) = e.as_literal()
        {
            // "The URL must begin with https:// ... query parameters are not [allowed] ... should
            // not contain a port number" (botocore iam `CreateOpenIDConnectProviderRequest.Url`).
            let rest = url.strip_prefix("https://");
            let bad = match rest {
                None => Some("must begin with https://"),
                Some("") => Some("names no host"),
                Some(r) if r.contains('?') || r.contains('#') => Some("may not carry a query or fragment"),
                Some(r) if r.split('/').next().is_some_and(|h| h.contains(':')) => Some("may not name a port"),
                _ if url.chars().count() > URL_MAX => Some("is longer than IAM's 255 characters"),
                _ => None,
            };
            if let Some(why) = bad {
                diags.push(
                    Diagnostic::error(format!("`{}`: url \"{url}\" {why}", r.address), e.span.clone())
                        .help("use the cluster's issuer: url = \"${eks_cluster.main.oidc_issuer}\""),
                );
            }
        }
        if let Some(e) = r.attrs.get("client_ids")
            && let Some(Value::List(ids)) = e.as_literal()
        {
            if ids.len() > CLIENT_IDS_MAX {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: {} client ids, IAM allows {CLIENT_IDS_MAX}", r.address, ids.len()),
                        e.span.clone(),
                    )
                    .help("keep at most 100 client ids (audiences) per provider"),
                );
            }
            for id in ids.iter().filter_map(Value::as_str).filter(|i| !CLIENT_ID_CHARS.contains(&i.chars().count())) {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: client id \"{id}\" is not 1 to 255 characters", r.address),
                        e.span.clone(),
                    )
                    .help("IRSA's audience is \"sts.amazonaws.com\" (the default when client_ids is left out)"),
                );
            }
        }
        if let Some(e) = r.attrs.get("thumbprints")
            && let Some(Value::List(tps)) = e.as_literal()
        {
            if tps.len() > THUMBPRINTS_MAX {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: {} thumbprints, IAM allows {THUMBPRINTS_MAX}", r.address, tps.len()),
                        e.span.clone(),
                    )
                    .help("keep at most 5 thumbprints; for an EKS issuer none is needed"),
                );
            }
            for tp in tps.iter().filter_map(Value::as_str).filter(|t| !is_thumbprint(t)) {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: thumbprint \"{tp}\" is not 40 hexadecimal characters", r.address),
                        e.span.clone(),
                    )
                    .help("a thumbprint is the hex SHA-1 of the certificate; leave thumbprints out for an EKS issuer (IAM trusts its CA)"),
                );
            }
        }
    }

    /// No client ids means IRSA's audience; lists compare as sets.
    fn normalize(&self, inputs: &mut Attrs) {
        if let Some(Value::List(l)) = inputs.get_mut("client_ids")
            && l.is_empty()
        {
            l.push(Value::str(STS_AUDIENCE));
        }
        for k in ["client_ids", "thumbprints"] {
            if let Some(Value::List(l)) = inputs.get_mut(k) {
                if k == "thumbprints" {
                    // IAM keeps thumbprints as written; hex case carries no meaning.
                    for v in l.iter_mut() {
                        if let Value::Str(s) = v {
                            *s = s.to_ascii_lowercase();
                        }
                    }
                }
                l.sort_by_key(|v| v.to_string());
                l.dedup();
            }
        }
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let url = str_attr(req.inputs, "url");
        let thumbprints = strings_attr(req.inputs, "thumbprints");
        let request = ctx
            .iam
            .create_open_id_connect_provider()
            .url(url)
            .set_client_id_list(Some(client_ids(req.inputs)))
            .set_thumbprint_list(Some(thumbprints).filter(|t| !t.is_empty()))
            .set_tags(Some(iam_tags(ctx, req.address, req.inputs)));
        let arn = match ctx.call(Service::Iam, "CreateOpenIDConnectProvider", request.send()).await {
            Ok(out) => out.open_id_connect_provider_arn().unwrap_or_default().to_string(),
            // One provider per URL per account: ours from an interrupted run is taken back;
            // anyone else's is refused (eksctl's `utils associate-iam-oidc-provider` makes one).
            Err(e) if e.has_code("EntityAlreadyExists") => match find_by_url(ctx, url).await? {
                Some((arn, all))
                    if all.get(tags::STACK) == Some(&ctx.stack)
                        && all.get(tags::ADDRESS).map(String::as_str) == Some(req.address) =>
                {
                    arn
                }
                _ => {
                    return Err(e.taken_by_other(&format!(
                        "the account already has an OIDC provider for {url}; remove [{}] and write that provider's ARN in service_accounts' oidc_provider, or delete it (aws iam delete-open-id-connect-provider)",
                        req.address
                    )));
                }
            },
            Err(e) => return Err(e),
        };
        Ok(recorded(&arn, url))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let mut found = vec![];
        for (arn, p) in providers(ctx).await? {
            let all: BTreeMap<String, String> =
                p.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
            if all.get(tags::STACK) != Some(&ctx.stack) {
                continue;
            }
            let (rec, attrs) = self.observed(&arn, &p, &all);
            found.push(Observed::tagged(&all, rec, attrs));
        }
        Ok(found)
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("provider ARN (arn:aws:iam::ACCOUNT:oidc-provider/oidc.eks.REGION.amazonaws.com/id/ID)")
    }

    /// GetOpenIDConnectProvider by ARN gives the URL, client ids, thumbprints and tags at once
    /// (botocore iam `GetOpenIDConnectProviderResponse`): all the language says of a provider.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let request = ctx.iam.get_open_id_connect_provider().open_id_connect_provider_arn(id);
        let Some(p) = ctx.call(Service::Iam, "GetOpenIDConnectProvider", request.send()).await.absent_ok()? else {
            return Ok(None);
        };
        let all: BTreeMap<String, String> =
            p.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
        let (rec, attrs) = self.observed(id, &p, &all);
        Ok(Some(Imported {
            observed: Observed { address: None, id: rec.id, attrs, outputs: rec.outputs, retained: false },
            unexpressed: vec![],
        }))
    }

    /// TagOpenIDConnectProvider adds or overwrites only the tags given (IAM API reference).
    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, _outputs: &Attrs) -> Result<()> {
        let tags = [(tags::STACK, ctx.stack.as_str()), (tags::ADDRESS, address)]
            .into_iter()
            .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
            .collect();
        let request = ctx.iam.tag_open_id_connect_provider().open_id_connect_provider_arn(id).set_tags(Some(tags));
        ctx.call(Service::Iam, "TagOpenIDConnectProvider", request.send()).await?;
        Ok(())
    }

    /// A provider's thumbprints when the file leaves them out are whatever IAM chose: no change.
    fn settle(&self, current: &mut Attrs, desired: &Attrs) {
        if desired.get("thumbprints").and_then(Value::as_list).is_none_or(<[Value]>::is_empty) {
            current.insert("thumbprints".into(), desired.get("thumbprints").cloned().unwrap_or(Value::List(vec![])));
        }
    }

    /// IAM fills in a thumbprint of its own when none was sent: what it chose is not drift.
    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        // Only a recorded empty list says "none asked": an import records nothing yet, and then
        // the observed thumbprints are the current ones (`settle` leaves them to IAM when the
        // file does not set any).
        let asked_none = recorded.get("thumbprints").and_then(Value::as_list).is_some_and(<[Value]>::is_empty);
        cur.extend(
            observed
                .iter()
                .filter(|(k, _)| !(asked_none && k.as_str() == "thumbprints"))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        self.normalize(&mut cur);
        cur
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
        if has("client_ids") {
            let (before, after) = (client_ids(old), client_ids(new));
            // Add first: a provider keeps at least one audience throughout.
            for c in after.iter().filter(|c| !before.contains(c)) {
                let request =
                    ctx.iam.add_client_id_to_open_id_connect_provider().open_id_connect_provider_arn(id).client_id(c);
                ctx.call(Service::Iam, "AddClientIDToOpenIDConnectProvider", request.send()).await?;
            }
            for c in before.iter().filter(|c| !after.contains(c)) {
                let request = ctx
                    .iam
                    .remove_client_id_from_open_id_connect_provider()
                    .open_id_connect_provider_arn(id)
                    .client_id(c);
                ctx.call(Service::Iam, "RemoveClientIDFromOpenIDConnectProvider", request.send()).await?;
            }
        }
        // Thumbprints removed: nothing is sent. `ThumbprintList` is required and whether IAM takes
        // an empty one is unverified (botocore iam `UpdateOpenIDConnectProviderThumbprintRequest`);
        // IAM keeps the ones it has, which it no longer needs for EKS's issuer (it checks that
        // against its trusted root CAs; the thumbprint IAM holds is not drift). Review r19-iam m7.
        if has("thumbprints") && !strings_attr(new, "thumbprints").is_empty() {
            let request = ctx
                .iam
                .update_open_id_connect_provider_thumbprint()
                .open_id_connect_provider_arn(id)
                .set_thumbprint_list(Some(strings_attr(new, "thumbprints")));
            ctx.call(Service::Iam, "UpdateOpenIDConnectProviderThumbprint", request.send()).await?;
        }
        if has("tags") {
            let changes = tags::changes(old, new);
            if !changes.removed.is_empty() {
                let request = ctx
                    .iam
                    .untag_open_id_connect_provider()
                    .open_id_connect_provider_arn(id)
                    .set_tag_keys(Some(changes.removed));
                ctx.call(Service::Iam, "UntagOpenIDConnectProvider", request.send()).await?;
            }
            let set: Vec<Tag> =
                changes.set.iter().filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok()).collect();
            if !set.is_empty() {
                let request =
                    ctx.iam.tag_open_id_connect_provider().open_id_connect_provider_arn(id).set_tags(Some(set));
                ctx.call(Service::Iam, "TagOpenIDConnectProvider", request.send()).await?;
            }
        }
        Ok(recorded(id, str_attr(new, "url")))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let request = ctx.iam.delete_open_id_connect_provider().open_id_connect_provider_arn(id);
        ctx.call(Service::Iam, "DeleteOpenIDConnectProvider", request.send()).await.absent_ok()?;
        Ok(())
    }
}

fn is_thumbprint(t: &str) -> bool {
    t.len() == 40 && t.bytes().all(|b| b.is_ascii_hexdigit())
}

fn client_ids(i: &Attrs) -> Vec<String> {
    let ids = strings_attr(i, "client_ids");
    if ids.is_empty() { vec![STS_AUDIENCE.to_string()] } else { ids }
}

fn iam_tags(ctx: &Ctx, address: &str, inputs: &Attrs) -> Vec<Tag> {
    tags::all_tags(ctx, address, inputs)
        .into_iter()
        .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
        .collect()
}

/// IAM answers a provider's URL without its scheme (`oidc.eks.<region>.amazonaws.com/id/…`).
fn with_scheme(url: &str) -> String {
    if url.starts_with("https://") { url.to_string() } else { format!("https://{url}") }
}

/// The issuer's host and path, as IAM keys providers and as trust policies name conditions:
/// the part of the provider ARN after `oidc-provider/` (EKS UG `associate-service-account-role`).
pub fn issuer_of_arn(arn: &str) -> Option<&str> {
    arn.split_once(":oidc-provider/").map(|(_, rest)| rest).filter(|r| !r.is_empty())
}

impl OidcProvider {
    /// A provider's outputs and inputs as GetOpenIDConnectProvider shows them (`all`: its tags).
    fn observed(
        &self,
        arn: &str,
        p: &aws_sdk_iam::operation::get_open_id_connect_provider::GetOpenIdConnectProviderOutput,
        all: &BTreeMap<String, String>,
    ) -> (Recorded, Attrs) {
        let url = with_scheme(p.url().unwrap_or_default());
        let strings = |l: &[String]| Value::List(l.iter().map(Value::str).collect());
        let mut attrs = Attrs::from([
            ("url".into(), Value::str(url.clone())),
            ("client_ids".into(), strings(p.client_id_list())),
            ("thumbprints".into(), strings(p.thumbprint_list())),
            ("tags".into(), tags::observed(all)),
        ]);
        self.normalize(&mut attrs);
        (recorded(arn, &url), attrs)
    }
}

fn recorded(arn: &str, url: &str) -> Recorded {
    Recorded {
        id: arn.to_string(),
        outputs: Attrs::from([("arn".into(), Value::str(arn)), ("url".into(), Value::str(url))]),
    }
}

/// Every provider of the account with what GetOpenIDConnectProvider says of it; one that
/// vanished between the list and the read is left out.
async fn providers(
    ctx: &Ctx,
) -> Result<Vec<(String, aws_sdk_iam::operation::get_open_id_connect_provider::GetOpenIdConnectProviderOutput)>> {
    let listed =
        ctx.call(Service::Iam, "ListOpenIDConnectProviders", ctx.iam.list_open_id_connect_providers().send()).await?;
    let mut out = vec![];
    for arn in listed.open_id_connect_provider_list().iter().filter_map(|p| p.arn()) {
        let request = ctx.iam.get_open_id_connect_provider().open_id_connect_provider_arn(arn);
        if let Some(p) = ctx.call(Service::Iam, "GetOpenIDConnectProvider", request.send()).await.absent_ok()? {
            out.push((arn.to_string(), p));
        }
    }
    Ok(out)
}

/// The provider for `url` (ARN and tags), if the account has one.
async fn find_by_url(ctx: &Ctx, url: &str) -> Result<Option<(String, BTreeMap<String, String>)>> {
    let want = url.trim_start_matches("https://").trim_end_matches('/');
    let listed =
        ctx.call(Service::Iam, "ListOpenIDConnectProviders", ctx.iam.list_open_id_connect_providers().send()).await?;
    let Some(arn) =
        listed.open_id_connect_provider_list().iter().filter_map(|p| p.arn()).find(|a| issuer_of_arn(a) == Some(want))
    else {
        return Ok(None);
    };
    let request = ctx.iam.get_open_id_connect_provider().open_id_connect_provider_arn(arn);
    let Some(p) = ctx.call(Service::Iam, "GetOpenIDConnectProvider", request.send()).await.absent_ok()? else {
        return Ok(None);
    };
    Ok(Some((arn.to_string(), p.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issuer_is_the_arn_after_oidc_provider() {
        let arn = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE";
        assert_eq!(issuer_of_arn(arn), Some("oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"));
        assert_eq!(issuer_of_arn("arn:aws:iam::1:role/x"), None);
        assert_eq!(issuer_of_arn("arn:aws:iam::1:oidc-provider/"), None);
    }

    #[test]
    fn no_client_ids_means_the_sts_audience() {
        let mut i = Attrs::from([("client_ids".into(), Value::List(vec![]))]);
        OidcProvider.normalize(&mut i);
        assert_eq!(client_ids(&i), ["sts.amazonaws.com"]);
        assert_eq!(i["client_ids"], Value::List(vec![Value::str("sts.amazonaws.com")]));
    }

    #[test]
    fn a_thumbprint_iam_chose_is_not_drift() {
        let recorded = Attrs::from([("thumbprints".into(), Value::List(vec![]))]);
        let observed = Attrs::from([("thumbprints".into(), Value::List(vec![Value::str("a".repeat(40))]))]);
        assert_eq!(OidcProvider.current(&recorded, &observed)["thumbprints"], Value::List(vec![]));
        let recorded = Attrs::from([("thumbprints".into(), Value::List(vec![Value::str("b".repeat(40))]))]);
        assert_eq!(OidcProvider.current(&recorded, &observed)["thumbprints"], observed["thumbprints"]);
    }
}
