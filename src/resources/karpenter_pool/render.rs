//! The two documents of a `karpenter_pool`: the EC2NodeClass (how nodes are launched: AMI,
//! role, subnets, security groups, reservations, volumes, EFA interfaces, placement group,
//! Bottlerocket user data) and the NodePool (what may be launched, how much, and how nodes
//! are disrupted). Fields and the Karpenter versions that have them: aws-facts §10. Pure:
//! the inputs, the pinned alias from the outputs, and gpustack's embedded instance catalog.

use serde_json::{Map, Value as Json, json};

use super::node_class::{self, AmiFamily};
use super::requirements;
use super::{CAPACITY_TYPES, default_disruption, protects_jobs, training};
use crate::aws::catalog;
use crate::resources::launch_template::userdata::{self, k8s_effect};
use crate::resources::{Manifest, rendered, str_attr};
use crate::value::{Attrs, Value};

/// Bottlerocket's root device `/dev/xvda`, always rendered: with any `blockDeviceMappings`
/// given, Karpenter drops its defaults and an unlisted root falls back to the AMI's 2 GiB gp2
/// (karpenter-provider-aws#8747). 4 GiB gp3 is Karpenter's own Bottlerocket default
/// (`pkg/providers/amifamily/bottlerocket.go` `DefaultBlockDeviceMappings`, v1.14.1).
pub const ROOT_GIB: i64 = 4;
/// The data device `/dev/xvdb` when `data_volume` is not set: Karpenter's default for it.
pub const DEFAULT_DATA_GIB: i64 = 20;

/// What the pool's NodePool and EC2NodeClass are called: the `name` input.
fn name(inputs: &Attrs) -> String {
    str_attr(inputs, "name").to_string()
}

/// A value as YAML text: `(known after apply)` for an id the plan does not know yet.
pub(crate) fn text(v: &Value) -> Json {
    match v {
        Value::Str(s) => json!(s),
        Value::Int(n) => json!(n),
        other => json!(other.interpolate()),
    }
}

pub(crate) fn list<'a>(inputs: &'a Attrs, k: &str) -> &'a [Value] {
    inputs.get(k).and_then(Value::as_list).unwrap_or_default()
}

pub(crate) fn strs(inputs: &Attrs, k: &str) -> Vec<String> {
    list(inputs, k).iter().map(Value::interpolate).collect()
}

/// The role's name: Karpenter's `role` takes a name (it makes the instance profile itself;
/// aws-facts §10), and stacks usually hand over `${iam_role.node.arn}` or `.name`.
pub(crate) fn role_name(role: &Value) -> Json {
    match role {
        Value::Str(r) if r.starts_with("arn:") => json!(r.rsplit('/').next().unwrap_or(r)),
        other => text(other),
    }
}

/// The pool's architecture and whether its instances have NVIDIA GPUs, from the embedded
/// catalog (the first listed type it knows): which Bottlerocket variant to pin the AMI from.
/// Families are assumed x86_64, and NVIDIA unless the pool's limit is not NVIDIA's
/// ([`limit_resource`]); types the catalog lacks are of families without accelerators
/// (it carries every accelerated one), so a CPU pool (m6i.large) gets the plain variant.
pub fn arch_and_gpu(inputs: &Attrs) -> (&'static str, bool) {
    let embedded = catalog::embedded();
    let launchable = requirements::launchable(inputs);
    let types = launchable.types;
    let known: Vec<&catalog::InstanceInfo> = types.iter().filter_map(|t| embedded.get(t)).collect();
    match known.first() {
        Some(i) => (i.arch(), known.iter().any(|i| i.is_nvidia())),
        None => (
            "x86_64",
            (types.is_empty() || types.iter().any(|t| embedded.accelerated_family(t)))
                && limit_resource(&types, &launchable.families) == "nvidia.com/gpu",
        ),
    }
}

/// The EFA cards of the pool's instance type (the rules make every listed type share one
/// layout), as many as `efa.interfaces` asks, from the catalog's one answer to "how many EFA
/// interfaces, on which cards" ([`catalog::InstanceInfo::efa_interfaces`]). None without `efa`
/// or for a type the embedded catalog lacks (the rules refuse that).
pub fn efa_layout(inputs: &Attrs) -> Option<Vec<u32>> {
    let efa = inputs.get("efa")?.as_table()?;
    let first = strs(inputs, "instance_types").into_iter().next()?;
    let info = catalog::embedded().get(&first)?;
    let wanted = efa.get("interfaces").and_then(Value::as_int).map(|n| n.clamp(1, i64::from(u32::MAX)) as u32);
    Some(info.efa_interfaces(wanted.map(i64::from)).map(|l| l.efa_cards()).unwrap_or_default())
}

