//! AL2023 user data: a MIME multi-part document holding one nodeadm `NodeConfig`
//! (`apiVersion: node.eks.aws/v1alpha1`, part content type `application/node.eks.aws`),
//! built from a launch template's `nodeadm` table, its `local_storage` shorthand and its
//! `node_labels` / `node_taints` (as kubelet flags).
//!
//! The shape is nodeadm's API reference (awslabs/amazon-eks-ami `nodeadm/doc/api.md`):
//! `spec.kubelet.{config, flags}`, `spec.containerd.{config, baseRuntimeSpec}`,
//! `spec.instance.localStorage.{strategy = RAID0 | RAID10 | Mount, mountPath, disabledMounts}`,
//! `spec.featureGates`, `spec.cluster.{name, apiServerEndpoint, certificateAuthority, cidr}`.
//! gpustack's keys are snake_case and map one to one; `kubelet.config` is passed through as a
//! `KubeletConfiguration` (camelCase keys, checked here against the known fields).
//!
//! A managed node group on an EKS AMI type gets `spec.cluster` from EKS, which merges its own
//! NodeConfig part with this one ("for EKS-managed nodes based on native AMIs, the default
//! NodeConfig is being added by EKS MNG under the hood", eksctl docs `node-bootstrapping`; EKS
//! UG `launch-templates`: AL2023 user data must be MIME multi-part). A self-managed group has
//! no such merge: its template carries `cluster` and `join` writes `spec.cluster` at apply.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json, json};

use crate::stack::diag::closest;
use crate::stack::expr::ExprKind;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Expr};
use crate::value::{Attrs, Value};

pub const STRATEGIES: &[&str] = &["RAID0", "RAID10", "Mount"];
/// `local_storage = "raid0"`: the shorthand for `nodeadm.instance.local_storage.strategy`.
pub const SHORTHAND: &[&str] = &["raid0", "raid10", "mount"];
/// nodeadm's `DisabledMount` enum (amazon-eks-ami nodeadm/doc/api.md).
const DISABLED_MOUNTS: &[&str] = &["Containerd", "PodLogs", "SOCI"];
/// nodeadm's `Feature` enum (amazon-eks-ami nodeadm/doc/api.md; `featuregates.go` answers false
/// for any other key, so a kubelet gate written here is silently ignored).
const FEATURES: &[&str] = &["InstanceIdNodeName", "FastImagePull"];

