//! The `eks_cluster` options beyond the control plane's core (DESIGN.md §2, issue 19): their
//! offline checks, the canonical form plans compare, and the changes EKS refuses. The checks
//! that need other resources (the VPC's blocks, the subnets' IPv6) are `rules::cluster`.

use super::cluster_log_group as log_group;
use crate::stack::expr::ExprKind;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

/// The built-in node pools of EKS Auto Mode, the only values `computeConfig.nodePools` takes
/// (EKS UG `set-builtin-node-pools`; botocore has no enum: "Only general-purpose or system is
/// allowed" is EKS's answer, quoted in kubernetes-sigs/cluster-api-provider-aws#5278).
pub const BUILT_IN_POOLS: &[&str] = &["general-purpose", "system"];

/// `auto_mode = { node_pools, node_role }` (`enabled = false` or no block: off). Block storage
/// and load balancing follow compute: EKS takes the three only together (aws-facts-auto-mode §2).
pub const AUTO_MODE: &[Attr] = &[
    Attr::opt("enabled", Ty::Bool, Default::None, OnChange::Update),
    Attr::opt("node_pools", Ty::List(&Ty::Enum(BUILT_IN_POOLS)), Default::None, OnChange::Update),
    // `computeConfig.nodeRoleArn`: "This value cannot be changed after the compute capability
    // of EKS Auto Mode is enabled" (botocore `ComputeConfigRequest`): `auto_mode_refusals`.
    Attr::opt("node_role", Ty::Str, Default::None, OnChange::Update),
];

/// The first Kubernetes version Auto Mode runs: "EKS Auto Mode requires Kubernetes version
/// 1.29 or greater" (EKS UG `create-auto`).
pub const AUTO_MODE_MIN_MINOR: u32 = 29;

/// An Auto Mode cluster's compute settings, from normalized inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoMode {
    pub node_pools: Vec<String>,
    pub node_role: Option<String>,
}

/// The cluster's Auto Mode, None when off.
pub fn auto_mode(inputs: &Attrs) -> Option<AutoMode> {
    let t = inputs.get("auto_mode")?.as_table()?;
    if t.get("enabled").and_then(Value::as_bool) == Some(false) {
        return None;
    }
    let node_pools = t
        .get("node_pools")
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let node_role = t.get("node_role").and_then(Value::as_str).filter(|r| !r.is_empty()).map(str::to_string);
    Some(AutoMode { node_pools, node_role })
}

/// Canonical `auto_mode`: absent when off; else `node_pools` (sorted, default none) and
/// `node_role` when given, as DescribeCluster reads them back (`computeConfig`).
fn normalize_auto_mode(inputs: &mut Attrs) {
    let Some(Value::Table(t)) = inputs.get_mut("auto_mode") else { return };
    if t.get("enabled").and_then(Value::as_bool) == Some(false) {
        inputs.remove("auto_mode");
        return;
    }
    t.remove("enabled");
    let pools = t.entry("node_pools".into()).or_insert_with(|| Value::List(vec![]));
    if let Value::List(l) = pools {
        l.sort_by_key(Value::interpolate);
        l.dedup();
    }
}

/// EKS refuses to change an Auto Mode cluster's node role ("This value cannot be changed after
/// the compute capability of EKS Auto Mode is enabled", botocore `ComputeConfigRequest.nodeRoleArn`).
pub fn auto_mode_refusals(old: &Attrs, new: &Attrs) -> Vec<(&'static str, String, String)> {
    let (Some(o), Some(n)) = (auto_mode(old), auto_mode(new)) else { return vec![] };
    let known = |r: &Option<String>| r.as_deref().is_none_or(|r| !r.contains("(known after apply)"));
    match (&o.node_role, &n.node_role) {
        (Some(a), b) if b.as_deref() != Some(a.as_str()) && known(b) => vec![(
            "auto_mode",
            format!("EKS cannot change an Auto Mode cluster's node role ({a} → {})", b.as_deref().unwrap_or("none")),
            format!(
                "keep auto_mode.node_role = \"{a}\"; give other roles to auto_mode_pool NodeClasses, or turn Auto Mode off first (destructive)"
            ),
        )],
        // Review auto m3: none → a role is a change too, as the botocore text reads (whether EKS
        // takes it is unverified; the emulator refuses it as well).
        (None, Some(b)) if known(&Some(b.clone())) => vec![(
            "auto_mode",
            format!("EKS cannot give an Auto Mode cluster a node role once its compute is on (none → {b})"),
            "leave auto_mode.node_role out, or turn Auto Mode off and on again with it (destructive)".into(),
        )],
        _ => vec![],
    }
}

