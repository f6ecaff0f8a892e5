//! `gpustack kubeconfig`: adds a cluster of the stack to a kubeconfig, the way
//! `aws eks update-kubeconfig` does (credentials from `aws eks get-token`, the
//! ecosystem's convention), from what state recorded: no call to EC2 or EKS.

use super::stdout::{out, outln};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_yaml_ng::{Mapping, Value as Yaml};

use super::{Global, VarArgs, load_stack};
use crate::state::backend::Backend;
use crate::state::local;

#[derive(Args)]
pub struct KubeconfigArgs {
    /// The stack file
    stack: PathBuf,
    /// The cluster: its address (eks_cluster.main), resource name (main) or EKS name; needed
    /// only when the stack has several
    cluster: Option<String>,
    /// The kubeconfig to update (default: the first path in $KUBECONFIG, else ~/.kube/config)
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Context name (default: the cluster's ARN, as aws eks update-kubeconfig does)
    #[arg(long, value_name = "NAME")]
    alias: Option<String>,
    /// AWS profile `aws eks get-token` uses (written into the entry as AWS_PROFILE)
    #[arg(long, value_name = "PROFILE")]
    profile: Option<String>,
    /// Print the kubeconfig entry instead of writing it
    #[arg(long)]
    print: bool,
    #[command(flatten)]
    vars: VarArgs,
}

pub async fn run(g: &Global, a: KubeconfigArgs) -> Result<i32> {
    let Some(stack) = load_stack(g, &a.stack, &a.vars) else { return Ok(1) };
    let backend = Backend::open(g.location(&stack)?).await;
    let Some(st) = backend.read().await? else {
        bail!("no state at {}: apply the stack first (gpustack apply {})", backend.location(), a.stack.display());
    };
    let clusters: Vec<(&String, &crate::state::ResourceState)> =
        st.resources.iter().filter(|(_, e)| e.kind == "eks_cluster").collect();
    let out = |e: &crate::state::ResourceState, k: &str| {
        e.outputs.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string()
    };
    let chosen = match &a.cluster {
        Some(want) => clusters.iter().find(|(addr, e)| {
            *addr == want || addr.strip_prefix("eks_cluster.") == Some(want.as_str()) || out(e, "name") == *want
        }),
        None if clusters.len() == 1 => clusters.first(),
        None => None,
    };
    let Some((address, e)) = chosen else {
        let names: Vec<&str> = clusters.iter().map(|(a, _)| a.as_str()).collect();
        if names.is_empty() {
            bail!("the state of stack {} has no eks_cluster: apply a stack with one first", stack.name);
        }
        match &a.cluster {
            Some(w) => bail!("no cluster {w} in the state of stack {}; clusters: {}", stack.name, names.join(", ")),
            None => bail!("stack {} has several clusters; name one: {}", stack.name, names.join(", ")),
        }
    };
    let (name, arn, endpoint, ca) =
        (out(e, "name"), out(e, "arn"), out(e, "endpoint"), out(e, "certificate_authority"));
    if endpoint.is_empty() {
        bail!("{address} has no endpoint in state yet; run gpustack apply {} to finish creating it", a.stack.display());
    }
    let context = a.alias.clone().unwrap_or_else(|| arn.clone());
    let entry = Entry {
        name: &arn,
        context: &context,
        cluster: &name,
        region: &stack.region,
        endpoint: &endpoint,
        ca: &ca,
        profile: a.profile.as_deref(),
    };
    if a.print {
        out!("{}", serde_yaml_ng::to_string(&merge(Yaml::Null, &entry)?)?)?;
        return Ok(0);
    }
    let file = a.kubeconfig.clone().unwrap_or_else(default_kubeconfig);
    let existing = match std::fs::read_to_string(&file) {
        Ok(t) if !t.trim().is_empty() => serde_yaml_ng::from_str(&t)
            .with_context(|| format!("{} is not valid YAML; fix it or pass --kubeconfig", file.display()))?,
        Ok(_) => Yaml::Null,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Yaml::Null,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let merged = merge(existing, &entry)?;
    local::write_atomic(&file, serde_yaml_ng::to_string(&merged)?.as_bytes())?;
    if g.json {
        outln!(
            "{}",
            serde_json::json!({"kubeconfig": file.display().to_string(), "context": context, "cluster": name})
        )?;
    } else {
        outln!("Added {address} ({name}) to {} as context {context}, now the current context.", file.display())?;
        outln!("Credentials come from `aws eks get-token`; try: kubectl get nodes")?;
    }
    Ok(0)
}

fn default_kubeconfig() -> PathBuf {
    if let Some(first) =
        std::env::var_os("KUBECONFIG").and_then(|v| std::env::split_paths(&v).find(|p| !p.as_os_str().is_empty()))
    {
        return first;
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    Path::new(&home).join(".kube").join("config")
}

struct Entry<'a> {
    /// The name the cluster and user entries get (the cluster ARN).
    name: &'a str,
    context: &'a str,
    cluster: &'a str,
    region: &'a str,
    endpoint: &'a str,
    ca: &'a str,
    profile: Option<&'a str>,
}

fn y(s: &str) -> Yaml {
    Yaml::String(s.to_string())
}

fn map(pairs: Vec<(&str, Yaml)>) -> Yaml {
    Yaml::Mapping(pairs.into_iter().map(|(k, v)| (y(k), v)).collect::<Mapping>())
}

/// `kubeconfig` with the entry's cluster, user and context added or replaced (by name)
/// and made current; everything else is kept.
fn merge(kubeconfig: Yaml, e: &Entry) -> Result<Yaml> {
    let mut root = match kubeconfig {
        Yaml::Mapping(m) => m,
        Yaml::Null => Mapping::new(),
        _ => bail!("the kubeconfig is not a YAML mapping"),
    };
    root.entry(y("apiVersion")).or_insert(y("v1"));
    root.entry(y("kind")).or_insert(y("Config"));
    let mut env = vec![];
    if let Some(p) = e.profile {
        env.push(map(vec![("name", y("AWS_PROFILE")), ("value", y(p))]));
    }
    let args = ["--region", e.region, "eks", "get-token", "--cluster-name", e.cluster, "--output", "json"];
    let mut exec = vec![
        ("apiVersion", y("client.authentication.k8s.io/v1beta1")),
        ("command", y("aws")),
        ("args", Yaml::Sequence(args.iter().map(|a| y(a)).collect())),
        ("interactiveMode", y("IfAvailable")),
    ];
    if !env.is_empty() {
        exec.push(("env", Yaml::Sequence(env)));
    }
    let exec = map(exec);
    let items = [
        (
            "clusters",
            e.name,
            map(vec![
                ("name", y(e.name)),
                ("cluster", map(vec![("server", y(e.endpoint)), ("certificate-authority-data", y(e.ca))])),
            ]),
        ),
        ("users", e.name, map(vec![("name", y(e.name)), ("user", map(vec![("exec", exec.clone())]))])),
        (
            "contexts",
            e.context,
            map(vec![("name", y(e.context)), ("context", map(vec![("cluster", y(e.name)), ("user", y(e.name))]))]),
        ),
    ];
    for (list, name, item) in items {
        let seq = root.entry(y(list)).or_insert(Yaml::Sequence(vec![]));
        if !seq.is_sequence() {
            *seq = Yaml::Sequence(vec![]);
        }
        if let Yaml::Sequence(s) = seq {
            s.retain(|x| x.get("name").and_then(Yaml::as_str) != Some(name));
            s.push(item);
        }
    }
    root.insert(y("current-context"), y(e.context));
    Ok(Yaml::Mapping(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_replaces_by_name_and_keeps_the_rest() {
        let before: Yaml = serde_yaml_ng::from_str(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster: {server: https://x}\n- name: arn:c\n  cluster: {server: https://old}\ncontexts: []\nusers: []\ncurrent-context: other\n",
        )
        .unwrap();
        let e = Entry {
            name: "arn:c",
            context: "arn:c",
            cluster: "c",
            region: "us-west-2",
            endpoint: "https://new",
            ca: "Q0E=",
            profile: Some("ml"),
        };
        let after = merge(before, &e).unwrap();
        let clusters = after["clusters"].as_sequence().unwrap();
        assert_eq!(clusters.len(), 2);
        assert_eq!(clusters[1]["cluster"]["server"].as_str(), Some("https://new"));
        assert_eq!(after["current-context"].as_str(), Some("arn:c"));
        let exec = &after["users"][0]["user"]["exec"];
        assert_eq!(exec["command"].as_str(), Some("aws"));
        assert_eq!(exec["args"][5].as_str(), Some("c"));
        assert_eq!(exec["env"][0]["value"].as_str(), Some("ml"));
    }
}
