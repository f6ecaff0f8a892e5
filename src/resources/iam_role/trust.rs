//! Who may assume an `iam_role`: its trust policy, written from `service` (AWS services,
//! `sts:AssumeRole`), `pod_identity` (EKS Pod Identity) and `service_accounts` (IRSA), and read
//! back from IAM for refresh. The three may be combined: a trust policy is a list of
//! statements, each allowing one principal (IAM UG `reference_policies_elements_principal`),
//! and a role trusted both by Pod Identity and through IRSA is how workloads move from one to
//! the other (EKS UG `pod-id-minimum-sdk`).

use serde_json::{Value as Json, json};

use crate::resources::oidc_provider::{STS_AUDIENCE, issuer_of_arn};
use crate::value::{Attrs, Value};

/// The service principal of EKS Pod Identity, and the actions its trust needs: "EKS Pod
/// Identity uses AssumeRole ... and TagSession" (EKS UG `pod-id-role`, the trust policy
/// `"Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole",
/// "sts:TagSession"]`).
pub const POD_IDENTITY_PRINCIPAL: &str = "pods.eks.amazonaws.com";
pub const POD_IDENTITY_ACTIONS: [&str; 2] = ["sts:AssumeRole", "sts:TagSession"];

/// One IRSA service account: the provider's ARN, the namespace and the name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServiceAccount {
    pub oidc_provider: String,
    pub namespace: String,
    pub name: String,
}

/// The trust a role's inputs ask for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trust {
    pub service: Option<String>,
    /// The service statement also allows `sts:TagSession` (`tag_session`).
    pub tag_session: bool,
    pub pod_identity: bool,
    pub service_accounts: Vec<ServiceAccount>,
}

