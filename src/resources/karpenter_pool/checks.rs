//! The offline checks of the attributes Karpenter users write (issue 19): `requirements` as
//! the NodePool CRD checks them, `limits`, selector terms by id or tags, `root_volume`,
//! `kubelet`, `metadata_options`, and what an AL2023 pool cannot take. Each cites the CRD
//! rule or the AWS behaviour it mirrors. `validate.rs` runs them with the older checks.

use std::collections::BTreeMap;

use super::node_class::{AmiFamily, EVICTION_SIGNALS, ami_alias};
use super::requirements::{CAPACITY_TYPE, key_refusal, launchable};
use super::validate::label_value;
use super::{CAPACITY_TYPES, vcpus_per_gpu};
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Expr, Resource};
use crate::value::{Attrs, Value};

/// The entries of a table expression, inline (each with its span) or one literal value.
fn entries(e: &Expr) -> BTreeMap<String, Expr> {
    match &e.kind {
        ExprKind::Table(t) => t.clone(),
        ExprKind::Value(Value::Table(t)) => {
            t.iter().map(|(k, v)| (k.clone(), Expr::value(v.clone(), e.span.clone()))).collect()
        }
        _ => BTreeMap::new(),
    }
}

/// The items of a list expression, inline or one literal value.
fn items(e: &Expr) -> Vec<Expr> {
    match &e.kind {
        ExprKind::List(l) => l.clone(),
        ExprKind::Value(Value::List(l)) => l.iter().map(|v| Expr::value(v.clone(), e.span.clone())).collect(),
        _ => vec![],
    }
}

fn text(e: Option<&Expr>) -> Option<String> {
    e?.as_literal()?.as_str().map(str::to_string)
}

/// The pool's inputs as written, references unknown.
pub(super) fn written(r: &Resource) -> Attrs {
    r.attrs.iter().map(|(k, e)| (k.clone(), e.resolve(&|_| Value::Unknown))).collect()
}

/// Every check of this file.
pub(super) fn check(r: &Resource, d: &mut Vec<Diagnostic>) {
    check_requirements(r, d);
    check_limits(r, d);
    check_selectors(r, d);
    check_root_volume(r, d);
    check_kubelet(r, d);
    check_al2023(r, d);
    if let Some(e) = r.attrs.get("metadata_options")
        && let Some(h) = entries(e).get("http_put_response_hop_limit")
        && let Some(n) = h.as_literal().and_then(Value::as_int).filter(|n| !(1..=64).contains(n))
    {
        d.push(
            Diagnostic::error(format!("`{}`: http_put_response_hop_limit = {n} is outside 1–64", r.address), h.span.clone())
                .help("1 (the default) keeps pods from the node role's credentials; 2 lets containers without host networking reach IMDS"),
        );
    }
}

