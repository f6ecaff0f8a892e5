//! The inverse of `userdata` and `nodeadm`: a launch template's user data read back into the
//! kind's inputs, for `[import]` and `import generate` (issue 20). Bottlerocket TOML gives
//! `node_labels` (`settings.kubernetes.node-labels`), `node_taints`
//! (`settings.kubernetes.node-taints`, `key = ["value:Effect"]`), `gpu_sharing`
//! (`settings.kubelet-device-plugins.nvidia`: the keys `userdata::render` writes) and
//! `bottlerocket_settings` (every other setting). AL2023 MIME multi-part gives, from its
//! `application/node.eks.aws` NodeConfig part (awslabs/amazon-eks-ami `nodeadm/doc/api.md`),
//! `nodeadm = { kubelet, containerd, instance, feature_gates }`, `local_storage` for a bare
//! strategy, and `node_labels` / `node_taints` from the kubelet flags `--node-labels` and
//! `--register-with-taints` (kubelet command-line reference).
//!
//! What the language cannot say is returned as (field, value) and never dropped: other MIME
//! parts (shell scripts, cloud-config: EKS UG `launch-templates`, "MIME multi-part"),
//! `spec.cluster` (written by eksctl and terraform-aws-eks for custom AMIs and self-managed
//! nodes; EKS adds its own for managed nodes on EKS AMIs), any other NodeConfig field, a user
//! data that is neither (an AL2 bootstrap script) and TOML outside `[settings]`.

use std::collections::BTreeMap;

use crate::value::{Attrs, Value};

/// What a user data says, as inputs, and what it says that they cannot.
#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    pub attrs: Attrs,
    pub unexpressed: Vec<(String, String)>,
    /// The text is nodeadm MIME (an AL2023 template).
    pub al2023: bool,
}

/// Reads `text` (already base64-decoded) back into inputs.
pub fn parse(text: &str) -> Parsed {
    let trimmed = text.trim_start();
    if trimmed.trim().is_empty() {
        return Parsed::default();
    }
    if let Some(boundary) = mime_boundary(text) {
        return parse_mime(text, &boundary);
    }
    if !trimmed.starts_with("#!")
        && let Ok(doc) = trimmed.parse::<toml_edit::DocumentMut>()
    {
        return parse_bottlerocket(&doc);
    }
    Parsed { unexpressed: vec![("user_data".into(), text.to_string())], ..Parsed::default() }
}

/// True when both texts say the same to the kind (their inputs are equal) and neither
/// holds anything the inputs cannot say: a different spelling of the same user data.
pub fn same_meaning(a: &str, b: &str) -> bool {
    let (pa, pb) = (parse(a), parse(b));
    pa.unexpressed.is_empty() && pb.unexpressed.is_empty() && pa.attrs == pb.attrs && pa.al2023 == pb.al2023
}

// ---- Bottlerocket -------------------------------------------------------------------------

fn parse_bottlerocket(doc: &toml_edit::DocumentMut) -> Parsed {
    let mut out = Parsed::default();
    let root = item_value(doc.as_item());
    let Value::Table(mut root) = root else { return out };
    let settings = match root.remove("settings") {
        Some(Value::Table(t)) => t,
        Some(other) => {
            out.unexpressed.push(("settings".into(), other.to_string()));
            BTreeMap::new()
        }
        None => BTreeMap::new(),
    };
    for (k, v) in root {
        out.unexpressed.push((format!("user_data.{k}"), v.to_string()));
    }
    let mut settings = settings;
    if let Some(Value::Table(k8s)) = settings.get_mut("kubernetes") {
        if let Some(Value::Table(labels)) = k8s.remove("node-labels") {
            out.attrs.insert("node_labels".into(), Value::Table(labels));
        }
        if let Some(Value::Table(taints)) = k8s.remove("node-taints") {
            let mut list = vec![];
            for (key, v) in taints {
                let entries = match v {
                    Value::List(l) => l,
                    single => vec![single],
                };
                for e in entries {
                    let s = e.as_str().unwrap_or_default();
                    let (value, effect) = s.rsplit_once(':').unwrap_or(("", s));
                    list.push(taint(&key, value, effect));
                }
            }
            out.attrs.insert("node_taints".into(), Value::List(list));
        }
        if k8s.is_empty() {
            settings.remove("kubernetes");
        }
    }
    if let Some(sharing) = take_sharing(&mut settings) {
        out.attrs.insert("gpu_sharing".into(), sharing);
    }
    if !settings.is_empty() {
        out.attrs.insert("bottlerocket_settings".into(), Value::Table(settings));
    }
    out
}