impl Trust {
    pub fn of(inputs: &Attrs) -> Trust {
        let service = inputs.get("service").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        let pod_identity = inputs.get("pod_identity").and_then(Value::as_bool).unwrap_or(false);
        let field = |t: &std::collections::BTreeMap<String, Value>, k: &str| {
            t.get(k).and_then(Value::as_str).unwrap_or_default().to_string()
        };
        let service_accounts = inputs
            .get("service_accounts")
            .and_then(Value::as_list)
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_table)
            .map(|t| ServiceAccount {
                oidc_provider: field(t, "oidc_provider"),
                namespace: field(t, "namespace"),
                name: field(t, "name"),
            })
            .collect();
        let tag_session = inputs.get("tag_session").and_then(Value::as_bool).unwrap_or(false);
        Trust { service, tag_session, pod_identity, service_accounts }
    }

    /// The trust policy document. IRSA statements follow the EKS UG
    /// (`associate-service-account-role`): `Federated` = the provider's ARN, action
    /// `sts:AssumeRoleWithWebIdentity`, `StringEquals` on `<issuer>:sub` =
    /// `system:serviceaccount:<namespace>:<name>` and `<issuer>:aud` = `sts.amazonaws.com`,
    /// where `<issuer>` is the issuer's host and path (no `https://`). A name or namespace with
    /// `*` is matched with `StringLike` ("use the StringLike condition" for wildcards, same page).
    pub fn document(&self) -> String {
        let mut statements = vec![];
        if let Some(s) = &self.service {
            let action =
                if self.tag_session { json!(["sts:AssumeRole", "sts:TagSession"]) } else { json!("sts:AssumeRole") };
            statements.push(json!({ "Effect": "Allow", "Principal": { "Service": s }, "Action": action }));
        }
        if self.pod_identity {
            statements.push(json!({
                "Effect": "Allow",
                "Principal": { "Service": POD_IDENTITY_PRINCIPAL },
                "Action": POD_IDENTITY_ACTIONS,
            }));
        }
        // One statement per provider and condition operator, its subjects in one list (as
        // terraform-aws-modules/iam's IRSA role writes it): the trust policy stays within IAM's
        // 2,048 characters (IAM UG "IAM and AWS STS quotas", ACLSizePerRole) for many accounts.
        let mut groups: std::collections::BTreeMap<(&str, bool), Vec<String>> = std::collections::BTreeMap::new();
        for sa in &self.service_accounts {
            let subject = format!("system:serviceaccount:{}:{}", sa.namespace, sa.name);
            let like = subject.contains('*') || subject.contains('?');
            groups.entry((sa.oidc_provider.as_str(), like)).or_default().push(subject);
        }
        for ((provider, like), subjects) in groups {
            let issuer = issuer_of_arn(provider).unwrap_or(provider);
            let subjects = if subjects.len() == 1 { json!(subjects[0]) } else { json!(subjects) };
            let (sub_key, aud_key) = (format!("{issuer}:sub"), format!("{issuer}:aud"));
            let condition = if like {
                json!({ "StringLike": { sub_key: subjects }, "StringEquals": { aud_key: STS_AUDIENCE } })
            } else {
                json!({ "StringEquals": { sub_key: subjects, aud_key: STS_AUDIENCE } })
            };
            statements.push(json!({
                "Effect": "Allow",
                "Principal": { "Federated": provider },
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": condition,
            }));
        }
        json!({ "Version": "2012-10-17", "Statement": statements }).to_string()
    }

    /// What a trust policy (as IAM answers it: URL-encoded JSON) allows, in the inputs' terms;
    /// None when it is not JSON.
    pub fn read(doc: &str) -> Option<Trust> {
        let decoded = super::percent_decode(doc);
        let j: Json = serde_json::from_str(&decoded).or_else(|_| serde_json::from_str(doc)).ok()?;
        let statements = match &j["Statement"] {
            Json::Array(a) => a.clone(),
            s @ Json::Object(_) => vec![s.clone()],
            _ => vec![],
        };
        let strings = |v: &Json| -> Vec<String> {
            match v {
                Json::String(s) => vec![s.clone()],
                Json::Array(a) => a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
                _ => vec![],
            }
        };
        let mut trust = Trust::default();
        for s in statements.iter().filter(|s| s["Effect"] == "Allow") {
            let actions = strings(&s["Action"]);
            for svc in strings(&s["Principal"]["Service"]) {
                let tags = POD_IDENTITY_ACTIONS.iter().all(|a| actions.iter().any(|x| x == a));
                if svc == POD_IDENTITY_PRINCIPAL && tags {
                    trust.pod_identity = true;
                } else if svc == POD_IDENTITY_PRINCIPAL {
                    // Reported as drift: Pod Identity refuses a role whose trust lacks TagSession.
                    trust.service = Some(format!("{svc} (without sts:TagSession)"));
                } else if trust.service.is_none() {
                    trust.tag_session = actions.iter().any(|a| a == "sts:TagSession");
                    trust.service = Some(svc);
                }
            }
            for provider in strings(&s["Principal"]["Federated"]) {
                let Some(issuer) = issuer_of_arn(&provider) else { continue };
                let key = format!("{issuer}:sub");
                let subjects = ["StringEquals", "StringLike"]
                    .iter()
                    .flat_map(|op| strings(&s["Condition"][*op][&key]))
                    .collect::<Vec<_>>();
                for subject in subjects {
                    let Some(rest) = subject.strip_prefix("system:serviceaccount:") else { continue };
                    let Some((namespace, name)) = rest.split_once(':') else { continue };
                    trust.service_accounts.push(ServiceAccount {
                        oidc_provider: provider.clone(),
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                    });
                }
            }
        }
        trust.service_accounts.sort();
        Some(trust)
    }

    /// The observed inputs refresh reports.
    pub fn attrs(&self) -> Attrs {
        let mut a = Attrs::from([
            ("pod_identity".into(), Value::Bool(self.pod_identity)),
            ("service_accounts".into(), Value::List(self.service_accounts.iter().map(ServiceAccount::value).collect())),
        ]);
        if let Some(s) = &self.service {
            a.insert("service".into(), Value::str(s.clone()));
        }
        if self.tag_session {
            a.insert("tag_session".into(), Value::Bool(true));
        }
        a
    }
}

