//! The plan notes of pools written as Karpenter users write them (issue 19): what a pool's
//! requirements admit from the embedded catalog, what gpustack could not check offline
//! (requirement keys the catalog cannot answer, ids and tags outside the stack), and which
//! device plugin AL2023 and Neuron nodes still need. Words only: no diagnostic here.

use std::collections::BTreeSet;

use super::{family, lit, lit_str};
use crate::aws::catalog::{self, InstanceInfo};
use crate::stack::Resource;

/// True for a pool on an AL2023 alias.
pub(super) fn al2023(pool: &Resource) -> bool {
    lit_str(pool, "ami").is_some_and(|a| a.starts_with("al2023@"))
}

/// What a pool written with requirements alone may launch, for the plan: how many of the
/// embedded catalog's types pass, and its accelerated ones by family.
pub(super) fn derived_note(known: &[(String, InstanceInfo)]) -> Vec<String> {
    let accel: BTreeSet<&str> = known
        .iter()
        .filter(|(t, i)| i.gpus > 0 || catalog::embedded().accelerated_family(t))
        .map(|(t, _)| family(t))
        .collect();
    vec![format!(
        "requirements admit {} type(s) of {}; accelerated families among them: {}",
        known.len(),
        catalog::embedded().label(),
        if accel.is_empty() {
            "none (a CPU pool)".to_string()
        } else {
            accel.into_iter().collect::<Vec<_>>().join(", ")
        }
    )]
}

/// Requirement keys the catalog cannot evaluate, and literal ids and tag selectors whose
/// zones, routes and reservations gpustack does not know offline: said, not guessed.
pub(super) fn unchecked_note(
    pool: &Resource,
    l: &crate::resources::karpenter_pool::requirements::Launchable,
) -> Vec<String> {
    let mut out = vec![];
    if !l.unchecked.is_empty() {
        out.push(format!(
            "not checked against the catalog: requirements on {} (the GPU rules assume they admit every type)",
            l.unchecked.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let outside: Vec<&str> = [
        ("subnets", "subnet_tags", "subnets' zones and routes"),
        ("security_groups", "security_group_tags", "security groups' rules"),
        ("capacity_reservations", "capacity_reservation_tags", "reservations' zone, type and size"),
    ]
    .into_iter()
    .filter(|(ids, tags, _)| {
        pool.attrs.contains_key(*tags)
            || lit(pool, ids).and_then(|v| v.as_list().map(|l| l.iter().any(|x| x.as_str().is_some()))).unwrap_or(false)
    })
    .map(|(_, _, what)| what)
    .collect();
    if !outside.is_empty() {
        out.push(format!("not checked offline (ids or tags outside the stack): {}", outside.join("; ")));
    }
    out
}

/// AL2023 nodes with accelerators need their device plugin as a DaemonSet: the AL2023 NVIDIA
/// AMI carries the driver and container toolkit, not the Kubernetes device plugin ("you must
/// install the NVIDIA device plugin for Kubernetes": EKS UG `ml-eks-optimized-ami`), and the
/// Neuron AMI the driver, not the Neuron device plugin (EKS UG `ml-eks-optimized-ami`,
/// AWS Neuron docs "Kubernetes environment setup"). Bottlerocket's NVIDIA variants run the
/// plugin on the host (aws-facts §4); Bottlerocket's Neuron support needs the plugin too.
pub(super) fn device_plugin_note(
    pool: &Resource,
    known: &[(String, InstanceInfo)],
    families: &[String],
) -> Vec<String> {
    let nvidia = known.iter().any(|(_, i)| i.is_nvidia())
        || families.iter().any(|f| crate::resources::karpenter_pool::gpu_maker(f) == Some("NVIDIA"));
    let neuron = known.iter().any(|(t, _)| t.starts_with("inf") || t.starts_with("trn"))
        || families.iter().any(|f| f.starts_with("inf") || f.starts_with("trn"));
    let mut out = vec![];
    if nvidia && al2023(pool) {
        out.push("AL2023 NVIDIA nodes: the AMI has the driver, not the device plugin: install NVIDIA's nvidia-device-plugin chart with a toleration for the pool's taints (the pool labels its nodes nvidia.com/gpu.present=true, which the chart's default affinity selects), or the GPU Operator with driver.enabled=false and toolkit.enabled=false (the AMI has both); else pods get no nvidia.com/gpu".to_string());
    }
    if neuron {
        out.push("Neuron nodes: install the Neuron device plugin (aws-neuron-device-plugin), or pods get no aws.amazon.com/neuron".to_string());
    }
    out
}
