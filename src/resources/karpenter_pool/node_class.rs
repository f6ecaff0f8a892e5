//! The EC2NodeClass fields Karpenter users set beyond gpustack's GPU layout: the AMI family
//! (`ami = "al2023@…"` beside Bottlerocket), the root volume, `instanceStorePolicy`, the
//! kubelet, IMDS, public IPs and detailed monitoring, and selector terms by id or by tags.
//! Their schema, their rendering and their offline checks live here together; `render.rs`
//! assembles the document. Field names, enums and CEL rules are the EC2NodeClass CRD's
//! (tests/k8s/crds/karpenter.k8s.aws_ec2nodeclasses.yaml, v1.14.1); what Karpenter does with
//! each is in docs/karpenter-pools.md §"Karpenter users' pools".

use serde_json::{Map, Value as Json, json};

use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::value::{Attrs, Value};

/// The AMI families a pool renders, by alias (`family@version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmiFamily {
    Bottlerocket,
    Al2023,
}

/// The family and version of an `ami` alias gpustack renders: `bottlerocket@latest`,
/// `bottlerocket@v1.57.0`, `al2023@latest`, `al2023@v20251029` (the AL2023 EKS AMI's release
/// date, as Karpenter pins it: CRD `alias` description "ex: \"al2023@v20240625\"").
pub fn ami_alias(ami: &str) -> Option<(AmiFamily, &str)> {
    let numeric = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    if let Some(version) = ami.strip_prefix("bottlerocket@") {
        let release = version.strip_prefix('v').unwrap_or(version);
        let ok = version == "latest" || (release.split('.').count() == 3 && release.split('.').all(numeric));
        return ok.then_some((AmiFamily::Bottlerocket, version));
    }
    let version = ami.strip_prefix("al2023@")?;
    let ok = version == "latest" || version.strip_prefix('v').is_some_and(|d| d.len() == 8 && numeric(d));
    ok.then_some((AmiFamily::Al2023, version))
}

/// The pool's AMI family (Bottlerocket unless `ami` is an AL2023 alias).
pub fn family(inputs: &Attrs) -> AmiFamily {
    inputs.get("ami").and_then(Value::as_str).and_then(ami_alias).map_or(AmiFamily::Bottlerocket, |(f, _)| f)
}

/// EBS volume types a root volume may have (`volumeType` enum of the CRD less `st1`/`sc1`,
/// which EC2 refuses as a boot volume: EC2 UG `ebs-volume-types`, "cannot be a boot volume").
pub const ROOT_VOLUME_TYPES: &[&str] = &["gp3", "gp2", "io1", "io2", "standard"];