const KUBELET: &[Attr] = &[
    Attr::opt("config", Ty::Map(&Ty::Any), Default::None, OnChange::Update),
    Attr::opt("flags", Ty::List(&Ty::Str), Default::None, OnChange::Update),
];
const CONTAINERD: &[Attr] = &[
    Attr::opt("config", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("base_runtime_spec", Ty::Map(&Ty::Any), Default::None, OnChange::Update),
];
const LOCAL_STORAGE: &[Attr] = &[
    Attr::req("strategy", Ty::Enum(STRATEGIES), OnChange::Update),
    Attr::opt("mount_path", Ty::Str, Default::None, OnChange::Update),
    Attr::opt("disabled_mounts", Ty::List(&Ty::Enum(DISABLED_MOUNTS)), Default::None, OnChange::Update),
];
const INSTANCE: &[Attr] = &[Attr::opt("local_storage", Ty::Object(LOCAL_STORAGE), Default::None, OnChange::Update)];
pub const NODEADM: &[Attr] = &[
    Attr::opt("kubelet", Ty::Object(KUBELET), Default::None, OnChange::Update),
    Attr::opt("containerd", Ty::Object(CONTAINERD), Default::None, OnChange::Update),
    Attr::opt("instance", Ty::Object(INSTANCE), Default::None, OnChange::Update),
    Attr::opt("feature_gates", Ty::Map(&Ty::Bool), Default::None, OnChange::Update),
];

/// The fields of `KubeletConfiguration` (kubelet.config.k8s.io/v1beta1, Kubernetes reference
/// "Kubelet Configuration (v1beta1)"), which nodeadm merges over its defaults.
const KUBELET_FIELDS: &[&str] = &[
    "enableServer",
    "staticPodPath",
    "podLogsDir",
    "syncFrequency",
    "fileCheckFrequency",
    "httpCheckFrequency",
    "staticPodURL",
    "staticPodURLHeader",
    "address",
    "port",
    "readOnlyPort",
    "tlsCertFile",
    "tlsPrivateKeyFile",
    "tlsCipherSuites",
    "tlsMinVersion",
    "rotateCertificates",
    "serverTLSBootstrap",
    "authentication",
    "authorization",
    "registryPullQPS",
    "registryBurst",
    "imagePullCredentialsVerificationPolicy",
    "preloadedImagesVerificationAllowlist",
    "eventRecordQPS",
    "eventBurst",
    "enableDebuggingHandlers",
    "enableContentionProfiling",
    "healthzPort",
    "healthzBindAddress",
    "oomScoreAdj",
    "clusterDomain",
    "clusterDNS",
    "streamingConnectionIdleTimeout",
    "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency",
    "nodeLeaseDurationSeconds",
    "imageMinimumGCAge",
    "imageMaximumGCAge",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "volumeStatsAggPeriod",
    "kubeletCgroups",
    "systemCgroups",
    "cgroupRoot",
    "cgroupsPerQOS",
    "cgroupDriver",
    "cpuManagerPolicy",
    "singleProcessOOMKill",
    "cpuManagerPolicyOptions",
    "cpuManagerReconcilePeriod",
    "memoryManagerPolicy",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "qosReserved",
    "runtimeRequestTimeout",
    "hairpinMode",
    "maxPods",
    "podCIDR",
    "podPidsLimit",
    "resolvConf",
    "runOnce",
    "cpuCFSQuota",
    "cpuCFSQuotaPeriod",
    "nodeStatusMaxImages",
    "maxOpenFiles",
    "contentType",
    "kubeAPIQPS",
    "kubeAPIBurst",
    "serializeImagePulls",
    "maxParallelImagePulls",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionPressureTransitionPeriod",
    "evictionMaxPodGracePeriod",
    "evictionMinimumReclaim",
    "mergeDefaultEvictionSettings",
    "podsPerCore",
    "enableControllerAttachDetach",
    "protectKernelDefaults",
    "makeIPTablesUtilChains",
    "iptablesMasqueradeBit",
    "iptablesDropBit",
    "featureGates",
    "failSwapOn",
    "memorySwap",
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "containerLogMaxWorkers",
    "containerLogMonitorInterval",
    "configMapAndSecretChangeDetectionStrategy",
    "systemReserved",
    "kubeReserved",
    "reservedSystemCPUs",
    "showHiddenMetricsForVersion",
    "systemReservedCgroup",
    "kubeReservedCgroup",
    "enforceNodeAllocatable",
    "allowedUnsafeSysctls",
    "volumePluginDir",
    "providerID",
    "kernelMemcgNotification",
    "logging",
    "enableSystemLogHandler",
    "enableSystemLogQuery",
    "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
    "shutdownGracePeriodByPodPriority",
    "crashLoopBackOff",
    "reservedMemory",
    "enableProfilingHandler",
    "enableDebugFlagsHandler",
    "seccompDefault",
    "memoryThrottlingFactor",
    "registerWithTaints",
    "registerNode",
    "tracing",
    "localStorageCapacityIsolation",
    "containerRuntimeEndpoint",
    "imageServiceEndpoint",
    "failCgroupV1",
    "userNamespaces",
];

/// The MIME boundary; any string absent from the parts works (RFC 2046 §5.1.1).
const BOUNDARY: &str = "//";

/// The template's inputs ask for AL2023 user data: `nodeadm` or `local_storage` is set, or
/// its `ami_type` is an AL2023 one.
pub fn is_al2023(i: &Attrs) -> bool {
    i.contains_key("nodeadm")
        || i.contains_key("local_storage")
        || i.get("ami_type").and_then(Value::as_str).is_some_and(|a| a.starts_with("AL2023_"))
}

/// What nodeadm's `spec.cluster` says for a self-managed node: the cluster's name, API
/// endpoint, CA (base64, as DescribeCluster returns it) and service CIDR.
pub struct Join {
    pub name: String,
    pub endpoint: String,
    pub certificate_authority: String,
    pub service_cidr: String,
}

/// The MIME user data, `None` when the template says nothing nodeadm needs (and joins no
/// cluster itself).
pub fn render(i: &Attrs, join: Option<&Join>) -> Option<String> {
    let spec = spec(i, join);
    if spec.is_empty() {
        return None;
    }
    let doc = json!({ "apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec });
    let yaml = serde_yaml_ng::to_string(&doc).unwrap_or_default();
    Some(format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n--{BOUNDARY}\nContent-Type: application/node.eks.aws\n\n---\n{yaml}\n--{BOUNDARY}--\n"
    ))
}

fn spec(i: &Attrs, join: Option<&Join>) -> Map<String, Json> {
    let n = i.get("nodeadm").and_then(Value::as_table);
    let sub = |k: &str| n.and_then(|n| n.get(k)).and_then(Value::as_table);
    let mut spec = Map::new();
    if let Some(j) = join {
        spec.insert(
            "cluster".into(),
            json!({
                "name": j.name, "apiServerEndpoint": j.endpoint,
                "certificateAuthority": j.certificate_authority, "cidr": j.service_cidr,
            }),
        );
    }
    let mut kubelet = Map::new();
    if let Some(c) =
        sub("kubelet").and_then(|k| k.get("config")).filter(|c| c.as_table().is_some_and(|t| !t.is_empty()))
    {
        kubelet.insert("config".into(), c.to_json());
    }
    let mut flags: Vec<Json> = sub("kubelet")
        .and_then(|k| k.get("flags"))
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .map(Value::to_json)
        .collect();
    flags.extend(label_and_taint_flags(i).into_iter().map(Json::String));
    if !flags.is_empty() {
        kubelet.insert("flags".into(), Json::Array(flags));
    }
    if !kubelet.is_empty() {
        spec.insert("kubelet".into(), Json::Object(kubelet));
    }
    if let Some(c) = sub("containerd") {
        let mut out = Map::new();
        if let Some(cfg) = c.get("config") {
            out.insert("config".into(), cfg.to_json());
        }
        if let Some(rs) = c.get("base_runtime_spec") {
            out.insert("baseRuntimeSpec".into(), rs.to_json());
        }
        if !out.is_empty() {
            spec.insert("containerd".into(), Json::Object(out));
        }
    }
    if let Some(ls) = local_storage(i) {
        spec.insert("instance".into(), json!({ "localStorage": ls }));
    }
    if let Some(g) = n.and_then(|n| n.get("feature_gates")).and_then(Value::as_table).filter(|g| !g.is_empty()) {
        spec.insert("featureGates".into(), Value::Table(g.clone()).to_json());
    }
    spec
}

/// `spec.instance.localStorage`, from the full form or the `local_storage` shorthand.
fn local_storage(i: &Attrs) -> Option<Json> {
    let full = i
        .get("nodeadm")
        .and_then(Value::as_table)
        .and_then(|n| n.get("instance"))
        .and_then(Value::as_table)
        .and_then(|t| t.get("local_storage"))
        .and_then(Value::as_table);
    if let Some(ls) = full {
        let mut out = Map::new();
        for (from, to) in [("strategy", "strategy"), ("mount_path", "mountPath"), ("disabled_mounts", "disabledMounts")]
        {
            if let Some(v) = ls.get(from) {
                out.insert(to.into(), v.to_json());
            }
        }
        return Some(Json::Object(out));
    }
    let short = i.get("local_storage").and_then(Value::as_str)?;
    let strategy = match short {
        "raid0" => "RAID0",
        "raid10" => "RAID10",
        _ => "Mount",
    };
    Some(json!({ "strategy": strategy }))
}

/// `node_labels` and `node_taints` as kubelet flags (`--node-labels`, `--register-with-taints`,
/// the kubelet command-line reference), sorted so the text is stable.
fn label_and_taint_flags(i: &Attrs) -> Vec<String> {
    let mut out = vec![];
    if let Some(labels) = i.get("node_labels").and_then(Value::as_table).filter(|l| !l.is_empty()) {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={}", v.interpolate())).collect();
        out.push(format!("--node-labels={}", l.join(",")));
    }
    if let Some(taints) = i.get("node_taints").and_then(Value::as_list).filter(|l| !l.is_empty()) {
        let mut t: Vec<String> = taints
            .iter()
            .filter_map(Value::as_table)
            .map(|t| {
                let g = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
                format!("{}={}:{}", g("key"), g("value"), super::userdata::k8s_effect(g("effect")))
            })
            .collect();
        t.sort();
        out.push(format!("--register-with-taints={}", t.join(",")));
    }
    out
}

/// Offline checks of `nodeadm` and `local_storage`: kubelet config keys are
/// `KubeletConfiguration` fields (camelCase), flags are flags, and the storage strategy is
/// said once.
pub fn check(nodeadm: Option<&Expr>, short: Option<&Expr>, diags: &mut Vec<Diagnostic>) {
    let table = |e: &Expr| -> BTreeMap<String, Expr> {
        match &e.kind {
            ExprKind::Table(t) => t.clone(),
            ExprKind::Value(Value::Table(t)) => {
                t.iter().map(|(k, v)| (k.clone(), Expr::value(v.clone(), e.span.clone()))).collect()
            }
            _ => BTreeMap::new(),
        }
    };
    let Some(n) = nodeadm.map(table) else { return };
    let kubelet = n.get("kubelet").map(table).unwrap_or_default();
    if let Some(cfg) = kubelet.get("config") {
        for (key, e) in table(cfg) {
            if KUBELET_FIELDS.contains(&key.as_str()) {
                continue;
            }
            let camel = camel_case(&key);
            let near = if KUBELET_FIELDS.contains(&camel.as_str()) {
                KUBELET_FIELDS.iter().copied().find(|f| *f == camel)
            } else {
                closest(&key, KUBELET_FIELDS.iter().copied())
            };
            let at = e.key_span.clone().or(e.span.clone()).or(cfg.span.clone());
            match near {
                Some(f) => diags.push(
                    Diagnostic::error(
                        format!("`nodeadm.kubelet.config.{key}` is not a KubeletConfiguration field"),
                        at,
                    )
                    .help(format!("did you mean `{f}`? kubelet config keys are KubeletConfiguration's camelCase fields")),
                ),
                None => diags.push(
                    Diagnostic::warning(
                        format!("`nodeadm.kubelet.config.{key}` is not a KubeletConfiguration field gpustack knows"),
                        at,
                    )
                    .help("check the spelling against the Kubernetes \"Kubelet Configuration (v1beta1)\" reference; nodeadm passes it through"),
                ),
            }
        }
    }
    if let Some(flags) = kubelet.get("flags")
        && let Value::List(l) = flags.resolve(&|_| Value::Unknown)
    {
        // kubelet keeps only the last --register-with-taints (k8s pkg/util/taints `taintsVar.Set`
        // replaces the list) and gpustack writes node_taints as one after these flags.
        if l.iter().filter_map(Value::as_str).any(|f| f.starts_with("--register-with-taints")) {
            diags.push(
                Diagnostic::error(
                    "`nodeadm.kubelet.flags` sets --register-with-taints, which kubelet replaces with the last such flag (node_taints, or EKS's for the node group's taints)",
                    flags.span.clone(),
                )
                .help("write the taints as node_taints = [{ key, value, effect }] (or on the node group's taints), not as a kubelet flag"),
            );
        }
        for f in l.iter().filter_map(Value::as_str).filter(|f| !f.starts_with("--")) {
            diags.push(
                Diagnostic::error(
                    format!("`nodeadm.kubelet.flags`: \"{f}\" is not a kubelet flag"),
                    flags.span.clone(),
                )
                .help("write each flag whole, e.g. \"--node-labels=team=ml\""),
            );
        }
    }
    if let Some(gates) = n.get("feature_gates") {
        for (key, e) in table(gates) {
            if !FEATURES.contains(&key.as_str()) {
                diags.push(
                    Diagnostic::error(
                        format!("`nodeadm.feature_gates.{key}` is not a nodeadm feature ({})", FEATURES.join(", ")),
                        e.key_span.clone().or(e.span.clone()).or(gates.span.clone()),
                    )
                    .help("kubelet feature gates go in nodeadm.kubelet.config.featureGates = { … }; nodeadm ignores unknown keys here"),
                );
            }
        }
    }
    let full = n.get("instance").map(table).and_then(|i| i.get("local_storage").cloned());
    if let (Some(_), Some(s)) = (full, short) {
        diags.push(
            Diagnostic::error(
                "`local_storage` and `nodeadm.instance.local_storage` both set the instance-store strategy",
                s.span.clone(),
            )
            .help("keep one: local_storage = \"raid0\" is the short form of nodeadm.instance.local_storage = { strategy = \"RAID0\" }"),
        );
    }
}

fn camel_case(s: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in s.chars() {
        if c == '_' || c == '-' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pairs: Vec<(&str, Value)>) -> Value {
        Value::Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    #[test]
    fn nodeadm_renders_one_mime_part_holding_a_node_config() {
        let i: Attrs = [
            (
                "nodeadm".to_string(),
                t(vec![(
                    "kubelet",
                    t(vec![
                        ("config", t(vec![("maxPods", Value::Int(110))])),
                        ("flags", Value::List(vec![Value::str("--v=2")])),
                    ]),
                )]),
            ),
            ("local_storage".to_string(), Value::str("raid0")),
            ("node_labels".to_string(), t(vec![("team", Value::str("ml"))])),
        ]
        .into();
        let text = render(&i, None).unwrap();
        assert!(text.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n"), "{text}");
        assert!(text.contains("--//\nContent-Type: application/node.eks.aws\n"), "{text}");
        assert!(text.trim_end().ends_with("--//--"), "{text}");
        let body = text.split("---\n").nth(1).unwrap().split("\n--//--").next().unwrap();
        let doc: Json = serde_yaml_ng::from_str(body).unwrap();
        assert_eq!(doc["apiVersion"], "node.eks.aws/v1alpha1");
        assert_eq!(doc["kind"], "NodeConfig");
        assert_eq!(doc["spec"]["kubelet"]["config"]["maxPods"], 110);
        assert_eq!(doc["spec"]["kubelet"]["flags"], json!(["--v=2", "--node-labels=team=ml"]));
        assert_eq!(doc["spec"]["instance"]["localStorage"]["strategy"], "RAID0");
        assert!(doc["spec"].get("cluster").is_none(), "EKS fills the cluster of a managed group");
        assert_eq!(render(&Attrs::new(), None), None);
    }

    #[test]
    fn a_self_managed_node_config_names_its_cluster() {
        let join = Join {
            name: "c".into(),
            endpoint: "https://x.eks".into(),
            certificate_authority: "Q0E=".into(),
            service_cidr: "10.100.0.0/16".into(),
        };
        let text = render(&Attrs::new(), Some(&join)).unwrap();
        assert!(text.contains("apiServerEndpoint: https://x.eks"), "{text}");
        assert!(text.contains("cidr: 10.100.0.0/16"), "{text}");
    }

    #[test]
    fn snake_case_kubelet_keys_are_refused_with_the_field() {
        assert_eq!(camel_case("max_pods"), "maxPods");
        assert_eq!(camel_case("system_reserved"), "systemReserved");
    }
}