/// `settings.kubelet-device-plugins.nvidia` as `gpu_sharing`, taking out only the keys
/// `userdata::render` writes; the rest stays in the settings.
fn take_sharing(settings: &mut BTreeMap<String, Value>) -> Option<Value> {
    let Some(Value::Table(plugins)) = settings.get_mut("kubelet-device-plugins") else { return None };
    let Some(Value::Table(nvidia)) = plugins.get_mut("nvidia") else { return None };
    let sharing = nvidia.get("device-sharing-strategy").and_then(Value::as_str).map(str::to_string);
    let partition = nvidia.get("device-partitioning-strategy").and_then(Value::as_str).map(str::to_string);
    let mut g = BTreeMap::new();
    match (sharing.as_deref(), partition.as_deref()) {
        (Some(s @ ("time-slicing" | "mps")), None) => {
            let replicas = nvidia.get(s).and_then(Value::as_table).and_then(|t| t.get("replicas")).cloned();
            // The renderer writes exactly the strategy and replicas: anything more stays a setting.
            let only_replicas = nvidia.get(s).and_then(Value::as_table).is_some_and(|t| t.len() == 1);
            let replicas = replicas.filter(|_| only_replicas)?;
            nvidia.remove("device-sharing-strategy");
            nvidia.remove(s);
            g.insert("strategy".into(), Value::str(s));
            g.insert("replicas".into(), replicas);
        }
        (None, Some("mig")) => {
            nvidia.remove("device-partitioning-strategy");
            g.insert("strategy".into(), Value::str("mig"));
            if let Some(Value::Table(mig)) = nvidia.get_mut("mig")
                && let Some(p) = mig.remove("profile")
            {
                g.insert("mig_profile".into(), p);
                if mig.is_empty() {
                    nvidia.remove("mig");
                }
            }
        }
        _ => return None,
    }
    if nvidia.is_empty() {
        plugins.remove("nvidia");
    }
    if plugins.is_empty() {
        settings.remove("kubelet-device-plugins");
    }
    Some(Value::Table(g))
}

fn item_value(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::Value(v) => toml_value(v),
        toml_edit::Item::Table(t) => Value::Table(t.iter().map(|(k, v)| (k.to_string(), item_value(v))).collect()),
        toml_edit::Item::ArrayOfTables(a) => Value::List(
            a.iter().map(|t| Value::Table(t.iter().map(|(k, v)| (k.to_string(), item_value(v))).collect())).collect(),
        ),
        toml_edit::Item::None => Value::Unknown,
    }
}

fn toml_value(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match v {
        T::String(s) => Value::str(s.value()),
        T::Integer(i) => Value::Int(*i.value()),
        T::Float(f) => Value::Float(*f.value()),
        T::Boolean(b) => Value::Bool(*b.value()),
        T::Datetime(d) => Value::str(d.value().to_string()),
        T::Array(a) => Value::List(a.iter().map(toml_value).collect()),
        T::InlineTable(t) => Value::Table(t.iter().map(|(k, v)| (k.to_string(), toml_value(v))).collect()),
    }
}

// ---- AL2023 nodeadm MIME -------------------------------------------------------------------

