//! `image_cache`: a Bottlerocket data-volume snapshot with container images already
//! pulled, so GPU nodes skip minutes of image pulls at every cold start. What
//! aws-samples/bottlerocket-images-cache does by hand, as a resource:
//! resolve the Bottlerocket AMI from SSM ("latest" resolved once and pinned) → launch
//! one tagged builder → wait for SSM → stop kubelet → pull every image with `ctr`
//! through `apiclient exec admin sheltie` (private ECR with a token) → stop → snapshot
//! /dev/xvdb → wait → terminate. A failure at any step terminates the builder, deletes
//! a half-made snapshot and names the step and the image; a builder left by a crash is
//! found by its tags and terminated before the next build.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    BlockDeviceMapping, EbsBlockDevice, Filter, HttpTokensState, IamInstanceProfileSpecification,
    InstanceMetadataOptionsRequest, InstanceStateName, InstanceType, ResourceType, Snapshot, SnapshotState, Tag,
    TagSpecification, VolumeType,
};
use aws_sdk_ssm::types::{CommandInvocationStatus, InstanceInformationStringFilter, PingStatus};

use super::{Create, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, i32_of, int_attr, str_attr};
use crate::aws::wait::{Poll, until};
use crate::aws::{AwsError, Ctx, Service, err, gone_is_ok, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct ImageCache;

const ROLE: &str = "gpustack:role";
const BUILDER: &str = "image-cache-builder";
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

/// How long each wait may take before the build is abandoned (and cleaned up).
const ONLINE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
const PULL_TIMEOUT: Duration = Duration::from_secs(45 * 60);
const INSTANCE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(120 * 60);

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
            out.push(Observed {
                address: all.get(tags::ADDRESS).cloned(),
                id: rec.id,
                attrs: Attrs::from([("tags".into(), tags::observed(&all))]),
                outputs: rec.outputs,
                retained: false,
            });
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
        Ok(snap.as_ref().map(recorded).unwrap_or_else(|| Recorded { id: id.to_string(), outputs: Attrs::new() }))
    }

    async fn delete(&self, ctx: &Ctx, address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let left = builders(ctx, address).await?;
        terminate(ctx, &left).await?;
        let _p = ctx.permit(Service::Ec2).await;
        gone_is_ok(ctx.ec2.delete_snapshot().snapshot_id(id).send().await.map(|_| ()).map_err(err("DeleteSnapshot")))
    }
}

/// One build: what it has made so far, so a failure can undo it.
struct Build<'a> {
    ctx: &'a Ctx,
    address: &'a str,
    inputs: &'a Attrs,
    report: &'a (dyn Fn(&str) + Send + Sync),
    instance: Option<String>,
    snapshot: Option<String>,
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
    async fn run(&mut self, token: &str) -> Result<Recorded> {
        let (ctx, inp) = (self.ctx, self.inputs);
        let arch = str_attr(inp, "architecture");
        (self.report)("resolving the Bottlerocket AMI");
        let variant = builder_variant(str_attr(inp, "variant"));
        let (ami, version) = resolve_ami(ctx, &variant, arch, str_attr(inp, "bottlerocket_version"))
            .await
            .map_err(at("resolving the Bottlerocket AMI"))?;
        (self.report)(&format!(
            "launching the builder ({}, {variant} {version})",
            str_attr(inp, "builder_instance_type")
        ));
        let id = self.launch(&ami, token).await.map_err(at("launching the builder"))?;
        self.instance = Some(id.clone());
        (self.report)(&format!("waiting for {id} to come online in SSM"));
        wait_online(ctx, &id).await.map_err(at("waiting for the builder to come online in SSM"))?;
        (self.report)("stopping kubelet");
        run_command(ctx, &id, "apiclient exec admin sheltie systemctl stop kubelet", "stop kubelet")
            .await
            .map_err(at("stopping kubelet"))?;
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
            let cmd = pull_command(image, platform);
            run_command(ctx, &id, &cmd, &format!("pull {image}")).await.map_err(at(&step))?;
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
        let call = ctx
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
        let deadline = std::time::Instant::now() + PROFILE_PROPAGATION;
        let mut pause = std::time::Duration::from_secs(1);
        let out = loop {
            let sent = {
                let _p = ctx.permit(Service::Ec2).await;
                call.clone().send().await.map_err(err("RunInstances"))
            };
            match sent {
                Err(e) if profile_not_ready(&e) && std::time::Instant::now() + pause < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(15));
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
        let _p = ctx.permit(Service::Ec2).await;
        let out = ctx
            .ec2
            .create_snapshot()
            .volume_id(volume)
            .description(description)
            .tag_specifications(spec)
            .send()
            .await
            .map_err(err("CreateSnapshot"))?;
        Ok(out.snapshot_id().unwrap_or_default().to_string())
    }

    /// Undoes a failed build: the builder (and with it its volumes) and any snapshot.
    async fn clean_up(&self) -> String {
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
            let _p = self.ctx.permit(Service::Ec2).await;
            match self.ctx.ec2.delete_snapshot().snapshot_id(snap).send().await.map_err(err("DeleteSnapshot")) {
                Ok(_) => done.push(format!("the unfinished snapshot {snap} was deleted")),
                Err(e) => done
                    .push(format!("deleting the unfinished snapshot {snap} failed ({}); delete it by hand", e.detail)),
            }
        }
        done.push("no snapshot was recorded".into());
        done.join("; ")
    }
}

