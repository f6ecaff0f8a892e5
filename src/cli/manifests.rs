//! `gpustack manifests STACK [--out DIR]`: writes the Kubernetes YAML of the stack's
//! rendered kinds with the ids from state (see `crate::manifests`).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::stdout::{out, outln};
use super::{Global, VarArgs, load_stack};
use crate::state::backend::Backend;

#[derive(Args)]
#[command(after_help = "Examples:
  gpustack manifests examples/karpenter.toml --out k8s/   # then: kubectl apply -R -f k8s/
  gpustack manifests examples/karpenter.toml | kubectl apply -f -

Run after apply: the YAML takes subnet, security group and reservation ids from state. The
output is byte-identical between runs, so a GitOps diff shows only real changes. Helm values
(efa-device-plugin/, nvidia-device-plugin/, neuron-device-plugin/, gpu-operator/values.yaml, …)
are written only with --out.")]
pub struct ManifestsArgs {
    /// The stack file (TOML)
    stack: PathBuf,
    /// Write one file per manifest under DIR (karpenter/<pool>.yaml, priority-classes.yaml,
    /// efa-device-plugin/values.yaml, …) instead of one multi-document stream on stdout
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    vars: VarArgs,
}

pub async fn run(g: &Global, a: ManifestsArgs) -> Result<i32> {
    let Some(stack) = load_stack(g, &a.stack, &a.vars) else { return Ok(1) };
    let backend = Backend::open(g.location(&stack)?).await;
    let Some(state) = backend.read().await? else {
        bail!("no state at {}: run `gpustack apply` first, so the manifests can name what it made", backend.location());
    };
    let files = match crate::manifests::render(&stack, &state) {
        Ok(f) => f,
        Err(errors) => bail!("{}", errors.join("\n")),
    };
    if files.is_empty() {
        eprintln!("{} declares nothing rendered (karpenter_pool, priority_class, …): no manifests.", a.stack.display());
        return Ok(0);
    }
    match &a.out {
        Some(dir) => {
            for f in &files {
                let path = dir.join(&f.path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
                }
                std::fs::write(&path, &f.text).with_context(|| format!("writing {}", path.display()))?;
            }
            let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
            if g.json {
                outln!("{}", serde_json::json!({ "out": dir, "files": names }))?;
            } else {
                eprintln!("Wrote {} file(s) under {}: {}", files.len(), dir.display(), names.join(", "));
            }
        }
        // The stream is for `kubectl apply -f -`: Helm values are not Kubernetes objects, so
        // they are only written with --out (helm install -f takes a file).
        None => {
            for f in files.iter().filter(|f| !f.is_helm_values()) {
                out!("# gpustack manifests: {}\n{}", f.path, f.text)?;
            }
            let values: Vec<&str> = files.iter().filter(|f| f.is_helm_values()).map(|f| f.path.as_str()).collect();
            if !values.is_empty() && !g.json {
                eprintln!(
                    "Helm values not in the stream (not Kubernetes objects): {}; write them with --out DIR",
                    values.join(", ")
                );
            }
        }
    }
    Ok(0)
}
