//! Offline checks of a launch template's `gpu_sharing` table: the strategy, its replicas,
//! and MIG profiles against the GPUs Bottlerocket's MIG manager knows (the catalog-backed
//! checks, which need the instance type, are in the GPU rules).

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Expr};
use crate::value::Value;

/// Offline checks of `gpu_sharing`.
pub fn check(e: &Expr, diags: &mut Vec<Diagnostic>) {
    let ExprKind::Table(t) = &e.kind else { return };
    let strategy = t.get("strategy").and_then(|x| x.as_literal()).and_then(Value::as_str).unwrap_or("none");
    let replicas = t.get("replicas");
    let n = replicas.and_then(|x| x.as_literal()).and_then(Value::as_int);
    match strategy {
        "time-slicing" | "mps" => {
            let (lo, hi) = if strategy == "mps" { (2, 48) } else { (2, i64::MAX) };
            match n {
                None if replicas.is_none() => diags.push(
                    Diagnostic::error(format!("gpu_sharing strategy \"{strategy}\" needs `replicas`"), e.span.clone())
                        .help("replicas = how many pods share each GPU, at least 2, e.g. replicas = 4"),
                ),
                Some(n) if n < lo || n > hi => diags.push(
                    Diagnostic::error(
                        if strategy == "mps" {
                            format!("MPS replicas must be 2 to 48, found {n}")
                        } else {
                            format!("time-slicing replicas must be at least 2, found {n}")
                        },
                        replicas.and_then(|r| r.span.clone()),
                    )
                    .help("with 1 replica nothing is shared: use strategy = \"none\""),
                ),
                _ => {}
            }
            if let Some(p) = t.get("mig_profile") {
                diags.push(
                    Diagnostic::error(
                        format!(
                            "`mig_profile` does not go with strategy \"{strategy}\": MIG and {strategy} are exclusive"
                        ),
                        p.span.clone(),
                    )
                    .help("pick one: strategy = \"mig\" with mig_profile, or time-slicing/mps with replicas"),
                );
            }
        }
        "mig" => {
            if t.get("mig_profile").is_none() {
                diags.push(
                    Diagnostic::error("gpu_sharing strategy \"mig\" needs `mig_profile`", e.span.clone())
                        .help("e.g. mig_profile = { \"h100.80gb\" = \"1g.10gb\" } (keyed by GPU model and memory)"),
                );
            }
            if let Some(r) = replicas {
                diags.push(
                    Diagnostic::error(
                        "`replicas` does not apply to MIG: MIG with sharing on top is not offered",
                        r.span.clone(),
                    )
                    .help("remove replicas; the MIG profile decides how many slices each GPU has"),
                );
            }
            // Bottlerocket's `mig.profile` values are quoted strings: a partition count ("4") or a
            // profile ("1g.10gb"); an integer is rejected and the node never configures
            // (nvidia-migmanager README; Bottlerocket settings reference, kubelet-device-plugins).
            if let Some(ExprKind::Table(p)) = t.get("mig_profile").map(|p| &p.kind) {
                let models = crate::aws::catalog::MIG_MODELS;
                for (k, v) in p {
                    match v.as_literal() {
                        Some(Value::Str(_)) | None => {}
                        Some(Value::Int(n)) => diags.push(
                            Diagnostic::error(
                                format!(
                                    "mig_profile \"{k}\" = {n} is an integer; Bottlerocket takes only strings here"
                                ),
                                v.span.clone(),
                            )
                            .help(format!(
                                "quote it: \"{k}\" = \"{n}\" (a partition count) or a profile such as \"1g.10gb\""
                            )),
                        ),
                        Some(_) => diags.push(
                            Diagnostic::error(format!("mig_profile \"{k}\" must be a string"), v.span.clone())
                                .help("a partition count such as \"4\" or a profile such as \"1g.10gb\""),
                        ),
                    }
                    match models.iter().find(|m| m.key == k.as_str()) {
                        None => diags.push(
                            Diagnostic::error(
                                format!("mig_profile key \"{k}\" is not a GPU Bottlerocket's MIG manager knows"),
                                v.key_span.clone().or(v.span.clone()),
                            )
                            .help(format!("keys are {}", models.iter().map(|m| m.key).collect::<Vec<_>>().join(", "))),
                        ),
                        Some(m) => {
                            if let Some(Value::Str(s)) = v.as_literal()
                                && !m.accepts(s)
                            {
                                diags.push(
                                    Diagnostic::error(
                                        format!("mig_profile \"{k}\" = \"{s}\" is not a layout of {k}"),
                                        v.span.clone(),
                                    )
                                    .help(format!("the choices are {}", m.choices())),
                                );
                            }
                        }
                    }
                }
            }
        }
        _ => {
            for k in ["replicas", "mig_profile"] {
                if let Some(x) = t.get(k) {
                    diags.push(
                        Diagnostic::error(
                            format!("`{k}` needs a sharing strategy, but strategy is \"none\""),
                            x.span.clone(),
                        )
                        .help("set strategy = \"time-slicing\", \"mps\" or \"mig\", or remove it"),
                    );
                }
            }
        }
    }
}