/// `root_volume`: the same shape as a launch template's (r19-lt).
pub const ROOT_VOLUME: &[Attr] = &[
    Attr::opt("size_gib", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("type", Ty::Enum(ROOT_VOLUME_TYPES), Default::None, OnChange::Update),
    Attr::opt("iops", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("throughput", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("encrypted", Ty::Bool, Default::None, OnChange::Update),
    Attr::opt("kms_key", Ty::Str, Default::None, OnChange::Update),
];

/// Karpenter's AL2023 root volume when none is given: 20 GiB gp3 at `/dev/xvda`
/// (karpenter-provider-aws v1.14.1 `pkg/providers/amifamily/al2023.go`
/// `DefaultBlockDeviceMappings`).
pub const AL2023_ROOT_GIB: i64 = 20;

/// The eviction signals the CRD allows in `evictionHard`, `evictionSoft` and
/// `evictionSoftGracePeriod` (its CEL rules).
pub const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];

/// `kubelet`: EC2NodeClass `spec.kubelet` (v1 moved it from the NodePool), every field of
/// the v1.14.1 CRD, snake_case.
pub const KUBELET: &[Attr] = &[
    Attr::opt("max_pods", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("pods_per_core", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("system_reserved", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("kube_reserved", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("eviction_hard", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("eviction_soft", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("eviction_soft_grace_period", Ty::Map(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("eviction_max_pod_grace_period", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("image_gc_high_threshold_percent", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("image_gc_low_threshold_percent", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("cpu_cfs_quota", Ty::Bool, Default::None, OnChange::Update),
    Attr::opt("cluster_dns", Ty::List(&Ty::Str), Default::None, OnChange::Update),
];

/// `kubelet` attribute → CRD field.
const KUBELET_FIELDS: &[(&str, &str)] = &[
    ("max_pods", "maxPods"),
    ("pods_per_core", "podsPerCore"),
    ("system_reserved", "systemReserved"),
    ("kube_reserved", "kubeReserved"),
    ("eviction_hard", "evictionHard"),
    ("eviction_soft", "evictionSoft"),
    ("eviction_soft_grace_period", "evictionSoftGracePeriod"),
    ("eviction_max_pod_grace_period", "evictionMaxPodGracePeriod"),
    ("image_gc_high_threshold_percent", "imageGCHighThresholdPercent"),
    ("image_gc_low_threshold_percent", "imageGCLowThresholdPercent"),
    ("cpu_cfs_quota", "cpuCFSQuota"),
    ("cluster_dns", "clusterDNS"),
];

pub const ENABLED: &[&str] = &["enabled", "disabled"];
pub const HTTP_TOKENS: &[&str] = &["required", "optional"];

/// `metadata_options`: IMDS of the nodes (CRD `metadataOptions`; Karpenter's defaults are
/// tokens required and a hop limit of 1, which keep pods off the node role's credentials).
pub const METADATA_OPTIONS: &[Attr] = &[
    Attr::opt("http_endpoint", Ty::Enum(ENABLED), Default::None, OnChange::Update),
    Attr::opt("http_protocol_ipv6", Ty::Enum(ENABLED), Default::None, OnChange::Update),
    Attr::opt("http_put_response_hop_limit", Ty::Int, Default::None, OnChange::Update),
    Attr::opt("http_tokens", Ty::Enum(HTTP_TOKENS), Default::None, OnChange::Update),
];

const METADATA_FIELDS: &[(&str, &str)] = &[
    ("http_endpoint", "httpEndpoint"),
    ("http_protocol_ipv6", "httpProtocolIPv6"),
    ("http_put_response_hop_limit", "httpPutResponseHopLimit"),
    ("http_tokens", "httpTokens"),
];

/// A value as YAML: strings and numbers as they are, maps and lists recursively, an id not
/// known yet as its `(known after apply)` text.
pub fn json_of(v: &Value) -> Json {
    match v {
        Value::Str(s) => json!(s),
        Value::Int(n) => json!(n),
        Value::Bool(b) => json!(b),
        Value::List(l) => Json::Array(l.iter().map(json_of).collect()),
        Value::Table(t) => Json::Object(t.iter().map(|(k, v)| (k.clone(), json_of(v))).collect()),
        other => json!(other.interpolate()),
    }
}

/// Fields of a table input renamed by `fields`, in the order given.
fn renamed(t: &Attrs, fields: &[(&str, &str)]) -> Map<String, Json> {
    fields.iter().filter_map(|(k, f)| Some((f.to_string(), json_of(t.get(*k)?)))).collect()
}

/// `spec.kubelet`, when `kubelet` is written.
pub fn kubelet(inputs: &Attrs) -> Option<Json> {
    let t = inputs.get("kubelet")?.as_table()?;
    let m = renamed(t, KUBELET_FIELDS);
    (!m.is_empty()).then_some(Json::Object(m))
}

/// `spec.metadataOptions`, when `metadata_options` is written (Karpenter's defaults
/// otherwise).
pub fn metadata_options(inputs: &Attrs) -> Option<Json> {
    let t = inputs.get("metadata_options")?.as_table()?;
    let m = renamed(t, METADATA_FIELDS);
    (!m.is_empty()).then_some(Json::Object(m))
}

/// The root device's `ebs`: `root_volume` over the family's default size.
pub fn root_ebs(inputs: &Attrs, default_gib: i64) -> Json {
    let rv = inputs.get("root_volume").and_then(Value::as_table);
    let get = |k: &str| rv.and_then(|t| t.get(k));
    let size = get("size_gib").and_then(Value::as_int).unwrap_or(default_gib);
    let mut ebs = Map::new();
    ebs.insert("volumeSize".into(), json!(format!("{size}Gi")));
    ebs.insert("volumeType".into(), get("type").map_or(json!("gp3"), json_of));
    for (k, f) in [("iops", "iops"), ("throughput", "throughput")] {
        if let Some(v) = get(k) {
            ebs.insert(f.into(), json_of(v));
        }
    }
    ebs.insert("encrypted".into(), get("encrypted").map_or(json!(true), json_of));
    if let Some(k) = get("kms_key") {
        ebs.insert("kmsKeyID".into(), json_of(k));
    }
    ebs.insert("deleteOnTermination".into(), json!(true));
    Json::Object(ebs)
}

/// Selector terms: one `{ id }` per listed id, then one `{ tags }` term when tags are given
/// (terms are ORed: CRD "The terms are ORed").
pub fn selector_terms(ids: &[Value], tags: Option<&Value>) -> Json {
    let mut terms: Vec<Json> = ids.iter().map(|v| json!({ "id": json_of(v) })).collect();
    if let Some(t) = tags.and_then(Value::as_table).filter(|t| !t.is_empty()) {
        terms.push(json!({ "tags": json_of(&Value::Table(t.clone())) }));
    }
    Json::Array(terms)
}

/// The simple fields: `instanceStorePolicy`, `associatePublicIPAddress`, `detailedMonitoring`.
pub fn flags(inputs: &Attrs, spec: &mut Map<String, Json>) {
    if inputs.get("instance_store").and_then(Value::as_str) == Some("raid0") {
        spec.insert("instanceStorePolicy".into(), json!("RAID0"));
    }
    for (k, f) in
        [("associate_public_ip_address", "associatePublicIPAddress"), ("detailed_monitoring", "detailedMonitoring")]
    {
        if let Some(v) = inputs.get(k) {
            spec.insert(f.into(), json_of(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_bottlerocket_or_al2023_releases() {
        assert_eq!(ami_alias("al2023@latest"), Some((AmiFamily::Al2023, "latest")));
        assert_eq!(ami_alias("al2023@v20251029"), Some((AmiFamily::Al2023, "v20251029")));
        assert_eq!(ami_alias("bottlerocket@v1.57.0"), Some((AmiFamily::Bottlerocket, "v1.57.0")));
        for bad in ["al2023@2025", "al2023@v1.2.3", "al2@latest", "bottlerocket@v1.57", "ubuntu@latest"] {
            assert_eq!(ami_alias(bad), None, "{bad}");
        }
    }

    #[test]
    fn kubelet_and_imds_render_the_crds_field_names() {
        let k = Value::Table(
            [
                ("max_pods".to_string(), Value::Int(110)),
                ("cluster_dns".to_string(), Value::List(vec![Value::str("10.100.0.10")])),
                (
                    "eviction_hard".to_string(),
                    Value::Table([("memory.available".to_string(), Value::str("5%"))].into_iter().collect()),
                ),
            ]
            .into_iter()
            .collect(),
        );
        let i = Attrs::from([("kubelet".to_string(), k)]);
        assert_eq!(
            kubelet(&i),
            Some(
                json!({ "maxPods": 110, "evictionHard": { "memory.available": "5%" }, "clusterDNS": ["10.100.0.10"] })
            )
        );
    }
}
