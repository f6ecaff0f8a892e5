//! `image_cache`: a Bottlerocket data-volume snapshot with container images already
//! pulled, so GPU nodes skip minutes of image pulls at every cold start. What
//! aws-samples/bottlerocket-images-cache does by hand, as a resource. This file is the
//! kind (schema, checks, refresh of the snapshots, tags, delete); `build` makes one
//! snapshot on a builder instance (the Bottlerocket AMI from SSM, "latest" resolved once
//! and pinned) and undoes a failed build; `pull` is the command that pulls one image.

mod build;
mod pull;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Snapshot, SnapshotState};

use self::build::{Build, builders, terminate};
use super::{Create, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS};
use crate::aws::{Absent, AwsError, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct ImageCache;

/// The snapshot's tag that says which Bottlerocket release it was built on.
const VERSION_TAG: &str = "gpustack:bottlerocket-version";

const ATTRS: &[Attr] = &[
    Attr::req("images", Ty::List(&Ty::Str), OnChange::Replace),
    Attr::req("variant", Ty::Str, OnChange::Replace),
    Attr::opt("bottlerocket_version", Ty::Str, Default::Str("latest"), OnChange::Replace),
    Attr::opt("architecture", Ty::Enum(&["x86_64", "arm64"]), Default::Str("x86_64"), OnChange::Replace),
    Attr::opt("volume_size_gib", Ty::Int, Default::None, OnChange::Replace),
    Attr::req("subnet", Ty::Str, OnChange::Update),
    Attr::req("builder_instance_profile", Ty::Str, OnChange::Update),
    // Default: m6i.xlarge for x86_64, m7g.xlarge for arm64 (the AMI's architecture must match).
    Attr::opt("builder_instance_type", Ty::Str, Default::None, OnChange::Update),
    TAGS,
];

impl Schema for ImageCache {
    fn name(&self) -> &'static str {
        "image_cache"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("snapshot_id", Ty::Str), ("bottlerocket_version", Ty::Str), ("volume_size_gib", Ty::Int)]
    }
}

