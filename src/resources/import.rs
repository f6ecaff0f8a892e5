//! `[import]` checks that need the kinds (the language checks that each address is a
//! resource of the stack and each id a string): the kind can be imported, the resource is
//! one the stack owns (not rendered, not `existing`), the id has the kind's form, and no
//! object is imported twice.

use super::{KINDS, Result};
use crate::aws::{Ctx, Service, tags};
use crate::stack::{Diagnostic, Stack};

/// `Kind::tag_imported` for an EC2 object: `ec2:CreateTags` with `gpustack:stack` and
/// `gpustack:address`, nothing else (CreateTags adds or overwrites the keys given and leaves
/// the object's other tags alone: EC2 API reference `CreateTags`).
pub async fn tag_ec2(ctx: &Ctx, id: &str, address: &str) -> Result<()> {
    super::import_ec2::tag(ctx, &[id.to_string()], address, &[]).await
}

/// `Kind::tag_imported` for a SageMaker object (by ARN): `sagemaker:AddTags` with the two
/// gpustack tags ("Adds or overwrites one or more tags for the specified SageMaker resource",
/// SageMaker API reference `AddTags`).
pub async fn tag_sagemaker(ctx: &Ctx, arn: &str, address: &str) -> Result<()> {
    let tags = [(tags::STACK, ctx.stack.as_str()), (tags::ADDRESS, address)]
        .map(|(k, v)| aws_sdk_sagemaker::types::Tag::builder().key(k).value(v).build());
    let call = ctx.sagemaker.add_tags().resource_arn(arn).set_tags(Some(tags.to_vec()));
    ctx.call(Service::SageMaker, "AddTags", call.send()).await?;
    Ok(())
}

/// Takes `gpustack:stack` and `gpustack:address` (and only those) off an object tagged by an
/// interrupted import that the stack no longer wants (review imp-core M1): it was never the
/// stack's, so it is released, never deleted. Keys only: EC2 `DeleteTags` ("If you specify a
/// tag key without a tag value, we delete any tag with this key regardless of its value", EC2
/// API reference), SageMaker `DeleteTags` (`TagKeys`), EKS `UntagResource` (`tagKeys`), IAM
/// `UntagRole`/`UntagOpenIDConnectProvider` (`TagKeys`); botocore models ec2 2016-11-15,
/// sagemaker 2017-07-24, eks 2017-11-01, iam 2010-05-08. The object carries the stack's tag,
/// so `gpustack policy`'s tag-conditioned statements allow these calls.
pub async fn untag(ctx: &Ctx, kind: &str, id: &str, outputs: &crate::value::Attrs) -> Result<()> {
    let keys = [tags::STACK, tags::ADDRESS];
    let arn = outputs.get("arn").and_then(crate::value::Value::as_str).filter(|a| !a.is_empty()).unwrap_or(id);
    match kind {
        "training_plan" => {
            let call = ctx.sagemaker.delete_tags().resource_arn(id).set_tag_keys(Some(keys.map(String::from).to_vec()));
            ctx.call(Service::SageMaker, "DeleteTags", call.send()).await?;
        }
        "eks_cluster" | "node_group" | "eks_addon" | "eks_access_entry" | "pod_identity_association" => {
            let call = ctx.eks.untag_resource().resource_arn(arn).set_tag_keys(Some(keys.map(String::from).to_vec()));
            ctx.call(Service::Eks, "UntagResource", call.send()).await?;
        }
        "iam_role" => {
            let call = ctx.iam.untag_role().role_name(id).set_tag_keys(Some(keys.map(String::from).to_vec()));
            ctx.call(Service::Iam, "UntagRole", call.send()).await?;
        }
        "oidc_provider" => {
            let call = ctx
                .iam
                .untag_open_id_connect_provider()
                .open_id_connect_provider_arn(id)
                .set_tag_keys(Some(keys.map(String::from).to_vec()));
            ctx.call(Service::Iam, "UntagOpenIDConnectProvider", call.send()).await?;
        }
        // Every other importable kind is an EC2 object, tagged by its id.
        _ => {
            let tags = keys.map(|k| aws_sdk_ec2::types::Tag::builder().key(k).build());
            let call = ctx.ec2.delete_tags().resources(id).set_tags(Some(tags.to_vec()));
            ctx.call(Service::Ec2, "DeleteTags", call.send()).await?;
        }
    }
    Ok(())
}

