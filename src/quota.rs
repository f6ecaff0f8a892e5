//! Quota preflight (DESIGN.md §2, aws-facts §6): what the stack may run, in vCPUs per
//! EC2 instance family, against the account's Service Quotas, at plan and again at
//! apply. A short quota is an error naming the quota code, the need and the limit; a
//! quota the API cannot find is a warning; a denied API says how to skip the check.

use std::collections::BTreeMap;

use crate::aws::{Ctx, Service, err};
use crate::rules::{lit, target};
use crate::stack::{Diagnostic, Resource, Span, Stack};
use crate::value::Value;

/// The family of an instance type: "p5.48xlarge" → "p5", "g6e.xlarge" → "g6e".
fn family(t: &str) -> &str {
    t.split('.').next().unwrap_or(t)
}

/// The letters a family starts with: "p5en" → "p", "vt1" → "vt", "trn1" → "trn".
fn class(t: &str) -> &str {
    let f = family(t);
    let end = f.find(|c: char| c.is_ascii_digit()).unwrap_or(f.len());
    &f[..end]
}

/// The running On-Demand vCPU quota for a type: (code, name). Codes from the "Amazon EC2
/// instance type quotas" page (aws-facts §6); `gr6`/`gr6f` count under G and VT.
pub fn on_demand_quota(t: &str) -> Option<(&'static str, &'static str)> {
    match class(t) {
        "p" => Some(("L-417A185B", "Running On-Demand P instances")),
        "g" | "gr" | "vt" => Some(("L-DB2E81BA", "Running On-Demand G and VT instances")),
        "trn" => Some(("L-2C3B7624", "Running On-Demand Trn instances")),
        "inf" => Some(("L-1945791B", "Running On-Demand Inf instances")),
        "dl" => Some(("L-6E869C2A", "Running On-Demand DL instances")),
        "a" | "c" | "d" | "h" | "i" | "m" | "r" | "t" | "z" => {
            Some(("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"))
        }
        _ => None,
    }
}

/// The Spot vCPU quota for a type (same page; EC2 UG `using-spot-limits`).
pub fn spot_quota(t: &str) -> Option<(&'static str, &'static str)> {
    match (class(t), family(t)) {
        ("p", f) if f.starts_with("p5") => Some(("L-C4BD4855", "All P5 Spot Instance Requests")),
        ("p", f) if ["p2", "p3", "p4"].iter().any(|p| f.starts_with(p)) => {
            Some(("L-7212CCBC", "All P4, P3 and P2 Spot Instance Requests"))
        }
        ("g" | "gr" | "vt", _) => Some(("L-3819A6DF", "All G and VT Spot Instance Requests")),
        ("trn", _) => Some(("L-6B0D517C", "All Trn Spot Instance Requests")),
        ("inf", _) => Some(("L-B5D1601B", "All Inf Spot Instance Requests")),
        ("dl", _) => Some(("L-85EED4F7", "All DL Spot Instance Requests")),
        _ => None,
    }
}

/// The Capacity Blocks quota for a type's family. Its unit is the vCPUs of concurrently
/// active blocks, not a count of blocks ("Amazon EC2 instance type quotas" page).
pub fn block_quota(t: &str) -> Option<(&'static str, &'static str)> {
    match family(t) {
        "p5" => Some(("L-DA6814F2", "P5 Capacity Blocks (vCPUs)")),
        "p5e" => Some(("L-C45F30BC", "P5e Capacity Blocks (vCPUs)")),
        "p5en" => Some(("L-4F9BB70B", "P5en Capacity Blocks (vCPUs)")),
        "p4d" => Some(("L-2C8F52B3", "P4d Capacity Blocks (vCPUs)")),
        "trn1" => Some(("L-2E30FD7D", "Trn1 Capacity Blocks (vCPUs)")),
        "trn2" => Some(("L-64569A79", "Trn2 Capacity Blocks (vCPUs)")),
        _ => None,
    }
}