/// NodePool CRD v1.14.1 `requirements`: the key pattern and restricted domains, values per
/// operator, `minValues` 1–50 and no more than the values of an `In` (see `requirements.rs`).
fn check_requirements(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(list) = r.attrs.get("requirements") else { return };
    let all = items(list);
    if all.len() > 100 {
        d.push(
            Diagnostic::error(
                format!("`{}`: {} requirements, Karpenter takes at most 100", r.address, all.len()),
                list.span.clone(),
            )
            .help("merge requirements on the same key"),
        );
    }
    for item in &all {
        let t = entries(item);
        let (Some(key), Some(op)) = (text(t.get("key")), text(t.get("operator"))) else { continue };
        let at = |k: &str| t.get(k).and_then(|e| e.span.clone()).or(item.span.clone());
        if let Some(why) = key_refusal(&key) {
            d.push(
                Diagnostic::error(format!("`{}`: requirement key \"{key}\": {why}", r.address), at("key"))
                    .help("use a well-known label (karpenter.k8s.aws/instance-family, -category, -gpu-name…, node.kubernetes.io/instance-type, kubernetes.io/arch, topology.kubernetes.io/zone) or your own domain"),
            );
        }
        let values: Option<Vec<String>> = t.get("values").map(|v| match v.resolve(&|_| Value::Unknown) {
            Value::List(l) => l.iter().map(Value::interpolate).collect(),
            _ => vec![],
        });
        let n = values.as_ref().map_or(0, Vec::len);
        let bad = match op.as_str() {
            "In" | "NotIn" if n == 0 => Some(format!("operator {op} needs at least one value")),
            "Exists" | "DoesNotExist" if n > 0 => Some(format!("operator {op} takes no values")),
            "Gt" | "Lt" | "Gte" | "Lte"
                if n != 1 || values.as_ref().and_then(|v| v[0].parse::<u64>().ok()).is_none() =>
            {
                Some(format!("operator {op} takes a single non-negative integer value"))
            }
            _ => None,
        };
        if let Some(why) = bad {
            d.push(
                Diagnostic::error(format!("`{}`: requirement on \"{key}\": {why}", r.address), item.span.clone())
                    .help("e.g. { key = \"karpenter.k8s.aws/instance-generation\", operator = \"Gt\", values = [\"4\"] }, or operator = \"Exists\" without values"),
            );
        }
        for v in values.iter().flatten().filter(|v| !label_value(v)) {
            d.push(
                Diagnostic::error(format!("`{}`: requirement value \"{v}\" is not a Kubernetes label value", r.address), at("values"))
                    .help("at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit"),
            );
        }
        if let Some(m) = t.get("min_values").and_then(|e| e.as_literal()).and_then(Value::as_int) {
            if !(1..=50).contains(&m) {
                d.push(Diagnostic::error(format!("`{}`: min_values = {m} is outside Karpenter's 1–50", r.address), at("min_values")).help("the least number of distinct values (e.g. instance types) Karpenter must be able to choose from"));
            } else if op == "In" && (n as i64) < m {
                d.push(
                    Diagnostic::error(format!("`{}`: min_values = {m} on \"{key}\" asks for more values than the {n} listed", r.address), at("min_values"))
                        .help("list at least that many values, or lower min_values (CRD: \"requirements with 'minValues' must have at least that many values specified\")"),
                );
            }
        }
        if key == CAPACITY_TYPE {
            check_capacity_requirement(r, &op, values.as_deref().unwrap_or_default(), item, d);
        }
    }
    let l = launchable(&written(r));
    if !l.excluded.is_empty() {
        let none_left = l.types.is_empty();
        let msg = format!(
            "`{}`: its requirements exclude {} of its instance_types{}",
            r.address,
            l.excluded.join(", "),
            if none_left {
                ": no listed type is left, so Karpenter could launch nothing"
            } else {
                ": Karpenter never launches them"
            }
        );
        let at = r.attrs.get("instance_types").and_then(|e| e.span.clone());
        let diag = if none_left { Diagnostic::error(msg, at) } else { Diagnostic::warning(msg, at) };
        d.push(diag.help(
            "Karpenter ANDs every requirement with instance_types: drop the excluded types or loosen the requirement",
        ));
    }
}

/// A `karpenter.sh/capacity-type` requirement: Karpenter's values, and no contradiction with
/// `capacity_types` (normalize makes an `In` requirement the pool's capacity types).
fn check_capacity_requirement(r: &Resource, op: &str, values: &[String], item: &Expr, d: &mut Vec<Diagnostic>) {
    for v in values.iter().filter(|v| !CAPACITY_TYPES.contains(&v.as_str())) {
        d.push(
            Diagnostic::error(format!("`{}`: \"{v}\" is not a Karpenter capacity type", r.address), item.span.clone())
                .help("use \"on-demand\", \"spot\" or \"reserved\""),
        );
    }
    if op != "In" {
        d.push(
            Diagnostic::error(
                format!("`{}`: write the capacity types it allows, not {op}", r.address),
                item.span.clone(),
            )
            .help("capacity_types = [\"spot\", \"on-demand\"] (or a requirement with operator = \"In\")"),
        );
        return;
    }
    let written: Option<Vec<String>> = r
        .attrs
        .get("capacity_types")
        .map(|e| e.resolve(&|_| Value::Unknown))
        .and_then(|v| v.as_list().map(|l| l.iter().map(Value::interpolate).collect()));
    if let Some(mut w) = written {
        let mut v = values.to_vec();
        w.sort();
        v.sort();
        if w != v {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: capacity_types ({}) and its karpenter.sh/capacity-type requirement ({}) disagree",
                        r.address,
                        w.join(", "),
                        v.join(", ")
                    ),
                    item.span.clone(),
                )
                .help("keep one of the two: capacity_types = [...] or the requirement"),
            );
        }
    }
}

/// Resources gpustack renders from `gpu_limit`: a `limits` entry for them would be a second,
/// conflicting cap (and one that misses shared GPUs' multiplication).
const GPU_RESOURCES: &[&str] = &["nvidia.com/gpu", "aws.amazon.com/neuron", "amd.com/gpu"];

