//! A pool's `requirements`: Karpenter's NodePool `spec.template.spec.requirements`, written
//! as Karpenter users write them (`{ key, operator, values, min_values }`), checked as the
//! NodePool CRD checks them, and read against gpustack's embedded instance catalog to say which
//! instance types the pool may launch ([`launchable`]), so the GPU rules (gpu_limit, EFA,
//! sharing, reservations) know a pool written only with requirements. What it does not do:
//! read the live EC2 catalog (a requirement on a label the embedded catalog cannot answer is
//! "unchecked", and said so), or render the requirements gpustack derives from
//! `capacity_types`, `instance_types` and `instance_families` (`render.rs`).
//!
//! Sources: the NodePool CRD (tests/k8s/crds/karpenter.sh_nodepools.yaml, v1.14.1): operator
//! enum `In NotIn Exists DoesNotExist Gt Lt Gte Lte`, CEL "requirements with operator 'In'
//! must have a value defined", "'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive
//! integer value", "requirements with 'minValues' must have at least that many values",
//! `minValues` 1–50, `maxItems: 100`, the key pattern and its restricted domains. The labels
//! Karpenter gives an instance type: karpenter-provider-aws v1.14.1
//! `pkg/providers/instancetype/types.go` `computeRequirements` (category, family, generation,
//! size from the type's name; `instance-cpu`; the GPU labels only for a type with one GPU
//! entry: name and manufacturer lowercased, count, memory in MiB) and Karpenter docs v1.14
//! `reference/instance-types.md`.

use std::collections::BTreeSet;

use crate::aws::catalog::{self, InstanceInfo};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::value::{Attrs, Value};

/// The operators of the NodePool CRD (v1.14.1; `Gte` and `Lte` came in 1.9).
pub const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"];

/// One requirement, as written.
pub const REQUIREMENT: &[Attr] = &[
    Attr::req("key", Ty::Str, OnChange::Update),
    Attr::req("operator", Ty::Enum(OPERATORS), OnChange::Update),
    Attr::opt("values", Ty::List(&Ty::Str), Default::None, OnChange::Update),
    Attr::opt("min_values", Ty::Int, Default::None, OnChange::Update),
];

pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";

/// Keys of the `karpenter.k8s.aws` domain a NodePool may name (the CRD's CEL list); every
/// other key of that domain, and of `karpenter.sh` but capacity-type, is refused.
pub const AWS_KEYS: &[&str] = &[
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// Why the CRD refuses a requirement's key, or None. Its CEL rules: `karpenter.sh` only for
/// `karpenter.sh/capacity-type` (`karpenter.sh/nodepool` is Karpenter's own),
/// `kubernetes.io/hostname` never, `karpenter.k8s.aws` only for [`AWS_KEYS`].
pub fn key_refusal(key: &str) -> Option<String> {
    let domain = key.split_once('/').map_or("", |(d, _)| d);
    if key == "karpenter.sh/nodepool" || key == "kubernetes.io/hostname" {
        return Some(format!("label \"{key}\" is restricted"));
    }
    if domain.ends_with("karpenter.sh") && key != CAPACITY_TYPE {
        return Some("label domain \"karpenter.sh\" is restricted".into());
    }
    if domain.ends_with("karpenter.k8s.aws") && !AWS_KEYS.contains(&key) {
        return Some("label domain \"karpenter.k8s.aws\" is restricted (not a label Karpenter gives instances)".into());
    }
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let name = key.rsplit_once('/').map_or(key, |(_, n)| n);
    let domain_ok = key.split_once('/').is_none_or(|(d, _)| {
        d.split('.').all(|p| {
            !p.is_empty()
                && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !p.starts_with('-')
                && !p.ends_with('-')
        })
    });
    (!(name_ok(name) && domain_ok && key.len() <= 316)).then(|| format!("\"{key}\" is not a Kubernetes label key"))
}

/// One requirement of a pool's inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Requirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
    pub min_values: Option<i64>,
}

/// The pool's `requirements` (known entries only).
pub fn parse(inputs: &Attrs) -> Vec<Requirement> {
    inputs
        .get("requirements")
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_table)
        .map(|t| Requirement {
            key: t.get("key").map(Value::interpolate).unwrap_or_default(),
            operator: t.get("operator").map(Value::interpolate).unwrap_or_default(),
            values: t
                .get("values")
                .and_then(Value::as_list)
                .unwrap_or_default()
                .iter()
                .map(Value::interpolate)
                .collect(),
            min_values: t.get("min_values").and_then(Value::as_int),
        })
        .collect()
}

/// The capacity types a `karpenter.sh/capacity-type In [...]` requirement allows, when the
/// pool has one (Karpenter's docs write capacity types this way; gpustack renders them from
/// `capacity_types`, which this fills: `KarpenterPool::normalize`).
pub fn capacity_types(reqs: &[Requirement]) -> Option<Vec<String>> {
    reqs.iter().find(|r| r.key == CAPACITY_TYPE && r.operator == "In").map(|r| r.values.clone())
}