impl ServiceAccount {
    pub fn value(&self) -> Value {
        Value::Table(
            [
                ("name".to_string(), Value::str(self.name.clone())),
                ("namespace".to_string(), Value::str(self.namespace.clone())),
                ("oidc_provider".to_string(), Value::str(self.oidc_provider.clone())),
            ]
            .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVIDER: &str =
        "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE";
    const ISSUER: &str = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE";

    fn sa(ns: &str, name: &str) -> ServiceAccount {
        ServiceAccount { oidc_provider: PROVIDER.into(), namespace: ns.into(), name: name.into() }
    }

    #[test]
    fn irsa_trust_is_the_user_guides() {
        let t = Trust { service_accounts: vec![sa("kube-system", "efs-csi-controller-sa")], ..Trust::default() };
        let doc: Json = serde_json::from_str(&t.document()).unwrap();
        let s = &doc["Statement"][0];
        assert_eq!(s["Principal"]["Federated"], PROVIDER);
        assert_eq!(s["Action"], "sts:AssumeRoleWithWebIdentity");
        assert_eq!(
            s["Condition"]["StringEquals"][format!("{ISSUER}:sub")],
            "system:serviceaccount:kube-system:efs-csi-controller-sa"
        );
        assert_eq!(s["Condition"]["StringEquals"][format!("{ISSUER}:aud")], "sts.amazonaws.com");
        assert_eq!(Trust::read(&t.document()), Some(t));
    }

    #[test]
    fn service_accounts_of_one_provider_share_a_statement() {
        let t = Trust {
            service_accounts: vec![sa("kube-system", "a"), sa("kube-system", "b"), sa("ml", "*")],
            ..Trust::default()
        };
        let doc: Json = serde_json::from_str(&t.document()).unwrap();
        assert_eq!(doc["Statement"].as_array().unwrap().len(), 2, "exact and wildcard subjects: {doc}");
        assert_eq!(
            doc["Statement"][0]["Condition"]["StringEquals"][format!("{ISSUER}:sub")],
            json!(["system:serviceaccount:kube-system:a", "system:serviceaccount:kube-system:b"])
        );
        assert_eq!(Trust::read(&t.document()), Some(t));
        // Twelve service accounts still fit IAM's 2,048-character trust policy.
        let many = Trust {
            service_accounts: (0..12).map(|i| sa("kube-system", &format!("sa-{i}"))).collect(),
            ..Trust::default()
        };
        assert!(many.document().len() < 2048, "{}", many.document().len());
    }

    #[test]
    fn wildcards_use_string_like() {
        let t = Trust { service_accounts: vec![sa("training", "*")], ..Trust::default() };
        let doc: Json = serde_json::from_str(&t.document()).unwrap();
        let c = &doc["Statement"][0]["Condition"];
        assert_eq!(c["StringLike"][format!("{ISSUER}:sub")], "system:serviceaccount:training:*");
        assert_eq!(c["StringEquals"][format!("{ISSUER}:aud")], "sts.amazonaws.com");
        assert!(c["StringEquals"].get(format!("{ISSUER}:sub")).is_none());
        assert_eq!(Trust::read(&t.document()), Some(t));
    }

    #[test]
    fn pod_identity_assumes_and_tags_and_combines_with_a_service() {
        let t = Trust { service: Some("ec2.amazonaws.com".into()), pod_identity: true, ..Trust::default() };
        let doc: Json = serde_json::from_str(&t.document()).unwrap();
        assert_eq!(doc["Statement"][1]["Principal"]["Service"], "pods.eks.amazonaws.com");
        assert_eq!(doc["Statement"][1]["Action"], json!(["sts:AssumeRole", "sts:TagSession"]));
        let encoded: String =
            percent_encoding::utf8_percent_encode(&t.document(), percent_encoding::NON_ALPHANUMERIC).to_string();
        assert_eq!(Trust::read(&encoded), Some(t));
    }

    #[test]
    fn a_service_that_tags_sessions_reads_back() {
        let t = Trust { service: Some("eks.amazonaws.com".into()), tag_session: true, ..Trust::default() };
        let doc: Json = serde_json::from_str(&t.document()).unwrap();
        assert_eq!(doc["Statement"][0]["Action"], json!(["sts:AssumeRole", "sts:TagSession"]));
        assert_eq!(Trust::read(&t.document()), Some(t));
        let plain = Trust { service: Some("eks.amazonaws.com".into()), ..Trust::default() };
        assert!(!Trust::read(&plain.document()).unwrap().tag_session);
    }

    #[test]
    fn a_pod_identity_statement_without_tag_session_is_drift() {
        let doc = r#"{"Statement":[{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
        let t = Trust::read(doc).unwrap();
        assert!(!t.pod_identity);
        assert_eq!(t.service.as_deref(), Some("pods.eks.amazonaws.com (without sts:TagSession)"));
    }
}
