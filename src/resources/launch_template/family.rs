//! Which AMI family a launch template is written for, and the attributes that belong to
//! the other one. AL2023 (an `AL2023_*` `ami_type`, or `nodeadm` / `local_storage` written)
//! reads a nodeadm NodeConfig and keeps container images on its root volume; Bottlerocket
//! (the default) reads TOML settings and keeps images on the data volume `/dev/xvdb`.
//! Also the attributes only a self-managed group's template may carry (`cluster`,
//! `instance_profile`, `ami_id`), and the root volume's EBS rules.

use crate::stack::{Diagnostic, Resource};
use crate::value::Value;

fn lit_str<'a>(r: &'a Resource, k: &str) -> Option<&'a str> {
    r.attrs.get(k).and_then(|e| e.as_literal()).and_then(Value::as_str)
}

/// The template is written for AL2023.
pub fn al2023(r: &Resource) -> bool {
    r.attrs.contains_key("nodeadm")
        || r.attrs.contains_key("local_storage")
        || lit_str(r, "ami_type").is_some_and(|a| a.starts_with("AL2023_"))
}

pub fn check(r: &Resource, diags: &mut Vec<Diagnostic>) {
    let at = |k: &str| r.attrs.get(k).and_then(|e| e.key_span.clone().or(e.span.clone()));
    let ami = lit_str(r, "ami_type");
    if al2023(r) {
        let why = match ami {
            Some(a) if a.starts_with("AL2023_") => format!("ami_type is {a}"),
            _ => "it sets nodeadm or local_storage".to_string(),
        };
        for (k, fix) in [
            ("bottlerocket_settings", "put kubelet settings in nodeadm = { kubelet = { config = { … } } }"),
            (
                "data_volume",
                "AL2023 keeps images on the root volume: set root_volume = { size_gib = 200 }, and local_storage = \"raid0\" for instance stores",
            ),
        ] {
            if r.attrs.contains_key(k) {
                diags.push(
                    Diagnostic::error(
                        format!("`{}` is an AL2023 template ({why}), but `{k}` is Bottlerocket's", r.address),
                        at(k),
                    )
                    .help(fix.to_string()),
                );
            }
        }
    }
    if let Some(a) = ami.filter(|a| a.starts_with("BOTTLEROCKET_")) {
        for k in ["nodeadm", "local_storage"] {
            if r.attrs.contains_key(k) {
                diags.push(
                    Diagnostic::error(format!("`{}` runs {a}, but `{k}` is AL2023's nodeadm configuration", r.address), at(k))
                        .help("use bottlerocket_settings for Bottlerocket (e.g. { kubernetes = { max-pods = 110 } }), or an AL2023_* ami_type"),
                );
            }
        }
    }
    let joins = r.attrs.contains_key("cluster");
    if joins {
        if !r.attrs.contains_key("ami_type") && !r.attrs.contains_key("ami_id") {
            diags.push(
                Diagnostic::error(format!("`{}` joins a cluster itself (`cluster`), so it needs an AMI", r.address), at("cluster"))
                    .help("set ami_type = \"AL2023_x86_64_NVIDIA\" (resolved from EKS's public SSM parameters) or ami_id = \"ami-…\""),
            );
        }
        if !r.attrs.contains_key("instance_profile") {
            diags.push(
                Diagnostic::error(format!("`{}` joins a cluster itself (`cluster`), so its instances need `instance_profile`", r.address), at("cluster"))
                    .help("set instance_profile = \"${iam_role.NODE.instance_profile}\" (an iam_role with instance_profile = true)"),
            );
        }
        if r.attrs.contains_key("ami_id") && !r.attrs.contains_key("ami_type") {
            diags.push(
                Diagnostic::error(format!("`{}`: with ami_id, say its family with `ami_type`", r.address), at("ami_id"))
                    .help("gpustack writes nodeadm user data for AL2023_* and TOML settings for BOTTLEROCKET_*; set the one the AMI is"),
            );
        }
    } else {
        for k in ["instance_profile", "ami_id"] {
            if r.attrs.contains_key(k) {
                diags.push(
                    Diagnostic::error(format!("`{}`: `{k}` is only for a self-managed group's template (one that sets `cluster`)", r.address), at(k))
                        .help("EKS refuses an IAM instance profile and sets the AMI of a managed node group itself (EKS UG launch-templates); remove it, or set cluster = \"${eks_cluster.NAME.name}\" for a self_managed_node_group"),
                );
            }
        }
    }
    root_volume(r, diags);
}

/// EBS rules for the root volume (EC2 API reference, `EbsBlockDevice`): IOPS for gp3, io1
/// and io2 only (io1 and io2 require it), throughput for gp3 only, a KMS key only on an
/// encrypted volume.
fn root_volume(r: &Resource, diags: &mut Vec<Diagnostic>) {
    let Some(rv) = r.attrs.get("root_volume") else { return };
    let v = rv.resolve(&|_| Value::Unknown);
    let Some(t) = v.as_table() else { return };
    let ty = t.get("type").and_then(Value::as_str).unwrap_or("gp3");
    let mut bad = |msg: String, help: &str| diags.push(Diagnostic::error(msg, rv.span.clone()).help(help.to_string()));
    if t.contains_key("iops") && ty == "gp2" {
        bad(format!("`{}`: root_volume.iops does not apply to gp2", r.address), "use type = \"gp3\" to set IOPS");
    }
    if !t.contains_key("iops") && matches!(ty, "io1" | "io2") {
        bad(format!("`{}`: root_volume of type {ty} needs `iops`", r.address), "set iops, or use type = \"gp3\"");
    }
    if t.contains_key("throughput") && ty != "gp3" {
        bad(
            format!("`{}`: root_volume.throughput applies to gp3 only", r.address),
            "use type = \"gp3\", or remove throughput",
        );
    }
    if t.contains_key("kms_key") && t.get("encrypted").and_then(Value::as_bool) == Some(false) {
        bad(
            format!("`{}`: root_volume.kms_key needs encrypted = true", r.address),
            "remove encrypted = false, or the kms_key",
        );
    }
    if let Some(n) = t.get("size_gib").and_then(Value::as_int).filter(|n| !(1..=65536).contains(n)) {
        bad(
            format!("`{}`: root_volume.size_gib = {n} is outside EBS's 1 to 65,536 GiB", r.address),
            "a GPU node usually wants 100 to 500 GiB",
        );
    }
}