/// Adds one error per problem of the stack's `[import]` entries.
pub fn check(stack: &Stack, diags: &mut Vec<Diagnostic>) {
    let mut seen: Vec<(&str, &str, &str)> = vec![];
    for i in &stack.imports {
        let Some(r) = stack.get(&i.address) else { continue };
        let kind = super::of(r);
        if kind.rendered() {
            diags.push(
                Diagnostic::error(
                    format!("`{}` is written as Kubernetes YAML (gpustack manifests), not read from AWS: it cannot be imported", i.address),
                    i.key_span.clone(),
                )
                .help("remove this [import] entry; `gpustack manifests` renders the resource from the stack file"),
            );
            continue;
        }
        if r.attrs.contains_key("existing") {
            diags.push(
                Diagnostic::error(
                    format!("`{}` reads an object with `existing`, so it cannot also import one", i.address),
                    i.key_span.clone(),
                )
                .help("keep `existing` to use the object without managing it, or remove `existing` (and write the object's attributes) to take it over with [import]"),
            );
            continue;
        }
        let Some(form) = kind.import_id() else {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: kind {} cannot be imported", i.address, kind.name()),
                    i.key_span.clone(),
                )
                .help(format!("the kinds that can be imported are: {}", importable().join(", "))),
            );
            continue;
        };
        if !id_has_form(form, &i.id) {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: \"{}\" is not a {} id; the form is {form}", i.address, i.id, kind.name()),
                    i.span.clone(),
                )
                .help(format!("write the id of the existing {} as {form}", kind.name())),
            );
            continue;
        }
        if let Some((_, _, first)) = seen.iter().find(|(k, id, _)| *k == kind.name() && *id == i.id) {
            diags.push(
                Diagnostic::error(
                    format!("`{}` and `{first}` both import {} \"{}\"", i.address, kind.name(), i.id),
                    i.span.clone(),
                )
                .help("one object belongs to one resource: remove one of the entries"),
            );
            continue;
        }
        seen.push((kind.name(), i.id.as_str(), i.address.as_str()));
    }
}

