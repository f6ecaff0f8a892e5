//! `gpustack status STACK`: live utilisation of what the stack reserved, on one screen —
//! each reservation's used/total and idle cost per hour, the time left on each block and
//! plan, and each node group's desired/ready count and health issues. Exit 3 when reserved
//! capacity sits idle, for alerting.
//!
//! Node groups: `eks:DescribeNodegroup` gives `scalingConfig.desiredSize`, `health.issues`
//! and `resources.autoScalingGroups` (EKS API Reference, `Nodegroup`); "ready" is the number
//! of that Auto Scaling group's instances whose `LifecycleState` is `InService` and
//! `HealthStatus` `Healthy` (`autoscaling:DescribeAutoScalingGroups`, botocore `Instance`).
//! EKS itself does not report a ready count, and a Kubernetes node's Ready condition is not
//! visible from the AWS API: an instance InService may still be joining.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use serde_json::Value as Json;

use super::stdout::{out, outln};
use super::timeline::read_timeline;
use super::{Global, VarArgs, load_stack};
use crate::aws::{Absent, AwsError, Ctx, Service};
use crate::capacity::timeline::{Timeline, human_hours, short, usd};

/// The exit code when reserved capacity sits idle.
pub const EXIT_IDLE: i32 = 3;

#[derive(Args)]
#[command(after_help = "Exit codes:
  0  every active reservation is fully used (or the stack reserves nothing)
  3  reserved capacity sits idle: an active ODCR, Capacity Block or training plan has
     instances free (billed all the same) — for alerting, e.g. in a cron job
  1  an error (no state, AWS unreachable, a bad stack file)

Examples:
  gpustack status examples/training.toml
  gpustack status examples/training.toml --json | jq '.idle_usd_per_hour'

Reads state (run `gpustack apply` first) and AWS: DescribeCapacityReservations,
DescribeTrainingPlan, DescribeNodegroup, DescribeAutoScalingGroups. IN SERVICE = instances
InService and Healthy in the node group's Auto Scaling group. GPUSTACK_NOW (RFC 3339) pins
\"now\".")]
pub struct StatusArgs {
    /// The stack file (TOML)
    stack: PathBuf,
    #[command(flatten)]
    vars: VarArgs,
}

#[derive(Clone, Debug, Serialize)]
pub struct GroupStatus {
    pub address: String,
    pub name: String,
    pub desired: Option<i64>,
    pub ready: Option<i64>,
    pub status: String,
    pub issues: Vec<String>,
}

pub async fn run(g: &Global, a: StatusArgs) -> Result<i32> {
    let Some(stack) = load_stack(g, &a.stack, &a.vars) else { return Ok(1) };
    let Some((t, state, ctx)) = read_timeline(g, &stack).await? else { return Ok(1) };
    let groups = match node_groups(&ctx, &state).await {
        Ok(gs) => gs,
        Err(e) => {
            anyhow::bail!("{e}\n  help: status needs eks:DescribeNodegroup and autoscaling:DescribeAutoScalingGroups")
        }
    };
    let (idle, _, _) = t.idle_now();
    let code = if idle > 0 { EXIT_IDLE } else { 0 };
    // An alerting command: a GPUSTACK_NOW left in a cron environment changes the exit code,
    // so say it is set (review timeline minor 6).
    let pinned = crate::capacity::timeline::pinned_now();
    if let Some(v) = &pinned {
        eprintln!("note: now pinned by GPUSTACK_NOW={} (unset it to use the clock)", v.trim());
    }
    if g.json {
        let mut j = t.to_json();
        if let Json::Object(m) = &mut j {
            m.insert("now_pinned".into(), Json::Bool(pinned.is_some()));
            m.insert("node_groups".into(), serde_json::to_value(&groups)?);
            m.insert("exit_code".into(), Json::from(code));
        }
        outln!("{}", serde_json::to_string_pretty(&j)?)?;
    } else {
        out!("{}", render(&t, &groups))?;
    }
    Ok(code)
}