/// `networkInterfaces` for the EFA cards (Karpenter ≥ 1.11; aws-facts §10). Karpenter has no
/// `efa` interface type, only `interface` and `efa-only`, and its CEL rules want the primary
/// `interface` on card 0 / device 0 and at most one `efa-only` per card. So every EFA card
/// gets an `efa-only` interface — at device 1 when card 0 carries EFA too (Karpenter's docs'
/// example: `{0,0,interface}, {0,1,efa-only}`; the launch template's layout puts its `efa`
/// interfaces at device 1 of the further cards the same way), at device 0 of each EFA card
/// when card 0 is ENA-only (EC2 UG `efa-acc-inst-types`). The count of EFA devices is the
/// launch template's for the same `efa`.
pub fn network_interfaces(cards: &[u32]) -> Vec<Json> {
    let nic = |card: u32, device: u32, kind: &str| json!({ "networkCardIndex": card, "deviceIndex": device, "interfaceType": kind });
    let device = if cards.first() == Some(&0) { 1 } else { 0 };
    let mut out = vec![nic(0, 0, "interface")];
    out.extend(cards.iter().map(|&c| nic(c, device, "efa-only")));
    out
}

/// `blockDeviceMappings`. AL2023 boots, runs containerd and the kubelet from one volume,
/// `/dev/xvda` (Karpenter's AL2023 default: 20 GiB gp3), set by `root_volume`. Bottlerocket
/// keeps its OS on `/dev/xvda` (`root_volume` over the 4 GiB default) and images and pods on
/// the data volume `/dev/xvdb` (`data_volume`).
fn block_devices(inputs: &Attrs) -> Json {
    if node_class::family(inputs) == AmiFamily::Al2023 {
        return json!([{ "deviceName": "/dev/xvda", "ebs": node_class::root_ebs(inputs, node_class::AL2023_ROOT_GIB) }]);
    }
    let root = json!({ "deviceName": "/dev/xvda", "ebs": node_class::root_ebs(inputs, ROOT_GIB) });
    let dv = inputs.get("data_volume").and_then(Value::as_table);
    let size = dv.and_then(|t| t.get("size_gib")).and_then(Value::as_int).unwrap_or(DEFAULT_DATA_GIB);
    let mut ebs = Map::new();
    ebs.insert("volumeSize".into(), json!(format!("{size}Gi")));
    ebs.insert("volumeType".into(), json!("gp3"));
    ebs.insert("encrypted".into(), json!(true));
    ebs.insert("deleteOnTermination".into(), json!(true));
    if let Some(dv) = dv {
        if let Some(snap) = dv.get("snapshot") {
            ebs.insert("snapshotID".into(), text(snap));
            // Only with a snapshot (CRD CEL: "snapshotID must be set when volumeInitializationRate is set").
            if let Some(rate) = dv.get("initialization_rate_mibps").and_then(Value::as_int) {
                ebs.insert("volumeInitializationRate".into(), json!(rate));
            }
        }
        for (k, field) in [("iops", "iops"), ("throughput", "throughput")] {
            if let Some(n) = dv.get(k).and_then(Value::as_int) {
                ebs.insert(field.into(), json!(n));
            }
        }
    }
    json!([root, { "deviceName": "/dev/xvdb", "ebs": ebs }])
}

