//! Bottlerocket user data: plain TOML (never MIME; terraform-aws-eks#3476), built
//! from a launch template's `node_labels`, `node_taints`, `gpu_sharing` and the
//! `bottlerocket_settings` passthrough (the contents of `[settings]`). EKS merges it
//! with its own join settings because the node group names the AMI type, not an AMI.

use std::collections::BTreeMap;

use toml_edit::{Array, DocumentMut, Item, Table};

use crate::value::{Attrs, Value};

/// The user-data TOML, `Ok(None)` when there is nothing to say, `Err` naming a
/// `bottlerocket_settings` key that collides with one gpustack generates.
pub fn render(i: &Attrs) -> Result<Option<String>, String> {
    render_with(i, vec![])
}

/// The user data of a self-managed Bottlerocket node: [`render`] plus the settings that join
/// the cluster, which EKS writes for a managed one (Bottlerocket settings reference,
/// `settings.kubernetes.cluster-name`, `api-server`, `cluster-certificate`, `cluster-dns-ip`;
/// the DNS address is the service CIDR's tenth, as EKS assigns CoreDNS's). `Err` names a
/// `bottlerocket_settings` key that collides.
pub fn render_joined(i: &Attrs, join: &super::nodeadm::Join) -> Result<String, String> {
    let k = |leaf: &'static str, v: String| (vec!["kubernetes", leaf], Value::str(v));
    let mut extra = vec![
        k("cluster-name", join.name.clone()),
        k("api-server", join.endpoint.clone()),
        k("cluster-certificate", join.certificate_authority.clone()),
    ];
    if let Some(dns) = cluster_dns(&join.service_cidr) {
        extra.push(k("cluster-dns-ip", dns));
    }
    Ok(render_with(i, extra)?.unwrap_or_default())
}

/// The tenth address of the service CIDR ("10.100.0.0/16" → "10.100.0.10"; an IPv6
/// cluster's "fd00:1::/108" → "fd00:1::a").
pub fn cluster_dns(cidr: &str) -> Option<String> {
    if let Ok(net) = cidr.parse::<ipnet::Ipv4Net>() {
        return Some(std::net::Ipv4Addr::from(u32::from(net.network()).checked_add(10)?).to_string());
    }
    let net: ipnet::Ipv6Net = cidr.parse().ok()?;
    Some(std::net::Ipv6Addr::from(u128::from(net.network()).checked_add(10)?).to_string())
}