/// What Auto Mode leaves behind when it is turned off or its cluster deleted (review auto M3):
/// "EKS will not delete EBS volumes provisioned by EKS Auto Mode", and a security group it
/// manages "will leak (not be deleted)" if an outside rule refers to it; the query is the
/// UG's (EKS UG `auto-disable`). A leaked group or volume left in the VPC keeps its subnets
/// and VPC from being deleted.
fn leftovers(cluster: &str) -> String {
    format!(
        "EKS does not delete the EBS volumes Auto Mode provisioned (delete PersistentVolumeClaims first, or the volumes \
         after), and a security group Auto Mode manages leaks if an outside rule refers to it: find them with `aws ec2 \
         describe-security-groups --filters Name=tag:eks:eks-cluster-name,Values={cluster} \
         Name=tag-key,Values=ingress.eks.amazonaws.com/resource,service.eks.amazonaws.com/resource` (EKS UG auto-disable)"
    )
}

/// The plan note of deleting an Auto Mode cluster: "Any EKS Auto Mode Nodes will be deleted,
/// including the EC2 managed instances" and "All load balancers will be deleted" (EKS UG
/// `delete-cluster`, "Considerations for EKS Auto Mode", which refers to `auto-disable` for
/// the rest: the leftovers above).
pub fn auto_mode_delete_note(old: &Attrs) -> Option<String> {
    auto_mode(old)?;
    Some(format!(
        "Auto Mode: EKS deletes its nodes and load balancers with the cluster (EKS UG delete-cluster); delete \
         LoadBalancer Services and Ingresses first so nothing recreates them; {}",
        leftovers(super::str_attr(old, "name"))
    ))
}

/// Plan notes for Auto Mode changes: turning it off is destructive (EKS UG `auto-disable`);
/// turning it on for an existing cluster needs add-on versions EKS lists (UG `auto-enable-existing`).
pub fn auto_mode_notes(old: &Attrs, new: &Attrs, changed: &[String]) -> Vec<String> {
    if !changed.iter().any(|c| c == "auto_mode") {
        return vec![];
    }
    match (auto_mode(old), auto_mode(new)) {
        (Some(_), None) => vec![
            format!(
                "turning Auto Mode off terminates every EC2 instance and deletes every load balancer Auto Mode runs; {}; \
                 install the vpc-cni, kube-proxy and coredns add-ons (eks_addon) before or with this change: the cluster \
                 was created without them (bootstrapSelfManagedAddons = false), so nodes left or added later have no pod \
                 networking or DNS (botocore eks CreateClusterRequest.bootstrapSelfManagedAddons)",
                leftovers(super::str_attr(new, "name"))
            ),
        ],
        (None, Some(_)) => vec![
            "Auto Mode on an existing cluster needs vpc-cni ≥ v1.19.0-eksbuild.1, the EBS CSI driver ≥ v1.37.0-eksbuild.1 and pod identity agent ≥ v1.3.4-eksbuild.1 if installed, and the cluster role's Auto Mode policies (EKS UG auto-enable-existing)"
                .into(),
        ],
        _ => vec![],
    }
}