/// The AMI and the version it is: `latest` is resolved here (and pinned by the outputs).
async fn resolve_ami(ctx: &Ctx, variant: &str, arch: &str, version: &str) -> Result<(String, String)> {
    let base = format!("/aws/service/bottlerocket/{variant}/{arch}/{version}");
    let get = |name: String| async move {
        let _p = ctx.permit(Service::Ssm).await;
        match ctx.ssm.get_parameter().name(&name).send().await.map_err(err("GetParameter")) {
            Ok(o) => Ok(o.parameter().and_then(|p| p.value()).unwrap_or_default().to_string()),
            Err(e) if e.code.as_deref() == Some("ParameterNotFound") => Err(AwsError {
                detail: format!(
                    "{}: Bottlerocket publishes no {name}; check `variant`, `architecture` and `bottlerocket_version`",
                    e.detail
                ),
                ..e
            }),
            Err(e) => Err(e),
        }
    };
    let ami = get(format!("{base}/image_id")).await?;
    let pinned = if version == "latest" { get(format!("{base}/image_version")).await? } else { version.to_string() };
    Ok((ami, pinned))
}

/// How long a new instance profile may take to reach EC2 before RunInstances accepts it.
const PROFILE_PROPAGATION: std::time::Duration = std::time::Duration::from_secs(120);