/// One screen: reservations, node groups, the idle total.
pub fn render(t: &Timeline, groups: &[GroupStatus]) -> String {
    let now = t.now;
    let mut o = format!("Status of stack {} ({}) at {} UTC\n\n", t.stack, t.region, short(now));
    if t.reservations.is_empty() {
        o.push_str("Reservations: none\n");
    } else {
        o.push_str(&format!(
            "{:<34} {:<16} {:<11} {:>9} {:>12}  {}\n",
            "RESERVATION", "TYPE", "STATE", "USED", "IDLE $/h", "TIME LEFT"
        ));
        for r in &t.reservations {
            let used = match (r.is_active(now), r.in_use) {
                (true, Some(u)) => format!("{u}/{}", r.total),
                (true, None) => format!("?/{}", r.total),
                _ => format!("-/{}", r.total),
            };
            let idle = match (r.idle(now), r.idle_usd_per_hour(now)) {
                _ if !r.is_active(now) => "-".to_string(),
                (Some(0), _) => "0".into(),
                (Some(_), Some(c)) => usd(c),
                (Some(n), None) => format!("{n} unpriced"),
                (None, _) => "?".into(),
            };
            let left = if r.is_scheduled(now) {
                format!(
                    "starts in {}",
                    human_hours(r.start.map(|s| s.duration_since(now).as_secs_f64() / 3600.0).unwrap_or(0.0))
                )
            } else {
                match (r.hours_left(now), r.end) {
                    (Some(0.0), _) => "ended".into(),
                    (Some(h), Some(e)) => {
                        format!("{} (ends {}){}", human_hours(h), short(e), if r.ends_soon(now) { " ⚠" } else { "" })
                    }
                    _ => "no end date".into(),
                }
            };
            o.push_str(&format!(
                "{:<34} {:<16} {:<11} {:>9} {:>12}  {}\n",
                r.address,
                r.instance_type,
                if r.state.is_empty() { "?" } else { &r.state },
                used,
                idle,
                left
            ));
        }
    }
    if !groups.is_empty() {
        // "IN SERVICE", not "READY": Auto Scaling's InService + Healthy, not Kubernetes node
        // Ready (an instance whose join failed is still in service; review timeline minor 12).
        o.push_str(&format!(
            "\n{:<34} {:<11} {:>7} {:>10}  {}\n",
            "NODE GROUP", "STATUS", "DESIRED", "IN SERVICE", "HEALTH"
        ));
        for gs in groups {
            let health = if gs.issues.is_empty() { "ok".to_string() } else { gs.issues.join("; ") };
            o.push_str(&format!(
                "{:<34} {:<11} {:>7} {:>10}  {}\n",
                gs.address,
                gs.status,
                gs.desired.map(|d| d.to_string()).unwrap_or("-".into()),
                gs.ready.map(|d| d.to_string()).unwrap_or("?".into()),
                health
            ));
        }
    }
    o.push('\n');
    if let Some(idle) = t.idle_summary() {
        o.push_str(&format!("Idle reserved capacity: {idle} (exit {EXIT_IDLE})\n"));
    } else {
        o.push_str("Idle reserved capacity: none\n");
    }
    o
}