/// The tag calls `tag_imported` makes for the stack's `[import]` entries, grouped by action:
/// (action, the imported objects' ARNs), for `gpustack policy`. ARN forms from the Service
/// Authorization Reference ("Resource types defined by" Amazon EC2, Amazon EKS, IAM, Amazon
/// SageMaker); where the id does not give the whole ARN (a node group's ARN ends in a UUID)
/// the rest is a wildcard. Only the imported object itself is here: the objects an import
/// tags beside it, whose ids are read at apply time (an imported VPC's internet gateway and
/// route tables, a subnet's route table, a NAT gateway's Elastic IPs, an imported role's
/// instance profile), are granted by `gpustack policy`'s own statements
/// (`TagImportedNetworkParts`, `TagImportedInstanceProfiles`; review imp-core M4).
pub fn tag_targets(stack: &Stack) -> Vec<(&'static str, Vec<String>)> {
    let region = stack.region.as_str();
    let mut out: Vec<(&'static str, Vec<String>)> = vec![];
    for i in &stack.imports {
        let Some(r) = stack.get(&i.address) else { continue };
        let Some((action, arns)) = tag_target(r.kind.name(), &i.id, region) else { continue };
        let at = match out.iter().position(|(a, _)| *a == action) {
            Some(at) => at,
            None => {
                out.push((action, vec![]));
                out.len() - 1
            }
        };
        for arn in arns {
            if !out[at].1.contains(&arn) {
                out[at].1.push(arn);
            }
        }
    }
    out
}

fn tag_target(kind: &str, id: &str, region: &str) -> Option<(&'static str, Vec<String>)> {
    let one = |action: &'static str, arn: String| Some((action, vec![arn]));
    let ec2 = |t: &str| one("ec2:CreateTags", format!("arn:aws:ec2:{region}:*:{t}/{id}"));
    let (cluster, rest) = id.split_once(':').unwrap_or((id, ""));
    let eks = |t: String| one("eks:TagResource", format!("arn:aws:eks:{region}:*:{t}"));
    match kind {
        "vpc" => ec2("vpc"),
        "subnet" => ec2("subnet"),
        "nat_gateway" => ec2("natgateway"),
        "security_group" => ec2("security-group"),
        "security_group_rule" => ec2("security-group-rule"),
        "vpc_endpoint" => ec2("vpc-endpoint"),
        "capacity_reservation" | "capacity_block" => ec2("capacity-reservation"),
        "launch_template" => ec2("launch-template"),
        "placement_group" => ec2("placement-group"),
        // As written and lower-cased: the name allows upper case, published plan ARNs are
        // lower case, and the real ARN cannot be read offline (review imp-core m8).
        "training_plan" => {
            let mut arns = vec![format!("arn:aws:sagemaker:{region}:*:training-plan/{id}")];
            if id.to_lowercase() != id {
                arns.push(format!("arn:aws:sagemaker:{region}:*:training-plan/{}", id.to_lowercase()));
            }
            Some(("sagemaker:AddTags", arns))
        }
        // A role's ARN holds its path (`role/NAME` or `role/PATH/NAME`).
        "iam_role" => {
            Some(("iam:TagRole", vec![format!("arn:aws:iam::*:role/{id}"), format!("arn:aws:iam::*:role/*/{id}")]))
        }
        "oidc_provider" => one("iam:TagOpenIDConnectProvider", id.to_string()),
        "eks_cluster" => eks(format!("cluster/{id}")),
        "node_group" => eks(format!("nodegroup/{cluster}/{rest}/*")),
        "eks_addon" => eks(format!("addon/{cluster}/{rest}/*")),
        // The entry's ARN names its principal: `access-entry/CLUSTER/{role|user}/ACCOUNT/NAME/UUID`
        // (the emulator's and the aws-cli example's form, tests/emulator/ext/eks_access.py;
        // review imp-eks m4): only this principal's entry, whatever the role's path.
        "eks_access_entry" => match principal_parts(rest) {
            Some((ty, account, name)) => Some((
                "eks:TagResource",
                vec![
                    format!("arn:aws:eks:{region}:*:access-entry/{cluster}/{ty}/{account}/{name}/*"),
                    format!("arn:aws:eks:{region}:*:access-entry/{cluster}/{ty}/{account}/*/{name}/*"),
                ],
            )),
            None => eks(format!("access-entry/{cluster}/*")),
        },
        "pod_identity_association" => eks(format!("podidentityassociation/{cluster}/{rest}")),
        _ => None,
    }
}

/// `arn:aws:iam::ACCOUNT:role/PATH/NAME` → ("role", ACCOUNT, NAME); users alike.
fn principal_parts(arn: &str) -> Option<(&str, &str, &str)> {
    let mut f = arn.splitn(6, ':');
    let (_, _, _, _, account, resource) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    let (ty, path) = resource.split_once('/')?;
    let name = path.rsplit('/').next()?;
    (matches!(ty, "role" | "user") && !account.is_empty() && !name.is_empty()).then_some((ty, account, name))
}

/// The kinds whose `import_id` is set.
pub fn importable() -> Vec<&'static str> {
    KINDS.iter().filter(|k| k.import_id().is_some()).map(|k| k.name()).collect()
}