/// `limits`: Kubernetes quantities (the CRD's pattern), no key gpu_limit renders.
pub(crate) fn check_limits(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(e) = r.attrs.get("limits") else { return };
    let has_limit = r.attrs.contains_key("gpu_limit");
    for (k, v) in entries(e) {
        let at = v.key_span.clone().or(v.span.clone());
        if GPU_RESOURCES.contains(&k.as_str()) && (has_limit || r.attrs.contains_key("gpu_sharing")) {
            d.push(
                Diagnostic::error(format!("`{}`: limits.\"{k}\" conflicts with gpu_limit", r.address), at.clone())
                    .help("set gpu_limit = the most physical GPUs (or Neuron devices) instead: gpustack renders it as the resource the nodes report, shares included"),
            );
        }
        // Keys Karpenter charges a pool with: the node's resources (kubernetes-sigs/karpenter
        // v1.14.1 `pkg/controllers/state/statenode.go` `Capacity()`: cpu, memory,
        // ephemeral-storage, pods and the extended resources), plus `nodes`
        // (`scheduler.go`). Another key (`gpu`) is a resource no node reports: it caps nothing.
        let known = matches!(k.as_str(), "cpu" | "memory" | "ephemeral-storage" | "pods" | "nodes") || k.contains('/');
        if !known {
            d.push(
                Diagnostic::warning(
                    format!("`{}`: limits.{k} is a resource no node reports: Karpenter caps nothing by it", r.address),
                    at.clone(),
                )
                .help("use cpu, memory, ephemeral-storage, pods, nodes or an extended resource such as \"nvidia.com/gpu\" (gpu_limit renders that)"),
            );
        }
        // A unitless memory or ephemeral-storage quantity is bytes (Kubernetes
        // `resource.Quantity`): `memory = 1000` caps the pool at 1000 bytes, so it launches nothing.
        if matches!(k.as_str(), "memory" | "ephemeral-storage")
            && match v.as_literal() {
                Some(Value::Int(_)) => true,
                Some(Value::Str(s)) => s.chars().all(|c| c.is_ascii_digit() || c == '.'),
                _ => false,
            }
        {
            d.push(
                Diagnostic::error(
                    format!("`{}`: limits.{k} without a unit is bytes: the pool could launch no node", r.address),
                    v.span.clone(),
                )
                .help(format!("write a unit, e.g. {k} = \"1000Gi\"")),
            );
        }
        let ok = match v.as_literal() {
            Some(Value::Int(n)) => *n >= 0,
            Some(Value::Str(s)) => quantity(s),
            Some(_) => false,
            None => true,
        };
        if !ok {
            d.push(
                Diagnostic::error(format!("`{}`: limits.{k} is not a Kubernetes quantity", r.address), v.span.clone())
                    .help("e.g. cpu = 1000, memory = \"1000Gi\", nodes = 10"),
            );
        }
    }
    // gpu_sharing renders limits.cpu from gpu_limit (render.rs `limits`): a second cpu limit
    // would silently replace the one that bounds physical GPUs.
    let inputs = written(r);
    let l = launchable(&inputs);
    let multiplies = inputs
        .get("gpu_sharing")
        .and_then(Value::as_table)
        .is_some_and(|s| super::advertised_per_gpu(Some(s), None) > 1);
    if let Some(cpu) = entries(e).get("cpu")
        && has_limit
        && multiplies
        && vcpus_per_gpu(&l.types, &l.families).is_some()
    {
        d.push(
            Diagnostic::error(format!("`{}`: limits.cpu conflicts with the cpu limit gpu_sharing renders from gpu_limit", r.address), cpu.key_span.clone().or(cpu.span.clone()))
                .help("remove limits.cpu: gpustack renders cpu = gpu_limit × vCPUs per GPU, which holds the pool to gpu_limit physical GPUs"),
        );
    }
}

/// A Kubernetes quantity (the NodePool CRD's `limits` pattern): a decimal number with an
/// optional SI or binary suffix, or an exponent.
pub(super) fn quantity(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let digits_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(digits_end);
    let num_ok = !num.is_empty() && num != "." && num.matches('.').count() <= 1;
    let suffix_ok = matches!(
        suffix,
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
    ) || suffix.strip_prefix(['e', 'E']).is_some_and(|x| {
        let x = x.strip_prefix(['+', '-']).unwrap_or(x);
        !x.is_empty() && x.chars().all(|c| c.is_ascii_digit())
    });
    num_ok && suffix_ok
}