#[derive(Default)]
struct Need {
    name: &'static str,
    unit: &'static str,
    amount: f64,
    /// "node_group.train: 2 × 192 vCPUs"
    parts: Vec<String>,
    span: Span,
}

fn lit_int(r: &Resource, path: &[&str]) -> Option<i64> {
    let (first, rest) = path.split_first()?;
    let mut v = lit(r, first)?;
    for k in rest {
        v = v.as_table()?.get(*k)?.clone();
    }
    v.as_int()
}

/// Checks the stack's need against the quotas. Returns diagnostics (errors and warnings).
pub async fn check(ctx: &Ctx, stack: &Stack) -> anyhow::Result<Vec<Diagnostic>> {
    // Instance types per resource, and their vCPUs from the catalog.
    let mut types: Vec<String> = vec![];
    for r in &stack.resources {
        match r.kind.name() {
            "node_group" => {
                if let Some(Value::List(l)) = lit(r, "instance_types") {
                    types.extend(l.iter().filter_map(|v| v.as_str().map(str::to_string)));
                }
                if let Some(t) = target(stack, r, "launch_template").and_then(|lt| lit(lt, "instance_type")) {
                    types.extend(t.as_str().map(str::to_string));
                }
            }
            "capacity_reservation" | "capacity_block" => {
                types.extend(lit(r, "instance_type").and_then(|v| v.as_str().map(str::to_string)))
            }
            _ => {}
        }
    }
    let catalog = ctx.catalog.lookup(ctx, types).await?;
    let vcpus = |t: &str| catalog.get(t).cloned().flatten().map(|i| i.vcpus as f64);

    let mut needs: BTreeMap<&'static str, Need> = BTreeMap::new();
    let mut warnings = vec![];
    let mut add = |quota: Option<(&'static str, &'static str)>,
                   unit: &'static str,
                   amount: f64,
                   part: String,
                   r: &Resource,
                   t: &str| {
        match quota {
            Some((code, name)) => {
                let n =
                    needs.entry(code).or_insert_with(|| Need { name, unit, span: r.span.clone(), ..Need::default() });
                n.amount += amount;
                n.parts.push(part);
            }
            None => warnings.push(
                Diagnostic::warning(
                    format!("`{}`: gpustack knows no EC2 quota code for {t}; its quota is not checked", r.address),
                    r.span.clone(),
                )
                .help("check the quota in the Service Quotas console"),
            ),
        }
    };
    for r in &stack.resources {
        match r.kind.name() {
            "node_group" => {
                let capacity = lit(r, "capacity_type")
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "ON_DEMAND".into());
                if capacity == "CAPACITY_BLOCK" {
                    continue; // runs inside its block, which has its own quota
                }
                let lt = target(stack, r, "launch_template");
                let mut ts: Vec<String> = match lit(r, "instance_types") {
                    Some(Value::List(l)) => l.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
                    _ => vec![],
                };
                if ts.is_empty() {
                    ts.extend(lt.and_then(|lt| lit(lt, "instance_type")).and_then(|v| v.as_str().map(str::to_string)));
                }
                let Some(max) = lit_int(r, &["scaling", "max"]).or(lit_int(r, &["scaling", "min"])).or(Some(1)) else {
                    continue;
                };
                // Nodes that land in a reservation of this stack are already counted with it.
                let reserved = lt
                    .and_then(|lt| target(stack, lt, "capacity_reservation"))
                    .filter(|res| res.kind.name() == "capacity_reservation")
                    .and_then(|res| lit_int(res, &["instance_count"]))
                    .unwrap_or(0);
                let count = (max - reserved).max(0);
                // The largest type the group may launch decides.
                let Some((t, cpus)) =
                    ts.iter().filter_map(|t| Some((t.clone(), vcpus(t)?))).max_by(|a, b| a.1.total_cmp(&b.1))
                else {
                    continue;
                };
                if count == 0 {
                    continue;
                }
                let quota = if capacity == "SPOT" { spot_quota(&t) } else { on_demand_quota(&t) };
                add(quota, "vCPUs", count as f64 * cpus, format!("{}: {count} × {cpus} vCPUs ({t})", r.address), r, &t);
            }
            "capacity_reservation" => {
                let Some(t) = lit(r, "instance_type").and_then(|v| v.as_str().map(str::to_string)) else { continue };
                let (Some(n), Some(cpus)) = (lit_int(r, &["instance_count"]), vcpus(&t)) else { continue };
                add(
                    on_demand_quota(&t),
                    "vCPUs",
                    n as f64 * cpus,
                    format!("{}: {n} × {cpus} vCPUs ({t})", r.address),
                    r,
                    &t,
                );
            }
            "capacity_block" => {
                let Some(t) = lit(r, "instance_type").and_then(|v| v.as_str().map(str::to_string)) else { continue };
                let (Some(n), Some(cpus)) = (lit_int(r, &["instance_count"]), vcpus(&t)) else { continue };
                add(
                    block_quota(&t),
                    "vCPUs",
                    n as f64 * cpus,
                    format!("{}: {n} × {cpus} vCPUs in a block ({t})", r.address),
                    r,
                    &t,
                );
            }
            _ => {}
        }
    }
    // Every quota at once: one round trip (two for a code with no applied value).
    let mut reads = tokio::task::JoinSet::new();
    for code in needs.keys().copied() {
        let ctx = ctx.clone();
        reads.spawn(async move { (code, limit(&ctx, code).await) });
    }
    let mut limits = BTreeMap::new();
    while let Some(joined) = reads.join_next().await {
        let (code, value) = joined.map_err(|e| anyhow::anyhow!("a quota read failed: {e}"))?;
        limits.insert(code, value);
    }
    let mut diags = warnings;
    diags.extend(sagemaker(ctx, stack).await?);
    for (code, need) in needs {
        let Some(value) = limits.remove(code) else { continue };
        match value {
            Ok(Some(value)) if need.amount > value => diags.push(
                Diagnostic::error(
                    format!(
                        "this stack needs {} {} of quota {code} ({}), but the account's limit in {} is {}",
                        need.amount, need.unit, need.name, stack.region, value
                    ),
                    need.span.clone(),
                )
                .help(format!(
                    "{}; request an increase (aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} --desired-value {}) or lower scaling.max",
                    need.parts.join(", "),
                    need.amount
                )),
            ),
            Ok(Some(_)) => {}
            Ok(None) => diags.push(
                Diagnostic::warning(format!("Service Quotas has no value for {code} ({}); not checked", need.name), need.span.clone())
                    .help("check the quota in the Service Quotas console"),
            ),
            Err(Denied(detail)) => diags.push(
                Diagnostic::error(format!("cannot read quota {code} ({}): {detail}", need.name), need.span.clone())
                    .help("allow servicequotas:GetServiceQuota and servicequotas:GetAWSDefaultServiceQuota, or pass --skip-quota-check"),
            ),
        }
    }
    Ok(diags)
}