/// The boundary of a `multipart/*` user data (RFC 2046 §5.1.1), from its top headers.
fn mime_boundary(text: &str) -> Option<String> {
    let head = text.split("\n\n").next().unwrap_or_default().replace("\r\n", "\n");
    let header = head.lines().find(|l| l.to_ascii_lowercase().starts_with("content-type:"))?;
    if !header.to_ascii_lowercase().contains("multipart/") {
        return None;
    }
    let at = header.to_ascii_lowercase().find("boundary=")? + "boundary=".len();
    let raw = header[at..].split(';').next().unwrap_or_default().trim();
    Some(raw.trim_matches('"').to_string()).filter(|b| !b.is_empty())
}

/// The parts of a multipart body: (headers lowercased, content).
fn mime_parts(text: &str, boundary: &str) -> Vec<(BTreeMap<String, String>, String)> {
    let text = text.replace("\r\n", "\n");
    let delim = format!("--{boundary}");
    let mut parts = vec![];
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        let t = line.trim_end();
        if t == delim || t == format!("{delim}--") {
            if let Some(lines) = current.take() {
                parts.push(lines.join("\n"));
            }
            if t == delim {
                current = Some(vec![]);
            }
            continue;
        }
        if let Some(lines) = current.as_mut() {
            lines.push(line);
        }
    }
    if let Some(lines) = current.take() {
        parts.push(lines.join("\n"));
    }
    parts
        .into_iter()
        .map(|p| {
            let (head, body) = p.split_once("\n\n").unwrap_or((p.as_str(), ""));
            let headers = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            (headers, body.to_string())
        })
        .collect()
}

fn parse_mime(text: &str, boundary: &str) -> Parsed {
    let mut out = Parsed::default();
    let mut configs = 0;
    let mut nodeadm_parts = 0;
    for (headers, body) in mime_parts(text, boundary) {
        let ctype = headers.get("content-type").cloned().unwrap_or_default();
        let body = match headers.get("content-transfer-encoding").map(|e| e.to_ascii_lowercase()) {
            Some(e) if e == "base64" => {
                let compact: String = body.split_whitespace().collect();
                aws_smithy_types::base64::decode(compact)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or(body)
            }
            _ => body,
        };
        if !ctype.to_ascii_lowercase().starts_with("application/node.eks.aws") {
            out.unexpressed.push((format!("user_data part {ctype}"), body.trim_end().to_string()));
            continue;
        }
        nodeadm_parts += 1;
        for doc in serde_yaml_ng::Deserializer::from_str(&body) {
            let Ok(json) = <serde_json::Value as serde::Deserialize>::deserialize(doc) else {
                out.unexpressed.push(("user_data NodeConfig".into(), body.trim_end().to_string()));
                break;
            };
            if json.is_null() {
                continue;
            }
            configs += 1;
            if configs > 1 {
                // nodeadm merges several NodeConfigs; the language holds one.
                out.unexpressed
                    .push(("user_data NodeConfig".into(), serde_yaml_ng::to_string(&json).unwrap_or_default()));
                continue;
            }
            node_config(&json, &mut out);
        }
    }
    // Only a NodeConfig part makes it AL2023's nodeadm: an AL2 MIME (cloud-init with a
    // `text/x-shellscript` part, amazon-eks-ami's bootstrap.sh) is not (review imp-eks m1).
    if nodeadm_parts == 0 {
        return out;
    }
    out.al2023 = true;
    if !out.attrs.contains_key("nodeadm") && !out.attrs.contains_key("local_storage") {
        // The template stays an AL2023 one (nodeadm MIME, not Bottlerocket TOML) when it says
        // nothing beyond labels and taints.
        out.attrs.insert("nodeadm".into(), Value::Table(BTreeMap::new()));
    }
    out
}