/// The EC2NodeClass.
fn node_class(address: &str, inputs: &Attrs, outputs: &Attrs) -> Json {
    let alias =
        outputs.get("ami_alias").and_then(Value::as_str).filter(|a| !a.is_empty()).unwrap_or(str_attr(inputs, "ami"));
    let mut spec = Map::new();
    spec.insert("role".into(), inputs.get("node_role").map_or(json!(""), role_name));
    spec.insert("amiSelectorTerms".into(), json!([{ "alias": alias }]));
    spec.insert(
        "subnetSelectorTerms".into(),
        node_class::selector_terms(list(inputs, "subnets"), inputs.get("subnet_tags")),
    );
    // Every interface carries the EFA groups and the pool's (as the launch template does):
    // Karpenter puts the selected groups on all of them.
    let efa = inputs.get("efa").and_then(Value::as_table);
    let mut groups: Vec<Value> = list(inputs, "security_groups").to_vec();
    groups.extend(
        efa.and_then(|e| e.get("security_groups")).and_then(Value::as_list).unwrap_or_default().iter().cloned(),
    );
    groups.sort_by_key(Value::interpolate);
    groups.dedup();
    spec.insert(
        "securityGroupSelectorTerms".into(),
        node_class::selector_terms(&groups, inputs.get("security_group_tags")),
    );
    let reservations =
        node_class::selector_terms(list(inputs, "capacity_reservations"), inputs.get("capacity_reservation_tags"));
    if reservations.as_array().is_some_and(|a| !a.is_empty()) {
        spec.insert("capacityReservationSelectorTerms".into(), reservations);
    }
    if let Some(pg) = inputs.get("placement_group") {
        spec.insert("placementGroupSelector".into(), json!({ "name": text(pg) }));
    }
    if let Some(cards) = efa_layout(inputs).filter(|c| !c.is_empty()) {
        spec.insert("networkInterfaces".into(), Json::Array(network_interfaces(&cards)));
    }
    spec.insert("blockDeviceMappings".into(), block_devices(inputs));
    node_class::flags(inputs, &mut spec);
    if let Some(k) = node_class::kubelet(inputs) {
        spec.insert("kubelet".into(), k);
    }
    if let Some(m) = node_class::metadata_options(inputs) {
        spec.insert("metadataOptions".into(), m);
    }
    // The same renderer as launch templates (plain TOML, never MIME). Karpenter parses it,
    // keeps the settings it does not own and writes its cluster settings, labels and taints
    // over it (`pkg/providers/amifamily/bootstrap/bottlerocket.go`, v1.14.1). Only
    // gpu_sharing goes here: the pool's labels and taints are on the NodePool, where
    // Karpenter schedules by them.
    let sharing: Attrs =
        inputs.get("gpu_sharing").map(|g| ("gpu_sharing".to_string(), g.clone())).into_iter().collect();
    if node_class::family(inputs) == AmiFamily::Bottlerocket
        && let Ok(Some(toml)) = userdata::render(&sharing)
    {
        spec.insert("userData".into(), json!(keep_gpu_name(&toml)));
    }
    let tags: Map<String, Json> = inputs
        .get("tags")
        .and_then(Value::as_table)
        .map(|t| t.iter().map(|(k, v)| (k.clone(), text(v))).collect())
        .unwrap_or_default();
    if !tags.is_empty() {
        spec.insert("tags".into(), Json::Object(tags));
    }
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": { "name": name(inputs), "labels": rendered::labels(address) },
        "spec": spec,
    })
}