#[async_trait]
impl Kind for ImageCache {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ssm:GetParameter",
            "ec2:RunInstances",
            "ec2:DescribeInstances",
            "ec2:StopInstances",
            "ec2:TerminateInstances",
            "ec2:CreateSnapshot",
            "ec2:DeleteSnapshot",
            "ec2:DescribeSnapshots",
            "ec2:DescribeVolumes",
            "ssm:DescribeInstanceInformation",
            "ssm:SendCommand",
            "ssm:GetCommandInvocation",
            "ssm:ListCommandInvocations",
            "iam:PassRole",
        ]
    }
    fn replace_order(&self) -> ReplaceOrder {
        // The new snapshot first; dependents move to it; then the old one is deleted.
        ReplaceOrder::CreateBeforeDestroy
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        let images = r.attrs.get("images").map(|e| (e.resolve(&|_| Value::Unknown), e.span.clone()));
        if let Some((Value::List(l), span)) = images {
            if l.is_empty() {
                diags.push(
                    Diagnostic::error("`images` is empty: there is nothing to cache", span.clone())
                        .help("list the images your pods start, e.g. images = [\"nvcr.io/nvidia/pytorch:24.12-py3\"]"),
                );
            }
            for v in l.iter().filter_map(Value::as_str) {
                if v.contains(char::is_whitespace) || v.is_empty() || v.contains(['\'', '"', ';', '|', '&', '$', '`']) {
                    diags.push(
                        Diagnostic::error(format!("`{v}` is not a container image reference"), span.clone())
                            .help("write registry/repository:tag or @sha256:digest"),
                    );
                }
            }
        }
        if let Some(e) = r.attrs.get("volume_size_gib")
            && let Some(n) = e.as_literal().and_then(Value::as_int)
            && !(1..=16384).contains(&n)
        {
            diags.push(Diagnostic::error(format!("`volume_size_gib` must be 1 to 16384, found {n}"), e.span.clone()));
        }
        if let Some(e) = r.attrs.get("variant")
            && let Some(v) = e.as_literal().and_then(Value::as_str)
            && !v.starts_with("aws-k8s-")
        {
            diags.push(
                Diagnostic::error(
                    format!("`variant` \"{v}\" is not a Bottlerocket Kubernetes variant"),
                    e.span.clone(),
                )
                .help("use the variant of your nodes, e.g. \"aws-k8s-1.31-nvidia\""),
            );
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        inputs.entry("volume_size_gib".into()).or_insert(Value::Int(50));
        let arm = inputs.get("architecture").and_then(Value::as_str) == Some("arm64");
        inputs.entry("builder_instance_type".into()).or_insert(Value::str(if arm {
            "m7g.xlarge"
        } else {
            "m6i.xlarge"
        }));
    }

    /// A snapshot's contents cannot drift; only its tags are read back.
    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        if let Some(t) = observed.get("tags") {
            cur.insert("tags".into(), t.clone());
        }
        cur
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        // A builder left by a crashed run is ours to clean up first.
        let left = builders(ctx, req.address).await?;
        if !left.is_empty() {
            (req.report)(&format!("terminating {} builder(s) left by an interrupted run", left.len()));
            terminate(ctx, &left).await?;
        }
        let mut b =
            Build { ctx, address: req.address, inputs: req.inputs, report: req.report, instance: None, snapshot: None };
        match b.run(req.token).await {
            Ok(rec) => Ok(rec),
            Err(e) => {
                let cleaned = b.clean_up().await;
                Err(AwsError { detail: format!("{}; {cleaned}", e.detail), ..e })
            }
        }
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let pages =
            ctx.ec2.describe_snapshots().owner_ids("self").filters(tags::stack_filter(ctx)).into_paginator().send();
        let snaps =
            ctx.all_pages(Service::Ec2, "DescribeSnapshots", pages, |p| p.snapshots.unwrap_or_default()).await?;
        let mut out = vec![];
        for snap in &snaps {
            // A snapshot still being made belongs to a build in flight (or a crashed one).
            if snap.state() != Some(&SnapshotState::Completed) {
                continue;
            }
            let all = tags::ec2_map(snap.tags());
            let rec = recorded(snap);
            out.push(Observed::tagged(&all, rec, Attrs::from([("tags".into(), tags::observed(&all))])));
        }
        Ok(out)
    }

    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        _changed: &[String],
    ) -> Result<Recorded> {
        // Builder settings only matter for the next build; tags go to the snapshot.
        tags::sync_ec2(ctx, id, old, new).await?;
        let snap = describe_snapshot(ctx, id).await?;
        Ok(snap.as_ref().map(recorded).unwrap_or_else(|| Recorded::id_only(id)))
    }

    async fn delete(&self, ctx: &Ctx, address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let left = builders(ctx, address).await?;
        terminate(ctx, &left).await?;
        let request = ctx.ec2.delete_snapshot().snapshot_id(id);
        ctx.call(Service::Ec2, "DeleteSnapshot", request.send()).await.absent_ok()?;
        Ok(())
    }
}

/// One snapshot by id; None when it is gone.
async fn describe_snapshot(ctx: &Ctx, id: &str) -> Result<Option<Snapshot>> {
    let out = ctx.call(Service::Ec2, "DescribeSnapshots", ctx.ec2.describe_snapshots().snapshot_ids(id).send()).await;
    Ok(out.absent_ok()?.and_then(|o| o.snapshots().first().cloned()))
}

fn recorded(snap: &Snapshot) -> Recorded {
    let id = snap.snapshot_id().unwrap_or_default().to_string();
    let version = tags::ec2_map(snap.tags()).get(VERSION_TAG).cloned().unwrap_or_default();
    Recorded {
        outputs: Attrs::from([
            ("snapshot_id".into(), Value::str(id.clone())),
            ("bottlerocket_version".into(), Value::str(version)),
            ("volume_size_gib".into(), Value::Int(snap.volume_size().unwrap_or(0).into())),
        ]),
        id,
    }
}