/// Whether `id` has the shape `form` describes: a prefix (`vpc-…`: the prefix and more),
/// two parts (`CLUSTER:NODEGROUP`: split at the first `:`, both non-empty; the second may
/// itself hold colons, an ARN), an ARN (`provider ARN`), or any name without spaces.
pub fn id_has_form(form: &str, id: &str) -> bool {
    let id = id.trim();
    if id.is_empty() || id.chars().any(char::is_whitespace) {
        return false;
    }
    // The form's first word: `cr-…` in "cr-… (an ODCR)".
    let head = form.split_whitespace().next().unwrap_or_default();
    if let Some(prefix) = head.strip_suffix('…').or_else(|| head.strip_suffix("...")) {
        return id.len() > prefix.len() && id.starts_with(prefix);
    }
    if head.contains(':') && head.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c == ':') {
        return id.split_once(':').is_some_and(|(a, b)| !a.is_empty() && !b.is_empty());
    }
    if form.contains("ARN") {
        return id.starts_with("arn:");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{Source, VarSources};

    /// Every error of the file's `[import]` table, each at its line:column, in one pass.
    fn errors(text: &str) -> Vec<(String, String)> {
        let none = |k: &str| (k == "pg").then(|| "train-pg".to_string());
        match crate::load::check(Source::new("i.toml", text.into()), &VarSources { cli: &[], env: &none }) {
            Ok(_) => vec![],
            Err(d) => d
                .items
                .iter()
                .filter(|x| x.is_error())
                .map(|x| (d.source.location(&x.span), x.message.clone()))
                .collect(),
        }
    }

    const HEAD: &str = "[stack]\nname = \"t\"\nregion = \"us-west-2\"\n[placement_group.train]\nstrategy = \"cluster\"\n[placement_group.spread]\nstrategy = \"spread\"\n[priority_class.jobs]\nvalue = 1000\n[vpc.shared]\nexisting = \"vpc-0abc\"\n";

    #[test]
    fn a_valid_import_table_loads_with_variables_in_ids() {
        let text = format!("{HEAD}[import]\n\"placement_group.train\" = \"${{var.pg}}\"\n");
        assert_eq!(errors(&text), vec![]);
        let none = |k: &str| (k == "pg").then(|| "train-pg".to_string());
        let s = crate::load::check(Source::new("i.toml", text), &VarSources { cli: &[], env: &none }).unwrap();
        let i = s.import_of("placement_group.train").unwrap();
        assert_eq!(i.id, "train-pg");
    }

    #[test]
    fn every_import_mistake_is_reported_at_its_place_in_one_pass() {
        let text = format!(
            "{HEAD}[import]\n\"placement_group.other\" = \"x\"\n\"priority_class.jobs\" = \"jobs\"\n\"vpc.shared\" = \"vpc-0abc\"\n\"placement_group.train\" = 3\n\"placement_group.spread\" = \"${{placement_group.train.name}}\"\nplacement_group.x = \"y\"\n"
        );
        let got = errors(&text);
        let has = |loc: &str, msg: &str| got.iter().any(|(l, m)| l.ends_with(loc) && m.contains(msg));
        assert!(has(":13:1", "names `placement_group.other`, which is not a resource of this stack"), "{got:#?}");
        assert!(has(":14:1", "written as Kubernetes YAML"), "{got:#?}");
        assert!(has(":15:1", "reads an object with `existing`"), "{got:#?}");
        assert!(has(":16:27", "the id must be a string"), "{got:#?}");
        assert!(has(":17:28", "cannot refer to another resource"), "{got:#?}");
        assert!(has(":18:1", "is not a resource address"), "{got:#?}");
        assert_eq!(got.len(), 6, "{got:#?}");
    }

    #[test]
    fn an_id_of_the_wrong_form_and_a_doubly_imported_object_are_errors() {
        let text = format!(
            "{HEAD}[capacity_reservation.odcr]\ninstance_type = \"p5.48xlarge\"\ninstance_count = 1\navailability_zone = \"us-west-2a\"\n[import]\n\"capacity_reservation.odcr\" = \"odcr-1\"\n\"placement_group.train\" = \"pg\"\n\"placement_group.spread\" = \"pg\"\n"
        );
        let got = errors(&text);
        let has = |msg: &str| got.iter().any(|(_, m)| m.contains(msg));
        assert!(has("\"odcr-1\" is not a capacity_reservation id; the form is cr-…"), "{got:#?}");
        assert!(
            has("`placement_group.spread` and `placement_group.train` both import placement_group \"pg\""),
            "{got:#?}"
        );
    }

    /// `gpustack policy` lets the principal add the two gpustack tags to exactly the objects
    /// the stack imports, nothing else (the stack-tag statements refuse untagged objects).
    #[test]
    fn the_policy_tags_exactly_the_imported_objects() {
        let text = format!(
            "{HEAD}[capacity_reservation.odcr]\ninstance_type = \"p5.48xlarge\"\ninstance_count = 1\navailability_zone = \"us-west-2a\"\nend_date = \"2026-12-31T00:00:00Z\"\n[import]\n\"capacity_reservation.odcr\" = \"cr-0abc\"\n\"placement_group.train\" = \"train-pg\"\n"
        );
        let none = |_: &str| None;
        let s = crate::load::check(Source::new("i.toml", text), &VarSources { cli: &[], env: &none }).unwrap();
        let doc = crate::policy::document(&s);
        let st: Vec<&serde_json::Value> = doc["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["Sid"].as_str().is_some_and(|s| s.starts_with("TagImported")))
            .collect();
        assert_eq!(st.len(), 1, "{doc:#}");
        assert_eq!(st[0]["Action"], serde_json::json!(["ec2:CreateTags"]));
        assert_eq!(
            st[0]["Resource"],
            serde_json::json!([
                "arn:aws:ec2:us-west-2:*:capacity-reservation/cr-0abc",
                "arn:aws:ec2:us-west-2:*:placement-group/train-pg"
            ])
        );
        assert_eq!(st[0]["Condition"]["StringEquals"]["aws:RequestTag/gpustack:stack"], "t");
        assert_eq!(
            st[0]["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"],
            serde_json::json!(["gpustack:stack", "gpustack:address"])
        );
    }

    /// m4 (review imp-eks): an access entry's tag grant names its principal, not every entry
    /// of the cluster.
    #[test]
    fn an_access_entry_tag_grant_is_scoped_to_its_principal() {
        let (action, arns) =
            tag_target("eks_access_entry", "brown:arn:aws:iam::111122223333:role/ops/brown-ops", "us-west-2").unwrap();
        assert_eq!(action, "eks:TagResource");
        assert_eq!(
            arns,
            [
                "arn:aws:eks:us-west-2:*:access-entry/brown/role/111122223333/brown-ops/*",
                "arn:aws:eks:us-west-2:*:access-entry/brown/role/111122223333/*/brown-ops/*"
            ]
        );
    }

    #[test]
    fn a_kind_that_cannot_be_imported_names_those_that_can() {
        let text = "[stack]\nname = \"t\"\nregion = \"us-west-2\"\n[image_cache.c]\nimages = [\"x\"]\nvariant = \"aws-k8s-1.31-nvidia\"\nsubnet = \"subnet-1\"\nbuilder_instance_profile = \"p\"\n[import]\n\"image_cache.c\" = \"x\"\n";
        let got = errors(text);
        assert!(
            got.iter()
                .any(|(l, m)| l.ends_with(":10:1") && m == "`image_cache.c`: kind image_cache cannot be imported"),
            "{got:#?}"
        );
        assert!(importable().contains(&"placement_group") && !importable().contains(&"image_cache"));
    }

    #[test]
    fn ids_are_checked_against_the_kinds_forms() {
        assert!(id_has_form("vpc-…", "vpc-0abc"));
        assert!(!id_has_form("vpc-…", "subnet-0abc"));
        assert!(!id_has_form("vpc-…", "vpc-"));
        assert!(id_has_form("cr-… (an ODCR)", "cr-0123"));
        assert!(id_has_form("CLUSTER:NODEGROUP", "my-cluster:gpu-ng"));
        assert!(!id_has_form("CLUSTER:NODEGROUP", "gpu-ng"));
        assert!(!id_has_form("CLUSTER:NODEGROUP", ":gpu-ng"));
        assert!(id_has_form("CLUSTER:PRINCIPAL_ARN", "c:arn:aws:iam::111122223333:role/x"));
        assert!(id_has_form("provider ARN", "arn:aws:iam::111122223333:oidc-provider/x"));
        assert!(!id_has_form("provider ARN", "oidc.eks.amazonaws.com/id/x"));
        assert!(id_has_form("group name", "my-pg"));
        assert!(!id_has_form("group name", "my pg"));
        assert!(!id_has_form("group name", ""));
    }
}