/// Offline checks of `auto_mode` on its own (the cluster role and node role are `rules::auto_mode`).
fn validate_auto_mode(r: &Resource, diags: &mut Vec<Diagnostic>) {
    let Some(e) = r.attrs.get("auto_mode") else { return };
    let Value::Table(t) = e.resolve(&|_| Value::Unknown) else { return };
    let field = |k: &str| match &e.kind {
        ExprKind::Table(m) => m.get(k),
        _ => None,
    };
    let at = |k: &str| field(k).and_then(|x| x.span.clone()).or(e.span.clone());
    let pools = t.get("node_pools").and_then(Value::as_list).is_some_and(|l| !l.is_empty());
    let role = t.get("node_role");
    if t.get("enabled").and_then(Value::as_bool) == Some(false) {
        if pools || role.is_some() {
            // aws-cdk PR #33373: with compute disabled "the request must not include values for
            // the nodeRoleArn or nodePools fields".
            diags.push(
                Diagnostic::error(
                    format!("`{}`: auto_mode.enabled = false, but node_pools or node_role is set", r.address),
                    at("enabled"),
                )
                .help("remove node_pools and node_role (EKS refuses them with compute off), or remove enabled = false"),
            );
        }
        return;
    }
    if pools && role.is_none() {
        // EKS's answer: "When Compute Config nodeRoleArn is null or empty, nodePool list cannot
        // be populated" (terraform-aws-modules/terraform-aws-eks#3366).
        diags.push(
            Diagnostic::error(
                format!("`{}`: auto_mode.node_pools needs auto_mode.node_role: EKS gives the built-in pools' nodes that role", r.address),
                at("node_pools"),
            )
            .help("add node_role = \"${iam_role.auto_nodes.arn}\" (an iam_role with service = \"ec2.amazonaws.com\"), or node_pools = [] and only auto_mode_pool pools"),
        );
    }
    if let Some(Value::Str(arn)) = role
        && !(arn.starts_with("arn:") && arn.contains(":iam::") && arn.contains(":role/"))
    {
        diags.push(
            Diagnostic::error(
                format!("`{}`: auto_mode.node_role \"{arn}\" is not an IAM role ARN", r.address),
                at("node_role"),
            )
            .help("write the role's ARN: \"${iam_role.NAME.arn}\" or arn:aws:iam::ACCOUNT:role/NAME"),
        );
    }
    if let Some(x) = field("node_role").and_then(|x| x.as_single_ref())
        && x.output != "arn"
    {
        diags.push(
            Diagnostic::error(
                format!("`{}`: auto_mode.node_role takes the role's ARN, not its {}", r.address, x.output),
                at("node_role"),
            )
            .help(format!("write \"${{{}.arn}}\"", x.address)),
        );
    }
    if let Some(Value::Str(mode)) = r.attrs.get("authentication_mode").and_then(|m| m.as_literal())
        && mode == "CONFIG_MAP"
    {
        // "accessConfig.authenticationMode: Requires EKS access entries" (EKS UG
        // `automode-get-started-cli`, Default Cluster Configurations).
        diags.push(
            Diagnostic::error(
                format!("`{}`: Auto Mode needs access entries; authentication_mode CONFIG_MAP has none", r.address),
                r.attrs.get("authentication_mode").and_then(|m| m.span.clone()),
            )
            .help("use authentication_mode = \"API\" (the default) or \"API_AND_CONFIG_MAP\""),
        );
    }
    if let Some(Value::Str(v)) = r.attrs.get("version").and_then(|m| m.as_literal())
        && let Some((1, minor)) = crate::aws::eks::minor(v)
        && minor < AUTO_MODE_MIN_MINOR
    {
        diags.push(
            Diagnostic::error(
                format!(
                    "`{}`: EKS Auto Mode requires Kubernetes 1.{AUTO_MODE_MIN_MINOR} or later (version is {v})",
                    r.address
                ),
                r.attrs.get("version").and_then(|m| m.span.clone()),
            )
            .help(format!("set version = \"1.{AUTO_MODE_MIN_MINOR}\" or later (EKS UG create-auto)")),
        );
    }
}

/// Canonical form: `upgrade_policy.support_type` is `support_type`; values equal to the API's
/// default are left out, so a state recorded before these attributes existed compares equal
/// (and a refreshed cluster too); `encryption.resources` is always ["secrets"].
pub fn normalize_options(inputs: &mut Attrs) {
    normalize_auto_mode(inputs);
    if let Some(Value::Table(t)) = inputs.remove("upgrade_policy")
        && let Some(v) = t.get("support_type")
    {
        inputs.insert("support_type".into(), v.clone());
    }
    for (k, default) in [
        ("ip_family", Value::str("ipv4")),
        ("bootstrap_cluster_creator_admin", Value::Bool(true)),
        ("zonal_shift", Value::Bool(false)),
        ("deletion_protection", Value::Bool(false)),
    ] {
        if inputs.get(k) == Some(&default) {
            inputs.remove(k);
        }
    }
    if let Some(Value::Table(t)) = inputs.get_mut("encryption") {
        t.remove("resources");
    }
}

