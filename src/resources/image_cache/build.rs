//! One image-cache build and its undoing: resolve the Bottlerocket AMI → launch one tagged
//! builder → wait for SSM → stop kubelet → pull every image (`pull`) → stop → snapshot
//! /dev/xvdb → wait → terminate. A failure at any step terminates the builder, deletes a
//! half-made snapshot and names the step and the image. Builders are found by their tags,
//! so one left by a crash is terminated before the next build.

use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{
    BlockDeviceMapping, EbsBlockDevice, Filter, HttpTokensState, IamInstanceProfileSpecification, Instance,
    InstanceMetadataOptionsRequest, InstanceStateName, InstanceType, ResourceType, Snapshot, SnapshotState, Tag,
    TagSpecification, VolumeType,
};

use super::{VERSION_TAG, describe_snapshot, pull, recorded};
use crate::aws::wait::{Status, until_status};
use crate::aws::{Absent, AwsError, Ctx, Service, ami, ssm, tags};
use crate::resources::{Recorded, Result, i32_of, int_attr, str_attr};
use crate::value::{Attrs, Value};

/// The tag that tells a builder instance from the stack's other instances.
const ROLE: &str = "gpustack:role";
const BUILDER: &str = "image-cache-builder";

/// How long each wait may take before the build is abandoned (and cleaned up).
const ONLINE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
const PULL_TIMEOUT: Duration = Duration::from_secs(45 * 60);
const INSTANCE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(120 * 60);
/// How long a new instance profile may take to reach EC2 before RunInstances accepts it.
const PROFILE_PROPAGATION: Duration = Duration::from_secs(120);

/// One build: what it has made so far, so a failure can undo it.
pub struct Build<'a> {
    pub ctx: &'a Ctx,
    pub address: &'a str,
    pub inputs: &'a Attrs,
    pub report: &'a (dyn Fn(&str) + Send + Sync),
    pub instance: Option<String>,
    pub snapshot: Option<String>,
}

/// Names the step a failure happened in.
fn at(step: &str) -> impl FnOnce(AwsError) -> AwsError + '_ {
    move |e| AwsError {
        operation: "image cache build",
        detail: format!("while {step} ({} failed: {})", e.operation, e.detail),
        code: e.code,
    }
}