/// Selector terms: ids as the CRD's patterns want them, tags without empty keys or values
/// and at most 20 (CRD `maxProperties: 20`, CEL "empty tag keys or values aren't
/// supported"), and something to select subnets and security groups with.
pub(crate) fn check_selectors(r: &Resource, d: &mut Vec<Diagnostic>) {
    for (ids, tags, prefix, required, example) in [
        (
            "subnets",
            "subnet_tags",
            "subnet-",
            true,
            "subnets = [\"${subnet.a.id}\"] or subnet_tags = { \"karpenter.sh/discovery\" = \"my-cluster\" }",
        ),
        (
            "security_groups",
            "security_group_tags",
            "sg-",
            true,
            "security_groups = [\"${eks_cluster.main.security_group_id}\"] or security_group_tags = { \"karpenter.sh/discovery\" = \"my-cluster\" }",
        ),
        ("capacity_reservations", "capacity_reservation_tags", "cr-", false, ""),
    ] {
        let listed = r.attrs.get(ids).map(items).unwrap_or_default();
        if required && listed.is_empty() && !r.attrs.contains_key(tags) {
            d.push(
                Diagnostic::error(
                    format!("`{}` selects no {}", r.address, ids.replace('_', " ")),
                    r.attrs.get(ids).and_then(|e| e.span.clone()).or(r.span.clone()),
                )
                .help(format!("set {example}")),
            );
        }
        for e in &listed {
            if let Some(id) = e.as_literal().and_then(Value::as_str)
                && !(id.strip_prefix(prefix).is_some_and(|rest| {
                    !rest.is_empty() && rest.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                }))
            {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: \"{id}\" in {ids} is not an id ({prefix}…)", r.address),
                        e.span.clone(),
                    )
                    .help(format!(
                        "write an id (\"{prefix}0abc…\"), a reference (\"${{…id}}\"), or select by tags with {tags}"
                    )),
                );
            }
        }
        // One selector term per id, plus one for the tags: the EC2NodeClass CRD allows at most
        // 30 (`subnetSelectorTerms`, `securityGroupSelectorTerms`,
        // `capacityReservationSelectorTerms`: `maxItems: 30`).
        let terms = listed.len() + usize::from(r.attrs.contains_key(tags));
        if terms > 30 {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: {ids} and {tags} make {terms} selector terms; the EC2NodeClass takes at most 30",
                        r.address
                    ),
                    r.attrs.get(ids).and_then(|e| e.span.clone()).or(r.span.clone()),
                )
                .help(format!("select them by tags with {tags} instead of listing each")),
            );
        }
        if let Some(t) = r.attrs.get(tags) {
            let map = entries(t);
            if map.len() > 20 {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: {tags} has {} tags, Karpenter takes at most 20", r.address, map.len()),
                        t.span.clone(),
                    )
                    .help("select by fewer tags"),
                );
            }
            if map.is_empty() {
                d.push(
                    Diagnostic::error(format!("`{}`: {tags} is empty", r.address), t.span.clone())
                        .help("name at least one tag; \"*\" as a value matches any value of that key"),
                );
            }
            for (k, v) in &map {
                if k.is_empty() || text(Some(v)).is_some_and(|s| s.is_empty()) {
                    d.push(
                        Diagnostic::error(format!("`{}`: {tags} has an empty key or value", r.address), v.span.clone())
                            .help("Karpenter refuses empty tag keys and values; use \"*\" to match any value"),
                    );
                }
            }
        }
    }
}