fn node_config(doc: &serde_json::Value, out: &mut Parsed) {
    use serde_json::Value as J;
    let empty = |v: &J| match v {
        J::Null => true,
        J::Object(o) => o.values().all(|v| matches!(v, J::Null) || v.as_object().is_some_and(|o| o.is_empty())),
        J::Array(a) => a.is_empty(),
        _ => false,
    };
    for (k, v) in doc.as_object().into_iter().flatten() {
        match k.as_str() {
            "apiVersion" | "kind" | "spec" => {}
            _ if empty(v) => {}
            _ => out.unexpressed.push((format!("NodeConfig.{k}"), v.to_string())),
        }
    }
    if doc.get("apiVersion").and_then(J::as_str).is_some_and(|a| a != "node.eks.aws/v1alpha1") {
        out.unexpressed.push(("NodeConfig.apiVersion".into(), doc["apiVersion"].to_string()));
    }
    let Some(spec) = doc.get("spec").and_then(J::as_object) else { return };
    let mut nodeadm = BTreeMap::new();
    for (k, v) in spec {
        match k.as_str() {
            "kubelet" => {
                let mut kubelet = BTreeMap::new();
                for (kk, kv) in v.as_object().into_iter().flatten() {
                    match kk.as_str() {
                        "config" if !empty(kv) => {
                            kubelet.insert("config".into(), Value::from_json(kv));
                        }
                        "flags" => {
                            let rest = flags(kv, out);
                            if !rest.is_empty() {
                                kubelet.insert("flags".into(), Value::List(rest));
                            }
                        }
                        _ if empty(kv) => {}
                        _ => out.unexpressed.push((format!("NodeConfig.spec.kubelet.{kk}"), kv.to_string())),
                    }
                }
                if !kubelet.is_empty() {
                    nodeadm.insert("kubelet".into(), Value::Table(kubelet));
                }
            }
            "containerd" => {
                let mut c = BTreeMap::new();
                for (ck, cv) in v.as_object().into_iter().flatten() {
                    match ck.as_str() {
                        "config" if cv.is_string() => {
                            c.insert("config".into(), Value::from_json(cv));
                        }
                        "baseRuntimeSpec" if !empty(cv) => {
                            c.insert("base_runtime_spec".into(), Value::from_json(cv));
                        }
                        _ if empty(cv) => {}
                        _ => out.unexpressed.push((format!("NodeConfig.spec.containerd.{ck}"), cv.to_string())),
                    }
                }
                if !c.is_empty() {
                    nodeadm.insert("containerd".into(), Value::Table(c));
                }
            }
            "instance" => {
                for (ik, iv) in v.as_object().into_iter().flatten() {
                    match ik.as_str() {
                        "localStorage" if !empty(iv) => local_storage(iv, &mut nodeadm, out),
                        _ if empty(iv) => {}
                        _ => out.unexpressed.push((format!("NodeConfig.spec.instance.{ik}"), iv.to_string())),
                    }
                }
            }
            "featureGates" if !empty(v) => {
                nodeadm.insert("feature_gates".into(), Value::from_json(v));
            }
            _ if empty(v) => {}
            // `cluster` included: a managed group on an EKS AMI gets it from EKS.
            _ => out.unexpressed.push((format!("NodeConfig.spec.{k}"), v.to_string())),
        }
    }
    if !nodeadm.is_empty() {
        out.attrs.insert("nodeadm".into(), Value::Table(nodeadm));
    }
}

/// `spec.instance.localStorage`: a bare strategy is the `local_storage` shorthand, as
/// `nodeadm::render` writes it; more is the full `nodeadm.instance.local_storage`.
fn local_storage(v: &serde_json::Value, nodeadm: &mut BTreeMap<String, Value>, out: &mut Parsed) {
    let Some(o) = v.as_object() else { return };
    let strategy = o.get("strategy").and_then(serde_json::Value::as_str);
    if o.len() == 1
        && let Some(short) = strategy.and_then(|s| match s {
            "RAID0" => Some("raid0"),
            "RAID10" => Some("raid10"),
            "Mount" => Some("mount"),
            _ => None,
        })
    {
        out.attrs.insert("local_storage".into(), Value::str(short));
        return;
    }
    let mut ls = BTreeMap::new();
    for (k, v) in o {
        let to = match k.as_str() {
            "strategy" => "strategy",
            "mountPath" => "mount_path",
            "disabledMounts" => "disabled_mounts",
            _ => {
                out.unexpressed.push((format!("NodeConfig.spec.instance.localStorage.{k}"), v.to_string()));
                continue;
            }
        };
        ls.insert(to.to_string(), Value::from_json(v));
    }
    if !ls.is_empty() {
        let inst = BTreeMap::from([("local_storage".to_string(), Value::Table(ls))]);
        nodeadm.insert("instance".into(), Value::Table(inst));
    }
}