fn requirements(inputs: &Attrs) -> Json {
    let capacity: Vec<&str> = CAPACITY_TYPES
        .iter()
        .copied()
        .filter(|c| list(inputs, "capacity_types").iter().any(|v| v.as_str() == Some(*c)))
        .collect();
    let mut req = vec![json!({ "key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity })];
    let types = strs(inputs, "instance_types");
    if !types.is_empty() {
        req.push(json!({ "key": "node.kubernetes.io/instance-type", "operator": "In", "values": types }));
    }
    let families = strs(inputs, "instance_families");
    if !families.is_empty() {
        req.push(json!({ "key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": families }));
    }
    // The pool's own, as written (Karpenter ANDs them with the above).
    for r in requirements::parse(inputs) {
        let mut m = Map::new();
        m.insert("key".into(), json!(r.key));
        m.insert("operator".into(), json!(r.operator));
        if !r.values.is_empty() {
            m.insert("values".into(), json!(r.values));
        }
        if let Some(n) = r.min_values {
            m.insert("minValues".into(), json!(n));
        }
        req.push(Json::Object(m));
    }
    Json::Array(req)
}

/// The pool's capacity types as normalized (Karpenter's order).
fn capacity_types(inputs: &Attrs) -> Vec<&str> {
    list(inputs, "capacity_types").iter().filter_map(Value::as_str).collect()
}

/// One `budgets[]` entry: `nodes`, and `reasons`, `schedule`, `duration` when written.
fn budget(b: &Attrs) -> Json {
    let mut out = Map::new();
    for k in ["nodes", "reasons", "schedule", "duration"] {
        let v = match b.get(k) {
            Some(Value::List(l)) => Json::Array(l.iter().map(text).collect()),
            Some(v) => text(v),
            None => continue,
        };
        out.insert(k.into(), v);
    }
    Json::Object(out)
}

/// `spec.disruption` of the NodePool, and the disruption fields of its template
/// (`expireAfter`, and `terminationGracePeriod` only when set: see [`super::Disruption`]).
/// The normalized inputs carry the defaults; they are filled here too for inputs recorded
/// by an older gpustack, whose YAML the plan renders for its diff.
fn disruption(inputs: &Attrs) -> (Json, Map<String, Json>) {
    let capacity = capacity_types(inputs);
    let defaults =
        default_disruption(&capacity, protects_jobs(&capacity, inputs), training(|k| inputs.contains_key(k)));
    let d = inputs.get("disruption").and_then(Value::as_table);
    let get = |k: &str, default: &str| d.and_then(|t| t.get(k)).map_or(json!(default), text);
    let budgets = match d.and_then(|t| t.get("budgets")).and_then(Value::as_list) {
        Some(l) => l.iter().filter_map(Value::as_table).map(budget).collect(),
        None => vec![json!({ "nodes": get("budget", defaults.budget) })],
    };
    let pool = json!({
        "consolidationPolicy": get("policy", defaults.policy),
        "consolidateAfter": get("consolidate_after", defaults.consolidate_after),
        "budgets": budgets,
    });
    let mut template = Map::new();
    template.insert("expireAfter".into(), get("expire_after", defaults.expire_after));
    if let Some(tgp) = d.and_then(|t| t.get("termination_grace_period")) {
        template.insert("terminationGracePeriod".into(), text(tgp));
    }
    (pool, template)
}

/// AMD GPU families, which Karpenter reports as `amd.com/gpu`, not `nvidia.com/gpu`
/// (karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/types.go`: `v1.ResourceAMDGPU:
/// *amdGPUs(info)`, counting GPUs whose `Manufacturer` is AMD). Listed because gpustack's
/// embedded catalog has no AMD type to read the manufacturer from.
pub const AMD_FAMILIES: &[&str] = &["g4ad"];

/// "NVIDIA" or "AMD" for an instance type (`g6.xlarge`) or family (`g6`): the GPU
/// manufacturer the embedded catalog gives (any GPU type of a family), else [`AMD_FAMILIES`],
/// else NVIDIA for an unknown P or G family (EC2's accelerated-computing GPU families); None
/// for a type or family without GPUs.
pub fn gpu_maker(name: &str) -> Option<&'static str> {
    let family = |t: &str| t.split('.').next().unwrap_or(t).to_string();
    let fam = family(name);
    let embedded = catalog::embedded();
    let known: Vec<&catalog::InstanceInfo> = if name.contains('.') {
        embedded.get(name).into_iter().collect()
    } else {
        embedded.all().filter(|i| family(&i.name) == fam).collect()
    };
    let maker = known.iter().filter(|i| i.gpus > 0).find_map(|i| i.gpu_manufacturer.as_deref());
    match maker {
        Some(m) if m.eq_ignore_ascii_case("nvidia") => Some("NVIDIA"),
        Some(m) if m.eq_ignore_ascii_case("amd") => Some("AMD"),
        Some(_) => None,
        None if AMD_FAMILIES.contains(&fam.as_str()) => Some("AMD"),
        None if !known.is_empty() => None,
        None => fam.starts_with(['g', 'p']).then_some("NVIDIA"),
    }
}

/// The resource a pool's `gpu_limit` caps: what its nodes report and Karpenter charges the
/// limit with (a registered node's capacity: kubernetes-sigs/karpenter v1.14.1
/// `pkg/controllers/state/statenode.go` `Capacity()`). Neuron devices
/// (`aws.amazon.com/neuron`, karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/types.go`
/// `awsNeuronDevices`) for a pool of Inferentia and Trainium types only, AMD GPUs
/// (`amd.com/gpu`, same file, `amdGPUs`) for a pool of AMD types only ([`gpu_maker`]), else
/// NVIDIA GPUs.
pub fn limit_resource(types: &[String], families: &[String]) -> &'static str {
    let neuron = |t: &&String| t.starts_with("trn") || t.starts_with("inf");
    let amd = |t: &&String| gpu_maker(t) == Some("AMD");
    let all: Vec<&String> = types.iter().chain(families).collect();
    if !all.is_empty() && all.iter().all(neuron) {
        "aws.amazon.com/neuron"
    } else if !all.is_empty() && all.iter().all(amd) {
        "amd.com/gpu"
    } else {
        "nvidia.com/gpu"
    }
}

/// How many `nvidia.com/gpu` one physical GPU is advertised as on a pool's node: the
/// replicas of time-slicing and MPS (a pool keeps the name `nvidia.com/gpu`: see
/// [`keep_gpu_name`]; "the plugin would now advertise 80 `nvidia.com/gpu`" for 10 replicas
/// of 8 GPUs, NVIDIA/k8s-device-plugin README), the slices of a MIG layout (Bottlerocket's
/// plugin runs MIG with `migStrategy: "single"`, which advertises each slice as
/// `nvidia.com/gpu`: bottlerocket-core-kit `packages/nvidia-k8s-device-plugin/nvidia-k8s-device-plugin-conf.in`),
/// else 1. `mig_key` picks the GPU's entry of `mig_profile`; None takes the first.
pub fn advertised_per_gpu(sharing: Option<&Attrs>, mig_key: Option<&str>) -> i64 {
    let Some(s) = sharing else { return 1 };
    match s.get("strategy").and_then(Value::as_str) {
        Some("time-slicing" | "mps") => s.get("replicas").and_then(Value::as_int).unwrap_or(1).max(1),
        Some("mig") => {
            let profile = s.get("mig_profile").and_then(Value::as_table);
            let entry = match mig_key {
                Some(k) => profile.and_then(|p| p.get_key_value(k)),
                None => profile.and_then(|p| p.iter().next()),
            };
            entry.and_then(|(k, v)| mig_slices(k, v.as_str()?)).unwrap_or(1)
        }
        _ => 1,
    }
}

/// The slices of one `mig_profile` entry: its count, or the count of its profile
/// (`"h100.80gb" = "1g.10gb"` → 7), from the MIG manager's table.
fn mig_slices(key: &str, value: &str) -> Option<i64> {
    let model = catalog::MIG_MODELS.iter().find(|m| m.key == key)?;
    let (n, _) = model.layouts.iter().find(|(n, p)| *n == value || *p == value)?;
    n.parse().ok()
}

/// The instance types a pool may launch, from the embedded catalog: `instance_types`
/// (restricted to `instance_families` when both are written: Karpenter ANDs requirements),
/// else every GPU type of `instance_families`. None when the pool names neither, or names a
/// type the catalog lacks: then its sizes are not known here.
fn pool_types(types: &[String], families: &[String]) -> Option<Vec<&'static catalog::InstanceInfo>> {
    let embedded = catalog::embedded();
    let family = |t: &str| t.split('.').next().unwrap_or(t).to_string();
    if !types.is_empty() {
        return types
            .iter()
            .filter(|t| families.is_empty() || families.contains(&family(t)))
            .map(|t| embedded.get(t))
            .collect::<Option<Vec<_>>>()
            .filter(|l| !l.is_empty());
    }
    let mut all: Vec<&catalog::InstanceInfo> =
        embedded.all().filter(|i| i.gpus > 0 && families.contains(&family(&i.name))).collect();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    (!all.is_empty()).then_some(all)
}

