//! AMIs from the public SSM parameters AWS publishes them under. Bottlerocket's are
//! `/aws/service/bottlerocket/<variant>/<arch>/<version>/image_id` (and `image_version`,
//! which says what `latest` is today).

use super::{AwsError, Ctx, ssm};

/// An AMI and the release it is.
pub struct Ami {
    pub id: String,
    /// The release ("1.32.0"); `latest` resolved, so it can be pinned.
    pub version: String,
}

/// The Bottlerocket AMI of `variant` ("aws-k8s-1.33") for `arch` ("x86_64", "arm64") at
/// `version` (a release, or "latest", resolved here). A name Bottlerocket does not publish
/// fails with `ParameterNotFound` and says which inputs to check.
pub async fn bottlerocket(ctx: &Ctx, variant: &str, arch: &str, version: &str) -> Result<Ami, AwsError> {
    const CHECK: &str = "check `variant`, `architecture` and `bottlerocket_version`";
    let id = published(ctx, &format!("/aws/service/bottlerocket/{variant}/{arch}/{version}/image_id"), CHECK).await?;
    let version =
        if version == "latest" { latest_version(ctx, variant, arch, CHECK).await? } else { version.to_string() };
    Ok(Ami { id, version })
}

/// The release Bottlerocket publishes now as `latest` for `variant` and `arch`
/// ("1.57.0-0b6a2b38"). A variant it does not publish fails with `ParameterNotFound` and
/// `what_to_check`.
pub async fn latest_version(ctx: &Ctx, variant: &str, arch: &str, what_to_check: &str) -> Result<String, AwsError> {
    published(ctx, &format!("/aws/service/bottlerocket/{variant}/{arch}/latest/image_version"), what_to_check).await
}

/// A public parameter's value; one that is not published says so and what to check.
async fn published(ctx: &Ctx, name: &str, what_to_check: &str) -> Result<String, AwsError> {
    ssm::parameter(ctx, name).await.map_err(|e| {
        if !e.has_code("ParameterNotFound") {
            return e;
        }
        let detail = format!("{}: Bottlerocket publishes no {name}; {what_to_check}", e.detail);
        AwsError { detail, ..e }
    })
}