struct Denied(String);

/// What HyperPod and training plans need of SageMaker's quotas (service code `sagemaker`),
/// by quota name: their codes differ between sources, so they are looked up by their exact
/// names (`docs/aws-facts-hyperpod.md` §8). Each HyperPod instance counts against
/// "ml.<type> for cluster usage" even on a training plan (SageMaker DG
/// `reserve-capacity-with-training-plans`: the quota must exceed the plan's count), against
/// its cluster's and the account's HyperPod totals; each plan's instances against the
/// reserved capacity of its type.
fn sagemaker_needs(stack: &Stack) -> BTreeMap<String, (i64, Vec<String>, Span)> {
    let mut needs: BTreeMap<String, (i64, Vec<String>, Span)> = BTreeMap::new();
    let add =
        |needs: &mut BTreeMap<String, (i64, Vec<String>, Span)>, name: String, n: i64, part: String, span: &Span| {
            let e = needs.entry(name).or_insert_with(|| (0, vec![], span.clone()));
            e.0 += n;
            e.1.push(part);
        };
    for c in crate::rules::hyperpod::clusters(stack) {
        let mut in_cluster = 0;
        for (group, (_, fields)) in crate::rules::hyperpod::groups(c) {
            let get = |k: &str| fields.get(k).and_then(|e| e.as_literal().cloned());
            let (Some(Value::Str(t)), Some(Value::Int(n))) = (get("instance_type"), get("instance_count")) else {
                continue;
            };
            let part = format!("{} group {group}: {n} × {t}", c.address);
            add(&mut needs, format!("{t} for cluster usage"), n, part.clone(), &c.span);
            add(
                &mut needs,
                "Total number of instances allowed across SageMaker HyperPod clusters".into(),
                n,
                part,
                &c.span,
            );
            in_cluster += n;
        }
        // The per-cluster quota holds the largest cluster, not the sum.
        let e = needs
            .entry("Maximum number instances allowed per SageMaker HyperPod cluster".into())
            .or_insert_with(|| (0, vec![], c.span.clone()));
        e.0 = e.0.max(in_cluster);
        e.1.push(format!("{}: {in_cluster} instances", c.address));
    }
    for r in stack.resources.iter().filter(|r| r.kind.name() == "training_plan") {
        let (Some(Value::Str(t)), Some(n)) = (lit(r, "instance_type"), lit_int(r, &["instance_count"])) else {
            continue;
        };
        add(
            &mut needs,
            format!("Number of {t} instances in reserved capacity across training plans per Region"),
            n,
            format!("{}: {n} × {t}", r.address),
            &r.span,
        );
    }
    needs
}