/// `root_volume`, as EC2 takes an EBS block device: IOPS only for gp3/io1/io2 (required for
/// io1/io2), throughput only for gp3, a KMS key only on an encrypted volume (EC2 API
/// `EbsBlockDevice`: "This parameter is required for io1 and io2 volumes", "not supported for
/// gp2, st1, sc1, or standard volumes"; `Throughput` "valid only for gp3 volumes"; `KmsKeyId`
/// "If KmsKeyId is specified, the encrypted state must be true").
fn check_root_volume(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(e) = r.attrs.get("root_volume") else { return };
    let t = entries(e);
    let ty = text(t.get("type")).unwrap_or_else(|| "gp3".into());
    let mut bad = |k: &str, msg: String, help: &str| {
        let at = t.get(k).and_then(|x| x.key_span.clone().or(x.span.clone())).or(e.span.clone());
        d.push(Diagnostic::error(format!("`{}`: root_volume {msg}", r.address), at).help(help.to_string()));
    };
    if t.contains_key("iops") && !matches!(ty.as_str(), "gp3" | "io1" | "io2") {
        bad(
            "iops",
            format!("sets iops on a {ty} volume, which takes none"),
            "use type = \"gp3\" (3,000 IOPS included) or io2 for provisioned IOPS",
        );
    }
    if !t.contains_key("iops") && matches!(ty.as_str(), "io1" | "io2") {
        bad("type", format!("of type {ty} needs iops"), "add iops = 3000 (or what the workload needs)");
    }
    if t.contains_key("throughput") && ty != "gp3" {
        bad("throughput", format!("sets throughput on a {ty} volume"), "throughput is provisioned on gp3 only");
    }
    if t.contains_key("kms_key") && t.get("encrypted").and_then(|e| e.as_literal()) == Some(&Value::Bool(false)) {
        bad(
            "kms_key",
            "names a KMS key on an unencrypted volume".into(),
            "remove encrypted = false (volumes are encrypted by default)",
        );
    }
    if let Some(n) =
        t.get("size_gib").and_then(|e| e.as_literal()).and_then(Value::as_int).filter(|n| !(1..=16384).contains(n))
    {
        bad("size_gib", format!("size_gib = {n} is outside EBS's 1–16384 GiB"), "e.g. size_gib = 200");
    }
    // The AL2023 EKS AMI's root snapshot is 20 GiB (awslabs/amazon-eks-ami
    // `templates/al2023/template.json` `ami_block_device_mappings.volume_size: 20`), and EC2
    // refuses a volume smaller than its snapshot (EC2 API `EbsBlockDevice.VolumeSize`: "If you
    // specify a snapshot, the default is the snapshot size … the volume size must be equal to
    // or larger than the snapshot size"): every launch of the pool would fail.
    let al2023 = r
        .attrs
        .get("ami")
        .and_then(|e| e.as_literal())
        .and_then(Value::as_str)
        .is_some_and(|a| a.starts_with("al2023@"));
    if let Some(n) =
        t.get("size_gib").and_then(|e| e.as_literal()).and_then(Value::as_int).filter(|n| al2023 && (1..20).contains(n))
    {
        bad(
            "size_gib",
            format!("size_gib = {n} is below the AL2023 EKS AMI's 20 GiB root snapshot: EC2 refuses every launch"),
            "set size_gib = 20 or more (e.g. 200 for GPU images)",
        );
    }
}