/// EKS cannot take secrets encryption away or change its key (EKS UG `enable-kms`: "You can't
/// disable secrets encryption after enabling it. This action is irreversible"; the API has
/// `AssociateEncryptionConfig` only, for "clusters that don't already have encryption enabled").
pub fn encryption_refusals(old: &Attrs, new: &Attrs) -> Vec<(&'static str, String, String)> {
    let key = |a: &Attrs| a.get("encryption").and_then(Value::as_table).and_then(|t| t.get("kms_key")).cloned();
    match (key(old), key(new)) {
        (Some(o), None) => vec![(
            "encryption",
            format!("EKS cannot turn secrets encryption off (the cluster encrypts with {})", o.interpolate()),
            format!(
                "keep encryption = {{ kms_key = \"{}\" }}; a cluster without it must be a new cluster (change `name`)",
                o.interpolate()
            ),
        )],
        (Some(o), Some(n)) if n.is_known() && o != n => vec![(
            "encryption",
            format!("EKS cannot change a cluster's secrets encryption key ({} → {})", o.interpolate(), n.interpolate()),
            format!("keep kms_key = \"{}\"; another key needs a new cluster (change `name`)", o.interpolate()),
        )],
        _ => vec![],
    }
}

/// Offline checks of the options each stands alone with (those that need the VPC or the
/// subnets are `rules::cluster`).
pub fn validate_options(r: &Resource, diags: &mut Vec<Diagnostic>) {
    validate_auto_mode(r, diags);
    let lit = |k: &str| {
        r.attrs.get(k).map(|e| (e.resolve(&|_| Value::Unknown), e.span.clone())).filter(|(v, _)| v.is_known())
    };
    if r.attrs.contains_key("upgrade_policy") && r.attrs.contains_key("support_type") {
        diags.push(
            Diagnostic::error(
                format!("`{}`: support_type and upgrade_policy.support_type are the same setting", r.address),
                r.attrs.get("upgrade_policy").and_then(|e| e.span.clone()),
            )
            .help("keep one of them: support_type = \"STANDARD\", or upgrade_policy = { support_type = \"STANDARD\" }"),
        );
    }
    if let Some((Value::Int(days), span)) = lit("log_retention_days")
        && !log_group::RETENTION_DAYS.contains(&days)
    {
        let near = log_group::RETENTION_DAYS.iter().min_by_key(|d| (*d - days).abs()).copied().unwrap_or(30);
        diags.push(
            Diagnostic::error(
                format!("`{}`: log_retention_days = {days} is not a retention CloudWatch Logs offers", r.address),
                span,
            )
            .help(format!(
                "use one of {} (the nearest is {near})",
                log_group::RETENTION_DAYS.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            )),
        );
    }
    let logs_on = match r.attrs.get("logging").map(|e| e.resolve(&|_| Value::Unknown)) {
        Some(Value::List(l)) => !l.is_empty(),
        Some(_) => true,
        None => false,
    };
    if let Some((_, span)) = lit("log_retention_days").filter(|_| !logs_on) {
        diags.push(
            Diagnostic::warning(
                format!(
                    "`{}`: log_retention_days is set but `logging` exports no log type, so the group stays empty",
                    r.address
                ),
                span,
            )
            .help("add the log types to export, e.g. logging = [\"api\", \"audit\", \"authenticator\"]"),
        );
    }
    if let Some((Value::Str(mode), span)) = lit("authentication_mode")
        && mode == "CONFIG_MAP"
        && lit("bootstrap_cluster_creator_admin").is_some_and(|(v, _)| v == Value::Bool(false))
    {
        // EKS's answer, quoted in terraform-aws-modules/terraform-aws-eks#3026.
        diags.push(
            Diagnostic::error(
                format!(
                    "`{}`: EKS requires bootstrap_cluster_creator_admin = true when authentication_mode is CONFIG_MAP",
                    r.address
                ),
                span,
            )
            .help("use authentication_mode = \"API\" (or \"API_AND_CONFIG_MAP\") and give admins an eks_access_entry"),
        );
    }
    if let Some(e) = r.attrs.get("encryption")
        && let Value::Table(t) = e.resolve(&|_| Value::Unknown)
        && let Some(Value::Str(key)) = t.get("kms_key")
        && let Some(problem) = kms_key_problem(key)
    {
        diags.push(
            Diagnostic::error(format!("`{}`: encryption.kms_key \"{key}\" {problem}", r.address), e.span.clone()).help(
                "write the key's ARN, arn:aws:kms:REGION:ACCOUNT:key/KEY-ID (or alias/NAME), in the cluster's region",
            ),
        );
    }
    if let Some((Value::Str(cidr), span)) = lit("service_cidr")
        && let Some(problem) = service_cidr_problem(&cidr)
    {
        diags.push(
            Diagnostic::error(format!("`{}`: service_cidr \"{cidr}\" {problem}", r.address), span)
                .help("pick a /12 to /24 block inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 that no VPC or peered network uses, e.g. \"172.20.0.0/16\""),
        );
    }
    if let Some((Value::Str(family), span)) = lit("ip_family")
        && family == "ipv6"
        && r.attrs.contains_key("service_cidr")
    {
        // botocore `KubernetesNetworkConfigRequest.serviceIpv4Cidr`: "Don't specify a value if you
        // select ipv6"; services then get addresses from fc00::/7.
        diags.push(
            Diagnostic::error(format!("`{}`: service_cidr cannot be set on an ipv6 cluster", r.address), span)
                .help("remove service_cidr: EKS gives an IPv6 cluster's services addresses from fc00::/7"),
        );
    }
}