/// The stack's managed and self-managed node groups, live.
async fn node_groups(ctx: &Ctx, state: &crate::state::State) -> Result<Vec<GroupStatus>, AwsError> {
    let mut out = vec![];
    for (address, r) in &state.resources {
        match r.kind.as_str() {
            "node_group" => {
                let Some((cluster, name)) = r.id.split_once(':') else { continue };
                let request = ctx.eks.describe_nodegroup().cluster_name(cluster).nodegroup_name(name);
                let found = ctx.call(Service::Eks, "DescribeNodegroup", request.send()).await.absent_ok()?;
                let Some(n) = found.and_then(|o| o.nodegroup) else {
                    out.push(GroupStatus {
                        address: address.clone(),
                        name: name.into(),
                        desired: None,
                        ready: None,
                        status: "not found".into(),
                        issues: vec![],
                    });
                    continue;
                };
                let asgs: Vec<String> = n
                    .resources()
                    .map(|r| r.auto_scaling_groups().iter().filter_map(|a| a.name().map(str::to_string)).collect())
                    .unwrap_or_default();
                let issues = n
                    .health()
                    .map(|h| h.issues())
                    .unwrap_or_default()
                    .iter()
                    .map(|i| {
                        format!(
                            "{}: {}",
                            i.code().map(|c| c.as_str()).unwrap_or("issue"),
                            i.message().unwrap_or_default()
                        )
                    })
                    .collect();
                out.push(GroupStatus {
                    address: address.clone(),
                    name: name.into(),
                    desired: n.scaling_config().and_then(|s| s.desired_size()).map(i64::from),
                    ready: ready(ctx, &asgs).await?,
                    status: n.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
                    issues,
                });
            }
            "self_managed_node_group" => {
                let request = ctx.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&r.id);
                let found = ctx.call(Service::AutoScaling, "DescribeAutoScalingGroups", request.send()).await?;
                let asg = found.auto_scaling_groups().first();
                out.push(GroupStatus {
                    address: address.clone(),
                    name: r.id.clone(),
                    desired: asg.and_then(|a| a.desired_capacity()).map(i64::from),
                    ready: asg.map(|a| in_service(a.instances())),
                    status: asg.map(|a| a.status().unwrap_or("ACTIVE").to_string()).unwrap_or("not found".into()),
                    issues: vec![],
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

fn in_service(instances: &[aws_sdk_autoscaling::types::Instance]) -> i64 {
    instances
        .iter()
        .filter(|i| {
            i.lifecycle_state() == Some(&aws_sdk_autoscaling::types::LifecycleState::InService)
                && i.health_status() == Some("Healthy")
        })
        .count() as i64
}

/// InService, healthy instances across the node group's Auto Scaling groups; `None` when
/// EKS names none or Auto Scaling knows none of them.
async fn ready(ctx: &Ctx, asgs: &[String]) -> Result<Option<i64>, AwsError> {
    if asgs.is_empty() {
        return Ok(None);
    }
    let request = ctx.autoscaling.describe_auto_scaling_groups().set_auto_scaling_group_names(Some(asgs.to_vec()));
    let found = ctx.call(Service::AutoScaling, "DescribeAutoScalingGroups", request.send()).await?;
    if found.auto_scaling_groups().is_empty() {
        return Ok(None);
    }
    Ok(Some(found.auto_scaling_groups().iter().map(|a| in_service(a.instances())).sum()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::timeline::tests::sample;

    /// Review timeline M4: IN SERVICE counts instances that are InService and Healthy, nothing
    /// else (Auto Scaling `Instance.LifecycleState` / `HealthStatus`, botocore autoscaling).
    #[test]
    fn in_service_counts_in_service_and_healthy_only() {
        use aws_sdk_autoscaling::types::{Instance, LifecycleState};
        let i = |state: LifecycleState, health: &str| {
            Instance::builder().instance_id("i-1").lifecycle_state(state).health_status(health).build()
        };
        let all = [
            i(LifecycleState::InService, "Healthy"),
            i(LifecycleState::InService, "Healthy"),
            i(LifecycleState::InService, "Unhealthy"),
            i(LifecycleState::Pending, "Healthy"),
            i(LifecycleState::Terminating, "Healthy"),
        ];
        assert_eq!(in_service(&all), 2);
        assert_eq!(in_service(&[]), 0);
    }

    #[test]
    fn one_screen() {
        let groups = vec![GroupStatus {
            address: "node_group.train".into(),
            name: "cap-train".into(),
            desired: Some(2),
            ready: Some(1),
            status: "DEGRADED".into(),
            issues: vec!["InsufficientFreeAddresses: subnet-1 has no free addresses".into()],
        }];
        insta::assert_snapshot!(render(&sample(), &groups));
    }
}