/// `kubelet`, as the EC2NodeClass CRD checks it: eviction signals, soft thresholds with a
/// grace period each (and back), image GC percentages 0–100 with high above low, counts ≥ 0.
fn check_kubelet(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(e) = r.attrs.get("kubelet") else { return };
    let t = entries(e);
    let int = |k: &str| t.get(k).and_then(|e| e.as_literal()).and_then(Value::as_int);
    let at = |k: &str| t.get(k).and_then(|x| x.key_span.clone().or(x.span.clone())).or(e.span.clone());
    for k in ["max_pods", "pods_per_core", "eviction_max_pod_grace_period"] {
        if let Some(n) = int(k).filter(|n| *n < 0) {
            d.push(
                Diagnostic::error(format!("`{}`: kubelet.{k} = {n} is negative", r.address), at(k))
                    .help("use 0 or more"),
            );
        }
    }
    for k in ["image_gc_high_threshold_percent", "image_gc_low_threshold_percent"] {
        if let Some(n) = int(k).filter(|n| !(0..=100).contains(n)) {
            d.push(
                Diagnostic::error(format!("`{}`: kubelet.{k} = {n} is not a percentage", r.address), at(k))
                    .help("use 0–100"),
            );
        }
    }
    if let (Some(h), Some(l)) = (int("image_gc_high_threshold_percent"), int("image_gc_low_threshold_percent"))
        && h <= l
    {
        d.push(
            Diagnostic::error(format!("`{}`: kubelet image_gc_high_threshold_percent ({h}) must be greater than image_gc_low_threshold_percent ({l})", r.address), at("image_gc_high_threshold_percent"))
                .help("e.g. high 85, low 80 (the kubelet's defaults)"),
        );
    }
    let keys = |k: &str| -> Vec<String> { t.get(k).map(|e| entries(e).into_keys().collect()).unwrap_or_default() };
    // The EC2NodeClass CRD (v1.14.1) `kubeReserved` / `systemReserved` CEL rules: "valid keys
    // … are ['cpu','memory','ephemeral-storage','pid']" and "value cannot be a negative
    // resource quantity".
    for k in ["system_reserved", "kube_reserved"] {
        let Some(m) = t.get(k) else { continue };
        for (key, v) in entries(m) {
            if !matches!(key.as_str(), "cpu" | "memory" | "ephemeral-storage" | "pid") {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: kubelet.{k} has \"{key}\", which Karpenter does not take", r.address),
                        at(k),
                    )
                    .help("use cpu, memory, ephemeral-storage or pid"),
                );
            }
            let negative = match v.as_literal() {
                Some(Value::Int(n)) => *n < 0,
                Some(Value::Str(s)) => s.starts_with('-'),
                _ => false,
            };
            if negative {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: kubelet.{k}.{key} is negative", r.address),
                        v.span.clone().or(at(k)),
                    )
                    .help("reserve 0 or more, e.g. memory = \"1Gi\""),
                );
            }
        }
    }
    for k in ["eviction_hard", "eviction_soft", "eviction_soft_grace_period"] {
        for s in keys(k).iter().filter(|s| !EVICTION_SIGNALS.contains(&s.as_str())) {
            d.push(
                Diagnostic::error(
                    format!("`{}`: kubelet.{k} has \"{s}\", not an eviction signal Karpenter takes", r.address),
                    at(k),
                )
                .help(format!("use one of {}", EVICTION_SIGNALS.join(", "))),
            );
        }
    }
    let (soft, grace) = (keys("eviction_soft"), keys("eviction_soft_grace_period"));
    for s in soft.iter().filter(|s| !grace.contains(s)) {
        d.push(
            Diagnostic::error(
                format!("`{}`: kubelet.eviction_soft \"{s}\" has no eviction_soft_grace_period", r.address),
                at("eviction_soft"),
            )
            .help(format!("add eviction_soft_grace_period = {{ \"{s}\" = \"1m\" }}")),
        );
    }
    for s in grace.iter().filter(|s| !soft.contains(s)) {
        d.push(
            Diagnostic::error(
                format!("`{}`: kubelet.eviction_soft_grace_period \"{s}\" has no eviction_soft threshold", r.address),
                at("eviction_soft_grace_period"),
            )
            .help(format!("add eviction_soft = {{ \"{s}\" = \"…\" }}, or remove the grace period")),
        );
    }
}

/// What an AL2023 pool cannot take. `data_volume` is Bottlerocket's second volume (AL2023
/// runs from its root volume alone: `root_volume`). `gpu_sharing` on a pool is rendered as
/// Bottlerocket user data; on AL2023 sharing is the NVIDIA device plugin's config, which
/// gpustack renders for AL2023 node groups only (`manifests::nvidia_device_plugin`), so
/// nothing would share the pool's GPUs; MIG on AL2023 needs NVIDIA's MIG manager (the GPU
/// Operator).
fn check_al2023(r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(ami) = text(r.attrs.get("ami")) else { return };
    if !matches!(ami_alias(&ami), Some((AmiFamily::Al2023, _))) {
        return;
    }
    if let Some(e) = r.attrs.get("data_volume") {
        d.push(
            Diagnostic::error(format!("`{}`: AL2023 nodes have no data volume (data_volume is Bottlerocket's /dev/xvdb)", r.address), e.key_span.clone().or(e.span.clone()))
                .help("size the one AL2023 volume with root_volume = { size_gib = 200 }, or use ami = \"bottlerocket@latest\" for a data volume (and image_cache snapshots)"),
        );
    }
    if let Some(e) = r.attrs.get("gpu_sharing") {
        let mig = text(entries(e).get("strategy")).as_deref() == Some("mig");
        let help = if mig {
            "MIG on AL2023 needs NVIDIA's MIG manager (the GPU Operator, kind gpu_operator); for MIG on a pool today use ami = \"bottlerocket@latest\", whose device plugin partitions from user data"
        } else {
            "use ami = \"bottlerocket@latest\" (sharing from user data), or an AL2023 node_group with gpu_sharing (gpustack renders the NVIDIA device plugin's config for node groups)"
        };
        d.push(
            Diagnostic::error(format!("`{}`: gpu_sharing on an AL2023 pool is not rendered: pools share GPUs through Bottlerocket user data", r.address), e.key_span.clone().or(e.span.clone()))
                .help(help),
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn quantities_follow_the_crd_pattern() {
        for ok in ["1000", "1000Gi", "0.5", "500m", "1e3", "10"] {
            assert!(super::quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "1000GB", "ten", "1.2.3"] {
            assert!(!super::quantity(bad), "{bad}");
        }
    }
}