/// Types whose GPUs `DescribeInstanceTypes` reports with `Count: 0` (fractional g6f/gr6f,
/// p5.4xlarge), which Karpenter labels `instance-gpu-count: "0"` and advertises as 0
/// `nvidia.com/gpu` (karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/types.go`,
/// `computeRequirements` and `nvidiaGPUs`; aws/karpenter-provider-aws#8368).
pub const ZERO_GPU_COUNT: &[&str] = &["g6f", "gr6f", "p5.4xlarge"];

/// Whether Karpenter counts a type (or family) as 0 GPUs ([`ZERO_GPU_COUNT`]).
pub fn zero_gpu_count(name: &str) -> bool {
    ZERO_GPU_COUNT.contains(&name) || ZERO_GPU_COUNT.contains(&name.split('.').next().unwrap_or(name))
}

/// `(family, instance-accelerator-name, instance-accelerator-manufacturer)` as Karpenter sets
/// them (lowercased, spaces as dashes; "aws" for every Neuron device) from the one
/// NeuronDevices / InferenceAcceleratorInfo entry these families have in the embedded
/// catalog's `DescribeInstanceTypes` data (src/aws/instance_catalog.json). Counts vary by size
/// and are not kept: a requirement on `instance-accelerator-count` stays unchecked.
const ACCELERATORS: &[(&str, &str, &str)] = &[
    ("inf1", "inferentia", "aws"),
    ("inf2", "inferentia2", "aws"),
    ("trn1", "trainium", "aws"),
    ("trn1n", "trainium", "aws"),
    ("trn2", "trainium2", "aws"),
    // trn2u comes from Karpenter's generated reference (the file's `from_karpenter`): Trainium2.
    ("trn2u", "trainium2", "aws"),
    ("dl2q", "qualcomm-ai100", "qualcomm"),
];

/// Inferentia and Trainium: the Neuron families.
pub fn neuron(name: &str) -> bool {
    name.starts_with("inf") || name.starts_with("trn")
}

/// The value an instance type has for a label, as Karpenter sets it; `Err(())` for a label
/// the embedded catalog cannot answer (memory, bandwidth, hypervisor, zone…).
fn label(info: &InstanceInfo, key: &str) -> Result<Option<String>, ()> {
    let (family, size) = info.name.split_once('.').unwrap_or((&info.name, ""));
    // "p5" → ("p", "5"), "trn1n" → ("trn", "1"), "p6-b200" → ("p", "6"): Karpenter reads the
    // category as the letters before the first digit and the generation as the digits after.
    let category: String = family.chars().take_while(char::is_ascii_alphabetic).collect();
    let generation: String = family[category.len()..].chars().take_while(char::is_ascii_digit).collect();
    let one_gpu = info.gpus > 0 && info.gpu_model.is_some();
    let lower = |s: &Option<String>| s.as_deref().map(|s| s.to_lowercase().replace(' ', "-"));
    Ok(match key {
        INSTANCE_TYPE => Some(info.name.clone()),
        INSTANCE_FAMILY => Some(family.to_string()),
        "karpenter.k8s.aws/instance-category" => Some(category),
        "karpenter.k8s.aws/instance-generation" => Some(generation),
        "karpenter.k8s.aws/instance-size" => Some(size.to_string()),
        "karpenter.k8s.aws/instance-cpu" => Some(info.vcpus.to_string()),
        "kubernetes.io/arch" => Some(if info.arch() == "arm64" { "arm64" } else { "amd64" }.to_string()),
        "kubernetes.io/os" => Some("linux".into()),
        "karpenter.k8s.aws/instance-gpu-name" => one_gpu.then(|| lower(&info.gpu_model)).flatten(),
        "karpenter.k8s.aws/instance-gpu-manufacturer" => one_gpu.then(|| lower(&info.gpu_manufacturer)).flatten(),
        // Karpenter's label is the GPU entry's `Count`, 0 for the fractional and
        // MIG-sliced types EC2 reports with `Count: 0` ([`ZERO_GPU_COUNT`]), where
        // gpustack's catalog keeps `LogicalGpuCount`.
        "karpenter.k8s.aws/instance-gpu-count" => {
            one_gpu.then(|| if zero_gpu_count(&info.name) { "0".to_string() } else { info.gpus.to_string() })
        }
        // Karpenter sets the accelerator labels from NeuronInfo ("aws" as manufacturer) or
        // InferenceAcceleratorInfo (karpenter-provider-aws `pkg/providers/instancetype/types.go`
        // `computeRequirements`, "Accelerators"), which the embedded catalog does not keep. A
        // type with GPUs or of a family without accelerators has none; the manufacturer of
        // Inferentia and Trainium types is "aws"; their name and count are not known here.
        "karpenter.k8s.aws/instance-accelerator-name"
        | "karpenter.k8s.aws/instance-accelerator-count"
        | "karpenter.k8s.aws/instance-accelerator-manufacturer" => {
            let accelerated = info.gpus == 0 && catalog::embedded().accelerated_family(&info.name);
            if !accelerated {
                None
            } else if let (false, Some((_, name, maker))) =
                (key.ends_with("count"), ACCELERATORS.iter().find(|(f, _, _)| *f == family))
            {
                Some(if key.ends_with("manufacturer") { maker } else { name }.to_string())
            } else {
                return Err(());
            }
        }
        "karpenter.k8s.aws/instance-gpu-memory" => one_gpu.then(|| info.gpu_memory_mib.to_string()),
        _ => return Err(()),
    })
}