/// RunInstances' refusal of an instance profile IAM has not propagated yet.
fn profile_not_ready(e: &AwsError) -> bool {
    e.code.as_deref() == Some("InvalidParameterValue")
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

/// Where Bottlerocket's aws-k8s variants install the kubelet ECR credential provider
/// (bottlerocket-core-kit `packages/ecr-credential-provider-1.31/*.spec`, and kubelet's
/// `--image-credential-provider-bin-dir /usr/libexec/kubernetes/kubelet/plugins`).
const ECR_PROVIDER: &str = "/usr/libexec/kubernetes/kubelet/plugins/ecr-credential-provider";

/// The SSM command that pulls one image into containerd's k8s.io namespace. A private ECR
/// image (`<account>.dkr.ecr.<region>.amazonaws.com/…`) is pulled with a password that the
/// builder fetches itself, with its own role, from the image's region: the kubelet credential
/// provider reads a `CredentialProviderRequest` on stdin and answers with the registry's
/// `{username, password}` (kubernetes/cloud-provider-aws `cmd/ecr-credential-provider`; it
/// takes the region from the image's host name). So no password is ever part of SendCommand's
/// parameters, which SSM keeps and `ListCommands` returns. The host has no shell
/// (Bottlerocket SECURITY_FEATURES.md), so the piping runs in the admin container, which has
/// bash and jq, and `sheltie` runs each host binary. Every other registry is pulled anonymously.
pub fn pull_command(image: &str, platform: &str) -> String {
    let pull = "sheltie ctr -a /run/containerd/containerd.sock -n k8s.io images pull --label io.cri-containerd.image=managed --platform";
    if !is_private_ecr(image) {
        return format!("apiclient exec admin {pull} {platform} {image}");
    }
    // Single quotes inside the script are safe: `shell_quote` escapes them for the outer word.
    let script = format!(
        r#"set -euo pipefail; REQ=$(jq -cn --arg i "$1" '{{apiVersion:"credentialprovider.kubelet.k8s.io/v1",kind:"CredentialProviderRequest",image:$i}}'); PW=$(printf '%s' "$REQ" | sheltie {ECR_PROVIDER} | jq -er '.auth[].password'); exec {pull} "$2" --user "AWS:$PW" "$1""#
    );
    format!(
        "apiclient exec -T admin bash -c {} _ {} {}",
        shell_quote(&script),
        shell_quote(image),
        shell_quote(platform)
    )
}

/// `<account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]/…`
fn is_private_ecr(image: &str) -> bool {
    let host = image.split('/').next().unwrap_or_default();
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() >= 6 && parts[1] == "dkr" && parts[2].starts_with("ecr") && parts[4] == "amazonaws"
}

/// One shell word: single-quoted, with any `'` closed, escaped and reopened.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

async fn wait_online(ctx: &Ctx, id: &str) -> Result<()> {
    until(&format!("builder {id} in SSM"), ONLINE_TIMEOUT, || async {
        let _p = ctx.permit(Service::Ssm).await;
        let out = ctx
            .ssm
            .describe_instance_information()
            .filters(InstanceInformationStringFilter::builder().key("InstanceIds").values(id).build().map_err(|e| {
                AwsError { operation: "DescribeInstanceInformation", code: None, detail: e.to_string() }
            })?)
            .send()
            .await
            .map_err(err("DescribeInstanceInformation"))?;
        Ok(
            match out
                .instance_information_list()
                .iter()
                .find(|i| i.instance_id() == Some(id))
                .and_then(|i| i.ping_status())
            {
                Some(PingStatus::Online) => Poll::Done(()),
                Some(other) => Poll::Pending(other.as_str().to_string()),
                None => Poll::Pending("not registered with SSM yet (does the instance profile allow SSM?)".into()),
            },
        )
    })
    .await
}

/// Runs one shell command on the builder and waits for it; a failure carries its stderr.
async fn run_command(ctx: &Ctx, id: &str, cmd: &str, what: &str) -> Result<()> {
    let sent = {
        let _p = ctx.permit(Service::Ssm).await;
        ctx.ssm
            .send_command()
            .instance_ids(id)
            .document_name("AWS-RunShellScript")
            .parameters("commands", vec![cmd.to_string()])
            .comment(format!("gpustack: {}", what.chars().take(90).collect::<String>()))
            .timeout_seconds(600)
            .send()
            .await
            .map_err(err("SendCommand"))?
    };
    let command = sent.command().and_then(|c| c.command_id()).unwrap_or_default().to_string();
    until(&format!("command `{what}` on {id}"), PULL_TIMEOUT, || async {
        let _p = ctx.permit(Service::Ssm).await;
        let out = match ctx
            .ssm
            .get_command_invocation()
            .command_id(&command)
            .instance_id(id)
            .send()
            .await
            .map_err(err("GetCommandInvocation"))
        {
            Ok(o) => o,
            // Invocations appear a moment after SendCommand.
            Err(e) if e.code.as_deref() == Some("InvocationDoesNotExist") => {
                return Ok(Poll::Pending("Pending".into()));
            }
            Err(e) => return Err(e),
        };
        match out.status() {
            Some(CommandInvocationStatus::Success) => Ok(Poll::Done(())),
            Some(
                st @ (CommandInvocationStatus::Failed
                | CommandInvocationStatus::Cancelled
                | CommandInvocationStatus::TimedOut
                | CommandInvocationStatus::Cancelling),
            ) => {
                let stderr = out.standard_error_content().unwrap_or_default().trim().to_string();
                Err(AwsError {
                    operation: "SendCommand",
                    code: Some(st.as_str().to_string()),
                    detail: format!(
                        "`{what}` {} (exit {}){}",
                        st.as_str(),
                        out.response_code(),
                        if stderr.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", stderr.chars().take(500).collect::<String>())
                        }
                    ),
                })
            }
            other => Ok(Poll::Pending(other.map_or("Pending", |s| s.as_str()).to_string())),
        }
    })
    .await
}

