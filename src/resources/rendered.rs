//! What every rendered kind (Kubernetes YAML for `gpustack manifests`, never applied to
//! AWS) does when the engine creates, updates or deletes it: nothing in AWS. State records
//! the inputs and the hash of the YAML, so a plan shows a change as `Render` with its diff.

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use super::{Kind, Recorded};
use crate::value::{Attrs, Value};

/// The record of a rendered resource: its address as id, and as outputs `outputs` (what its
/// create resolved) plus the YAML's `sha256`.
pub fn record(kind: &dyn Kind, address: &str, inputs: &Attrs, mut outputs: Attrs) -> Recorded {
    let yaml = kind.render(address, inputs, &outputs).map(|m| m.yaml).unwrap_or_default();
    outputs.insert("sha256".into(), Value::str(format!("{:x}", Sha256::digest(yaml.as_bytes()))));
    Recorded { id: address.to_string(), outputs }
}

/// A Helm chart version of three dot-separated numbers (`4.8.2`), what `helm --version` takes
/// for the charts gpustack writes values for.
pub fn three_numbers(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// YAML documents from JSON values, each starting with `---`, keys in the order built.
pub fn yaml_documents(docs: &[Json]) -> String {
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        // serde_yaml_ng cannot fail on a serde_json::Value (string keys, finite numbers).
        out.push_str(&serde_yaml_ng::to_string(d).unwrap_or_default());
    }
    out
}

/// The labels every rendered object carries, so `kubectl get -l` finds what gpustack wrote.
pub fn labels(address: &str) -> Json {
    serde_json::json!({ "app.kubernetes.io/managed-by": "gpustack", "gpustack.io/address": address })
}