/// Whether an instance type satisfies a requirement; None when the catalog cannot tell. A
/// label the type lacks satisfies NotIn and DoesNotExist only (Kubernetes node-selector
/// semantics, which Karpenter's `scheduling.Requirements` follow).
pub fn admits(r: &Requirement, info: &InstanceInfo) -> Option<bool> {
    let value = label(info, &r.key).ok()?;
    let number = |v: &str| v.parse::<i64>().ok();
    let bound = r.values.first().and_then(|v| number(v));
    let have = value.as_deref().and_then(number);
    Some(match (r.operator.as_str(), value.as_deref()) {
        ("In", Some(v)) => r.values.iter().any(|x| x == v),
        ("In", None) => false,
        ("NotIn", Some(v)) => !r.values.iter().any(|x| x == v),
        ("NotIn", None) => true,
        ("Exists", v) => v.is_some(),
        ("DoesNotExist", v) => v.is_none(),
        ("Gt", _) => matches!((have, bound), (Some(h), Some(b)) if h > b),
        ("Lt", _) => matches!((have, bound), (Some(h), Some(b)) if h < b),
        ("Gte", _) => matches!((have, bound), (Some(h), Some(b)) if h >= b),
        ("Lte", _) => matches!((have, bound), (Some(h), Some(b)) if h <= b),
        _ => return None,
    })
}

/// Keys that are not properties of an instance type (where or how it runs): they narrow no
/// type and need no note.
fn placement_key(key: &str) -> bool {
    matches!(key, CAPACITY_TYPE | "topology.kubernetes.io/zone" | "topology.k8s.aws/zone-id")
        || key.starts_with("karpenter.k8s.aws/capacity-reservation")
        || key.starts_with("karpenter.k8s.aws/placement-group")
        || !key.contains("kubernetes.io/") && !key.starts_with("karpenter.k8s.aws/")
}

/// The instance types a pool may launch, as far as gpustack can tell.
#[derive(Debug, Default, PartialEq)]
pub struct Launchable {
    /// Exact types: `instance_types` as written, or (with neither `instance_types` nor
    /// `instance_families`) every embedded-catalog type its requirements admit.
    pub types: Vec<String>,
    /// `instance_families` as written.
    pub families: Vec<String>,
    /// `types` came from the requirements (the embedded catalog's types that pass them).
    pub derived: bool,
    /// Requirement keys the catalog could not evaluate (they may narrow the set further).
    pub unchecked: BTreeSet<String>,
    /// Listed `instance_types` that a requirement excludes.
    pub excluded: Vec<String>,
}

/// The pool's launchable types ([`Launchable`]). Listed types are kept as written, less those
/// a requirement excludes (Karpenter ANDs every requirement); a pool written with
/// requirements alone gets the catalog's types that pass them. The embedded catalog holds
/// every accelerated type (a unit test of `aws::catalog` fails otherwise), so the GPU and
/// Neuron types of a derived set are complete; its CPU types are a sample.
pub fn launchable(inputs: &Attrs) -> Launchable {
    let strs = |k: &str| -> Vec<String> {
        inputs.get(k).and_then(Value::as_list).unwrap_or_default().iter().map(Value::interpolate).collect()
    };
    let (types, families) = (strs("instance_types"), strs("instance_families"));
    let reqs: Vec<Requirement> = parse(inputs).into_iter().filter(|r| !placement_key(&r.key)).collect();
    let embedded = catalog::embedded();
    let mut unchecked = BTreeSet::new();
    let mut passes = |info: &InstanceInfo| {
        reqs.iter().all(|r| match admits(r, info) {
            Some(ok) => ok,
            None => {
                unchecked.insert(r.key.clone());
                true
            }
        })
    };
    if !types.is_empty() {
        let excluded: Vec<String> =
            types.iter().filter(|t| embedded.get(t).is_some_and(|i| !passes(i))).cloned().collect();
        let kept = types.iter().filter(|t| !excluded.contains(t)).cloned().collect();
        return Launchable { types: kept, families, derived: false, unchecked, excluded };
    }
    if !families.is_empty() || reqs.is_empty() {
        return Launchable { types, families, derived: false, unchecked, excluded: vec![] };
    }
    let mut derived: Vec<String> = embedded.all().filter(|i| passes(i)).map(|i| i.name.clone()).collect();
    derived.sort();
    Launchable { types: derived, families, derived: true, unchecked, excluded: vec![] }
}

