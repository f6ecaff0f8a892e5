//! SSM mechanics: reading a parameter, waiting for an instance's agent to come online, and
//! running a shell command on an instance with Run Command (`AWS-RunShellScript`) until it
//! ends. What to run, and on which instance, is the caller's business.

use std::time::Duration;

use aws_sdk_ssm::operation::get_command_invocation::GetCommandInvocationOutput;
use aws_sdk_ssm::types::{CommandInvocationStatus, InstanceInformationStringFilter, PingStatus};

use super::wait::{Status, until_status};
use super::{AwsError, Ctx, Service};

/// How long Run Command may take to start delivering a command (`TimeoutSeconds`).
const DELIVERY_TIMEOUT_SECONDS: i32 = 600;

/// A parameter's value (`GetParameter`); an unknown name fails with `ParameterNotFound`.
pub async fn parameter(ctx: &Ctx, name: &str) -> Result<String, AwsError> {
    let out = ctx.call(Service::Ssm, "GetParameter", ctx.ssm.get_parameter().name(name).send()).await?;
    Ok(out.parameter().and_then(|p| p.value()).unwrap_or_default().to_string())
}

/// Waits until `instance` is registered with SSM and its agent answers (`PingStatus` Online).
/// `what` names the instance for the timeout message ("builder i-… in SSM").
pub async fn wait_online(ctx: &Ctx, instance: &str, what: &str, timeout: Duration) -> Result<(), AwsError> {
    let describe = || async {
        let filter =
            InstanceInformationStringFilter::builder().key("InstanceIds").values(instance).build().map_err(|e| {
                AwsError { operation: "DescribeInstanceInformation", code: None, detail: e.to_string() }
            })?;
        let request = ctx.ssm.describe_instance_information().filters(filter);
        let out = ctx.call(Service::Ssm, "DescribeInstanceInformation", request.send()).await?;
        Ok(out.instance_information_list().iter().find(|i| i.instance_id() == Some(instance)).cloned())
    };
    until_status(what, timeout, describe, |info| match info.as_ref().and_then(|i| i.ping_status()) {
        Some(PingStatus::Online) => Status::Reached(()),
        Some(other) => Status::Pending(other.as_str().to_string()),
        None => Status::Pending("not registered with SSM yet (does the instance profile allow SSM?)".into()),
    })
    .await
}

/// Runs one shell command on `instance` and waits for it to end; a failure carries its exit
/// code and the start of its stderr. `what` names the command in messages and in the
/// command's SSM comment.
pub async fn run_shell(ctx: &Ctx, instance: &str, cmd: &str, what: &str, timeout: Duration) -> Result<(), AwsError> {
    let request = ctx
        .ssm
        .send_command()
        .instance_ids(instance)
        .document_name("AWS-RunShellScript")
        .parameters("commands", vec![cmd.to_string()])
        .comment(format!("gpustack: {}", what.chars().take(90).collect::<String>()))
        .timeout_seconds(DELIVERY_TIMEOUT_SECONDS);
    let sent = ctx.call(Service::Ssm, "SendCommand", request.send()).await?;
    let command = sent.command().and_then(|c| c.command_id()).unwrap_or_default().to_string();
    let describe = || async {
        let request = ctx.ssm.get_command_invocation().command_id(&command).instance_id(instance);
        match ctx.call(Service::Ssm, "GetCommandInvocation", request.send()).await {
            Ok(o) => Ok(Some(o)),
            // Invocations appear a moment after SendCommand.
            Err(e) if e.has_code("InvocationDoesNotExist") => Ok(None),
            Err(e) => Err(e),
        }
    };
    let status = |out: Option<GetCommandInvocationOutput>| {
        let Some(out) = out else { return Status::Pending("Pending".into()) };
        match out.status() {
            Some(CommandInvocationStatus::Success) => Status::Reached(()),
            Some(
                st @ (CommandInvocationStatus::Failed
                | CommandInvocationStatus::Cancelled
                | CommandInvocationStatus::TimedOut
                | CommandInvocationStatus::Cancelling),
            ) => Status::Failed(failed(&out, st, what)),
            other => Status::Pending(other.map_or("Pending", |s| s.as_str()).to_string()),
        }
    };
    until_status(&format!("command `{what}` on {instance}"), timeout, describe, status).await
}

/// A command that ended without success, with its exit code and stderr.
fn failed(out: &GetCommandInvocationOutput, st: &CommandInvocationStatus, what: &str) -> AwsError {
    let stderr = out.standard_error_content().unwrap_or_default().trim().to_string();
    AwsError {
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
    }
}