/// `(vCPUs, GPUs)` of one instance when every type the pool may launch ([`pool_types`]) has
/// the same vCPU:GPU ratio (g5.xlarge, g6.xlarge, g6e.xlarge: 4 vCPUs per GPU), else None.
/// With one ratio, a `cpu` limit bounds physical GPUs exactly (see [`limits`]).
pub fn vcpus_per_gpu(types: &[String], families: &[String]) -> Option<(i64, i64)> {
    let all = pool_types(types, families)?;
    let first = all.first().filter(|i| i.gpus > 0)?;
    let (v, g) = (i64::from(first.vcpus), i64::from(first.gpus));
    all.iter().all(|i| i.gpus > 0 && i64::from(i.vcpus) * g == v * i64::from(i.gpus)).then_some((v, g))
}

/// `spec.limits`: `gpu_limit` physical accelerators, counted as the nodes report them
/// ([`advertised_per_gpu`]): a registered, initialized node is charged with what it reports
/// (kubernetes-sigs/karpenter v1.14.1 `pkg/controllers/state/statenode.go` `Capacity()`,
/// l.374), so the multiplied limit lets every shared node of the pool launch. It does NOT
/// bound physical GPUs during a burst: until a node initializes it is charged with its
/// NodeClaim's capacity, the type's physical GPUs (same function, l.359-368; the NodeClaim
/// capacity is the instance type's: karpenter-provider-aws v1.14.1
/// `pkg/cloudprovider/cloudprovider.go` l.449, `nvidiaGPUs` in
/// `pkg/providers/instancetype/types.go`), and within one scheduling pass each new NodeClaim
/// subtracts its type's physical capacity (core `pkg/controllers/provisioning/scheduling/scheduler.go`
/// `subtractMax`). So one scale-up may start up to `gpu_limit` × replicas (or × slices)
/// physical GPUs. A pool that multiplies therefore also gets a `cpu` limit, `gpu_limit` ×
/// vCPUs per GPU, when all its types share one vCPU:GPU ratio ([`vcpus_per_gpu`]): vCPUs are
/// charged the same before and after initialization and subtracted per NodeClaim within a
/// pass, so that limit holds the pool to `gpu_limit` physical GPUs at every moment. With
/// mixed ratios no `cpu` limit is exact, none is rendered, and the rules warn. None without
/// `gpu_limit` (a CPU pool; the rules require it where it binds).
fn limits(inputs: &Attrs) -> Option<Json> {
    // `limits` as written (cpu, memory, nodes…); the rules refuse a key gpu_limit renders.
    let mut out: Map<String, Json> = inputs
        .get("limits")
        .and_then(Value::as_table)
        .map(|t| t.iter().map(|(k, v)| (k.clone(), node_class::json_of(v))).collect())
        .unwrap_or_default();
    let Some(limit) = inputs.get("gpu_limit") else {
        return (!out.is_empty()).then_some(Json::Object(out));
    };
    let launchable = requirements::launchable(inputs);
    let (types, families) = (launchable.types, launchable.families);
    let resource = limit_resource(&types, &families);
    let per_gpu = match resource {
        "nvidia.com/gpu" => advertised_per_gpu(inputs.get("gpu_sharing").and_then(Value::as_table), None),
        _ => 1,
    };
    let value = match limit {
        Value::Int(n) => json!(n.saturating_mul(per_gpu)),
        other => text(other),
    };
    if let (Value::Int(n), true, Some((vcpus, gpus))) = (limit, per_gpu > 1, vcpus_per_gpu(&types, &families)) {
        // Floor: a set of instances with at most `n` GPUs has at most n × vcpus / gpus vCPUs,
        // a whole number, so rounding down never refuses one that fits.
        out.insert("cpu".into(), json!(n.saturating_mul(vcpus) / gpus));
    }
    out.insert(resource.into(), value);
    Some(Json::Object(out))
}