/// The NVIDIA device plugin's config for a `gpu_sharing` table, and its name: `time-slicing-4`,
/// `mps-4`, `mig`; None for strategy "none". Sharing renames the resource to
/// `nvidia.com/gpu.shared` and refuses requests for more than one, as Bottlerocket's settings
/// do by default, so a pod asks for the same resource on either OS (aws-facts §4, §14).
pub fn nvidia_config(sharing: &BTreeMap<String, Value>) -> Option<(String, Json)> {
    let strategy = sharing.get("strategy").and_then(Value::as_str)?;
    let replicas = sharing.get("replicas").and_then(Value::as_int).unwrap_or(2);
    let shared = |key: &str| {
        json!({
            "version": "v1",
            "flags": { "migStrategy": "none" },
            "sharing": { key: {
                "renameByDefault": true,
                "failRequestsGreaterThanOne": true,
                "resources": [{ "name": "nvidia.com/gpu", "replicas": replicas }],
            } },
        })
    };
    match strategy {
        "time-slicing" => Some((format!("time-slicing-{replicas}"), shared("timeSlicing"))),
        "mps" => Some((format!("mps-{replicas}"), shared("mps"))),
        // The plugin exposes MIG partitions (`nvidia.com/mig-<g>g.<mem>gb`); making them needs
        // NVIDIA's MIG manager, which the EKS AL2023 AMI does not run: on AL2023 only a
        // `gpu_operator` with `mig` makes them, and its render sets the strategy it runs
        // (docs/aws-facts-gpu-addons.md §3).
        "mig" => Some(("mig".into(), json!({ "version": "v1", "flags": { "migStrategy": "mixed" } }))),
        _ => None,
    }
}

/// The node labels an AL2023 node group needs for the NVIDIA device plugin to apply its
/// sharing config, with the config's name: `nvidia.com/device-plugin.config` selects the
/// config, `nvidia.com/gpu.present=true` matches the chart's default affinity (aws-facts §14),
/// and with MPS `nvidia.com/mps.capable=true`. The chart deploys the MPS control daemon only
/// on nodes with that label ("We only deploy this pod if the following sharing label is
/// applied": NVIDIA/k8s-device-plugin v0.20.0
/// `deployments/helm/nvidia-device-plugin/templates/daemonset-mps-control-daemon.yml`), and
/// without the daemon the plugin stops ("error waiting for MPS daemon":
/// `internal/plugin/server.go`). The label is otherwise written only by GPU Feature Discovery
/// (`internal/lm/nvml.go`), which the chart leaves off (`gfd.enabled: false`) and which
/// publishes through node-feature-discovery workers that tolerate only
/// `nvidia.com/gpu=present:NoSchedule` (the chart's `values.yaml`), not the GPU taints these
/// groups carry; so gpustack sets the label itself. None for strategy "none".
pub fn nvidia_labels(sharing: &BTreeMap<String, Value>) -> Option<(String, Vec<(&'static str, String)>)> {
    let (name, _) = nvidia_config(sharing)?;
    let mut labels = vec![("nvidia.com/device-plugin.config", name.clone()), ("nvidia.com/gpu.present", "true".into())];
    if sharing.get("strategy").and_then(Value::as_str) == Some("mps") {
        labels.push(("nvidia.com/mps.capable", "true".into()));
    }
    if let Some((config, _, _)) = mig_layout(sharing) {
        labels.push(("nvidia.com/mig.config", config));
    }
    Some((name, labels))
}

/// The MIG layout of a `gpu_sharing = { strategy = "mig", mig_profile = {...} }` table as
/// NVIDIA's MIG manager takes it: the name of its mig-parted config (`all-1g.10gb`, the
/// naming of mig-parted's own examples: every GPU of the node cut the same way), the
/// profile, and slices per GPU. The node label `nvidia.com/mig.config=<name>` selects it
/// (NVIDIA/gpu-operator v26.7.0 `controllers/state_manager.go` `migConfigLabelKey`). A
/// `mig_profile` value is a profile or a partition count of its GPU model (`MIG_MODELS`);
/// with several models the first (sorted) decides, and the rules refuse models that
/// disagree. None for other strategies or an unknown value.
pub fn mig_layout(sharing: &BTreeMap<String, Value>) -> Option<(String, String, i64)> {
    if sharing.get("strategy").and_then(Value::as_str) != Some("mig") {
        return None;
    }
    let profile = sharing.get("mig_profile").and_then(Value::as_table)?;
    let (model, v) = profile.iter().next()?;
    let v = v.as_str()?;
    let m = crate::aws::catalog::MIG_MODELS.iter().find(|m| m.key == model)?;
    let (count, p) = m.layouts.iter().find(|(n, p)| *n == v || *p == v)?;
    Some((format!("all-{p}"), p.to_string(), count.parse().ok()?))
}