impl Build<'_> {
    pub async fn run(&mut self, token: &str) -> Result<Recorded> {
        let (ctx, inp) = (self.ctx, self.inputs);
        let arch = str_attr(inp, "architecture");
        (self.report)("resolving the Bottlerocket AMI");
        let variant = builder_variant(str_attr(inp, "variant"));
        let ami = ami::bottlerocket(ctx, &variant, arch, str_attr(inp, "bottlerocket_version"))
            .await
            .map_err(at("resolving the Bottlerocket AMI"))?;
        let version = ami.version;
        (self.report)(&format!(
            "launching the builder ({}, {variant} {version})",
            str_attr(inp, "builder_instance_type")
        ));
        let id = self.launch(&ami.id, token).await.map_err(at("launching the builder"))?;
        self.instance = Some(id.clone());
        (self.report)(&format!("waiting for {id} to come online in SSM"));
        ssm::wait_online(ctx, &id, &format!("builder {id} in SSM"), ONLINE_TIMEOUT)
            .await
            .map_err(at("waiting for the builder to come online in SSM"))?;
        (self.report)("stopping kubelet");
        let stop_kubelet = "apiclient exec admin sheltie systemctl stop kubelet";
        ssm::run_shell(ctx, &id, stop_kubelet, "stop kubelet", PULL_TIMEOUT).await.map_err(at("stopping kubelet"))?;
        let images: Vec<String> = inp
            .get("images")
            .and_then(Value::as_list)
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        let platform = if arch == "arm64" { "linux/arm64" } else { "linux/amd64" };
        for (n, image) in images.iter().enumerate() {
            let step = format!("pulling image {}/{}: {image}", n + 1, images.len());
            (self.report)(&step);
            let cmd = pull::command(image, platform);
            ssm::run_shell(ctx, &id, &cmd, &format!("pull {image}"), PULL_TIMEOUT).await.map_err(at(&step))?;
        }
        (self.report)("stopping the builder");
        stop(ctx, &id).await.map_err(at("stopping the builder"))?;
        let volume = data_volume(ctx, &id).await.map_err(at("finding the builder's /dev/xvdb volume"))?;
        (self.report)(&format!("snapshotting /dev/xvdb ({volume})"));
        let snap = self.snapshot(&volume, &version, &images).await.map_err(at("snapshotting /dev/xvdb"))?;
        self.snapshot = Some(snap.clone());
        (self.report)(&format!("waiting for {snap} to complete"));
        let done = wait_snapshot(ctx, &snap).await.map_err(at("waiting for the snapshot to complete"))?;
        (self.report)("terminating the builder");
        terminate(ctx, std::slice::from_ref(&id)).await.map_err(at("terminating the builder"))?;
        self.instance = None;
        Ok(recorded(&done))
    }

    async fn launch(&self, ami: &str, token: &str) -> Result<String> {
        let (ctx, inp) = (self.ctx, self.inputs);
        let mut t = tags::all_tags(ctx, self.address, inp);
        t.push((ROLE.into(), BUILDER.into()));
        t.push(("Name".into(), format!("{}-{}-builder", ctx.stack, self.address.replace('.', "-"))));
        let tagged = |rt: ResourceType| {
            TagSpecification::builder()
                .resource_type(rt)
                .set_tags(Some(t.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()))
                .build()
        };
        let disk = |device: &str, gib: i32, fast: bool| {
            let mut ebs = EbsBlockDevice::builder()
                .volume_size(gib)
                .volume_type(VolumeType::Gp3)
                .delete_on_termination(true)
                .encrypted(true);
            if fast {
                ebs = ebs.iops(4000).throughput(1000);
            }
            BlockDeviceMapping::builder().device_name(device).ebs(ebs.build()).build()
        };
        let request = ctx
            .ec2
            .run_instances()
            .image_id(ami)
            .instance_type(InstanceType::from(str_attr(inp, "builder_instance_type")))
            .min_count(1)
            .max_count(1)
            .subnet_id(str_attr(inp, "subnet"))
            .iam_instance_profile(
                IamInstanceProfileSpecification::builder().name(str_attr(inp, "builder_instance_profile")).build(),
            )
            .block_device_mappings(disk("/dev/xvda", 10, false))
            .block_device_mappings(disk("/dev/xvdb", i32_of(int_attr(inp, "volume_size_gib").unwrap_or(50)), true))
            // The admin container is how commands reach containerd (apiclient exec admin sheltie).
            .user_data(aws_smithy_types::base64::encode("[settings.host-containers.admin]\nenabled = true\n"))
            .metadata_options(InstanceMetadataOptionsRequest::builder().http_tokens(HttpTokensState::Required).build())
            .tag_specifications(tagged(ResourceType::Instance))
            .tag_specifications(tagged(ResourceType::Volume))
            // Idempotent: a retried launch returns the same instance.
            .client_token(token);
        // A new instance profile takes a while to reach EC2: RunInstances answers
        // "Invalid IAM Instance Profile name" (or "has no associated IAM Roles") for a minute or
        // two after it was made (karpenter-provider-aws#5018, packer#9810), and the SDK does not
        // retry that. Retry it with backoff for about two minutes; nothing was launched.
        let deadline = Instant::now() + PROFILE_PROPAGATION;
        let mut pause = Duration::from_secs(1);
        let out = loop {
            match ctx.call(Service::Ec2, "RunInstances", request.clone().send()).await {
                Err(e) if profile_not_ready(&e) && Instant::now() + pause < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(15));
                }
                other => break other?,
            }
        };
        out.instances().first().and_then(|x| x.instance_id()).map(str::to_string).ok_or_else(|| AwsError {
            operation: "RunInstances",
            code: None,
            detail: "RunInstances answered without an instance".into(),
        })
    }

    async fn snapshot(&self, volume: &str, version: &str, images: &[String]) -> Result<String> {
        let (ctx, inp) = (self.ctx, self.inputs);
        let mut t = tags::all_tags(ctx, self.address, inp);
        t.push((VERSION_TAG.into(), version.to_string()));
        let spec = TagSpecification::builder()
            .resource_type(ResourceType::Snapshot)
            .set_tags(Some(t.into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()))
            .build();
        let mut description = format!("gpustack image cache {}: {}", self.address, images.join(", "));
        description.truncate(255);
        let request = ctx.ec2.create_snapshot().volume_id(volume).description(description).tag_specifications(spec);
        let out = ctx.call(Service::Ec2, "CreateSnapshot", request.send()).await?;
        Ok(out.snapshot_id().unwrap_or_default().to_string())
    }

    /// Undoes a failed build: the builder (and with it its volumes) and any snapshot.
    pub async fn clean_up(&self) -> String {
        let mut done = vec![];
        if let Some(id) = &self.instance {
            match terminate(self.ctx, std::slice::from_ref(id)).await {
                Ok(()) => done.push(format!("the builder {id} was terminated")),
                Err(e) => {
                    done.push(format!("terminating the builder {id} failed ({}); terminate it by hand", e.detail))
                }
            }
        }
        if let Some(snap) = &self.snapshot {
            let ctx = self.ctx;
            match ctx.call(Service::Ec2, "DeleteSnapshot", ctx.ec2.delete_snapshot().snapshot_id(snap).send()).await {
                Ok(_) => done.push(format!("the unfinished snapshot {snap} was deleted")),
                Err(e) => done
                    .push(format!("deleting the unfinished snapshot {snap} failed ({}); delete it by hand", e.detail)),
            }
        }
        done.push("no snapshot was recorded".into());
        done.join("; ")
    }
}

/// RunInstances' refusal of an instance profile IAM has not propagated yet.
fn profile_not_ready(e: &AwsError) -> bool {
    e.has_code("InvalidParameterValue")
        && (e.detail.contains("Invalid IAM Instance Profile") || e.detail.contains("has no associated IAM Roles"))
}