/// Whether a pool may launch NVIDIA GPU types: a listed, derived or family type
/// [`gpu_maker`] calls NVIDIA. A pool that names no types says nothing (a CPU pool by
/// default: Karpenter picks GPU types only for pods that need them, and those pools are
/// refused without gpu_limit by the rules when they list GPU types).
pub fn launches_nvidia(inputs: &Attrs) -> bool {
    let l = requirements::launchable(inputs);
    l.types.iter().chain(&l.families).any(|t| gpu_maker(t) == Some("NVIDIA"))
}

/// The label the NVIDIA device plugin chart's default affinity selects GPU nodes by.
pub const NVIDIA_PRESENT: &str = "nvidia.com/gpu.present";

/// `template.spec.taints` from `node_taints`, effects as Kubernetes spells them.
fn taints(inputs: &Attrs) -> Vec<Json> {
    list(inputs, "node_taints")
        .iter()
        .filter_map(Value::as_table)
        .map(|t| {
            let mut taint = Map::new();
            taint.insert("key".into(), json!(t.get("key").map(Value::interpolate).unwrap_or_default()));
            if let Some(v) = t.get("value").map(Value::interpolate).filter(|v| !v.is_empty()) {
                taint.insert("value".into(), json!(v));
            }
            let effect = t.get("effect").map(Value::interpolate).unwrap_or_default();
            taint.insert("effect".into(), json!(k8s_effect(&effect)));
            Json::Object(taint)
        })
        .collect()
}

