//! `gpustack import generate`: writes a stack file for a live EKS cluster (see
//! `crate::generate`), and checks that gpustack reads it back.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use super::Global;
use super::stdout::{out, outln};

#[derive(Subcommand)]
pub enum ImportCommand {
    /// Write a stack file for a live EKS cluster: the cluster, its VPC, subnets, NAT gateways,
    /// security groups, roles, add-ons, access entries, Pod Identity associations, managed node
    /// groups with their launch templates and the reservations they use, each with an
    /// [import] entry. Only reads AWS
    Generate(GenerateArgs),
}

#[derive(Args)]
#[command(after_help = "Examples:
  gpustack import generate --cluster prod-gpu --region us-west-2 --out prod-gpu.toml
  gpustack plan prod-gpu.toml --detailed-exitcode     # exit 0: imports only, no change
  gpustack apply prod-gpu.toml                        # tags each object; changes nothing else

Ids and ARNs of other imported objects become references (\"${vpc.main.id}\"); attributes equal
to their default are left out; what the stack language cannot say is written as a comment
(# not expressible: FIELD = VALUE) and objects found but not importable as
# not imported: …. Clusters, ODCRs, Capacity Blocks and training plans get
prevent_destroy = true unless --no-prevent-destroy.

Read permissions: each kind's describe calls (`gpustack policy FILE` on the written file lists
them) plus eks:DescribeCluster, eks:ListAddons, eks:ListAccessEntries,
eks:ListPodIdentityAssociations, eks:ListNodegroups, eks:DescribeNodegroup,
ec2:DescribeSubnets, ec2:DescribeNatGateways, ec2:DescribeVpcEndpoints,
ec2:DescribeCapacityReservations, iam:ListOpenIDConnectProviders and logs:DescribeLogGroups.")]
pub struct GenerateArgs {
    /// The EKS cluster's name
    #[arg(long)]
    cluster: String,
    /// The cluster's region (default: AWS_REGION, then AWS_DEFAULT_REGION)
    #[arg(long)]
    region: Option<String>,
    /// Write the stack file here instead of stdout
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Overwrite --out if it exists
    #[arg(long, requires = "out")]
    force: bool,
    /// The stack's name ([stack].name; default: the cluster's name made a valid stack name)
    #[arg(long, value_name = "NAME")]
    stack_name: Option<String>,
    /// Leave out prevent_destroy = true on the cluster and on reservations, Capacity Blocks and
    /// training plans (then `gpustack destroy` may delete them)
    #[arg(long)]
    no_prevent_destroy: bool,
}

fn env_region() -> Option<String> {
    ["AWS_REGION", "AWS_DEFAULT_REGION"].iter().find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

pub async fn run(g: &Global, c: ImportCommand) -> Result<i32> {
    match c {
        ImportCommand::Generate(a) => generate(g, a).await,
    }
}

async fn generate(g: &Global, a: GenerateArgs) -> Result<i32> {
    let Some(region) = a.region.clone().or_else(env_region) else {
        bail!("no region: pass --region (the cluster's region, e.g. --region us-west-2) or set AWS_REGION");
    };
    if let Some(out) = &a.out
        && out.exists()
        && !a.force
    {
        bail!("{} exists: pass --force to overwrite it, or choose another --out", out.display());
    }
    let stack_name = a.stack_name.clone().unwrap_or_else(|| crate::generate::write::stack_name(&a.cluster));
    let valid = stack_name.len() <= 31
        && stack_name.starts_with(|c: char| c.is_ascii_lowercase())
        && stack_name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        bail!(
            "--stack-name {stack_name:?} is not a valid stack name: use at most 31 lower-case letters, digits and '-', starting with a letter"
        );
    }
    let ctx = crate::aws::Ctx::connect(&stack_name, &region).await;
    let req = crate::generate::Request {
        cluster: a.cluster.clone(),
        region: region.clone(),
        stack_name: stack_name.clone(),
        prevent_destroy: !a.no_prevent_destroy,
    };
    let quiet = g.json;
    let progress = move |m: &str| {
        if !quiet {
            eprintln!("{m}…");
        }
    };
    let generated = crate::generate::generate(&ctx, &req, &progress).await?;

    // The file must read back: checked as `validate` would, before it is written.
    let name = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("{stack_name}.toml")));
    let problems = check(&name, &generated.text);

    match &a.out {
        Some(path) => std::fs::write(path, &generated.text).with_context(|| format!("writing {}", path.display()))?,
        None if !g.json => out!("{}", generated.text)?,
        None => {}
    }
    if g.json {
        let objects: Vec<_> =
            generated.imported.iter().map(|(addr, id)| serde_json::json!({"address": addr, "id": id})).collect();
        let skipped: Vec<_> = generated
            .skipped
            .iter()
            .map(|(kind, id, why)| serde_json::json!({"kind": kind, "id": id, "reason": why}))
            .collect();
        let mut doc = serde_json::json!({
            "cluster": a.cluster, "region": region, "stack": stack_name,
            "imported": objects, "not_imported": skipped, "valid": problems.is_none(),
        });
        match &a.out {
            Some(p) => doc["out"] = serde_json::json!(p),
            None => doc["text"] = serde_json::json!(generated.text),
        }
        if let Some(p) = &problems {
            doc["diagnostics"] = serde_json::json!(p);
        }
        outln!("{doc}")?;
    } else {
        let n = generated.imported.len();
        let target = a.out.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "stdout".into());
        eprintln!("Wrote {n} object{} of cluster {} to {target}.", crate::stack::diag::plural(n), a.cluster);
        for (kind, id, why) in &generated.skipped {
            eprintln!("warning: {kind} {id} was not imported: {why}");
        }
        if let Some(p) = &problems {
            eprintln!("error: the generated file does not validate (a gpustack bug; please report it):\n{p}");
        } else if let Some(out) = &a.out {
            eprintln!("Next: gpustack plan {} (imports only, no change expected)", out.display());
        }
    }
    Ok(if problems.is_some() { 1 } else { 0 })
}

/// The load step's diagnostics for the generated text, rendered; `None` when it is valid.
fn check(path: &Path, text: &str) -> Option<String> {
    let sources = crate::stack::VarSources { env: &|_| None, cli: &[] };
    match crate::load::from_bytes(path, text.as_bytes().to_vec(), &sources) {
        Ok(_) => None,
        Err(d) => Some(d.render(false)),
    }
}