async fn sagemaker(ctx: &Ctx, stack: &Stack) -> anyhow::Result<Vec<Diagnostic>> {
    let needs = sagemaker_needs(stack);
    if needs.is_empty() {
        return Ok(vec![]);
    }
    // Applied values first; a quota never raised is listed only with AWS's default.
    let pages = ctx.quotas.list_service_quotas().service_code("sagemaker").into_paginator().send();
    let applied = ctx.all_pages(Service::Quotas, "ListServiceQuotas", pages, |p| p.quotas.unwrap_or_default()).await;
    let pages = ctx.quotas.list_aws_default_service_quotas().service_code("sagemaker").into_paginator().send();
    let defaults =
        ctx.all_pages(Service::Quotas, "ListAWSDefaultServiceQuotas", pages, |p| p.quotas.unwrap_or_default()).await;
    let listed = applied.and_then(|mut a| {
        let d = defaults?;
        a.extend(d.into_iter().filter(|q| q.quota_name().is_some()));
        Ok(a)
    });
    let mut diags = vec![];
    let quotas = match listed {
        Ok(q) => q,
        Err(e) => {
            let span = needs.values().next().map(|n| n.2.clone()).unwrap_or_default();
            diags.push(
                Diagnostic::error(format!("cannot list SageMaker's quotas: {}", e.message()), span)
                    .help("allow servicequotas:ListServiceQuotas and servicequotas:ListAWSDefaultServiceQuotas, or pass --skip-quota-check"),
            );
            return Ok(diags);
        }
    };
    for (name, (need, parts, span)) in needs {
        let Some(q) = quotas.iter().find(|q| q.quota_name() == Some(name.as_str())) else {
            diags.push(
                Diagnostic::warning(
                    format!("Service Quotas lists no SageMaker quota named \"{name}\"; not checked"),
                    span,
                )
                .help("check the quota in the Service Quotas console (Amazon SageMaker AI)"),
            );
            continue;
        };
        let code = q.quota_code().unwrap_or_default();
        let Some(value) = q.value() else { continue };
        if need as f64 > value {
            diags.push(
                Diagnostic::error(
                    format!(
                        "this stack needs {need} instances of SageMaker quota \"{name}\" ({code}), but the account's limit in {} is {value}",
                        stack.region
                    ),
                    span,
                )
                .help(format!(
                    "{}; request an increase (aws service-quotas request-service-quota-increase --service-code sagemaker --quota-code {code} --desired-value {need}) or lower instance_count",
                    parts.join(", ")
                )),
            );
        }
    }
    Ok(diags)
}