/// Why a literal KMS key is not one EKS can use, if it is not.
pub fn kms_key_problem(key: &str) -> Option<&'static str> {
    let parts: Vec<&str> = key.splitn(6, ':').collect();
    match parts.as_slice() {
        ["arn", p, "kms", region, account, rest]
            if p.starts_with("aws")
                && !region.is_empty()
                && account.len() == 12
                && account.bytes().all(|b| b.is_ascii_digit())
                && (rest.strip_prefix("key/").is_some_and(|k| !k.is_empty())
                    || rest.strip_prefix("alias/").is_some_and(|k| !k.is_empty())) =>
        {
            None
        }
        _ => Some("is not the ARN of a KMS key or alias"),
    }
}

/// The rules of `serviceIpv4Cidr` that hold for the block alone (botocore
/// `KubernetesNetworkConfigRequest`): inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, and
/// "Between /24 and /12". Not overlapping the VPC is `rules::cluster`.
pub fn service_cidr_problem(text: &str) -> Option<String> {
    let Ok(net) = text.parse::<ipnet::Ipv4Net>() else {
        return Some("is not an IPv4 CIDR block".into());
    };
    if net.addr() != net.network() {
        return Some(format!("has host bits set (the block starting there is {})", net.trunc()));
    }
    if !(12..=24).contains(&net.prefix_len()) {
        return Some(format!("is a /{}; EKS takes /12 to /24", net.prefix_len()));
    }
    let private: [ipnet::Ipv4Net; 3] = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
        .map(|b| b.parse().unwrap_or_else(|_| unreachable!("literal")));
    if !private.iter().any(|p| p.contains(&net)) {
        return Some("is not inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_cidrs_follow_the_api_rules() {
        assert_eq!(service_cidr_problem("172.20.0.0/16"), None);
        assert_eq!(service_cidr_problem("10.100.0.0/24"), None);
        assert_eq!(service_cidr_problem("172.16.0.0/12"), None);
        assert!(service_cidr_problem("10.0.0.0/8").unwrap().contains("/12 to /24"));
        assert!(service_cidr_problem("10.0.0.0/25").unwrap().contains("/12 to /24"));
        assert!(service_cidr_problem("100.64.0.0/16").unwrap().contains("not inside"));
        assert!(service_cidr_problem("10.0.0.1/16").unwrap().contains("host bits"));
        assert!(service_cidr_problem("fd00::/108").unwrap().contains("not an IPv4"));
    }

    #[test]
    fn kms_keys_are_key_or_alias_arns() {
        assert_eq!(
            kms_key_problem("arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"),
            None
        );
        assert_eq!(kms_key_problem("arn:aws:kms:us-west-2:123456789012:alias/eks"), None);
        assert!(kms_key_problem("alias/eks").is_some());
        assert!(kms_key_problem("arn:aws:kms:us-west-2:123456789012:key/").is_some());
        assert!(kms_key_problem("arn:aws:iam::123456789012:role/x").is_some());
    }

    #[test]
    fn defaults_and_the_upgrade_policy_spelling_normalize_away() {
        let mut a = Attrs::from([
            ("ip_family".into(), Value::str("ipv4")),
            ("zonal_shift".into(), Value::Bool(false)),
            ("deletion_protection".into(), Value::Bool(true)),
            ("bootstrap_cluster_creator_admin".into(), Value::Bool(true)),
            ("support_type".into(), Value::str("STANDARD")),
            (
                "upgrade_policy".into(),
                Value::Table([("support_type".to_string(), Value::str("EXTENDED"))].into_iter().collect()),
            ),
        ]);
        normalize_options(&mut a);
        assert_eq!(a.get("support_type"), Some(&Value::str("EXTENDED")));
        assert_eq!(a.get("deletion_protection"), Some(&Value::Bool(true)));
        for gone in ["ip_family", "zonal_shift", "bootstrap_cluster_creator_admin", "upgrade_policy"] {
            assert!(!a.contains_key(gone), "{gone}: {a:?}");
        }
    }

    fn auto(pools: &[&str], role: Option<&str>) -> Attrs {
        let mut t: std::collections::BTreeMap<String, Value> =
            [("node_pools".to_string(), Value::List(pools.iter().map(|p| Value::str(*p)).collect()))].into();
        if let Some(r) = role {
            t.insert("node_role".into(), Value::str(r));
        }
        Attrs::from([("auto_mode".to_string(), Value::Table(t))])
    }

    #[test]
    fn auto_mode_off_is_no_block_and_pools_sort() {
        let mut off = Attrs::from([(
            "auto_mode".to_string(),
            Value::Table([("enabled".to_string(), Value::Bool(false))].into()),
        )]);
        normalize_options(&mut off);
        assert!(!off.contains_key("auto_mode"));
        let mut on = auto(&["system", "general-purpose"], Some("arn:aws:iam::1:role/n"));
        normalize_options(&mut on);
        assert_eq!(on, auto(&["general-purpose", "system"], Some("arn:aws:iam::1:role/n")));
        assert_eq!(auto_mode(&on).unwrap().node_pools, ["general-purpose", "system"]);
    }

    #[test]
    fn the_auto_mode_node_role_never_changes_and_turning_off_is_noted() {
        let a = auto(&["system"], Some("arn:aws:iam::1:role/a"));
        let b = auto(&["system"], Some("arn:aws:iam::1:role/b"));
        assert!(auto_mode_refusals(&a, &b)[0].1.contains("cannot change"));
        assert!(auto_mode_refusals(&a, &auto(&[], Some("arn:aws:iam::1:role/a"))).is_empty(), "pools change in place");
        assert!(auto_mode_refusals(&a, &Attrs::new()).is_empty(), "off is allowed");
        assert!(
            auto_mode_refusals(&auto(&[], None), &auto(&["system"], Some("arn:aws:iam::1:role/a")))[0]
                .1
                .contains("once its compute is on"),
            "review auto m3: none → a role is refused too"
        );
        let changed = ["auto_mode".to_string()];
        let off = &auto_mode_notes(&a, &Attrs::new(), &changed)[0];
        assert!(off.contains("terminates every EC2 instance"));
        // Review auto m1 / M3: the networking add-ons it was created without, and what stays.
        assert!(off.contains("vpc-cni, kube-proxy and coredns"), "{off}");
        assert!(off.contains("does not delete the EBS volumes"), "{off}");
        assert!(auto_mode_notes(&Attrs::new(), &a, &changed)[0].contains("auto-enable-existing"));
    }

    #[test]
    fn deleting_an_auto_mode_cluster_says_what_stays() {
        let mut a = auto(&["system"], Some("arn:aws:iam::1:role/a"));
        a.insert("name".into(), Value::str("gpu"));
        let note = auto_mode_delete_note(&a).unwrap();
        assert!(note.contains("does not delete the EBS volumes"), "{note}");
        assert!(note.contains("Values=gpu"), "{note}");
        assert!(note.contains("LoadBalancer Services"), "{note}");
        assert!(auto_mode_delete_note(&Attrs::new()).is_none(), "no note without Auto Mode");
    }

    #[test]
    fn encryption_is_never_removed_or_rekeyed() {
        let with = |k: &str| {
            Attrs::from([(
                "encryption".to_string(),
                Value::Table([("kms_key".to_string(), Value::str(k))].into_iter().collect()),
            )])
        };
        assert!(encryption_refusals(&Attrs::new(), &with("arn:a")).is_empty(), "adding is in place");
        assert!(encryption_refusals(&with("arn:a"), &with("arn:a")).is_empty());
        assert!(encryption_refusals(&with("arn:a"), &Attrs::new())[0].1.contains("cannot turn secrets encryption off"));
        assert!(encryption_refusals(&with("arn:a"), &with("arn:b"))[0].1.contains("cannot change"));
    }
}