async fn instance_state(ctx: &Ctx, id: &str) -> Result<Option<aws_sdk_ec2::types::Instance>> {
    let _p = ctx.permit(Service::Ec2).await;
    match ctx.ec2.describe_instances().instance_ids(id).send().await.map_err(err("DescribeInstances")) {
        Ok(o) => Ok(o.reservations().iter().flat_map(|r| r.instances()).next().cloned()),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

async fn stop(ctx: &Ctx, id: &str) -> Result<()> {
    {
        let _p = ctx.permit(Service::Ec2).await;
        ctx.ec2.stop_instances().instance_ids(id).send().await.map_err(err("StopInstances"))?;
    }
    until(&format!("builder {id} to stop"), INSTANCE_TIMEOUT, || async {
        let st = instance_state(ctx, id).await?.and_then(|i| i.state().and_then(|s| s.name().cloned()));
        Ok(match st {
            Some(InstanceStateName::Stopped) => Poll::Done(()),
            other => Poll::Pending(other.map_or("unknown".into(), |s| s.as_str().to_string())),
        })
    })
    .await
}

async fn data_volume(ctx: &Ctx, id: &str) -> Result<String> {
    let inst = instance_state(ctx, id).await?;
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

async fn describe_snapshot(ctx: &Ctx, id: &str) -> Result<Option<Snapshot>> {
    let _p = ctx.permit(Service::Ec2).await;
    match ctx.ec2.describe_snapshots().snapshot_ids(id).send().await.map_err(err("DescribeSnapshots")) {
        Ok(o) => Ok(o.snapshots().first().cloned()),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

async fn wait_snapshot(ctx: &Ctx, id: &str) -> Result<Snapshot> {
    until(&format!("snapshot {id}"), SNAPSHOT_TIMEOUT, || async {
        let Some(snap) = describe_snapshot(ctx, id).await? else {
            return Err(AwsError {
                operation: "DescribeSnapshots",
                code: None,
                detail: format!("snapshot {id} disappeared"),
            });
        };
        match snap.state() {
            Some(SnapshotState::Completed) => Ok(Poll::Done(snap)),
            Some(SnapshotState::Error) => Err(AwsError {
                operation: "CreateSnapshot",
                code: Some("error".into()),
                detail: format!("snapshot {id} failed: {}", snap.state_message().unwrap_or_default()),
            }),
            _ => Ok(Poll::Pending(format!("pending ({})", snap.progress().unwrap_or("0%")))),
        }
    })
    .await
}

/// Builders of `address` not yet terminated.
async fn builders(ctx: &Ctx, address: &str) -> Result<Vec<String>> {
    let _p = ctx.permit(Service::Ec2).await;
    let out = ctx
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
        .send()
        .await
        .map_err(err("DescribeInstances"))?;
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect())
}

/// Terminates instances and waits until they are gone (their volumes go with them).
async fn terminate(ctx: &Ctx, ids: &[String]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    {
        let _p = ctx.permit(Service::Ec2).await;
        gone_is_ok(
            ctx.ec2
                .terminate_instances()
                .set_instance_ids(Some(ids.to_vec()))
                .send()
                .await
                .map(|_| ())
                .map_err(err("TerminateInstances")),
        )?;
    }
    for id in ids {
        until(&format!("builder {id} to terminate"), INSTANCE_TIMEOUT, || async {
            let st = instance_state(ctx, id).await?.and_then(|i| i.state().and_then(|s| s.name().cloned()));
            Ok(match st {
                None | Some(InstanceStateName::Terminated) => Poll::Done(()),
                Some(other) => Poll::Pending(other.as_str().to_string()),
            })
        })
        .await?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The ECR pull runs as written: bash parses it, jq builds the credential-provider request,
    /// and the password reaches `ctr --user` only on the builder. `apiclient exec` and `sheltie`
    /// are stand-ins that run their command here; the provider answers as cloud-provider-aws's
    /// ecr-credential-provider does.
    #[test]
    fn the_ecr_pull_command_runs_and_hands_the_password_to_ctr_only() {
        let image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/train:1";
        let cmd = pull_command(image, "linux/amd64");
        assert!(cmd.contains(ECR_PROVIDER), "{cmd}");
        let jq = std::process::Command::new("jq").arg("--version").output().is_ok_and(|o| o.status.success());
        assert!(jq, "jq is needed to run this test (the builder's admin container has it)");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let response = r#"{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","auth":{"123456789012.dkr.ecr.eu-west-1.amazonaws.com":{"username":"AWS","password":"s3cr3t"}}}"#;
        // `sheltie` is a program on the builder (the script `exec`s it): a stand-in on PATH.
        let sheltie = dir.path().join("sheltie");
        std::fs::write(
            &sheltie,
            format!(
                "#!/usr/bin/env bash\nif [ \"$1\" = {ECR_PROVIDER} ]; then cat > {log}.req; echo '{response}'; else printf '%s\\n' \"$@\" > {log}; fi\n",
                log = log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&sheltie, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let script = format!("apiclient() {{ shift 3; \"$@\"; }}\n{cmd}\n");
        let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
        let out = std::process::Command::new("bash").arg("-c").arg(&script).env("PATH", path).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let args = std::fs::read_to_string(&log).unwrap();
        assert!(args.contains("--user\nAWS:s3cr3t\n"), "{args}");
        assert!(args.ends_with(&format!("{image}\n")), "{args}");
        let req = std::fs::read_to_string(format!("{}.req", log.display())).unwrap();
        let req: serde_json::Value = serde_json::from_str(&req).unwrap();
        assert_eq!(req["kind"], "CredentialProviderRequest");
        assert_eq!(req["apiVersion"], "credentialprovider.kubelet.k8s.io/v1");
        assert_eq!(req["image"], image);
        assert!(!cmd.contains("s3cr3t"));
    }
}