fn render_with(i: &Attrs, extra: Vec<(Vec<&'static str>, Value)>) -> Result<Option<String>, String> {
    let mut settings: BTreeMap<String, Value> = match i.get("bottlerocket_settings") {
        Some(Value::Table(t)) => t.clone(),
        _ => BTreeMap::new(),
    };
    let mut generated: Vec<(Vec<&str>, Value)> = extra;
    if let Some(Value::Table(labels)) = i.get("node_labels")
        && !labels.is_empty()
    {
        generated.push((vec!["kubernetes", "node-labels"], Value::Table(labels.clone())));
    }
    if let Some(Value::List(taints)) = i.get("node_taints")
        && !taints.is_empty()
    {
        let mut by_key: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for t in taints.iter().filter_map(Value::as_table) {
            let get = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
            by_key.entry(get("key").to_string()).or_default().push(Value::str(format!(
                "{}:{}",
                get("value"),
                k8s_effect(get("effect"))
            )));
        }
        generated.push((
            vec!["kubernetes", "node-taints"],
            Value::Table(by_key.into_iter().map(|(k, v)| (k, Value::List(v))).collect()),
        ));
    }
    if let Some(Value::Table(g)) = i.get("gpu_sharing") {
        let nvidia = ["kubelet-device-plugins", "nvidia"];
        let replicas = g.get("replicas").cloned().unwrap_or(Value::Int(2));
        match g.get("strategy").and_then(Value::as_str) {
            Some("time-slicing") => {
                generated.push((vec![nvidia[0], nvidia[1], "device-sharing-strategy"], Value::str("time-slicing")));
                generated.push((vec![nvidia[0], nvidia[1], "time-slicing", "replicas"], replicas));
            }
            Some("mps") => {
                generated.push((vec![nvidia[0], nvidia[1], "device-sharing-strategy"], Value::str("mps")));
                generated.push((vec![nvidia[0], nvidia[1], "mps", "replicas"], replicas));
            }
            Some("mig") => {
                generated.push((vec![nvidia[0], nvidia[1], "device-partitioning-strategy"], Value::str("mig")));
                if let Some(p) = g.get("mig_profile") {
                    generated.push((vec![nvidia[0], nvidia[1], "mig", "profile"], p.clone()));
                }
            }
            _ => {}
        }
    }
    for (path, v) in generated {
        insert(&mut settings, &path, v)?;
    }
    if settings.is_empty() {
        return Ok(None);
    }
    let mut doc = DocumentMut::new();
    doc.insert("settings", Item::Table(table(&settings)));
    Ok(Some(doc.to_string()))
}

/// EKS spellings (NO_SCHEDULE) to Kubernetes' (NoSchedule), which Bottlerocket takes.
pub fn k8s_effect(e: &str) -> &str {
    match e {
        "NO_SCHEDULE" => "NoSchedule",
        "NO_EXECUTE" => "NoExecute",
        "PREFER_NO_SCHEDULE" => "PreferNoSchedule",
        other => other,
    }
}

fn insert(t: &mut BTreeMap<String, Value>, path: &[&str], v: Value) -> Result<(), String> {
    let (first, rest) = path.split_first().ok_or("empty settings path")?;
    if rest.is_empty() {
        if t.contains_key(*first) {
            return Err(format!("settings.{first}"));
        }
        t.insert(first.to_string(), v);
        return Ok(());
    }
    match t.entry(first.to_string()).or_insert_with(|| Value::Table(BTreeMap::new())) {
        Value::Table(inner) => {
            insert(inner, rest, v).map_err(|k| k.replacen("settings.", &format!("settings.{first}."), 1))
        }
        _ => Err(format!("settings.{first}")),
    }
}

/// A TOML table; tables that hold only tables are implicit, so the text reads
/// `[settings.kubernetes.node-labels]` rather than a header per level.
fn table(t: &BTreeMap<String, Value>) -> Table {
    let mut out = Table::new();
    let only_tables = t.values().all(|v| matches!(v, Value::Table(_)));
    out.set_implicit(only_tables);
    for (k, v) in t {
        let item = match v {
            Value::Table(inner) => Item::Table(table(inner)),
            other => Item::Value(value(other)),
        };
        out.insert(k, item);
    }
    out
}

fn value(v: &Value) -> toml_edit::Value {
    match v {
        Value::Bool(b) => (*b).into(),
        Value::Int(n) => (*n).into(),
        Value::Float(f) => (*f).into(),
        Value::Str(s) => s.as_str().into(),
        Value::List(l) => toml_edit::Value::Array(l.iter().map(value).collect::<Array>()),
        Value::Table(t) => {
            let mut it = toml_edit::InlineTable::new();
            for (k, v) in t {
                it.insert(k, value(v));
            }
            toml_edit::Value::InlineTable(it)
        }
        Value::Unknown => "".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: Vec<(&str, Value)>) -> Attrs {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    fn table_of(pairs: Vec<(&str, Value)>) -> Value {
        Value::Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    #[test]
    fn labels_taints_and_time_slicing_render_as_plain_toml() {
        let i = attrs(vec![
            ("node_labels", table_of(vec![("gpustack.io/pool", Value::str("inference"))])),
            (
                "node_taints",
                Value::List(vec![table_of(vec![
                    ("key", Value::str("nvidia.com/gpu")),
                    ("value", Value::str("true")),
                    ("effect", Value::str("NO_SCHEDULE")),
                ])]),
            ),
            ("gpu_sharing", table_of(vec![("strategy", Value::str("time-slicing")), ("replicas", Value::Int(4))])),
        ]);
        let text = render(&i).unwrap().unwrap();
        assert_eq!(
            text,
            "[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"time-slicing\"\n\n\
             [settings.kubelet-device-plugins.nvidia.time-slicing]\nreplicas = 4\n\n\
             [settings.kubernetes.node-labels]\n\"gpustack.io/pool\" = \"inference\"\n\n\
             [settings.kubernetes.node-taints]\n\"nvidia.com/gpu\" = [\"true:NoSchedule\"]\n"
        );
        assert!(!text.contains("MIME") && !text.contains("Content-Type"));
        let parsed: toml_edit::DocumentMut = text.parse().unwrap();
        assert_eq!(
            parsed["settings"]["kubelet-device-plugins"]["nvidia"]["time-slicing"]["replicas"].as_integer(),
            Some(4)
        );
    }

    #[test]
    fn a_joined_node_names_its_cluster_and_dns() {
        let join = crate::resources::launch_template::nodeadm::Join {
            name: "c".into(),
            endpoint: "https://x".into(),
            certificate_authority: "Q0E=".into(),
            service_cidr: "172.20.0.0/16".into(),
        };
        let text = render_joined(&Attrs::new(), &join).unwrap();
        assert!(text.contains("[settings.kubernetes]\napi-server = \"https://x\""), "{text}");
        assert!(text.contains("cluster-dns-ip = \"172.20.0.10\""), "{text}");
        assert_eq!(cluster_dns("fd00:1::/108").as_deref(), Some("fd00:1::a"));
        assert_eq!(cluster_dns("not a cidr"), None);
    }

    #[test]
    fn mig_and_passthrough_merge_and_collisions_are_named() {
        let i = attrs(vec![
            (
                "gpu_sharing",
                table_of(vec![
                    ("strategy", Value::str("mig")),
                    ("mig_profile", table_of(vec![("h100.80gb", Value::str("1g.10gb"))])),
                ]),
            ),
            (
                "bottlerocket_settings",
                table_of(vec![("kernel", table_of(vec![("lockdown", Value::str("integrity"))]))]),
            ),
        ]);
        let text = render(&i).unwrap().unwrap();
        assert!(text.contains("[settings.kernel]\nlockdown = \"integrity\""), "{text}");
        assert!(text.contains("device-partitioning-strategy = \"mig\""), "{text}");
        assert!(
            text.contains("[settings.kubelet-device-plugins.nvidia.mig.profile]\n\"h100.80gb\" = \"1g.10gb\""),
            "{text}"
        );

        let clash = attrs(vec![
            ("gpu_sharing", table_of(vec![("strategy", Value::str("mps")), ("replicas", Value::Int(4))])),
            (
                "bottlerocket_settings",
                table_of(vec![(
                    "kubelet-device-plugins",
                    table_of(vec![("nvidia", table_of(vec![("device-sharing-strategy", Value::str("time-slicing"))]))]),
                )]),
            ),
        ]);
        assert_eq!(render(&clash).unwrap_err(), "settings.kubelet-device-plugins.nvidia.device-sharing-strategy");
        assert_eq!(render(&Attrs::new()).unwrap(), None);
    }
}