/// True when the pool narrows the types it launches at all: listed types or families, or a
/// requirement on a property of the instance type.
pub fn narrows_types(inputs: &Attrs) -> bool {
    ["instance_types", "instance_families"].iter().any(|k| inputs.contains_key(*k))
        || parse(inputs).iter().any(|r| !placement_key(&r.key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> Value {
        Value::Table(
            [
                ("key".to_string(), Value::str(key)),
                ("operator".to_string(), Value::str(op)),
                ("values".to_string(), Value::List(values.iter().map(|v| Value::str(*v)).collect())),
            ]
            .into_iter()
            .collect(),
        )
    }

    fn inputs(reqs: Vec<Value>) -> Attrs {
        Attrs::from([("requirements".to_string(), Value::List(reqs))])
    }

    /// Karpenter's GPU NodePool written with requirements alone (instance-category g,
    /// generation > 4, gpu-name in [l4, a10g]): the derived set is g5 and g6 types, all
    /// NVIDIA; a CPU pool (category c/m/r) derives no accelerated type.
    #[test]
    fn requirements_alone_derive_the_catalogs_types() {
        let gpu = launchable(&inputs(vec![
            req("karpenter.k8s.aws/instance-category", "In", &["g"]),
            req("karpenter.k8s.aws/instance-generation", "Gt", &["4"]),
            req("karpenter.k8s.aws/instance-gpu-name", "In", &["l4", "a10g"]),
            req("kubernetes.io/arch", "In", &["amd64"]),
        ]));
        assert!(gpu.derived);
        assert!(gpu.types.contains(&"g6.xlarge".to_string()) && gpu.types.contains(&"g5.48xlarge".to_string()));
        // g6f (fractional L4) is an L4 type too.
        assert!(gpu.types.iter().all(|t| ["g5.", "g6.", "g6f."].iter().any(|p| t.starts_with(p))), "{:?}", gpu.types);
        assert!(gpu.unchecked.is_empty());
        let cpu = launchable(&inputs(vec![
            req("karpenter.k8s.aws/instance-category", "In", &["c", "m", "r"]),
            req("karpenter.k8s.aws/instance-generation", "Gt", &["2"]),
            req("karpenter.sh/capacity-type", "In", &["on-demand"]),
        ]));
        let embedded = catalog::embedded();
        assert!(!cpu.types.is_empty());
        assert!(cpu.types.iter().all(|t| embedded.get(t).is_some_and(|i| i.gpus == 0)), "{:?}", cpu.types);
        // A label the catalog cannot answer is said, not guessed.
        let mem = launchable(&inputs(vec![
            req("karpenter.k8s.aws/instance-family", "In", &["inf2"]),
            req("karpenter.k8s.aws/instance-memory", "Gt", &["16000"]),
        ]));
        assert!(mem.types.iter().all(|t| t.starts_with("inf2.")) && !mem.types.is_empty());
        assert_eq!(mem.unchecked.iter().collect::<Vec<_>>(), ["karpenter.k8s.aws/instance-memory"]);
    }

    /// Listed types a requirement excludes are dropped and reported (Karpenter ANDs them).
    #[test]
    fn listed_types_compose_with_requirements() {
        let mut i = inputs(vec![req("karpenter.k8s.aws/instance-size", "NotIn", &["48xlarge"])]);
        i.insert("instance_types".into(), Value::List(vec![Value::str("p5.48xlarge"), Value::str("g6.xlarge")]));
        let l = launchable(&i);
        assert_eq!((l.types, l.excluded), (vec!["g6.xlarge".to_string()], vec!["p5.48xlarge".to_string()]));
    }

    #[test]
    fn keys_follow_the_crds_cel_rules() {
        assert_eq!(key_refusal("karpenter.k8s.aws/instance-gpu-name"), None);
        assert_eq!(key_refusal("karpenter.sh/capacity-type"), None);
        assert_eq!(key_refusal("topology.kubernetes.io/zone"), None);
        assert!(key_refusal("karpenter.sh/nodepool").is_some());
        assert!(key_refusal("karpenter.k8s.aws/instance-gpus").is_some());
        assert!(key_refusal("kubernetes.io/hostname").is_some());
        assert!(key_refusal("Bad Key").is_some());
    }
}