/// The applied quota value, else AWS's default; None when neither exists.
async fn limit(ctx: &Ctx, code: &str) -> Result<Option<f64>, Denied> {
    let denied = |e: crate::aws::AwsError| Denied(e.message().to_string());
    let applied = {
        let _p = ctx.permit(Service::Quotas).await;
        ctx.quotas.get_service_quota().service_code("ec2").quota_code(code).send().await.map_err(err("GetServiceQuota"))
    };
    match applied {
        Ok(o) => return Ok(o.quota().and_then(|q| q.value())),
        Err(e) if e.code.as_deref() == Some("NoSuchResourceException") => {}
        Err(e) => return Err(denied(e)),
    }
    let default = {
        let _p = ctx.permit(Service::Quotas).await;
        ctx.quotas
            .get_aws_default_service_quota()
            .service_code("ec2")
            .quota_code(code)
            .send()
            .await
            .map_err(err("GetAWSDefaultServiceQuota"))
    };
    match default {
        Ok(o) => Ok(o.quota().and_then(|q| q.value())),
        Err(e) if e.code.as_deref() == Some("NoSuchResourceException") => Ok(None),
        Err(e) => Err(denied(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_map_to_their_quota_codes() {
        assert_eq!(on_demand_quota("p5.48xlarge").map(|q| q.0), Some("L-417A185B"));
        assert_eq!(on_demand_quota("g6e.12xlarge").map(|q| q.0), Some("L-DB2E81BA"));
        assert_eq!(on_demand_quota("vt1.3xlarge").map(|q| q.0), Some("L-DB2E81BA"));
        assert_eq!(on_demand_quota("m6i.large").map(|q| q.0), Some("L-1216C47A"));
        assert_eq!(on_demand_quota("trn1.32xlarge").map(|q| q.0), Some("L-2C3B7624"));
        assert_eq!(on_demand_quota("inf2.48xlarge").map(|q| q.0), Some("L-1945791B"));
        assert_eq!(on_demand_quota("dl1.24xlarge").map(|q| q.0), Some("L-6E869C2A"));
        assert_eq!(on_demand_quota("gr6.4xlarge").map(|q| q.0), Some("L-DB2E81BA"));
        assert_eq!(spot_quota("gr6f.4xlarge").map(|q| q.0), Some("L-3819A6DF"));
        assert_eq!(spot_quota("trn2.48xlarge").map(|q| q.0), Some("L-6B0D517C"));
        assert_eq!(spot_quota("p6-b200.48xlarge"), None);
        assert_eq!(block_quota("trn1.32xlarge").map(|q| q.0), Some("L-2E30FD7D"));
        assert_eq!(block_quota("trn2.48xlarge").map(|q| q.0), Some("L-64569A79"));
        assert_eq!(spot_quota("p5.48xlarge").map(|q| q.0), Some("L-C4BD4855"));
        assert_eq!(spot_quota("p4d.24xlarge").map(|q| q.0), Some("L-7212CCBC"));
        assert_eq!(spot_quota("g5.xlarge").map(|q| q.0), Some("L-3819A6DF"));
        assert_eq!(block_quota("p5en.48xlarge").map(|q| q.0), Some("L-4F9BB70B"));
        assert_eq!(block_quota("p5.48xlarge").map(|q| q.0), Some("L-DA6814F2"));
    }
}