/// Kubelet flags: `--node-labels` and `--register-with-taints` become `node_labels` and
/// `node_taints` (several flags merge); the others are returned in order.
fn flags(v: &serde_json::Value, out: &mut Parsed) -> Vec<Value> {
    let mut rest = vec![];
    for f in v.as_array().into_iter().flatten() {
        let Some(s) = f.as_str() else {
            out.unexpressed.push(("NodeConfig.spec.kubelet.flags".into(), f.to_string()));
            continue;
        };
        if let Some(list) = s.strip_prefix("--node-labels=") {
            let labels = out.attrs.entry("node_labels".into()).or_insert_with(|| Value::Table(BTreeMap::new()));
            if let Value::Table(t) = labels {
                for pair in list.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    t.insert(k.to_string(), Value::str(v));
                }
            }
        } else if let Some(list) = s.strip_prefix("--register-with-taints=") {
            let taints = out.attrs.entry("node_taints".into()).or_insert_with(|| Value::List(vec![]));
            if let Value::List(l) = taints {
                for t in list.split(',').filter(|p| !p.is_empty()) {
                    let (kv, effect) = t.rsplit_once(':').unwrap_or((t, ""));
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    l.push(taint(k, v, effect));
                }
            }
        } else {
            rest.push(Value::str(s));
        }
    }
    rest
}