/// The variant the builder boots: the nodes' variant without `-nvidia`. NVIDIA variants do
/// not reach `configured.target` without an NVIDIA GPU, so SSM never comes online on a
/// general-purpose builder (bottlerocket-kernel-kit#321: "fail as expected if no NVIDIA
/// devices are present"; bottlerocket#4435: images-cache `snapshot.sh` hangs at SSM with an
/// -nvidia AMI). The snapshot holds only containerd's data root, which both variants share
/// (same kernel, containerd and data-partition features; aws-samples/bottlerocket-images-cache
/// builds on the plain `aws-k8s-*` variant for every node).
pub fn builder_variant(variant: &str) -> String {
    variant.replace("-nvidia", "")
}

async fn instance(ctx: &Ctx, id: &str) -> Result<Option<Instance>> {
    let out = ctx.call(Service::Ec2, "DescribeInstances", ctx.ec2.describe_instances().instance_ids(id).send()).await;
    Ok(out.absent_ok()?.and_then(|o| o.reservations().iter().flat_map(|r| r.instances()).next().cloned()))
}

fn state(i: Option<&Instance>) -> Option<&InstanceStateName> {
    i.and_then(|i| i.state()).and_then(|s| s.name())
}

async fn stop(ctx: &Ctx, id: &str) -> Result<()> {
    ctx.call(Service::Ec2, "StopInstances", ctx.ec2.stop_instances().instance_ids(id).send()).await?;
    until_status(
        &format!("builder {id} to stop"),
        INSTANCE_TIMEOUT,
        || instance(ctx, id),
        |i| match state(i.as_ref()) {
            Some(InstanceStateName::Stopped) => Status::Reached(()),
            other => Status::Pending(other.map_or("unknown".into(), |s| s.as_str().to_string())),
        },
    )
    .await
}

async fn data_volume(ctx: &Ctx, id: &str) -> Result<String> {
    let inst = instance(ctx, id).await?;
    inst.iter()
        .flat_map(|i| i.block_device_mappings())
        .find(|m| m.device_name() == Some("/dev/xvdb"))
        .and_then(|m| m.ebs().and_then(|e| e.volume_id()))
        .map(str::to_string)
        .ok_or_else(|| AwsError {
            operation: "DescribeInstances",
            code: None,
            detail: format!("{id} has no /dev/xvdb volume"),
        })
}

async fn wait_snapshot(ctx: &Ctx, id: &str) -> Result<Snapshot> {
    until_status(
        &format!("snapshot {id}"),
        SNAPSHOT_TIMEOUT,
        || describe_snapshot(ctx, id),
        |snap| {
            let Some(snap) = snap else {
                return Status::Failed(AwsError {
                    operation: "DescribeSnapshots",
                    code: None,
                    detail: format!("snapshot {id} disappeared"),
                });
            };
            match snap.state() {
                Some(SnapshotState::Completed) => Status::Reached(snap),
                Some(SnapshotState::Error) => Status::Failed(AwsError {
                    operation: "CreateSnapshot",
                    code: Some("error".into()),
                    detail: format!("snapshot {id} failed: {}", snap.state_message().unwrap_or_default()),
                }),
                _ => Status::Pending(format!("pending ({})", snap.progress().unwrap_or("0%"))),
            }
        },
    )
    .await
}

/// Builders of `address` not yet terminated.
pub async fn builders(ctx: &Ctx, address: &str) -> Result<Vec<String>> {
    let pages = ctx
        .ec2
        .describe_instances()
        .filters(tags::stack_filter(ctx))
        .filters(Filter::builder().name(format!("tag:{}", tags::ADDRESS)).values(address).build())
        .filters(Filter::builder().name(format!("tag:{ROLE}")).values(BUILDER).build())
        .filters(
            Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .values("stopping")
                .values("stopped")
                .build(),
        )
        .into_paginator()
        .send();
    let reservations =
        ctx.all_pages(Service::Ec2, "DescribeInstances", pages, |p| p.reservations.unwrap_or_default()).await?;
    Ok(reservations.iter().flat_map(|r| r.instances()).filter_map(|i| i.instance_id().map(str::to_string)).collect())
}

/// Terminates instances and waits until they are gone (their volumes go with them).
pub async fn terminate(ctx: &Ctx, ids: &[String]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let request = ctx.ec2.terminate_instances().set_instance_ids(Some(ids.to_vec()));
    ctx.call(Service::Ec2, "TerminateInstances", request.send()).await.absent_ok()?;
    for id in ids {
        let what = format!("builder {id} to terminate");
        until_status(
            &what,
            INSTANCE_TIMEOUT,
            || instance(ctx, id),
            |i| match state(i.as_ref()) {
                None | Some(InstanceStateName::Terminated) => Status::Reached(()),
                Some(other) => Status::Pending(other.as_str().to_string()),
            },
        )
        .await?;
    }
    Ok(())
}
