//! How the builder pulls an image: the SSM shell command that runs `ctr images pull` into
//! containerd's k8s.io namespace through the admin container, fetching a private ECR
//! password on the builder itself so that no secret is ever part of a command.

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
pub fn command(image: &str, platform: &str) -> String {
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
        let cmd = command(image, "linux/amd64");
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