/// A `node_taints` entry; Kubernetes' effect spelling (NoSchedule) back to EKS's (NO_SCHEDULE).
fn taint(key: &str, value: &str, effect: &str) -> Value {
    let effect = match effect {
        "NoSchedule" => "NO_SCHEDULE",
        "NoExecute" => "NO_EXECUTE",
        "PreferNoSchedule" => "PREFER_NO_SCHEDULE",
        other => other,
    };
    let mut t = BTreeMap::from([("key".to_string(), Value::str(key)), ("effect".to_string(), Value::str(effect))]);
    if !value.is_empty() {
        t.insert("value".into(), Value::str(value));
    }
    Value::Table(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::launch_template::{nodeadm, userdata};

    fn table(pairs: &[(&str, Value)]) -> Value {
        Value::Table(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }
    fn attrs(pairs: &[(&str, Value)]) -> Attrs {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }
    fn labels() -> Value {
        table(&[("gpustack.io/pool", Value::str("inference")), ("team", Value::str("ml"))])
    }
    fn taints() -> Value {
        Value::List(vec![
            table(&[("key", Value::str("dedicated")), ("effect", Value::str("NO_EXECUTE"))]),
            table(&[
                ("key", Value::str("nvidia.com/gpu")),
                ("value", Value::str("true")),
                ("effect", Value::str("NO_SCHEDULE")),
            ]),
        ])
    }

    /// Every Bottlerocket shape `userdata::render` writes reads back to the same inputs.
    #[test]
    fn bottlerocket_user_data_round_trips() {
        let cases = vec![
            attrs(&[("node_labels", labels())]),
            attrs(&[("node_taints", taints())]),
            attrs(&[("gpu_sharing", table(&[("strategy", Value::str("time-slicing")), ("replicas", Value::Int(4))]))]),
            attrs(&[("gpu_sharing", table(&[("strategy", Value::str("mps")), ("replicas", Value::Int(8))]))]),
            attrs(&[(
                "gpu_sharing",
                table(&[
                    ("strategy", Value::str("mig")),
                    ("mig_profile", table(&[("h100.80gb", Value::str("1g.10gb"))])),
                ]),
            )]),
            attrs(&[("gpu_sharing", table(&[("strategy", Value::str("mig"))]))]),
            attrs(&[
                ("node_labels", labels()),
                ("node_taints", taints()),
                ("gpu_sharing", table(&[("strategy", Value::str("time-slicing")), ("replicas", Value::Int(2))])),
                (
                    "bottlerocket_settings",
                    table(&[
                        ("kernel", table(&[("lockdown", Value::str("integrity"))])),
                        ("kubernetes", table(&[("max-pods", Value::Int(110))])),
                        (
                            "kubelet-device-plugins",
                            table(&[("nvidia", table(&[("pass-device-specs", Value::Bool(true))]))]),
                        ),
                    ]),
                ),
            ]),
        ];
        for inputs in cases {
            let text = userdata::render(&inputs).unwrap().unwrap();
            let back = parse(&text);
            assert_eq!(back.attrs, inputs, "{text}");
            assert!(back.unexpressed.is_empty() && !back.al2023, "{text}");
            assert_eq!(userdata::render(&back.attrs).unwrap().unwrap(), text);
        }
    }

    /// m1/m2 (review imp-eks): eksctl's managed-group user data on an EKS AMI as Go's
    /// `mime/multipart` writes it (CRLF, a random boundary): a maxPods-only NodeConfig and a
    /// preBootstrapCommands script (eksctl `pkg/nodebootstrap/al2023.go`); and an AL2 MIME with
    /// only a script part, which is not AL2023.
    #[test]
    fn eksctl_crlf_mime_and_an_al2_mime_read_back() {
        let eksctl = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=4f1c2d9e8a7b\r\n\r\n--4f1c2d9e8a7b\r\nContent-Type: text/x-shellscript\r\n\r\n#!/bin/bash\r\nset -ex\r\necho pre\r\n--4f1c2d9e8a7b\r\nContent-Type: application/node.eks.aws\r\n\r\napiVersion: node.eks.aws/v1alpha1\r\nkind: NodeConfig\r\nspec:\r\n  kubelet:\r\n    config:\r\n      maxPods: 58\r\n\r\n--4f1c2d9e8a7b--\r\n";
        let p = parse(eksctl);
        assert!(p.al2023);
        let kubelet = p.attrs["nodeadm"].as_table().unwrap()["kubelet"].clone();
        assert_eq!(kubelet.as_table().unwrap()["config"], table(&[("maxPods", Value::Int(58))]));
        assert!(
            p.unexpressed.iter().any(|(f, v)| f.contains("text/x-shellscript") && v.contains("echo pre")),
            "{:?}",
            p.unexpressed
        );
        let al2 = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"==B==\"\n\n--==B==\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\n/etc/eks/bootstrap.sh brown\n--==B==--\n";
        let p = parse(al2);
        assert!(!p.al2023 && !p.attrs.contains_key("nodeadm"), "{:?}", p.attrs);
        assert_eq!(p.unexpressed.len(), 1);
    }

    /// Every AL2023 shape `nodeadm::render` writes reads back to the same inputs.
    #[test]
    fn al2023_user_data_round_trips() {
        let full_ls = table(&[(
            "instance",
            table(&[(
                "local_storage",
                table(&[
                    ("strategy", Value::str("Mount")),
                    ("mount_path", Value::str("/mnt/k8s")),
                    ("disabled_mounts", Value::List(vec![Value::str("PodLogs")])),
                ]),
            )]),
        )]);
        let cases = vec![
            attrs(&[("nodeadm", table(&[])), ("node_labels", labels())]),
            attrs(&[("nodeadm", table(&[])), ("node_labels", labels()), ("node_taints", taints())]),
            attrs(&[("local_storage", Value::str("raid0"))]),
            attrs(&[("local_storage", Value::str("raid10")), ("node_labels", labels())]),
            attrs(&[("nodeadm", full_ls)]),
            attrs(&[(
                "nodeadm",
                table(&[
                    (
                        "kubelet",
                        table(&[
                            (
                                "config",
                                table(&[("maxPods", Value::Int(110)), ("cpuManagerPolicy", Value::str("static"))]),
                            ),
                            ("flags", Value::List(vec![Value::str("--v=2")])),
                        ]),
                    ),
                    (
                        "containerd",
                        table(&[
                            ("config", Value::str("[plugins.\"io.containerd.grpc.v1.cri\"]\n")),
                            ("base_runtime_spec", table(&[("process", table(&[("rlimits", Value::List(vec![]))]))])),
                        ]),
                    ),
                    ("feature_gates", table(&[("FastImagePull", Value::Bool(true))])),
                ]),
            )]),
        ];
        for inputs in cases {
            let text = nodeadm::render(&inputs, None).unwrap();
            let back = parse(&text);
            assert!(back.unexpressed.is_empty() && back.al2023, "{text}: {:?}", back.unexpressed);
            assert_eq!(back.attrs, inputs, "{text}");
            assert_eq!(nodeadm::render(&back.attrs, None).unwrap(), text);
        }
    }

    /// An eksctl-style AL2023 user data (eksctl docs `node-bootstrapping`: a minimal NodeConfig
    /// with empty sections and `metadata.creationTimestamp: null`, its labels as a kubelet flag,
    /// an unquoted boundary) plus a shell part: the NodeConfig maps to inputs, the script and
    /// the cluster section are unexpressed.
    #[test]
    fn an_eksctl_style_al2023_user_data_keeps_what_it_cannot_say() {
        let text = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=//\n\n--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata:\n  creationTimestamp: null\nspec:\n  cluster:\n    apiServerEndpoint: https://X.gr7.us-west-2.eks.amazonaws.com\n    certificateAuthority: Q0E=\n    cidr: 10.100.0.0/16\n    name: brown\n  containerd: {}\n  instance:\n    localStorage: {}\n  kubelet:\n    config:\n      clusterDNS:\n      - 10.100.0.10\n      maxPods: 110\n    flags:\n    - --node-labels=alpha.eksctl.io/cluster-name=brown,alpha.eksctl.io/nodegroup-name=gpu\n\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho ready\n--//--\n";
        let p = parse(text);
        assert!(p.al2023);
        assert_eq!(
            p.attrs.get("node_labels"),
            Some(&table(&[
                ("alpha.eksctl.io/cluster-name", Value::str("brown")),
                ("alpha.eksctl.io/nodegroup-name", Value::str("gpu"))
            ]))
        );
        let kubelet = &p.attrs["nodeadm"].as_table().unwrap()["kubelet"];
        assert_eq!(kubelet.as_table().unwrap()["config"].as_table().unwrap()["maxPods"], Value::Int(110));
        assert!(!kubelet.as_table().unwrap().contains_key("flags"), "the label flag became node_labels");
        let fields: Vec<&str> = p.unexpressed.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["NodeConfig.spec.cluster", "user_data part text/x-shellscript; charset=\"us-ascii\""]);
        assert!(p.unexpressed[1].1.contains("echo ready"));
        assert!(
            !same_meaning(text, &nodeadm::render(&p.attrs, None).unwrap()),
            "what would be dropped is not the same"
        );
    }

    /// terraform-aws-eks's AL2023 user data (`templates/al2023_user_data.tpl` inside the
    /// cloudinit multipart the module builds: 7bit parts with their own MIME-Version) reads
    /// its kubelet config; the bootstrap `spec.cluster` of a custom AMI is unexpressed.
    #[test]
    fn a_terraform_aws_eks_al2023_user_data_reads_back() {
        let text = "Content-Type: multipart/mixed; boundary=\"MIMEBOUNDARY\"\nMIME-Version: 1.0\n\n--MIMEBOUNDARY\nContent-Transfer-Encoding: 7bit\nContent-Type: application/node.eks.aws\nMime-Version: 1.0\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n    flags:\n    - --node-labels=node.kubernetes.io/lifecycle=normal\n    - --register-with-taints=nvidia.com/gpu=true:NoSchedule\n\n--MIMEBOUNDARY\nContent-Transfer-Encoding: 7bit\nContent-Type: application/node.eks.aws\nMime-Version: 1.0\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: brown\n    apiServerEndpoint: https://X.eks.amazonaws.com\n    certificateAuthority: Q0E=\n    cidr: 172.20.0.0/16\n\n--MIMEBOUNDARY--\n";
        let p = parse(text);
        assert_eq!(p.attrs["node_labels"], table(&[("node.kubernetes.io/lifecycle", Value::str("normal"))]));
        assert_eq!(
            p.attrs["node_taints"],
            Value::List(vec![table(&[
                ("key", Value::str("nvidia.com/gpu")),
                ("value", Value::str("true")),
                ("effect", Value::str("NO_SCHEDULE"))
            ])])
        );
        let cfg = &p.attrs["nodeadm"].as_table().unwrap()["kubelet"].as_table().unwrap()["config"];
        assert_eq!(cfg.as_table().unwrap()["shutdownGracePeriod"], Value::str("30s"));
        assert_eq!(p.unexpressed.len(), 1, "{:?}", p.unexpressed);
        assert_eq!(p.unexpressed[0].0, "user_data NodeConfig");
        assert!(p.unexpressed[0].1.contains("apiServerEndpoint"));
    }

    /// terraform-aws-eks's Bottlerocket user data (`templates/bottlerocket_user_data.tpl`, with
    /// a custom AMI: the join settings, then `bootstrap_extra_args`): the join keys stay
    /// settings, the labels and time-slicing are read, a section outside [settings] is kept.
    #[test]
    fn a_terraform_aws_eks_bottlerocket_user_data_reads_back() {
        let text = "[settings.kubernetes]\n\"cluster-name\" = \"brown\"\n\"api-server\" = \"https://X.eks.amazonaws.com\"\n\"cluster-certificate\" = \"Q0E=\"\n\n[settings.kubernetes.node-labels]\n\"label1\" = \"foo\"\n\n[settings.kubernetes.node-taints]\n\"dedicated\" = \"experimental:PreferNoSchedule\"\n\n[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"time-slicing\"\n\n[settings.kubelet-device-plugins.nvidia.time-slicing]\nreplicas = 3\n\n[metadata]\nowner = \"platform\"\n";
        let p = parse(text);
        assert_eq!(p.attrs["node_labels"], table(&[("label1", Value::str("foo"))]));
        assert_eq!(
            p.attrs["node_taints"],
            Value::List(vec![table(&[
                ("key", Value::str("dedicated")),
                ("value", Value::str("experimental")),
                ("effect", Value::str("PREFER_NO_SCHEDULE"))
            ])])
        );
        assert_eq!(
            p.attrs["gpu_sharing"],
            table(&[("strategy", Value::str("time-slicing")), ("replicas", Value::Int(3))])
        );
        let k8s = &p.attrs["bottlerocket_settings"].as_table().unwrap()["kubernetes"];
        assert_eq!(k8s.as_table().unwrap()["cluster-name"], Value::str("brown"));
        assert_eq!(
            p.unexpressed,
            vec![("user_data.metadata".to_string(), table(&[("owner", Value::str("platform"))]).to_string())]
        );
    }

    /// An AL2 bootstrap script is neither shape: all of it is unexpressed.
    #[test]
    fn a_bootstrap_script_is_unexpressed_whole() {
        let text = "#!/bin/bash\n/etc/eks/bootstrap.sh brown --kubelet-extra-args '--max-pods=110'\n";
        let p = parse(text);
        assert!(p.attrs.is_empty());
        assert_eq!(p.unexpressed, vec![("user_data".to_string(), text.to_string())]);
        assert_eq!(parse(""), Parsed::default());
    }
}