/// `template.metadata.labels` from `node_labels`.
pub(crate) fn node_labels(inputs: &Attrs) -> Map<String, Json> {
    inputs
        .get("node_labels")
        .and_then(Value::as_table)
        .map(|l| l.iter().map(|(k, v)| (k.clone(), text(v))).collect())
        .unwrap_or_default()
}

/// The NodePool.
fn node_pool(address: &str, inputs: &Attrs) -> Json {
    let node_class_ref = json!({ "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name(inputs) });
    let mut labels = node_labels(inputs);
    if node_class::family(inputs) == AmiFamily::Al2023 && launches_nvidia(inputs) {
        // NVIDIA's nvidia-device-plugin chart schedules its DaemonSet only on nodes labelled
        // `feature.node.kubernetes.io/pci-10de.present`, `…/cpu-model.vendor_id=NVIDIA` or
        // `nvidia.com/gpu.present=true` (NVIDIA/k8s-device-plugin
        // `deployments/helm/nvidia-device-plugin/values.yaml` `affinity`, v0.17–v0.19; NFD and
        // GFD are off by default), and nodeadm adds `nvidia.com/gpu.present` only from kubelet
        // 1.35 (awslabs/amazon-eks-ami `nodeadm/doc/api-concepts.md`). Without it an AL2023
        // NVIDIA node gets no plugin and never reports nvidia.com/gpu. The node group path sets
        // the same label (`launch_template/gpu_sharing.rs`). A label written wins.
        labels.entry(NVIDIA_PRESENT.to_string()).or_insert(json!("true"));
    }
    node_pool_document(address, inputs, node_class_ref, requirements(inputs), labels)
}

/// A Karpenter `karpenter.sh/v1` NodePool from a pool's inputs, with its node class
/// reference, requirements and template labels given: the half `karpenter_pool` and
/// `auto_mode_pool` share (weight, limits, disruption, taints).
pub(crate) fn node_pool_document(
    address: &str,
    inputs: &Attrs,
    node_class_ref: Json,
    requirements: Json,
    labels: Map<String, Json>,
) -> Json {
    let (pool_disruption, template_disruption) = disruption(inputs);
    let mut template_spec = Map::new();
    template_spec.insert("nodeClassRef".into(), node_class_ref);
    template_spec.insert("requirements".into(), requirements);
    let taints = taints(inputs);
    if !taints.is_empty() {
        template_spec.insert("taints".into(), Json::Array(taints));
    }
    template_spec.extend(template_disruption);
    let mut template = Map::new();
    if !labels.is_empty() {
        template.insert("metadata".into(), json!({ "labels": labels }));
    }
    template.insert("spec".into(), Json::Object(template_spec));
    let mut spec = Map::new();
    spec.insert("weight".into(), inputs.get("weight").map_or(Json::Null, text));
    if let Some(l) = limits(inputs) {
        spec.insert("limits".into(), l);
    }
    spec.insert("disruption".into(), pool_disruption);
    spec.insert("template".into(), Json::Object(template));
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": { "name": name(inputs), "labels": rendered::labels(address) },
        "spec": spec,
    })
}

/// `karpenter/<pool>.yaml`: the EC2NodeClass, then the NodePool that refers to it.
pub fn manifest(address: &str, inputs: &Attrs, outputs: &Attrs) -> Manifest {
    let pool = address.rsplit('.').next().unwrap_or(address);
    let docs = [node_class(address, inputs, outputs), node_pool(address, inputs)];
    Manifest { file: format!("karpenter/{pool}.yaml"), yaml: rendered::yaml_documents(&docs) }
}

/// Shared GPUs keep the resource name `nvidia.com/gpu` on a pool: Bottlerocket otherwise
/// advertises them as `nvidia.com/gpu.shared` (`rename-by-default` is true; aws-facts §4),
/// which Karpenter does not model, so it would never launch a node for pods asking for it
/// (kubernetes-sigs/karpenter#729, aws/karpenter-provider-aws#3376).
fn keep_gpu_name(toml: &str) -> String {
    let mut out = toml.to_string();
    for strategy in ["time-slicing", "mps"] {
        let header = format!("[settings.kubelet-device-plugins.nvidia.{strategy}]\n");
        out = out.replace(&header, &format!("{header}rename-by-default = false\n"));
    }
    out
}
